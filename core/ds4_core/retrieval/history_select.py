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
from typing import Protocol

from ds4_core.retrieval.floor import MAX_BELOW_FLOOR, BelowFloor
from ds4_core.retrieval.history_candidates import _Candidate
from ds4_core.retrieval.history_groups import group_texts
from ds4_core.retrieval.history_relevance import EntryRelevance, SessionRelevance
from ds4_core.retrieval.scoring import RankedEntry, rank_history


class _Reader(Protocol):
    """What is needed of the search (`history._Search`): its connection, the rows read by
    rowid, and a way to read more rows."""

    conn: sqlite3.Connection
    rows: dict[int, _Candidate]

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


def select(
    search: _Reader,
    eligible: list[_Candidate],
    relevance: SessionRelevance,
    *,
    branch: Collection[str],
    excluded: Collection[str],
    floor: bool = True,
) -> tuple[list[RankedEntry[_Candidate]], list[BelowFloor], int]:
    """(entries that pass the floor best first, below-floor records, how many fell below).

    `eligible`: the passes' eligible candidates; `branch` / `excluded`: entry ids on the
    active branch / already in the context (the same eligibility for the added candidates).
    `floor=False` (the FTS pass is off, so no relevance was computed): every eligible
    candidate in the DS4 reference order (`rank_history`), nothing below a floor.
    """
    if not floor:
        return list(rank_history(eligible)), [], 0
    passed, below, threshold = relevance.split()
    search._load([e.rowid for e in passed + below[:MAX_BELOW_FLOOR]])
    pool = {c.rowid: c for c in eligible}
    for added in passed + below[:MAX_BELOW_FLOOR]:
        c = search.rows.get(added.rowid)
        if c is not None and c.raw and c.entry_id in branch and c.entry_id not in excluded:
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
            score=round(scores.get(rowid, 0.0), 6),
            floor=threshold,
            tokens=item.candidate.token_estimate,
        )
        for rowid, (_i, item) in order.items()
        if rowid not in kept
    ]
    under.sort(key=lambda b: (-b.score, b.source_id))
    return ranked, under[:MAX_BELOW_FLOOR], len(under)


__all__ = ["RelevantEntry", "select"]
