"""Project ranking: the points of project windows and files. Pure: no store, no SQL.

Candidate generation stays in `project/search.py`: the exact tiers (path, basename, declared
symbol, phrase, symbol text) and the FTS5 concept and whole-file passes read SQLite and record,
per window, which tiers matched with which terms (`Tier`), its bm25 per concept, and per file
its whole-file bm25. This module turns that evidence into numbers (weights: `ProjectWeights`)
and orders: each concept's weight (`concept_idf`) and window scores, each file's evidence and
score (`file_evidence`, `combine_file_scores` with the role factors of `project/roles.py`,
`size_contenders`, `sized_scores`, `top_files`), the FTS tier of a ranked file's windows
(`fts_points`, `fts_tier`), the relevance the floor compares (`window_relevance`,
`file_relevance`), and each window's final score, reason and rank (`score_window`,
`rank_windows`). The rules, in full, are in the docstring of `project/search.py`.

Where the weights come from: the exact tiers (path 140, basename 125, declared symbol 115,
phrase 90, symbol text 85), the FTS tier (60 down to 20), +10 for a file modified in the working
tree, +3 for a tracked one and the token cost are the DS4 engine's project ranking
(docs/ds4-rules.md, "Project indexing and windows"; the FTS points now fall geometrically and
FTS-only windows pay no token cost: docs/architecture.md). The rest (extra matches, role
factors, the concept weights and shares, the whole-file blend, the size prior, the file prior,
the relevance floor) are ds4-lsp's own, for prose
requests (docs/project-knowledge.md, "Decisions beyond the reference" and "`ds4_core/project/
search.py` — ranking and rendering"); each field of `ProjectWeights` says which.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, Protocol, TypeVar

from .roles import FileRole, file_role, is_configuration, is_demoted, role_is_demoted


class Tier(IntEnum):
    """An exact-match tier of a window, weakest first (points: `ProjectWeights.tier_points`)."""

    SYMBOL_TEXT = 1
    """An identifier of the request in the window's text, starting a word."""
    PHRASE = 2
    """A quoted phrase (or backticked text with spaces) in the window's text."""
    DECLARED_SYMBOL = 3
    """The window declares a name of the request (its `symbols` column)."""
    BASENAME = 4
    """A request file's last segment is the window's file name."""
    PATH = 5
    """A request file equals the window's path, or its trailing segments."""


TIER_LABELS: tuple[tuple[Tier, str], ...] = (
    (Tier.PATH, "path"),
    (Tier.BASENAME, "basename"),
    (Tier.DECLARED_SYMBOL, "declared symbol"),
    (Tier.PHRASE, "exact phrase"),
    (Tier.SYMBOL_TEXT, "symbol text"),
)
"""Each tier's label in a window's reason, in the order the reason lists them."""


@dataclass(frozen=True)
class ProjectWeights:
    """The numbers of the project ranking; the defaults are what `search_project` uses.

    DS4 engine (docs/ds4-rules.md, "Project indexing and windows"):

    Attributes:
        path: points of the exact-path tier.
        basename: points of the exact-basename tier.
        declared_symbol: points of the declared-symbol tier.
        phrase: points of the exact-phrase tier.
        symbol_text: points of the symbol-text tier.
        fts_max: FTS tier points of the best window of the best-ranked file...
        fts_min: ...never fewer than these...
        fts_rank_step: ...and these fewer per rank of the window's file (the reference's
            linear steps; `fts_rank_decay` replaces them, below).
        modified: points for a file modified in the working tree.
        tracked: points for a file tracked by Git.
        token_cost_divisor: one point is deducted per this many estimated tokens...
        token_cost_max: ...up to this many.

    ds4-lsp's own (docs/project-knowledge.md, "Decisions beyond the reference"):

    Attributes:
        second_window_step: FTS tier points a file's second window has below its first.
        second_window_share: a file's second window gets an FTS tier when its concept relevance
            is at least this share of the first window's.
        extra_match: points per further exact match of a window (terms over all its tiers)...
        extra_match_max: ...up to this many.
        fts_evidence_divisor: an exact-tier window that also has an FTS tier gets
            (FTS points - `fts_min`) / this.
        role_penalty: points an exact-tier test or doc window loses when the request is not
            about tests or docs and does not name the file.
        role_demotion: factor on the file evidence and whole-file share of such a file.
        unranked_presence: share of a concept's idf given to a window holding the concept
            without a bm25 score for it.
        path_share: share of a concept's idf added to a file whose path names the concept.
        coverage_floor: a file's evidence is its strength times (floor + (1 - floor) coverage),
            coverage being the share of the concepts' weight it matches.
        evidence_share: weight of the window evidence (relative to the best file's) next to
            the whole-file bm25 (relative to the best file's, weight 1) in a prose request.
        fts_rank_decay: the FTS tier points of the file at rank r are `fts_min + (fts_max -
            fts_min) * fts_rank_decay ** r` (60, 56, 52.4, 49.2, ...: the reference's 60 - 4 r
            for the first ranks, but never equal for two ranks, so the 30th file still ranks
            above the 31st); 0 keeps the reference's `fts_rank_step`.
        fts_token_cost: whether an FTS-only window pays the token cost (the reference: yes).
        size_weight: weight of the size prior of a file (`size_prior`, 0..1) in the file score
            of a prose request: the score is multiplied by `1 - size_weight + size_weight *
            size_prior` (`sized_scores`).
        size_saturation: lines at which the size prior reaches 1.
        prior_weight: weight of an outside file prior (0..1 per file, e.g. how well the file's
            past commits match the request) added to the file score.
        config_demotion: factor on the file score of a configuration or data file
            (`is_configuration`).
        relevance_floor: the least relevance (`window_relevance`, 0..1) a window needs to be
            sent.
    """

    path: int = 140
    basename: int = 125
    declared_symbol: int = 115
    phrase: int = 90
    symbol_text: int = 85
    fts_max: int = 60
    fts_min: int = 20
    fts_rank_step: int = 4
    modified: int = 10
    tracked: int = 3
    token_cost_divisor: int = 250
    token_cost_max: int = 12
    second_window_step: int = 2
    second_window_share: float = 0.5
    extra_match: int = 2
    extra_match_max: int = 6
    fts_evidence_divisor: int = 10
    role_penalty: int = 10
    role_demotion: float = 0.25
    unranked_presence: float = 0.4
    path_share: float = 0.5
    coverage_floor: float = 0.5
    evidence_share: float = 0.5
    fts_rank_decay: float = 0.9
    fts_token_cost: bool = False
    size_weight: float = 0.5
    size_saturation: int = 2000
    prior_weight: float = 0.25
    config_demotion: float = 0.5
    relevance_floor: float = 0.55

    def tier_points(self, tier: Tier) -> int:
        """The points of an exact `tier`."""
        if tier is Tier.PATH:
            return self.path
        if tier is Tier.BASENAME:
            return self.basename
        if tier is Tier.DECLARED_SYMBOL:
            return self.declared_symbol
        if tier is Tier.PHRASE:
            return self.phrase
        return self.symbol_text


PROJECT_WEIGHTS = ProjectWeights()
"""The weights `search_project` ranks with."""


# ----------------------------------------------------------------------------- file roles


def role_factor(
    path: str, *, about_tests: bool, about_docs: bool, weights: ProjectWeights = PROJECT_WEIGHTS
) -> float:
    """The factor on the file score of `path` for its role: `role_demotion` for a test file
    in a request not about tests and for documentation (change logs included) in one not about
    docs, `config_demotion` for a configuration or data file (`is_configuration`), else 1."""
    if is_configuration(path):
        return weights.config_demotion
    if is_demoted(path, about_tests=about_tests, about_docs=about_docs):
        return weights.role_demotion
    return 1.0


# ----------------------------------------------------------------------------- concepts


def concept_idf(total_rows: int, matched_rows: int) -> float:
    """The weight of an FTS concept matching `matched_rows` of the index's `total_rows` rows:
    `ln(1 + (N - n + 0.5) / (n + 0.5))`, always positive (FTS5's own idf is ~0 for a word in
    half the rows, which in a small project is most telling words). N is at least n."""
    return math.log(1 + (max(total_rows, matched_rows) - matched_rows + 0.5) / (matched_rows + 0.5))


def concept_window_score(idf: float, score: float, best: float) -> float:
    """A window's score for a concept: `idf` times its bm25 `score` relative to the concept's
    `best` window (both negated bm25, higher is better; 1 when `best` is not positive), never
    negative."""
    share = score / best if best > 0 else 1.0
    return idf * max(share, 0.0)


def presence_score(idf: float, weights: ProjectWeights = PROJECT_WEIGHTS) -> float:
    """A window's score for a concept it holds without a bm25 score for it."""
    return idf * weights.unranked_presence


def window_relevance(held: Iterable[int], information: Sequence[float]) -> float:
    """The relevance of a window to the request, in 0..1: the share of the request's
    information (`information`: each concept's `concept_idf`, also for a concept that matched
    nothing) carried by the concepts it holds (`held`, concept indexes). One window is at most
    `windows.SNIPPET_LINES` lines, so this also measures how close together the matches are.
    0 when the request has no information."""
    total = sum(information)
    if total <= 0:
        return 0.0
    return sum(information[i] for i in set(held) if 0 <= i < len(information)) / total


def file_relevance(coverage: float, known: float) -> float:
    """The relevance of a file to the request, in 0..1 (the scale of the relevance floor):
    the mean of `coverage`, the share of the request's information the file holds
    (`window_relevance` of its concepts: an informative word counts more), and `known`, the
    share of the request's concepts the project knows at all (each counts the same: a request
    whose words the project mostly knows is about it even when its rarest word is a typo or a
    new name, while an unrelated one is carried by words the project has never seen)."""
    return (min(1.0, max(0.0, coverage)) + min(1.0, max(0.0, known))) / 2


# ----------------------------------------------------------------------------- files


def file_evidence(
    best_by_file: Mapping[str, Mapping[int, float]],
    idf: Sequence[float],
    naming: Sequence[Collection[str]],
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> dict[str, float]:
    """Each file's FTS evidence (docs in `project/search.py`, "Files first").

    Args:
        best_by_file: per path, each concept's (by index) best window score in that file.
        idf: each concept's weight (`concept_idf`; 0 for a concept that matched nothing).
        naming: per concept, the paths whose words name it.
        weights: the weights.

    Returns:
        `{path: evidence}` for the paths of `best_by_file`: `sum_c (m(c, f) + path_share
        idf(c) [f names c]) * (floor + (1 - floor) coverage)`; {} when no concept has weight.
        The role of the file is applied later (`combine_file_scores`).
    """
    total = sum(idf)
    if total <= 0:
        return {}
    w = weights
    in_paths = [(i, files) for i, files in enumerate(naming) if files and idf[i] > 0]
    evidence: dict[str, float] = {}
    for path, best in best_by_file.items():
        named = [i for i, files in in_paths if path in files]
        coverage = sum(idf[i] for i in set(best) | set(named)) / total
        strength = sum(best.values()) + w.path_share * sum(idf[i] for i in named)
        evidence[path] = strength * (w.coverage_floor + (1 - w.coverage_floor) * coverage)
    return evidence


def size_prior(lines: int, saturation: int) -> float:
    """The size prior of a file of `lines` lines: `ln(1 + lines) / ln(1 + saturation)`, at most
    1 (a file of `saturation` lines or more), 0 when `saturation` < 1. Longer files are more
    often the ones a change touches (bug-localization studies: BugLocator's rVSM, Zhou et al.
    ICSE 2012), while bm25's length normalisation favours short files."""
    if saturation < 1:
        return 0.0
    return math.log1p(max(0, min(lines, saturation))) / math.log1p(saturation)


@dataclass(frozen=True)
class FileSignals:
    """What the repository says about each candidate file of a request.

    Attributes:
        texts: whole-file bm25 for the request's words (negated: higher is better); empty when
            the request's words were not searched at file level.
        evidence: window evidence (`file_evidence`).
        prior: an outside prior per file in 0..1 (e.g. from the Git history); may be empty.
    """

    texts: Mapping[str, float]
    evidence: Mapping[str, float]
    prior: Mapping[str, float]


def combine_file_scores(
    signals: FileSignals,
    role: Callable[[str], float],
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> dict[str, float]:
    """Each candidate file's score before its size (every path of `texts`, `evidence` and
    `prior`; `sized_scores` applies the size).

    `(text + evidence_share * evidence + prior_weight * prior) * role(path)`, where `text` is
    the whole-file bm25 relative to the best file's, `evidence` the window evidence relative to
    the best file's, `prior` the outside prior (clamped to 0..1) and `role` the factor of its
    role (`role_factor`). Units: a file best in every signal scores `1 + evidence_share +
    prior_weight`.
    """
    w = weights
    best_text = max(signals.texts.values(), default=0.0) or 1.0
    best_evidence = max(signals.evidence.values(), default=0.0) or 1.0
    paths = signals.texts.keys() | signals.evidence.keys() | signals.prior.keys()
    combined: dict[str, float] = {}
    for path in paths:
        prior = min(1.0, max(0.0, signals.prior.get(path, 0.0)))
        value = (
            signals.texts.get(path, 0.0) / best_text
            + w.evidence_share * signals.evidence.get(path, 0.0) / best_evidence
            + w.prior_weight * prior
        )
        combined[path] = value * role(path)
    return combined


def size_contenders(
    scores: Mapping[str, float], limit: int, weights: ProjectWeights = PROJECT_WEIGHTS
) -> list[str]:
    """The paths of `scores` (before size) that can still be among the `limit` best once
    `sized_scores` multiplies each by its size factor (`1 - size_weight` .. 1): those scoring
    at least `1 - size_weight` times the `limit`-th best, best first (ties: path order). So
    the size of only these files is read."""
    ranked = top_files(scores, len(scores))
    if limit <= 0 or len(ranked) <= limit:
        return ranked
    bar = scores[ranked[limit - 1]] * (1 - weights.size_weight)
    return [path for path in ranked if scores[path] >= bar]


def sized_scores(
    scores: Mapping[str, float],
    lines: Mapping[str, int],
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> dict[str, float]:
    """`scores` (of `combine_file_scores`) times each file's size factor `1 - size_weight +
    size_weight * size_prior(lines, size_saturation)` (a file missing from `lines` counts 0
    lines)."""
    w = weights
    return {
        path: score
        * (1 - w.size_weight + w.size_weight * size_prior(lines.get(path, 0), w.size_saturation))
        for path, score in scores.items()
    }


def top_files(scores: Mapping[str, float], limit: int) -> list[str]:
    """The `limit` best paths of `scores`, best first (ties: path order)."""
    return [path for path, _ in sorted(scores.items(), key=lambda item: (-item[1], item[0]))][
        :limit
    ]


class FileWindow(Protocol):
    """A window of a ranked file, as `fts_tier` orders them."""

    @property
    def start_line(self) -> int:
        """First line, 1-based."""

    @property
    def relevance(self) -> float:
        """The sum of its concept scores."""


F = TypeVar("F", bound=FileWindow)


def fts_points(rank: int, weights: ProjectWeights = PROJECT_WEIGHTS) -> float:
    """The FTS tier points of the best window of the file at `rank` (0 = best):
    `fts_min + (fts_max - fts_min) * fts_rank_decay ** rank` (with `fts_rank_decay` 0: the
    reference's `max(fts_min, fts_max - fts_rank_step * rank)`)."""
    w = weights
    if w.fts_rank_decay > 0:
        return w.fts_min + (w.fts_max - w.fts_min) * w.fts_rank_decay**rank
    return float(max(w.fts_min, w.fts_max - w.fts_rank_step * rank))


def fts_tier(
    rank: int, windows: Sequence[F], weights: ProjectWeights = PROJECT_WEIGHTS
) -> list[tuple[F, float]]:
    """The FTS tier points of the file at `rank` (0 = best) among the files ranked: its best
    window (by relevance, then start line) gets `max(fts_min, fts_max - fts_rank_step rank)`,
    and its second `second_window_step` fewer (not under `fts_min`) when that one's relevance
    is at least `second_window_share` of the best one's. [] for no windows."""
    if not windows:
        return []
    w = weights
    ordered = sorted(windows, key=lambda window: (-window.relevance, window.start_line))
    top = fts_points(rank, w)
    first = ordered[0]
    points = [(first, float(top))]
    if len(ordered) > 1 and ordered[1].relevance >= w.second_window_share * first.relevance:
        points.append((ordered[1], float(max(w.fts_min, top - w.second_window_step))))
    return points


# ----------------------------------------------------------------------------- windows


class WindowEvidence(Protocol):
    """What the project search found for one window: the input of `score_window`.

    `project.search` passes its windows (read from SQLite); tests may pass any object with
    these attributes.
    """

    @property
    def path(self) -> str:
        """POSIX path relative to the project root."""

    @property
    def start_line(self) -> int:
        """First line, 1-based."""

    @property
    def snippet_id(self) -> str:
        """The window's id (the last tie-break)."""

    @property
    def token_estimate(self) -> int:
        """Estimated tokens of the window's text."""

    @property
    def modified(self) -> bool:
        """The file differs from Git HEAD in the working tree."""

    @property
    def tracked(self) -> bool:
        """The file is tracked by Git."""

    @property
    def tiers(self) -> Mapping[Tier, Sequence[str]]:
        """The exact tiers that matched, each with the request terms that did, in order."""

    @property
    def fts_score(self) -> float | None:
        """Its FTS tier points (`fts_tier`), or None."""

    @property
    def concepts(self) -> Mapping[int, float]:
        """Its score per FTS concept (by concept index) it holds."""


@dataclass(frozen=True)
class RankingContext:
    """What `score_window` needs to know about the request.

    Attributes:
        about_tests: the request is about tests (no test-file penalty).
        about_docs: the request is about documentation (no doc-file penalty).
        named_files: the paths the request names (path or basename tier; no penalty).
        concept_labels: each FTS concept's label, by concept index (shown in reasons).
    """

    about_tests: bool
    about_docs: bool
    named_files: Collection[str]
    concept_labels: Sequence[str]


W = TypeVar("W", bound=WindowEvidence)


@dataclass
class ScoredWindow(Generic[W]):
    """A window with its score (rounded to 6 decimals) and reason."""

    window: W
    score: float
    reason: str


def score_window(
    window: W, context: RankingContext, weights: ProjectWeights = PROJECT_WEIGHTS
) -> ScoredWindow[W] | None:
    """The score and reason of `window`, or None when no exact or FTS tier matched it.

    The primary score is its best exact tier's points, plus `extra_match` per further match
    (up to `extra_match_max`) and (FTS points - `fts_min`) / `fts_evidence_divisor` when it also
    has an FTS tier, minus `role_penalty` for a test or doc file the request is not about and
    does not name; or else its FTS points. Then +`modified`, +`tracked`, minus
    min(`token_cost_max`, tokens / `token_cost_divisor`). The reason lists its tiers (in
    `TIER_LABELS` order) with their terms, the role penalty, its FTS concepts and `modified`.
    """
    w = weights
    tiers = window.tiers
    fts = window.fts_score
    if not tiers and fts is None:
        return None
    reasons = [f"{label}: {', '.join(tiers[tier])}" for tier, label in TIER_LABELS
               if tier in tiers]  # fmt: skip
    if tiers:
        score = float(max(w.tier_points(tier) for tier in tiers))
        matches = sum(len(terms) for terms in tiers.values())
        score += min(w.extra_match_max, w.extra_match * (matches - 1))
        if fts is not None:
            score += (fts - w.fts_min) / w.fts_evidence_divisor
        role = file_role(window.path)
        if window.path not in context.named_files and role_is_demoted(
            role, about_tests=context.about_tests, about_docs=context.about_docs
        ):
            score -= w.role_penalty
            reasons.append(f"{role} file")
    else:
        assert fts is not None
        score = fts
    if window.concepts:
        labels = [context.concept_labels[i] for i in sorted(window.concepts)]
        reasons.append("FTS: " + ", ".join(labels))
    if window.modified:
        score += w.modified
        reasons.append("modified")
    if window.tracked:
        score += w.tracked
    if tiers or w.fts_token_cost:
        score -= min(w.token_cost_max, max(0, window.token_estimate) / w.token_cost_divisor)
    return ScoredWindow(window, round(score, 6), "; ".join(reasons))


def rank_key(scored: ScoredWindow[W]) -> tuple[float, bool, str, int, str]:
    """The rank order: score (best first), then modified files first, path, start line and
    snippet id."""
    window = scored.window
    return (-scored.score, not window.modified, window.path, window.start_line, window.snippet_id)


def rank_windows(
    windows: Iterable[W], context: RankingContext, weights: ProjectWeights = PROJECT_WEIGHTS
) -> list[ScoredWindow[W]]:
    """`score_window` of each of `windows` that matched a tier, best first (`rank_key`)."""
    scored = [s for window in windows if (s := score_window(window, context, weights))]
    scored.sort(key=rank_key)
    return scored


__all__ = [
    "PROJECT_WEIGHTS",
    "TIER_LABELS",
    "FileRole",
    "FileSignals",
    "FileWindow",
    "ProjectWeights",
    "RankingContext",
    "ScoredWindow",
    "Tier",
    "WindowEvidence",
    "combine_file_scores",
    "concept_idf",
    "concept_window_score",
    "file_evidence",
    "file_relevance",
    "file_role",
    "fts_points",
    "fts_tier",
    "is_configuration",
    "is_demoted",
    "presence_score",
    "rank_key",
    "rank_windows",
    "role_factor",
    "role_is_demoted",
    "score_window",
    "size_contenders",
    "size_prior",
    "sized_scores",
    "top_files",
    "window_relevance",
]
