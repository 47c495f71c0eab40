"""History ranking as a pure function (`ds4_core.retrieval.scoring`), on hand-built candidates."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4_core.retrieval.scoring import (
    HISTORY_WEIGHTS,
    HistoryWeights,
    evidence_points,
    history_reason,
    literal_priority,
    rank_history,
)


@dataclass(frozen=True)
class Found:
    entry_id: str
    role: str | None = "assistant"
    created_at: str | None = None
    token_estimate: int = 0
    exact: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    fts_terms: tuple[str, ...] = ()
    fts_rank: int | None = None
    files_found: int = 0
    symbols_found: int = 0
    errors_found: int = 0


def _ranked(*candidates: Found) -> list[tuple[str, float, int]]:
    return [(r.candidate.entry_id, r.score, r.literal_priority) for r in rank_history(candidates)]


def test_points_follow_the_documented_weights() -> None:
    # 100 + min(12, 3 * 2) for three identifiers, 15 base, 5 for an assistant
    assert evidence_points(Found("a", exact=("A", "B", "C"))) == 100 + 6 + 15 + 5
    # identifiers cap at +12 past the first
    assert evidence_points(Found("a", role="user", exact=tuple("ABCDEFG"))) == 100 + 12 + 15 + 8
    # 85 + min(8, 2 * 1) for two phrases; toolResult authority 4
    assert evidence_points(Found("a", role="toolResult", phrases=("x y", "z w"))) == 85 + 2 + 19
    # FTS: 60 + max(0, 10 - rank)
    assert evidence_points(Found("a", role=None, fts_terms=("t",), fts_rank=3)) == 60 + 7 + 16
    assert evidence_points(Found("a", role=None, fts_terms=("t",), fts_rank=30)) == 60 + 16
    # 12 per file, 10 per symbol, 12 per error; unknown role 1
    found = Found("a", role="custom", files_found=2, symbols_found=1, errors_found=1)
    assert evidence_points(found) == 24 + 10 + 12 + 16


def test_an_fts_rank_without_fts_terms_gives_no_fts_points() -> None:
    assert evidence_points(Found("a", fts_rank=0)) == 20


def test_token_cost_is_capped_and_recency_spreads_over_eight_points() -> None:
    old = Found("old", created_at="2026-01-01T00:00:00.000Z", token_estimate=500)
    new = Found("new", created_at="2026-01-01T00:00:10.000Z", token_estimate=50_000)
    mid = Found("mid", created_at="2026-01-01T00:00:05.000Z")
    assert _ranked(old, new, mid) == [
        ("mid", 24.0, 0),  # 20 + 4 recency
        ("old", 19.5, 0),  # 20 + 0 recency - 500 / 1000
        ("new", 16.0, 0),  # 20 + 8 recency - 12 (the cap)
    ]


def test_no_recency_when_all_times_are_equal_or_missing() -> None:
    same = "2026-01-01T00:00:00.000Z"
    assert [s for _, s, _ in _ranked(Found("a", created_at=same), Found("b"))] == [20.0, 20.0]


def test_literal_priority_outranks_any_score() -> None:
    phrase = Found("p", phrases=("x y",), files_found=10)
    fts = Found("f", fts_terms=("t",), fts_rank=0, files_found=20)
    exact = Found("e", exact=("X",), token_estimate=100_000)
    assert [e for e, _, _ in _ranked(fts, phrase, exact)] == ["e", "p", "f"]
    assert literal_priority(exact) == 2 and literal_priority(phrase) == 1
    assert literal_priority(fts) == 0


def test_ties_go_to_the_newest_then_entry_id_then_input_order() -> None:
    t1, t2 = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
    # equal scores need equal recency: the newest has +8, so offset it with tokens
    newer = Found("b", created_at=t2, token_estimate=8000)
    older = Found("a", created_at=t1)
    assert [e for e, _, _ in _ranked(older, newer)] == ["b", "a"]
    assert [e for e, _, _ in _ranked(Found("z"), Found("y"))] == ["y", "z"]
    first, second = Found("same"), Found("same", role="assistant")
    ranked = list(rank_history([first, second]))
    assert ranked[0].candidate is first and ranked[1].candidate is second


def test_scores_are_rounded_to_six_decimals() -> None:
    (only,) = rank_history([Found("a", token_estimate=1)])
    assert only.score == 19.999
    assert only.created_ms is None


def test_reason_and_matched_terms() -> None:
    found = Found("a", exact=("Foo.bar",), phrases=("x y",), fts_terms=("foo", "x y"))
    (ranked,) = rank_history([found])
    assert ranked.reason == history_reason(found)
    assert (
        ranked.reason
        == "exact identifier: Foo.bar; exact phrase: x y; FTS: foo, x y; active branch"
    )
    assert ranked.matched_terms == ("Foo.bar", "x y", "foo")
    assert history_reason(Found("b")) == "active branch"


def test_other_weights_can_be_passed() -> None:
    weights = HistoryWeights(base=0, role_authority={"user": 100}, other_role_authority=0)
    assert evidence_points(Found("a", role="user"), weights) == 100
    assert evidence_points(Found("a", role="assistant"), weights) == 0
    ranked = list(rank_history([Found("a"), Found("b", role="user")], weights))
    assert [r.candidate.entry_id for r in ranked] == ["b", "a"]
    assert HISTORY_WEIGHTS == HistoryWeights()
    with pytest.raises(TypeError):
        HISTORY_WEIGHTS.role_authority["user"] = 0  # type: ignore[index]


_FOUND = st.builds(
    Found,
    entry_id=st.text(alphabet="abc", min_size=1, max_size=3),
    role=st.sampled_from([None, "user", "assistant", "toolResult", "custom"]),
    created_at=st.one_of(
        st.none(), st.integers(0, 59).map(lambda s: f"2026-01-01T00:00:{s:02d}.000Z")
    ),
    token_estimate=st.integers(-5, 20_000),
    exact=st.lists(st.sampled_from("ABC"), unique=True).map(tuple),
    phrases=st.lists(st.sampled_from(["x y", "z w"]), unique=True).map(tuple),
    fts_terms=st.lists(st.sampled_from(["t", "u"]), unique=True).map(tuple),
    fts_rank=st.one_of(st.none(), st.integers(0, 20)),
    files_found=st.integers(0, 3),
    symbols_found=st.integers(0, 3),
    errors_found=st.integers(0, 3),
)


@given(candidates=st.lists(_FOUND, max_size=12))
def test_rank_order_is_priority_then_score_and_a_permutation(candidates: list[Found]) -> None:
    ranked = list(rank_history(candidates))
    assert sorted(map(id, (r.candidate for r in ranked))) == sorted(map(id, candidates))
    keys = [(-r.literal_priority, -r.score) for r in ranked]
    assert keys == sorted(keys)
    for r in ranked:
        base = evidence_points(r.candidate)
        assert base - 12 <= r.score <= base + 8
