"""Relevance of history entries to a request: weighted evidence, coverage, answers over
questions, and the floor (docs/retrieval.md "History scope"; issue 11).

`retrieve_history` (`retrieval/history.py`) finds candidates with its literal and FTS passes;
this module decides how much each entry of the session has in common with the request, and
whether that is enough to send it at all.

1. **Units** (`retrieval/history_words.py`): the request's informative words (stemmed, so word
   forms meet), its multi-token identifiers as phrases, its CJK character pairs.
2. **Matches**: each unit is looked up in `entries_fts` and in the sub-word index
   `entries_subwords` (camelCase humps, CJK pairs; migration 8), within the session's
   `message` / `custom_message` entries: one indexed query per unit and table.
3. **Weight** of a unit: its inverse document frequency in this session,
   `max(0, ln((N - n + 0.5) / (n + 0.5)))` with N the session's entries and n those matching
   it. A word in half the session or more weighs 0 (a filler such as `write` in a session of
   file edits); a word in 30% weighs about 0.85; a word in 5 of 900 entries about 5.1.
4. **Evidence** of an entry: the weights of the units it matches, summed (`evidence`), and
   the share of the request's total weight that is (`coverage`, 0-1). Units the session never
   mentions keep their full weight in the total, so a request about something else (`haiku`,
   `borrow checker`) covers little of itself in any entry.
5. **Score** (the rank order): evidence x (0.5 + coverage) x role factor x length factor.
   Role (answers over questions): `ROLE_FACTORS` (a user's message, which asks, counts less
   than the assistant's and the tools' answers). Length: 1 / (1 + LENGTH_SLOPE ln(1 + tokens /
   LENGTH_UNIT)): a long file read matches many words by chance. A tool result also takes the
   score of the tool call that produced it (the call's arguments hold the words a short output
   lacks, `93`), times `RESULT_OVER_CALL`, so the output ranks above the call; the hit then
   quotes the call line with it (`retrieval/history_groups.py`).
6. **Floor**: an entry's relevance is coverage x min(1, evidence / EVIDENCE_REF) (0-1). Under
   `RELEVANCE_FLOOR` it is not sent, however much budget is left.

Errors: an `sqlite3.Error` of a unit query (an FTS5 index that cannot be read, a database
without migration 8) leaves that unit unmatched and adds a warning; nothing raises.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ds4_core.retrieval.history_turns import TURN_WEIGHT, turn_evidence
from ds4_core.retrieval.history_words import Unit
from ds4_core.store.sql import chunked, placeholders

ELIGIBLE_ENTRY_TYPES = ("message", "custom_message")
_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in ELIGIBLE_ENTRY_TYPES) + ")"  # our constants

ROLE_FACTORS = {"user": 0.55, "assistant": 1.0, "toolResult": 0.9, "bashExecution": 0.9}
"""Score factor by message role; any other role (custom messages): `OTHER_ROLE_FACTOR`."""
OTHER_ROLE_FACTOR = 0.8
RESULT_OVER_CALL = 0.5
"""A tool result scores at least this times the score of the call that produced it."""
LENGTH_UNIT = 400
LENGTH_SLOPE = 0.3
EVIDENCE_REF = 6.0
"""Evidence (summed unit weights) at which relevance stops being scaled down: about one word
found in a handful of the session's entries."""
REQUEST_FLOOR = 0.4
"""Nothing is sent when none of the best `GATE_TOP` entries reaches this relevance: the
session is not about the request."""
GATE_TOP = 3
ENTRY_FLOOR = 0.1
"""Past the request's floor, an entry under this relevance is still not sent."""
IDENTIFIER_BOOST = 2.0
"""A unit the request names as an exact identifier weighs this much more (a person naming a
symbol points at it more precisely than with a word)."""
TURN_RELEVANCE = 1.0
"""A turn's relevance counts this much toward its conclusion's."""
RESULT_SHORT_TOKENS = 200
"""Only tool results up to this many tokens take their call's score (a short output)."""
SCORED_LIMIT = 200
"""Most entries (best evidence first) whose role, length and tool-call link are read."""

_MATCH_SQL = {
    table: (
        f"SELECT f.rowid FROM {table} AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
        f"WHERE {table} MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL}"
    )
    for table in ("entries_fts", "entries_subwords")
}
_BM25_SQL = {
    table: (
        f"SELECT f.rowid, bm25({table}) FROM {table} AS f "
        "CROSS JOIN entries AS e ON e.rowid = f.rowid "
        f"WHERE {table} MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
        f"ORDER BY bm25({table}), f.rowid LIMIT ?"
    )
    for table in ("entries_fts", "entries_subwords")
}
_COUNT_SQL = f"SELECT count(*) FROM entries WHERE session_id = ? AND entry_type IN {_TYPES_SQL}"


@dataclass(frozen=True, slots=True)
class EntryRelevance:
    """What one entry shares with the request.

    Attributes:
        rowid: the entry's `entries` rowid.
        evidence: summed weights of the units it matches.
        coverage: evidence / the request's total weight (0-1).
        relevance: coverage x min(1, evidence / EVIDENCE_REF): the floor's scale (0-1).
        score: the rank value (module docstring, rule 5).
        units: the units it matches, as their display text, in request order.
        call_rowid: for a tool result scored through its call, the call entry's rowid.
    """

    rowid: int
    evidence: float
    coverage: float
    relevance: float
    score: float
    units: tuple[str, ...]
    call_rowid: int | None = None


@dataclass
class SessionRelevance:
    """The relevance of a session's entries to one request.

    `entries`: by rowid, every entry matching at least one unit among the `SCORED_LIMIT` with
    the most evidence; `weights`: unit display text -> weight; `total`: the summed weights;
    `warnings`: sentences for the user.
    """

    entries: dict[int, EntryRelevance]
    weights: dict[str, float]
    total: float
    warnings: list[str]

    def ranked(self) -> list[EntryRelevance]:
        """Entries best first (score, then relevance, then the newer rowid)."""
        return sorted(self.entries.values(), key=lambda e: (-e.score, -e.relevance, -e.rowid))

    def split(self) -> tuple[list[EntryRelevance], list[EntryRelevance], float]:
        """(entries that pass the floor, those that do not, the floor they were held to),
        each list best first (module docstring, rule 6)."""
        ranked = self.ranked()
        best = max((e.relevance for e in ranked[:GATE_TOP]), default=0.0)
        if best < REQUEST_FLOOR:
            return [], ranked, REQUEST_FLOOR
        passed = [e for e in ranked if e.relevance >= ENTRY_FLOOR]
        return passed, [e for e in ranked if e.relevance < ENTRY_FLOOR], ENTRY_FLOOR


def unit_weight(entries: int, matching: int) -> float:
    """`max(0, ln((N - n + 0.5) / (n + 0.5)))` (module docstring, rule 3)."""
    return max(0.0, math.log((entries - matching + 0.5) / (matching + 0.5)))


def length_factor(tokens: int) -> float:
    """1 / (1 + LENGTH_SLOPE ln(1 + tokens / LENGTH_UNIT))."""
    return 1.0 / (1.0 + LENGTH_SLOPE * math.log1p(max(0, tokens) / LENGTH_UNIT))


def _unit_matches(
    conn: sqlite3.Connection, session_id: str, unit: Unit, warnings: list[str]
) -> set[int]:
    found: set[int] = set()
    for table, expression in (("entries_fts", unit.fts), ("entries_subwords", unit.sub)):
        if expression is None:
            continue
        try:
            found.update(
                row[0] for row in conn.execute(_MATCH_SQL[table], (expression, session_id))
            )
        except sqlite3.Error as exc:
            warnings.append(
                f"ds4: the history index could not be searched for {unit.text!r} ({exc}); "
                "if this persists, rebuild the index (ds4.rebuildIndex)."
            )
    return found


def _bm25(
    conn: sqlite3.Connection, session_id: str, units: Sequence[Unit], warnings: list[str]
) -> dict[int, float]:
    """rowid -> bm25 relevance (negated FTS5 `bm25()`, summed over `entries_fts` and
    `entries_subwords`) of the session's best `SCORED_LIMIT` entries for the OR of `units`."""
    out: dict[int, float] = {}
    for table, expressions in (
        ("entries_fts", [u.fts for u in units if u.fts]),
        ("entries_subwords", [u.sub for u in units if u.sub]),
    ):
        if not expressions:
            continue
        try:
            rows = conn.execute(
                _BM25_SQL[table], (" OR ".join(expressions), session_id, SCORED_LIMIT)
            ).fetchall()
        except sqlite3.Error as exc:
            warnings.append(
                f"ds4: the history index could not be ranked ({exc}); if this persists, "
                "rebuild the index (ds4.rebuildIndex)."
            )
            continue
        for rowid, value in rows:
            out[rowid] = out.get(rowid, 0.0) - value
    return out


def _metadata(conn: sqlite3.Connection, rowids: Iterable[int]) -> dict[int, tuple]:
    """rowid -> (role, token_estimate, parent_id, entry_id, session_id)."""
    out: dict[int, tuple] = {}
    for chunk in chunked(sorted(rowids)):
        for row in conn.execute(
            "SELECT rowid, role, token_estimate, parent_id, entry_id, session_id FROM entries "
            f"WHERE rowid IN ({placeholders(len(chunk))})",
            chunk,
        ):
            out[row[0]] = row[1:]
    return out


def session_relevance(
    conn: sqlite3.Connection, session_id: str, units: Sequence[Unit]
) -> SessionRelevance:
    """Score the entries of `session_id` against the request's `units` (module docstring).

    Returns a `SessionRelevance`; empty when there are no units or no entries. Never raises
    for FTS5 errors (they become warnings); errors of the `entries` table propagate.
    """
    warnings: list[str] = []
    (count,) = conn.execute(_COUNT_SQL, (session_id,)).fetchone()
    if not units or not count:
        return SessionRelevance({}, {}, 0.0, warnings)
    weights: dict[str, float] = {}
    matched_by: dict[int, list[str]] = {}
    evidence: dict[int, float] = {}
    for unit in units:
        rowids = _unit_matches(conn, session_id, unit, warnings)
        weight = unit_weight(count, len(rowids)) * (IDENTIFIER_BOOST if unit.identifier else 1)
        weights[unit.text] = weight
        if weight <= 0:
            continue
        for rowid in rowids:
            matched_by.setdefault(rowid, []).append(unit.text)
            evidence[rowid] = evidence.get(rowid, 0.0) + weight
    total = sum(weights.values())
    if total <= 0 or not evidence:
        return SessionRelevance({}, weights, total, warnings)
    base = _bm25(conn, session_id, [u for u in units if weights[u.text] > 0], warnings)
    best = sorted(base, key=lambda r: (-base[r], -r))[:SCORED_LIMIT]
    meta = _metadata(conn, best)
    scored: dict[int, EntryRelevance] = {}
    for rowid in best:
        role, tokens, _parent, _entry_id, _session = meta[rowid]
        ev = evidence.get(rowid, 0.0)
        coverage = ev / total
        relevance = coverage * min(1.0, ev / EVIDENCE_REF)
        factor = ROLE_FACTORS.get(role or "", OTHER_ROLE_FACTOR) * length_factor(tokens or 0)
        scored[rowid] = EntryRelevance(
            rowid, ev, coverage, relevance, base[rowid] * (0.5 + coverage) * factor,
            tuple(matched_by.get(rowid, ())),
        )  # fmt: skip
    _score_results_through_calls(conn, session_id, scored, meta)
    _score_conclusions(conn, session_id, scored, matched_by, weights, total)
    return SessionRelevance(scored, weights, total, warnings)


def _score_conclusions(
    conn: sqlite3.Connection,
    session_id: str,
    scored: dict[int, EntryRelevance],
    matched_by: dict[int, list[str]],
    weights: dict[str, float],
    total: float,
) -> None:
    """Add each best turn's score to its conclusion (`retrieval/history_turns.py`)."""
    for turn in turn_evidence(conn, session_id, matched_by, weights, total):
        relevance = turn.coverage * min(1.0, turn.evidence / EVIDENCE_REF) * TURN_RELEVANCE
        own = scored.get(turn.conclusion)
        bonus = TURN_WEIGHT * turn.score
        if own is None:
            scored[turn.conclusion] = EntryRelevance(
                turn.conclusion, turn.evidence, turn.coverage, relevance, bonus, turn.units
            )
        else:
            scored[turn.conclusion] = EntryRelevance(
                own.rowid,
                max(own.evidence, turn.evidence),
                max(own.coverage, turn.coverage),
                max(own.relevance, relevance),
                own.score + bonus,
                own.units if own.relevance >= relevance else turn.units,
                own.call_rowid,
            )


def _score_results_through_calls(
    conn: sqlite3.Connection,
    session_id: str,
    scored: dict[int, EntryRelevance],
    meta: dict[int, tuple],
) -> None:
    """Give each scored tool call's results (the toolResult entries whose parent chain of
    results leads to it) at least `RESULT_OVER_CALL` x its score and relevance."""
    calls = {
        meta[rowid][3]: rowid
        for rowid in scored
        if meta[rowid][0] == "assistant" and meta[rowid][3] is not None
    }
    if not calls:
        return
    results: list[tuple[int, str, int]] = []  # (result rowid, call entry id, call rowid)
    frontier = dict(calls)  # entry id -> call rowid whose results may be children of it
    for _depth in range(32):  # a call's results chain one after another
        if not frontier:
            break
        following: dict[str, int] = {}
        for chunk in chunked(sorted(frontier)):
            for rowid, entry_id, parent in conn.execute(
                "SELECT rowid, entry_id, parent_id FROM entries WHERE session_id = ? "
                f"AND role = 'toolResult' AND parent_id IN ({placeholders(len(chunk))})",
                (session_id, *chunk),
            ):
                call = frontier[parent]
                results.append((rowid, parent, call))
                following[entry_id] = call
        frontier = following
    lengths = dict(
        row
        for chunk in chunked(sorted({r for r, _p, _c in results}))
        for row in conn.execute(
            f"SELECT rowid, token_estimate FROM entries WHERE rowid IN ({placeholders(len(chunk))})",
            chunk,
        )
    )
    for rowid, _parent, call in results:
        if lengths.get(rowid, 0) > RESULT_SHORT_TOKENS:
            continue
        via = scored[call]
        own = scored.get(rowid)
        score = via.score * RESULT_OVER_CALL
        if own is not None and own.score >= score:
            continue
        scored[rowid] = EntryRelevance(
            rowid,
            max(via.evidence, own.evidence if own else 0.0),
            max(via.coverage, own.coverage if own else 0.0),
            max(via.relevance, own.relevance if own else 0.0),
            score,
            via.units,
            call,
        )


__all__ = [
    "EVIDENCE_REF",
    "ENTRY_FLOOR",
    "REQUEST_FLOOR",
    "ROLE_FACTORS",
    "EntryRelevance",
    "SessionRelevance",
    "length_factor",
    "session_relevance",
    "unit_weight",
]
