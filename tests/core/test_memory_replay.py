"""Replay of memory and pin mutations: order with equal timestamps, conflicts, supersede."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.memory.claims import claim_key, conflict_reason, shape_claim
from ds4_core.memory.events import MemoryItem, Mutation, PinItem
from ds4_core.memory.replay import Replay, replay


def memory(
    item_id: str,
    claim: str,
    *,
    at: int = 1,
    session: str = "s1",
    order: int = 0,
    operation: str = "add",
    previous: str | None = None,
    scope: str = "project",
    key: str | None = None,
) -> Mutation:
    item = MemoryItem(item_id, scope, claim, at, (), "/p" if scope == "project" else None, key)  # type: ignore[arg-type]
    return Mutation(
        "memory", f"mut-{item_id}", at, operation, item, previous, None, None, None,  # type: ignore[arg-type]
        session, f"e-{item_id}", order,
    )  # fmt: skip


def status(target: str, value: str, *, at: int, kind: str = "memory", order: int = 9) -> Mutation:
    return Mutation(
        kind, f"mut-st-{target}-{at}", at, "status", None, None, target, value, "why",  # type: ignore[arg-type]
        "s1", f"e-st-{target}-{at}", order,
    )  # fmt: skip


def pin(item_id: str, content: str, *, at: int = 1, order: int = 0) -> Mutation:
    item = PinItem(item_id, "session", content, at)
    return Mutation(
        "pin", f"mut-{item_id}", at, "add", item, None, None, None, None, "s1", f"e-{item_id}",
        order,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("claim", "expected"),
    [
        ("The `retries` setting defaults to 3.", ("the retries setting", "3")),
        ("`timeout` = 30s", ("timeout", "30s")),
        ("Our database is PostgreSQL 16", ("our database", "postgresql 16")),
        ("No shape here", None),
        ("x" * 200 + " is long", None),
    ],
)
def test_claims_get_their_automatic_key(claim: str, expected: tuple[str, str] | None) -> None:
    assert claim_key(claim) == expected


def test_a_different_value_for_the_same_key_conflicts() -> None:
    assert conflict_reason(
        shape_claim("retries defaults to 5"), shape_claim("Retries defaults to 3")
    )
    assert (
        conflict_reason(shape_claim("retries defaults to 3."), shape_claim("Retries defaults to 3"))
        is None
    )


def test_opposite_polarity_conflicts() -> None:
    assert conflict_reason(shape_claim("Enable telemetry"), shape_claim("disable telemetry"))
    assert conflict_reason(shape_claim("Enable telemetry"), shape_claim("disable caching")) is None


def test_a_contradicting_add_is_rejected_and_supersede_replaces() -> None:
    state = replay(
        [
            memory("m1", "retries defaults to 3", at=1),
            memory("m2", "retries defaults to 5", at=2),
            memory("m3", "retries defaults to 5", at=3, operation="supersede", previous="m1"),
        ]
    )
    assert [r.mutation.item_id for r in state.rejected] == ["m2"]
    assert "supersede it" in state.rejected[0].reason
    assert state.items["m1"].status == "superseded" and state.items["m1"].superseded_by == "m3"
    assert [item.item_id for item in state.active()] == ["m3"]
    assert state.items["m3"].key == "retries"
    assert state.items["m1"].mutation_keys == ("s1:e-m1", "s1:e-m3")


def test_conflicts_only_within_one_place() -> None:
    state = replay(
        [
            memory("m1", "retries defaults to 3", scope="session", session="s1"),
            memory("m2", "retries defaults to 5", scope="session", session="s2"),
        ]
    )
    assert not state.rejected and len(state.active()) == 2


def test_an_explicit_key_groups_claims_without_a_shape() -> None:
    state = replay(
        [
            memory("m1", "we ship on Fridays", key="release-day", at=1),
            memory("m2", "we ship on Mondays", key="release-day", at=2),
        ]
    )
    assert [r.mutation.item_id for r in state.rejected] == ["m2"]


def test_status_changes_only_active_items() -> None:
    state = replay(
        [
            memory("m1", "a is b", at=1),
            status("m1", "expired", at=2),
            status("m1", "invalid", at=3),
            status("nope", "invalid", at=4),
        ]
    )
    assert state.items["m1"].status == "expired" and state.items["m1"].status_reason == "why"
    assert [r.reason.split(" ")[0] for r in state.rejected] == ["memory", "unknown"]


def test_pins_are_deleted_and_duplicates_rejected() -> None:
    state = replay(
        [
            pin("p1", "Keep the API stable", at=1),
            pin("p2", "keep the API stable.", at=2),
            status("p1", "deleted", at=3, kind="pin"),
            pin("p3", "Keep the API stable", at=4),
        ]
    )
    assert [r.mutation.item_id for r in state.rejected] == ["p2"]
    assert [item.item_id for item in state.active()] == ["p3"]
    assert state.items["p1"].status == "deleted"


def test_memory_and_pins_replay_separately() -> None:
    with pytest.raises(ValueError, match="separately"):
        replay([memory("m1", "a is b"), pin("p1", "x")])


_claims = st.sampled_from(
    [
        "retries defaults to 3",
        "retries defaults to 5",
        "enable telemetry",
        "disable telemetry",
        "the cache is redis",
        "the cache is memcached",
        "ship on fridays",
    ]
)


@st.composite
def _mutations(draw: st.DrawFn) -> list[Mutation]:
    """Adds, supersedes and statuses with few distinct timestamps (many ties) over two
    sessions; entry orders unique per session."""
    count = draw(st.integers(min_value=1, max_value=12))
    result: list[Mutation] = []
    for index in range(count):
        at = draw(st.integers(min_value=0, max_value=2))
        session = draw(st.sampled_from(["s1", "s2"]))
        choice = draw(st.sampled_from(["add", "supersede", "status"]))
        target = f"m{draw(st.integers(min_value=0, max_value=max(0, index - 1)))}"
        if choice == "status":
            mutation = Mutation(
                "memory", f"x{index}", at, "status", None, None, target, "invalid", None,
                session, f"e{index}", index,
            )  # fmt: skip
        else:
            item = MemoryItem(f"m{index}", "project", draw(_claims), at, (), "/p")
            previous = target if choice == "supersede" and target != f"m{index}" else None
            mutation = Mutation(
                "memory", f"x{index}", at, "supersede" if previous else "add", item, previous,
                None, None, None, session, f"e{index}", index,
            )  # fmt: skip
        result.append(mutation)
    return result


def _summary(state: object) -> object:
    replayed = state  # type: ignore[assignment]
    return (
        [(i.item_id, i.status, i.superseded_by, i.mutation_keys) for i in replayed.items.values()],  # type: ignore[attr-defined]
        [(r.mutation.mutation_key, r.reason) for r in replayed.rejected],  # type: ignore[attr-defined]
    )


@settings(max_examples=300, deadline=None)
@given(mutations=_mutations(), seed=st.randoms(use_true_random=False))
def test_replay_does_not_depend_on_input_order(mutations: list[Mutation], seed: object) -> None:
    """Equal timestamps are broken by session, entry order, mutation id and key, so any
    arrival order (files synced in another order, rows read back in another order) gives the
    same items and the same rejections."""
    shuffled = list(mutations)
    seed.shuffle(shuffled)  # type: ignore[attr-defined]
    assert _summary(replay(shuffled)) == _summary(replay(mutations))


@settings(max_examples=300, deadline=None)
@given(mutations=_mutations())
def test_no_two_active_memory_items_conflict(mutations: list[Mutation]) -> None:
    """Whatever the mutations, the active items never contradict each other: a contradiction
    is rejected, not applied."""
    active = replay(mutations).active()
    for index, first in enumerate(active):
        for second in active[index + 1 :]:
            a = shape_claim(first.item.claim)  # type: ignore[union-attr]
            b = shape_claim(second.item.claim)  # type: ignore[union-attr]
            assert a.text != b.text
            assert conflict_reason(a, b) is None


@settings(max_examples=200, deadline=None)
@given(mutations=_mutations())
def test_every_mutation_is_applied_or_rejected(mutations: list[Mutation]) -> None:
    state = replay(mutations)
    touched = {key for item in state.items.values() for key in item.mutation_keys}
    rejected = {r.mutation.mutation_key for r in state.rejected}
    assert touched.isdisjoint(rejected)
    assert touched | rejected == {m.mutation_key for m in mutations}


@settings(max_examples=200, deadline=None)
@given(mutations=_mutations(), copied=st.sets(st.integers(min_value=0, max_value=11)))
def test_copies_in_a_forked_session_change_only_provenance(
    mutations: list[Mutation], copied: set[int]
) -> None:
    """Pi's `/fork` copies entries into a new session file (here `zz`, sorting after the
    others at equal times): each copy is one event with its original, recorded on the item,
    rejected only when the original was."""
    copies = [
        replace(m, session_id="zz", entry_id=f"c{m.entry_id}")
        for index, m in enumerate(mutations)
        if index in copied
    ]
    plain, forked = replay(mutations), replay([*mutations, *copies])

    def statuses(state: Replay) -> list[tuple[str, str, str | None]]:
        return [(i.item_id, i.status, i.superseded_by) for i in state.items.values()]

    assert statuses(forked) == statuses(plain)
    refused = {r.mutation.mutation_id for r in plain.rejected}
    expected = {r.mutation.mutation_key for r in plain.rejected} | {
        c.mutation_key for c in copies if c.mutation_id in refused
    }
    assert {r.mutation.mutation_key for r in forked.rejected} == expected
    touched = {key for item in forked.items.values() for key in item.mutation_keys}
    assert touched | expected == {m.mutation_key for m in [*mutations, *copies]}


def test_a_session_item_changes_only_from_a_session_it_applies_to() -> None:
    """A `status` or `supersede` of a session item (or pin) read from an unrelated session is
    rejected, whoever wrote the entry; from the session that created it, or a fork holding a
    copy of its creating entry, it applies. Project items change from any session."""
    mine = memory("m1", "alpha is one", scope="session", session="sa", at=1)
    project = memory("m2", "beta is two", session="sa", at=1, order=1)
    stranger = [
        replace(status("m1", "invalid", at=2), session_id="sc"),
        replace(
            memory("m3", "alpha is three", scope="session", session="sc", at=3),
            operation="supersede",
            previous_id="m1",
        ),
        replace(status("m2", "invalid", at=4), session_id="sc"),
    ]
    state = replay([mine, project, *stranger])
    assert state.items["m1"].status == "active" and state.items["m2"].status == "invalid"
    assert [r.reason for r in state.rejected] == [
        "memory 'm1' does not apply to session 'sc' (a session item of session 'sa')"
    ] * 2
    assert "m3" not in state.items
    fork = replace(mine, session_id="sf", entry_id="copy")
    state = replay([mine, fork, replace(status("m1", "invalid", at=2), session_id="sf")])
    assert state.items["m1"].status == "invalid" and not state.rejected
    pinned = pin("p1", "A-only pin")
    state = replay([pinned, replace(status("p1", "deleted", at=2, kind="pin"), session_id="sc")])
    assert state.items["p1"].status == "active" and "does not apply" in state.rejected[0].reason
