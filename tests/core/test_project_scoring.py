"""Project ranking as pure functions (`ds4_core.project.scoring`), on hand-built candidates."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4_core.project.scoring import (
    PROJECT_WEIGHTS,
    FileSignals,
    ProjectWeights,
    RankingContext,
    Tier,
    combine_file_scores,
    concept_idf,
    concept_window_score,
    file_evidence,
    file_relevance,
    file_role,
    fts_points,
    fts_tier,
    is_configuration,
    is_demoted,
    presence_score,
    rank_windows,
    role_factor,
    score_window,
    size_contenders,
    size_prior,
    sized_scores,
    top_files,
    window_relevance,
)


@dataclass
class Window:
    path: str = "src/app.py"
    start_line: int = 1
    snippet_id: str = "s"
    token_estimate: int = 0
    modified: bool = False
    tracked: bool = False
    tiers: dict[Tier, list[str]] = field(default_factory=dict)
    fts_score: float | None = None
    concepts: dict[int, float] = field(default_factory=dict)

    @property
    def relevance(self) -> float:
        return sum(self.concepts.values())


CONTEXT = RankingContext(
    about_tests=False, about_docs=False, named_files=(), concept_labels=("cache", "config")
)


def _score(window: Window, context: RankingContext = CONTEXT) -> tuple[float, str] | None:
    scored = score_window(window, context)
    return None if scored is None else (scored.score, scored.reason)


def test_a_window_without_tier_or_fts_points_is_not_scored() -> None:
    assert score_window(Window(concepts={0: 1.0}), CONTEXT) is None


def test_each_exact_tier_has_its_points() -> None:
    expected = {
        Tier.PATH: 140,
        Tier.BASENAME: 125,
        Tier.DECLARED_SYMBOL: 115,
        Tier.PHRASE: 90,
        Tier.SYMBOL_TEXT: 85,
    }
    for tier, points in expected.items():
        assert PROJECT_WEIGHTS.tier_points(tier) == points
        assert _score(Window(tiers={tier: ["x"]})) is not None
        assert _score(Window(tiers={tier: ["x"]}))[0] == points  # type: ignore[index]


def test_best_tier_counts_extra_matches_add_two_each_up_to_six() -> None:
    window = Window(tiers={Tier.SYMBOL_TEXT: ["a", "b"], Tier.DECLARED_SYMBOL: ["a"]})
    assert _score(window) == (119.0, "declared symbol: a; symbol text: a, b")
    many = Window(tiers={Tier.PHRASE: ["p"], Tier.SYMBOL_TEXT: list("abcdefg")})
    assert _score(many) == (96.0, "exact phrase: p; symbol text: a, b, c, d, e, f, g")


def test_fts_evidence_on_an_exact_window_and_fts_alone() -> None:
    both = Window(tiers={Tier.SYMBOL_TEXT: ["Cache"]}, fts_score=56.0, concepts={1: 0.3, 0: 2.0})
    assert _score(both) == (88.6, "symbol text: Cache; FTS: cache, config")
    assert _score(Window(fts_score=52.0, concepts={1: 1.0})) == (52.0, "FTS: config")


def test_modified_tracked_and_token_cost() -> None:
    window = Window(tiers={Tier.PHRASE: ["p"]}, modified=True, tracked=True, token_estimate=1000)
    assert _score(window) == (90 + 10 + 3 - 4, "exact phrase: p; modified")
    assert _score(Window(tiers={Tier.PHRASE: ["p"]}, token_estimate=10**6))[0] == 78.0  # type: ignore[index]
    # an FTS-only window pays no token cost by default (its file's rank already decided it)...
    fts = Window(fts_score=60.0, modified=True, tracked=True, token_estimate=1000)
    assert _score(fts) == (60 + 10 + 3, "modified")
    # ...and does with the reference's weights
    reference = ProjectWeights(fts_token_cost=True)
    scored = score_window(Window(fts_score=60.0, token_estimate=10**6), CONTEXT, reference)
    assert scored is not None and scored.score == 48.0


def test_file_relevance_is_the_mean_of_coverage_and_known_share() -> None:
    assert file_relevance(0.4, 1.0) == 0.7
    assert file_relevance(0.0, 0.0) == 0.0
    assert file_relevance(2.0, -1.0) == 0.5  # clamped to 0..1


def test_window_relevance_is_the_share_of_the_request_information_held() -> None:
    information = [1.0, 3.0, 4.0]  # the last concept matched nothing: still information
    assert window_relevance({0: 0.2, 1: 0.9}, information) == 0.5
    assert window_relevance([2], information) == 0.5
    assert window_relevance([], information) == 0.0
    assert window_relevance([0, 0, 7], information) == 0.125  # each once; unknown ignored
    assert window_relevance([0], []) == 0.0


def test_test_and_doc_windows_of_exact_tiers_lose_ten_unless_asked_for_or_named() -> None:
    test = Window(path="tests/test_app.py", tiers={Tier.SYMBOL_TEXT: ["run"]})
    doc = Window(path="docs/app.md", tiers={Tier.PHRASE: ["run it"]})
    assert _score(test) == (75.0, "symbol text: run; test file")
    assert _score(doc) == (80.0, "exact phrase: run it; doc file")
    about = RankingContext(True, True, (), ())
    assert _score(test, about) == (85.0, "symbol text: run")
    assert _score(doc, about) == (90.0, "exact phrase: run it")
    named = RankingContext(False, False, {"tests/test_app.py"}, ())
    assert _score(test, named) == (85.0, "symbol text: run")
    # an FTS-only window is never penalised (its file evidence was demoted instead)
    assert _score(Window(path="tests/test_app.py", fts_score=40.0)) == (40.0, "")


def test_rank_order_breaks_ties_by_modified_path_line_and_id() -> None:
    a = Window(path="b.py", fts_score=50.0, snippet_id="1")
    b = Window(path="a.py", fts_score=50.0, start_line=9, snippet_id="2")
    c = Window(path="a.py", fts_score=50.0, start_line=1, snippet_id="3")
    d = Window(path="z.py", fts_score=40.0, modified=True, snippet_id="4")  # 50 with +10
    e = Window(path="a.py", fts_score=50.0, start_line=1, snippet_id="0")
    f = Window(path="q.py", concepts={0: 1.0})  # no tier: left out
    ranked = rank_windows([a, b, c, d, e, f], CONTEXT)
    assert [s.window.snippet_id for s in ranked] == ["4", "0", "3", "2", "1"]
    assert all(s.score == 50.0 for s in ranked)


def test_other_weights_can_be_passed() -> None:
    weights = ProjectWeights(symbol_text=200, tracked=0, extra_match=0)
    window = Window(tiers={Tier.PATH: ["app.py"], Tier.SYMBOL_TEXT: ["x"]}, tracked=True)
    scored = score_window(window, CONTEXT, weights)
    assert scored is not None and scored.score == 200.0


def test_concept_idf_is_positive_and_falls_with_matches() -> None:
    assert concept_idf(100, 1) == pytest.approx(math.log(1 + 99.5 / 1.5))
    assert concept_idf(100, 100) == pytest.approx(math.log(1 + 0.5 / 100.5))
    assert concept_idf(10, 20) == concept_idf(20, 20)  # N is at least n
    values = [concept_idf(1000, n) for n in (1, 10, 100, 999)]
    assert values == sorted(values, reverse=True) and values[-1] > 0


def test_concept_window_and_presence_scores() -> None:
    assert concept_window_score(2.0, 3.0, 4.0) == 1.5
    assert concept_window_score(2.0, -1.0, 4.0) == 0.0
    assert concept_window_score(2.0, 3.0, 0.0) == 2.0
    assert presence_score(2.0) == pytest.approx(0.8)


def test_file_evidence_rewards_coverage_and_names() -> None:
    idf = [1.0, 3.0]
    best = {"a.py": {0: 1.0}, "b.py": {0: 0.5, 1: 1.0}, "tests/test_b.py": {0: 0.5, 1: 1.0}}
    naming = [set(), {"a.py"}]
    evidence = file_evidence(best, idf, naming)
    # a.py: (1 + 0.5 * 3) * (0.5 + 0.5 * 4/4); b.py: 1.5 * (0.5 + 0.5 * 4/4); the role of a
    # file is applied later (combine_file_scores)
    assert evidence == {"a.py": 2.5, "b.py": 1.5, "tests/test_b.py": 1.5}
    assert file_evidence(best, [0.0, 0.0], naming) == {}
    # coverage: a file matching a quarter of the weight keeps 0.5 + 0.125 of its strength
    assert file_evidence({"c.py": {0: 2.0}}, idf, [set(), set()]) == {"c.py": 1.25}


def _signals(**kwargs: object) -> FileSignals:
    fields: dict[str, object] = {"texts": {}, "evidence": {}, "prior": {}}
    fields.update(kwargs)
    return FileSignals(**fields)  # type: ignore[arg-type]


def test_combined_file_scores_and_top_files() -> None:
    texts = {"a.py": 10.0, "docs/a.md": 10.0, "b.py": 5.0}
    evidence = {"b.py": 4.0, "c.py": 2.0}
    weights = ProjectWeights(size_weight=0.0, evidence_share=1.0)

    def role(path: str) -> float:
        return 0.5 if path.startswith("docs/") else 1.0

    combined = combine_file_scores(_signals(texts=texts, evidence=evidence), role, weights)
    assert combined == {"a.py": 1.0, "docs/a.md": 0.5, "b.py": 1.5, "c.py": 0.5}
    assert top_files(combined, 3) == ["b.py", "a.py", "c.py"]  # ties: path order
    assert top_files({}, 3) == []


def test_size_prior_is_log_lines_up_to_the_saturation() -> None:
    assert size_prior(0, 100) == 0.0
    assert size_prior(100, 100) == 1.0
    assert size_prior(9, 99) == pytest.approx(0.5)
    assert size_prior(5, 0) == 0.0
    assert size_prior(500, 100) == 1.0  # saturated
    # equal text evidence: the longer file ranks first (bm25 favoured the short one)
    weights = ProjectWeights(size_weight=0.5, size_saturation=2000)
    scores = combine_file_scores(
        _signals(texts={"big.py": 1.0, "small.py": 1.05}), lambda p: 1.0, weights
    )
    sized = sized_scores(scores, {"big.py": 2000, "small.py": 20}, weights)
    assert top_files(sized, 2) == ["big.py", "small.py"]
    assert sized["big.py"] == pytest.approx(1.0 / 1.05)
    assert sized["small.py"] == pytest.approx(0.5 + 0.5 * math.log1p(20) / math.log1p(2000))
    assert sized_scores({"gone.py": 1.0}, {}, weights) == {"gone.py": 0.5}  # no lines: 0


def test_only_files_that_can_still_rank_are_sized() -> None:
    weights = ProjectWeights(size_weight=0.5)
    scores = {"a.py": 1.0, "b.py": 0.8, "c.py": 0.45, "d.py": 0.3}
    # the 2nd best is 0.8: once sized it is at least 0.4, so d.py (at most 0.3) cannot pass it
    assert size_contenders(scores, 2, weights) == ["a.py", "b.py", "c.py"]
    assert size_contenders(scores, 10, weights) == ["a.py", "b.py", "c.py", "d.py"]
    # whatever the sizes, the top 2 of the contenders are the top 2 of all files
    for lines in ({"c.py": 2000}, {"d.py": 2000}, {"a.py": 1, "b.py": 1, "c.py": 2000}):
        everything = sized_scores(scores, lines, weights)
        contenders = sized_scores({p: scores[p] for p in size_contenders(scores, 2)}, lines)
        assert top_files(contenders, 2) == top_files(everything, 2)


def test_the_file_prior_is_weighted_clamped_and_may_add_files() -> None:
    weights = ProjectWeights(size_weight=0.0, prior_weight=0.5)
    signals = _signals(
        texts={"a.py": 2.0, "b.py": 1.8}, prior={"b.py": 1.0, "c.py": 4.0, "d.py": -1.0}
    )
    combined = combine_file_scores(signals, lambda p: 1.0, weights)
    assert combined == pytest.approx({"a.py": 1.0, "b.py": 1.4, "c.py": 0.5, "d.py": 0.0})
    assert top_files(combined, 2) == ["b.py", "a.py"]


def test_role_factors_demote_tests_docs_change_logs_and_configuration() -> None:
    w = ProjectWeights(role_demotion=0.25, config_demotion=0.5)

    def factor(path: str, tests: bool = False, docs: bool = False) -> float:
        return role_factor(path, about_tests=tests, about_docs=docs, weights=w)

    assert factor("src/app.py") == 1.0
    assert factor("tests/test_app.py") == 0.25 and factor("tests/test_app.py", tests=True) == 1.0
    assert factor("docs/guide.md") == 0.25 and factor("docs/guide.md", docs=True) == 1.0
    assert factor("CHANGELOG.md") == 0.25 and factor("CHANGELOG.md", docs=True) == 1.0
    assert factor("pyproject.toml") == 0.5 and factor(".gitignore") == 0.5
    assert is_configuration("setup.cfg") and is_configuration(".pre-commit-config.yaml")
    assert not is_configuration("src/app.py") and not is_configuration("docs/conf.json")
    # a doc name is a doc only without an extension or with a doc one
    assert file_role("NEWS") == "doc" and file_role("HISTORY.rst") == "doc"
    assert file_role("src/history.py") == "source"


def test_fts_tier_gives_the_best_window_and_a_close_second() -> None:
    first = Window(start_line=80, concepts={0: 1.0})
    close = Window(start_line=1, concepts={0: 0.5})
    far = Window(start_line=160, concepts={0: 0.2})
    reference = ProjectWeights(fts_rank_decay=0.0)  # the reference's linear steps
    assert fts_tier(0, [far, close, first], reference) == [(first, 60.0), (close, 58.0)]
    assert fts_tier(3, [first, far], reference) == [(first, 48.0)]
    assert fts_tier(50, [first, close], reference) == [(first, 20.0), (close, 20.0)]
    # the default: 20 + 40 * 0.9 ** rank, so ranks never tie
    assert fts_tier(0, [far, close, first]) == [(first, 60.0), (close, 58.0)]
    assert fts_tier(3, [first, far]) == [(first, pytest.approx(20 + 40 * 0.9**3))]
    assert fts_points(30) > fts_points(31) > 20.0
    tie = Window(start_line=5, concepts={0: 1.0})
    assert fts_tier(0, [first, tie])[0][0] is tie  # equal relevance: the earlier window
    assert fts_tier(0, []) == []


def test_file_roles_and_demotion() -> None:
    assert file_role("src/app.py") == "source"
    assert file_role("tests/unit/app.py") == "test"
    assert file_role("src/app.test.ts") == "test"
    assert file_role("README.md") == "doc"
    assert is_demoted("docs/x.md", about_tests=False, about_docs=False)
    assert not is_demoted("docs/x.md", about_tests=False, about_docs=True)
    assert is_demoted("test_x.py", about_tests=False, about_docs=True)
    assert not is_demoted("x.py", about_tests=False, about_docs=False)


_WINDOW = st.builds(
    Window,
    path=st.sampled_from(["a.py", "tests/test_a.py", "docs/a.md", "b.py"]),
    start_line=st.integers(1, 300),
    snippet_id=st.text(alphabet="0123", min_size=1, max_size=2),
    token_estimate=st.integers(0, 5000),
    modified=st.booleans(),
    tracked=st.booleans(),
    tiers=st.dictionaries(
        st.sampled_from(list(Tier)), st.lists(st.sampled_from("xyz"), min_size=1, max_size=3)
    ),
    fts_score=st.one_of(st.none(), st.integers(20, 60).map(float)),
    concepts=st.dictionaries(st.integers(0, 1), st.floats(0, 5)),
)


@given(windows=st.lists(_WINDOW, max_size=10))
def test_rank_windows_scores_every_matched_window_best_first(windows: list[Window]) -> None:
    ranked = rank_windows(windows, CONTEXT)
    assert len(ranked) == sum(1 for w in windows if w.tiers or w.fts_score is not None)
    scores = [s.score for s in ranked]
    assert scores == sorted(scores, reverse=True)


@given(windows=st.lists(_WINDOW, max_size=10))
def test_an_exact_tier_outranks_fts_alone_before_bonuses_and_cost(windows: list[Window]) -> None:
    for window in windows:  # the file bonuses and the token cost can reorder the two
        window.modified = window.tracked = False
        window.token_estimate = 0
    ranked = rank_windows(windows, CONTEXT)
    exact = [s.score for s in ranked if s.window.tiers]
    fts_only = [s.score for s in ranked if not s.window.tiers]
    if exact and fts_only:
        assert min(exact) > max(fts_only)
