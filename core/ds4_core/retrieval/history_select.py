"""The rank order and the floor of a history search (`retrieval/history.py`, step 4).

`retrieve_history` hands over its eligible candidates (active branch, not in the context) and
the session's relevance to the request (`retrieval/history_relevance.py`). Here:

* candidates the relevance found that the literal pass did not are read and added
  (a conclusion found through its turn, an entry found through a stemmed word or a sub-word);
* the candidates that pass the floor are ordered by relevance score, then by the DS4 reference
  order (`retrieval/scoring.py`: literal priority, score, time, id) as the tie-breaker; their
  `RankedEntry.score` is the relevance score and their reason leads with the relevance;
* the others become `BelowFloor` records (best relevance first, at most `MAX_BELOW_FLOOR`);
* a tool result is quoted with the line of the call that produced it, and a tool call with
  its short results (`retrieval/history_groups.py`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection
from typing import NamedTuple, Protocol

from ds4_core.retrieval.floor import MAX_BELOW_FLOOR, BelowFloor
from ds4_core.retrieval.history_candidates import _Candidate
from ds4_core.retrieval.history_groups import group_texts
from ds4_core.retrieval.history_relevance import (
    RELATIVE_SCORE,
    EntryRelevance,
    SessionRelevance,
)
from ds4_core.retrieval.scoring import RankedEntry, rank_history


class _Reader(Protocol):
    """What is needed of the search (`history._Search`): its connection, the rows read by
    rowid, the rows its literal pass found (by rowid), and a way to read more rows."""

    conn: sqlite3.Connection
    rows: dict[int, _Candidate]
    candidates: dict[int, _Candidate]

    def _load(self, rowids: list[int]) -> None: ...


class RelevantEntry(RankedEntry[_Candidate]):
    """A `RankedEntry` scored by relevance; `reason` leads with it."""

    relevance: EntryRelevance

    @property
    def reason(self) -> str:
        r = self.relevance
        head = f"relevance {r.relevance:.3f} (covers {r.coverage:.0%} of the request"
        head += ": " + ", ".join(r.units) + ")" if r.units else ")"
        return head + "; " + super().reason

    @property
    def matched_terms(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*super().matched_terms, *self.relevance.units]))


class Selection(NamedTuple):
    """What `select` returns.

    Attributes:
        ranked: the entries that pass the floor, best first.
        below: below-floor records, best first, at most `MAX_BELOW_FLOOR`.
        below_count: how many eligible candidates fell below the floor in all.
        added: entries the relevance pass scored that the literal pass had not found.
        added_in_context: of those loaded for ranking, how many the caller already sends.
    """

    ranked: list[RankedEntry[_Candidate]]
    below: list[BelowFloor]
    below_count: int
    added: int
    added_in_context: int


def select(
    search: _Reader,
    eligible: list[_Candidate],
    relevance: SessionRelevance,
    *,
    branch: Collection[str],
    excluded: Collection[str],
    floor: bool = True,
) -> Selection:
    """The entries that pass the floor, best first, and what fell below it (`Selection`).

    `eligible`: the passes' eligible candidates; `branch` / `excluded`: entry ids on the
    active branch / already in the context (the same eligibility for the added candidates).
    `floor=False` (the FTS pass is off, so no relevance was computed): every eligible
    candidate in the DS4 reference order (`rank_history`), nothing below a floor.
    """
    if not floor:
        return Selection(list(rank_history(eligible)), [], 0, 0, 0)
    passed, below, threshold, shares = relevance.split()
    search._load([e.rowid for e in passed + below[:MAX_BELOW_FLOOR]])
    pool = {c.rowid: c for c in eligible}
    known = set(search.candidates)  # found by the literal pass: counted by the caller
    in_context = 0
    for added in passed + below[:MAX_BELOW_FLOOR]:
        c = search.rows.get(added.rowid)
        if c is None or not c.raw or c.rowid in known:
            continue
        if c.entry_id in excluded:
            in_context += 1
        elif c.entry_id in branch:
            pool.setdefault(c.rowid, c)
    order = {
        item.candidate.rowid: (i, item) for i, item in enumerate(rank_history(list(pool.values())))
    }
    keep = [e for e in passed if e.rowid in order]
    keep.sort(key=lambda e: (-e.score, order[e.rowid][0]))
    kept = {e.rowid for e in keep}
    groups = group_texts(search, [order[e.rowid][1].candidate for e in keep])
    ranked: list[RankedEntry[_Candidate]] = []
    for e in keep:
        item = order[e.rowid][1]
        if e.rowid in groups:
            item.candidate._text = groups[e.rowid]
        relevant = RelevantEntry(
            item.candidate, round(e.score, 6), item.literal_priority, item.created_ms
        )
        relevant.relevance = e
        ranked.append(relevant)
    scores = {e.rowid: e.relevance for e in passed + below}
    under = [
        BelowFloor(
            kind="history",
            source_id=item.candidate.entry_key,
            score=round(shares[rowid] if rowid in shares else scores.get(rowid, 0.0), 6),
            floor=RELATIVE_SCORE if rowid in shares else threshold,
            tokens=item.candidate.token_estimate,
            rule="relative" if rowid in shares else "floor",
        )
        for rowid, (_i, item) in order.items()
        if rowid not in kept
    ]
    # those that reached the floor (cut relative to the best) first, then by score
    under.sort(key=lambda b: (b.rule != "relative", -b.score, b.source_id))
    scored = len({e.rowid for e in passed + below} - known)
    return Selection(ranked, under[:MAX_BELOW_FLOOR], len(under), scored, in_context)


__all__ = ["RelevantEntry", "Selection", "select"]
