"""History ranking: score and order the eligible candidates of a history search. Pure: no store.

Candidate generation stays in `retrieval/history.py`: the literal pass and the FTS5 bm25 pass
over SQLite find the candidates, record which exact identifiers, phrases and FTS terms each
holds and its FTS rank, check which of the request's files, symbols and errors its text holds,
and keep the eligible ones (active branch, not already in the context). This module turns that
evidence into a score, a reason and a rank order (`rank_history`), so the weights can be read,
tested and changed in one place.

The weights (`HistoryWeights`) are those of the DS4 context engine's historical retrieval
(docs/ds4-rules.md, "Historical retrieval": an exact identifier scores 100 and more, a phrase 85
and more, an FTS hit 60 and more, with small additions for files, symbols and errors named, the
role, recency, and a cost deduction for long entries). In full, for one candidate:

    score = 100 + min(12, 3 (identifiers - 1))     if it holds an exact identifier
          + 85 + min(8, 2 (phrases - 1))           if it holds a quoted phrase
          + 60 + max(0, 10 - fts_rank)             if the FTS pass found it (rank 0 = best)
          + 12 per request file, 10 per symbol, 12 per error its text holds
          + 15 + role authority                    (user 8, assistant 5, toolResult 4,
                                                    bashExecution 4, any other role 1)
          + 8 (t - oldest) / (newest - oldest)     recency among the candidates with a time
          - min(12, token_estimate / 1000)

rounded to 6 decimals. Order: literal priority (2 with an exact identifier, 1 with only a
phrase, else 0), then score, then creation time (newest first; no time sorts as 0), then entry
id, then the input order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

from ds4_core.retrieval.descriptor import unique
from ds4_core.sessions.context import iso_to_ms


def _default_role_authority() -> Mapping[str, int]:
    return MappingProxyType({"user": 8, "assistant": 5, "toolResult": 4, "bashExecution": 4})


@dataclass(frozen=True)
class HistoryWeights:
    """The points of the history score (module docstring; docs/ds4-rules.md, "Historical
    retrieval"). Points are added as written; the defaults are the DS4 engine's.

    Attributes:
        exact_identifier: points for holding at least one of the request's exact identifiers.
        exact_identifier_step: points per further identifier held...
        exact_identifier_extra_max: ...up to this many.
        phrase: points for holding at least one quoted phrase of the request.
        phrase_step: points per further phrase held...
        phrase_extra_max: ...up to this many.
        fts: points for being among the FTS pass's results...
        fts_rank_points: ...plus this many minus the FTS rank (0 = best), never below 0.
        descriptor_file: points per request file the text holds.
        descriptor_symbol: points per request symbol the text holds.
        descriptor_error: points per request error the text holds.
        base: points every candidate gets.
        role_authority: points by message role (read-only mapping)...
        other_role_authority: ...and for any other role (or none).
        recency: points for the newest candidate, 0 for the oldest, linear in between (given
            only when the candidates' times differ).
        token_cost_unit: one point is deducted per this many estimated tokens...
        token_cost_max: ...up to this many.
    """

    exact_identifier: int = 100
    exact_identifier_step: int = 3
    exact_identifier_extra_max: int = 12
    phrase: int = 85
    phrase_step: int = 2
    phrase_extra_max: int = 8
    fts: int = 60
    fts_rank_points: int = 10
    descriptor_file: int = 12
    descriptor_symbol: int = 10
    descriptor_error: int = 12
    base: int = 15
    role_authority: Mapping[str, int] = field(default_factory=_default_role_authority)
    other_role_authority: int = 1
    recency: int = 8
    token_cost_unit: int = 1000
    token_cost_max: int = 12


HISTORY_WEIGHTS = HistoryWeights()
"""The weights `retrieve_history` ranks with."""


class HistoryEvidence(Protocol):
    """What the history search found for one eligible entry: the scorer's input.

    `retrieval.history` passes its candidates (read from SQLite); tests may pass any object with
    these attributes.
    """

    @property
    def entry_id(self) -> str:
        """The Pi entry id (the last tie-break)."""

    @property
    def role(self) -> str | None:
        """The message role (`user`, `assistant`, `toolResult`, ...; `custom` for a
        custom_message), or None."""

    @property
    def created_at(self) -> str | None:
        """The entry's ISO-8601 timestamp, or None."""

    @property
    def token_estimate(self) -> int:
        """Estimated tokens of the entry's text."""

    @property
    def exact(self) -> Sequence[str]:
        """Exact identifiers of the request found in the text, in request order."""

    @property
    def phrases(self) -> Sequence[str]:
        """Quoted phrases of the request found in the text, in request order."""

    @property
    def fts_terms(self) -> Sequence[str]:
        """Query terms in the text, when the FTS pass found the entry (else empty)."""

    @property
    def fts_rank(self) -> int | None:
        """0-based rank in the FTS pass's bm25 order, or None when it did not find it."""

    @property
    def files_found(self) -> int:
        """How many of the request's files the text holds."""

    @property
    def symbols_found(self) -> int:
        """How many of the request's symbols the text holds."""

    @property
    def errors_found(self) -> int:
        """How many of the request's errors the text holds."""


E = TypeVar("E", bound=HistoryEvidence)


@dataclass
class RankedEntry(Generic[E]):
    """One candidate with its score (rounded to 6 decimals) and literal priority.

    `created_ms`: its creation time in ms since the epoch, or None.
    """

    candidate: E
    score: float
    literal_priority: int
    created_ms: int | None

    @property
    def matched_terms(self) -> tuple[str, ...]:
        """Exact identifiers, phrases and FTS terms found, in that order, each once."""
        c = self.candidate
        return unique([*c.exact, *c.phrases, *c.fts_terms], None)

    @property
    def reason(self) -> str:
        """E.g. `exact identifier: Foo.bar; FTS: foo; active branch`."""
        return history_reason(self.candidate)


def history_reason(c: HistoryEvidence) -> str:
    """Why `c` was retrieved: its identifiers, phrases and FTS terms, then `active branch`."""
    reasons = []
    if c.exact:
        reasons.append("exact identifier: " + ", ".join(c.exact))
    if c.phrases:
        reasons.append("exact phrase: " + ", ".join(c.phrases))
    if c.fts_terms:
        reasons.append("FTS: " + ", ".join(c.fts_terms))
    reasons.append("active branch")
    return "; ".join(reasons)


def literal_priority(c: HistoryEvidence) -> int:
    """2 when `c` holds an exact identifier, 1 when it holds only a phrase, else 0."""
    return 2 if c.exact else 1 if c.phrases else 0


def evidence_points(c: HistoryEvidence, weights: HistoryWeights = HISTORY_WEIGHTS) -> int:
    """The points of `c` that do not depend on the other candidates: everything but recency
    and the token cost (module docstring)."""
    w = weights
    points = (
        w.descriptor_file * c.files_found
        + w.descriptor_symbol * c.symbols_found
        + w.descriptor_error * c.errors_found
    )
    if c.exact:
        points += w.exact_identifier + min(
            w.exact_identifier_extra_max, w.exact_identifier_step * (len(c.exact) - 1)
        )
    if c.phrases:
        points += w.phrase + min(w.phrase_extra_max, w.phrase_step * (len(c.phrases) - 1))
    if c.fts_terms:
        rank = c.fts_rank if c.fts_rank is not None else w.fts_rank_points
        points += w.fts + max(0, w.fts_rank_points - rank)
    return points + w.base + w.role_authority.get(c.role or "", w.other_role_authority)


def rank_history(
    candidates: Sequence[E], weights: HistoryWeights = HISTORY_WEIGHTS
) -> Iterator[RankedEntry[E]]:
    """Score `candidates` (module docstring) and yield them best first.

    The recency points compare each candidate with the oldest and newest of `candidates` (those
    with a parseable `created_at`), so pass the whole eligible set at once. Every candidate is
    scored before the first is yielded; the `RankedEntry` objects are made as they are taken.
    """
    w = weights
    created = [iso_to_ms(c.created_at) for c in candidates]
    times = [ms for ms in created if ms is not None]
    oldest = min(times, default=0)
    newest = max(times, default=0)
    spread = newest > oldest
    scored: list[tuple[int, float, int, str, int]] = []  # the sort key, then the index
    for index, c in enumerate(candidates):
        score = float(evidence_points(c, w))
        ms = created[index]
        if ms is not None and spread:
            score += (ms - oldest) / (newest - oldest) * w.recency
        score -= min(w.token_cost_max, max(0, c.token_estimate) / w.token_cost_unit)
        priority = literal_priority(c)
        scored.append((-priority, -round(score, 6), -(ms or 0), c.entry_id, index))
    scored.sort()
    for neg_priority, neg_score, _ms, _entry_id, index in scored:
        yield RankedEntry(candidates[index], -neg_score, -neg_priority, created[index])


__all__ = [
    "HISTORY_WEIGHTS",
    "HistoryEvidence",
    "HistoryWeights",
    "RankedEntry",
    "evidence_points",
    "history_reason",
    "literal_priority",
    "rank_history",
]
