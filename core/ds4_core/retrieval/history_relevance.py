"""Relevance of history entries to a request: weighted evidence, coverage, answers over
questions and actions, turn conclusions, and the floor (docs/retrieval.md "History scope";
issue 11).

`retrieve_history` (`retrieval/history.py`) runs its literal pass, then asks this module how
much each entry of the session has in common with the request and whether that is enough to
send it at all (`session_relevance`; the rank order and the records are built from it in
`retrieval/history_select.py`).

1. **Units** (`retrieval/history_words.py`): the request's informative words (stemmed, so word
   forms meet), its multi-token identifiers as phrases, its CJK runs.
2. **Matches**: each unit is counted, then read, in `entries_fts` and in the sub-word index
   `entries_subwords` (camelCase humps, CJK pairs; migration 9), within the session (other
   sessions in the same database never change an entry's relevance; only the rank score
   below keeps FTS5's bm25, whose statistics span the database: replacing it by the
   session's own weights lost 0.06-0.12 Acc@1 on both evaluation sets). A request of more than
   `MATCHED_UNITS` units reads the matches of its heaviest ones only.
3. **Weight** of a unit: its inverse document frequency, `max(0, ln((N - n + 0.5) /
   (n + 0.5)))` with N the session's entries and n those matching it (`unit_weight`; in an index
   under `COMMON_UNIT_MIN_ENTRIES` entries `ln(1 + ...)`, which stays positive). A word in half
   the entries weighs 0 (a filler such as `write` in a session of file edits), one in 30% about
   0.85, one in 5 of 900 about 5.1; one in more than `COMMON_UNIT_SHARE` is left out. A unit
   the request names as an exact identifier weighs `IDENTIFIER_BOOST` times more.
4. **Evidence** of an entry: the weights of the units it matches, summed, and the share of the
   request's total weight that is (`coverage`, 0-1). Units the session never mentions keep
   their weight in the total, so a request about something else (`haiku`, `borrow checker`)
   covers little of itself in any entry.
5. **Score** (the rank order), for the session's best `SCORED_LIMIT` entries by FTS5 bm25 over
   the OR of the `BM25_UNITS` heaviest units (plus the best by sub-word, whose matches count at
   least their weights): bm25 x (0.5 + coverage) x length factor (`length_factor`: a long file
   read matches many words by chance) x role factor (`ROLE_FACTORS`: a user's message asks,
   the assistant's and the tools' answer; `action_factor`: an assistant message that calls a
   tool counts less unless it writes prose first). Then each best turn's conclusion gets the
   turn's score (`retrieval/history_turns.py`). (Closeness of the matched words, FTS5
   `NEAR`, was measured and removed: no gain on either evaluation set.)
6. **Floor** (`SessionRelevance.split`): an entry's relevance is coverage x min(1, evidence /
   `evidence_ref`) (0-1); an entry holding a decisive exact identifier (`DECISIVE_SHARE`) has
   at least `REQUEST_FLOOR`. Nothing is sent when none of the best `GATE_TOP` entries reaches
   `REQUEST_FLOOR`; otherwise an entry needs `ENTRY_FLOOR` and a score near the best-ranked
   entry's (`RELATIVE_SCORE`).

Errors: an `sqlite3.Error` of a unit query (an FTS5 index that cannot be read, a database
without migration 9) leaves that unit unmatched and adds a warning; when the bm25 statement
of `entries_fts` fails, the result says `failed` and the caller ranks without a floor. Nothing
raises but errors of the `entries` table.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from ds4_core.retrieval.history_terms import (
    _SESSION_COUNT_SQL,
    _SESSION_ROWIDS_SQL,
    _session_rows,
)
from ds4_core.retrieval.history_turns import TURN_WEIGHT, turn_evidence
from ds4_core.retrieval.history_words import Unit
from ds4_core.store.sql import chunked, placeholders

ELIGIBLE_ENTRY_TYPES = ("message", "custom_message")
_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in ELIGIBLE_ENTRY_TYPES) + ")"  # our constants

ROLE_FACTORS = {"user": 0.55, "assistant": 1.0, "toolResult": 0.9, "bashExecution": 0.9}
"""Score factor by message role; any other role (custom messages): `OTHER_ROLE_FACTOR`."""
OTHER_ROLE_FACTOR = 0.8
ACTION_FACTOR = 0.7
PROSE_CHARS = 200
_PROSE_SQL = (  # characters before the first tool call (`name {json}`); -1: no call
    "SELECT rowid, instr(searchable_text, ' {\"') - 1 FROM entries WHERE rowid IN "
)
ACTION_CHECKED = 60
"""The action factor is applied to the assistant messages among the best this many entries
(the others rank too low for it to matter): their texts are read for it."""
LENGTH_UNIT = 400
LENGTH_SLOPE = 0.3
COMMON_UNIT_SHARE = 0.25
"""A unit found in more than this share of the indexed entries weighs 0 (its idf would be
under ln 3 ~ 1.1): it is left out, which also keeps the per-unit reads short."""
COMMON_UNIT_MIN_ENTRIES = 200
"""Below this many indexed entries no unit is common: shares mean little in a tiny index."""
IDENTIFIER_BOOST = 2.0
"""A unit the request names as an exact identifier weighs this much more (a person naming a
symbol points at it more precisely than with a word)."""
DECISIVE_SHARE = 0.1
"""An exact identifier of the request found in at most this share of the indexed entries (any
share in an index of fewer than `COMMON_UNIT_MIN_ENTRIES`) is decisive: an entry holding it
reaches at least `REQUEST_FLOOR`, however little else of the request it covers."""
EVIDENCE_REF = 6.0
"""Evidence (summed unit weights) at which relevance stops being scaled down: about one word
found in a handful of the session's entries."""
REQUEST_FLOOR = 0.4
"""Nothing is sent when none of the best `GATE_TOP` entries reaches this relevance: the
session is not about the request."""
GATE_TOP = 3
ENTRY_FLOOR = 0.3
"""Past the request's floor, an entry under this relevance is still not sent (0.1 before a
trial user's near-miss requests; measured in docs/retrieval.md "History scope")."""
RELATIVE_SCORE = 0.7
"""...nor one under this share of the best-ranked entry's score, both with and without the
role factors (`EntryRelevance.plain`): a question is ranked below its answer, not cut for it."""
MATCHED_UNITS = 8
"""A request of more units reads the matches of its this many heaviest only (`_light_units`)."""
BM25_UNITS = 8
"""The bm25 query ORs the this many heaviest units (a long pasted request has more; FTS5 scores
every entry matching any of them, which is where the time goes)."""
SCORED_LIMIT = 200
"""Most entries each table's bm25 query returns (best first); only those are scored."""

_BM25_SQL = {
    table: (
        f"SELECT f.rowid, bm25({table}), e.role, e.token_estimate, e.seq, e.entry_id "
        f"FROM {table} AS f "
        "CROSS JOIN entries AS e ON e.rowid = f.rowid "
        f"WHERE {table} MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
        f"ORDER BY bm25({table}), f.rowid LIMIT ?"
    )
    for table in ("entries_fts", "entries_subwords")
}
_BM25_ANY_SQL = {  # all sessions: FTS5 ranks without reading `entries` rows (about 3x faster)
    table: f"SELECT rowid, bm25({table}) FROM {table} WHERE {table} MATCH ? "
    f"ORDER BY bm25({table}), rowid LIMIT ?"
    for table in ("entries_fts", "entries_subwords")
}
_ROWIDS_SQL = {  # the whole index holds one session: no join
    table: f"SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?"
    for table in ("entries_fts", "entries_subwords")
}
_COUNT_SQL = {  # counted up to a limit
    table: f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)"
    for table in ("entries_fts", "entries_subwords")
}


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
        decisive: it holds a decisive exact identifier (`DECISIVE_SHARE`).
        plain: the score without the role and action factors: what the relative cut of the
            floor compares (a question is ranked below its answer, not dropped for it).
    """

    rowid: int
    evidence: float
    coverage: float
    relevance: float
    score: float
    units: tuple[str, ...]
    decisive: bool = False
    plain: float = 0.0


@dataclass
class SessionRelevance:
    """The relevance of a session's entries to one request.

    `entries`: by rowid, the scored entries; `weights`: unit display text -> weight;
    `total`: the summed weights; `warnings`: sentences for the user; `failed`: the ranking
    statement of `entries_fts` raised (the index is unusable: the caller ranks without a
    floor, as before relevance existed).
    """

    entries: dict[int, EntryRelevance]
    weights: dict[str, float]
    total: float
    warnings: list[str]
    failed: bool = False

    def ranked(self) -> list[EntryRelevance]:
        """Entries best first (score, then relevance, then the newer rowid)."""
        return sorted(self.entries.values(), key=lambda e: (-e.score, -e.relevance, -e.rowid))

    def split(
        self,
    ) -> tuple[list[EntryRelevance], list[EntryRelevance], float, dict[int, float]]:
        """(entries that pass the floor, those that do not, the floor they were held to, and
        for each entry that reached that floor but not `RELATIVE_SCORE` of the best entry
        its share of the best, by rowid), each list best first (module docstring, rule 6)."""
        ranked = self.ranked()
        # the gate and the relative cut look at entries that reach the entry floor: a short
        # entry repeating one rare word may score highest with little of the request in it
        eligible = [e for e in ranked if e.relevance >= ENTRY_FLOOR]
        best = max((e.relevance for e in eligible[:GATE_TOP]), default=0.0)
        if best < REQUEST_FLOOR:
            return [], ranked, REQUEST_FLOOR, {}
        first = eligible[0]
        least = RELATIVE_SCORE * first.plain
        top = RELATIVE_SCORE * first.score
        passed: list[EntryRelevance] = []
        below: list[EntryRelevance] = []
        shares: dict[int, float] = {}
        for e in ranked:
            if e.relevance < ENTRY_FLOOR:
                below.append(e)
            elif e.plain >= least or e.score >= top:
                passed.append(e)
            else:
                below.append(e)
                shares[e.rowid] = max(
                    e.plain / first.plain if first.plain > 0 else 0.0,
                    e.score / first.score if first.score > 0 else 0.0,
                )
        return passed, below, ENTRY_FLOOR, shares


def unit_weight(entries: int, matching: int) -> float:
    """`max(0, ln((N - n + 0.5) / (n + 0.5)))` (module docstring, rule 3); in an index of
    fewer than `COMMON_UNIT_MIN_ENTRIES` entries `ln(1 + (N - n + 0.5) / (n + 0.5))`, which
    stays positive (a word in 2 of 3 entries still says something there)."""
    ratio = max(0.0, entries - matching + 0.5) / (matching + 0.5)
    if entries < COMMON_UNIT_MIN_ENTRIES:
        return math.log1p(ratio)
    return max(0.0, math.log(ratio)) if ratio > 0 else 0.0


def evidence_ref(entries: int) -> float:
    """`min(EVIDENCE_REF, 0.8 ln(2 N + 2))`: in a small index no word weighs 6."""
    return min(EVIDENCE_REF, 0.8 * math.log(2 * max(0, entries) + 2))


def action_factor(prose: int) -> float:
    """An assistant message's factor by the characters of prose before its first tool call
    (-1: it calls no tool, factor 1): `ACTION_FACTOR` for a bare tool call, rising linearly to
    1 at `PROSE_CHARS` (an answer is written out; a call is an action)."""
    if prose < 0:
        return 1.0
    return ACTION_FACTOR + (1 - ACTION_FACTOR) * min(1.0, prose / PROSE_CHARS)


def length_factor(tokens: int) -> float:
    """1 / (1 + LENGTH_SLOPE ln(1 + tokens / LENGTH_UNIT))."""
    return 1.0 / (1.0 + LENGTH_SLOPE * math.log1p(max(0, tokens) / LENGTH_UNIT))


def _warn(warnings: list[str], what: str, exc: sqlite3.Error) -> None:
    warnings.append(
        f"ds4: the history index could not be {what} ({exc}); history relevance may be "
        "incomplete. If this persists, rebuild the index (ds4.rebuildIndex)."
    )


def _rowids(
    conn: sqlite3.Connection, table: str, expression: str, session_id: str | None, limit: int
) -> list[int]:
    """Up to `limit` rowids of `table` matching the FTS5 `expression`, of the session
    `session_id` only (None: no filter; the index holds only that session)."""
    if session_id is None:
        rows = conn.execute(_ROWIDS_SQL[table], (expression, limit))
    else:
        rows = conn.execute(_SESSION_ROWIDS_SQL[table], (expression, session_id, limit))
    return [row[0] for row in rows]


def _unit_rowids(
    conn: sqlite3.Connection,
    unit: Unit,
    rows: int,
    warnings: list[str],
    counted: dict[str, int] | None = None,
    session_id: str | None = None,
) -> tuple[set[int], set[int]] | None:
    """(rowids matching `unit` in `entries_fts`, in `entries_subwords`) of the session
    `session_id` (None: the index holds only that session, so no filter is needed), or None
    when it is common (`COMMON_UNIT_SHARE`) in either: each table is read up to one row past
    the share (`counted`: main-table counts already known, by unit text, spare the read of a
    common unit)."""
    cap = int(rows * COMMON_UNIT_SHARE) if rows >= COMMON_UNIT_MIN_ENTRIES else rows
    found: tuple[set[int], set[int]] = (set(), set())
    try:
        if unit.fts is not None:
            count = (counted or {}).get(unit.text)
            if count is not None and count > cap:
                return None
            if count is None or count:
                found[0].update(_rowids(conn, "entries_fts", unit.fts, session_id, cap + 1))
                if len(found[0]) > cap:
                    return None
        if unit.sub is not None:
            found[1].update(_rowids(conn, "entries_subwords", unit.sub, session_id, cap + 1))
            if len(found[1]) > cap:
                return None
    except sqlite3.Error as exc:
        _warn(warnings, f"searched for {unit.text!r}", exc)
    return found


def _light_units(
    conn: sqlite3.Connection,
    units: Sequence[Unit],
    rows: int,
    warnings: list[str],
    counted: dict[str, int],
    session_id: str | None = None,
) -> dict[str, float]:
    """Unit text -> weight of the units past the `MATCHED_UNITS` heaviest of a long request,
    from their document counts alone (the larger of the two tables' counts; 0 when common):
    their matches are not read, so a long pasted request costs `MATCHED_UNITS` reads. The main
    table's counts are left in `counted`."""
    cap = int(rows * COMMON_UNIT_SHARE) if rows >= COMMON_UNIT_MIN_ENTRIES else rows
    estimated: dict[str, float] = {}
    for unit in units:
        docs = 0
        try:
            for table, expression in (("entries_fts", unit.fts), ("entries_subwords", unit.sub)):
                if expression is not None:
                    # counted up to one past the cap: over it the unit weighs 0 anyway
                    if session_id is None:
                        (found,) = conn.execute(_COUNT_SQL[table], (expression, cap + 1)).fetchone()
                    else:
                        (found,) = conn.execute(
                            _SESSION_COUNT_SQL[table], (expression, session_id, cap + 1)
                        ).fetchone()
                    if table == "entries_fts":
                        counted[unit.text] = found
                    docs = max(docs, found)
        except sqlite3.Error as exc:
            _warn(warnings, f"searched for {unit.text!r}", exc)
        boost = IDENTIFIER_BOOST if unit.identifier else 1.0
        estimated[unit.text] = 0.0 if docs > cap else unit_weight(rows, docs) * boost
    heaviest = sorted(units, key=lambda u: -estimated[u.text])[:MATCHED_UNITS]
    for unit in heaviest:
        del estimated[unit.text]
    return estimated


def _bm25(
    conn: sqlite3.Connection,
    session_id: str,
    units: Sequence[Unit],
    subwords: bool,
    warnings: list[str],
    alone: bool = True,
) -> tuple[dict[int, float], dict[int, float], dict[int, tuple]]:
    """(rowid -> bm25 in `entries_fts`, rowid -> bm25 in `entries_subwords`, rowid -> (role,
    token_estimate, seq, entry_id)) of the best `SCORED_LIMIT` entries for the OR of `units`
    in `entries_fts` and the best `SCORED_LIMIT / 2` in `entries_subwords` when `subwords`
    (some unit matched there); bm25 is FTS5's `bm25()` negated. Every entry found is in the
    first map (0 when found only in the sub-word table)."""
    out: dict[int, float] = {}
    meta: dict[int, tuple] = {}
    sub: dict[int, float] = {}
    for table, expressions in (
        ("entries_fts", [u.fts for u in units if u.fts]),
        ("entries_subwords", [u.sub for u in units if u.sub] if subwords else []),
    ):
        if not expressions:
            continue
        try:
            rows = _ranked_in_session(conn, table, " OR ".join(expressions), session_id, alone)
        except sqlite3.Error as exc:
            _warn(warnings, "ranked", exc)
            if table == "entries_fts":
                return {}, {}, {}
            continue
        target = out if table == "entries_fts" else sub
        for rowid, value, *rest in rows:
            target[rowid] = -value
            out.setdefault(rowid, 0.0)
            meta[rowid] = tuple(rest)
    return out, sub, meta


def _ranked_in_session(
    conn: sqlite3.Connection, table: str, query: str, session_id: str, alone: bool = True
) -> list[tuple]:
    """(rowid, bm25, role, token_estimate, seq, entry_id) of the session's best eligible entries for
    `query` in `table` (`SCORED_LIMIT` of them; half as many from the sub-word table), best
    first (ties: lower rowid).

    Ranked over all sessions first (no join) and kept when that holds the whole answer: every
    returned row is this session's, or fewer rows than asked came back. Otherwise (other
    sessions share the index) the statement is rerun with the session join. `alone=False`
    (the index is known to hold other sessions): the join statement at once.
    """
    limit = SCORED_LIMIT if table == "entries_fts" else SCORED_LIMIT // 2
    if not alone:
        return conn.execute(_BM25_SQL[table], (query, session_id, limit)).fetchall()
    ranked = conn.execute(_BM25_ANY_SQL[table], (query, limit)).fetchall()
    rows: dict[int, tuple] = {}
    for chunk in chunked([r[0] for r in ranked]):
        for row in conn.execute(
            "SELECT rowid, session_id, entry_type, role, token_estimate, seq, entry_id "
            "FROM entries "
            f"WHERE rowid IN ({placeholders(len(chunk))})",
            chunk,
        ):
            rows[row[0]] = row
    mine = [
        (rowid, value, *rows[rowid][3:])
        for rowid, value in ranked
        if rowid in rows and rows[rowid][1] == session_id and rows[rowid][2] in ELIGIBLE_ENTRY_TYPES
    ]
    if len(ranked) < limit or all(row[1] == session_id for row in rows.values()):
        return mine
    return conn.execute(_BM25_SQL[table], (query, session_id, limit)).fetchall()


def session_relevance(
    conn: sqlite3.Connection,
    session_id: str,
    units: Sequence[Unit],
    branch: Collection[str] | None = None,
) -> SessionRelevance:
    """Score the entries of `session_id` against the request's `units` (module docstring).

    `branch`: the entry ids of the active branch (None: every entry); entries off it are
    neither scored nor counted in a turn, and a turn's conclusion is its last assistant
    message on it.

    Returns a `SessionRelevance`; empty when there are no units or no entries. Never raises
    for FTS5 errors (they become warnings); errors of the `entries` table propagate.
    """
    warnings: list[str] = []
    rows, session_filter = _session_rows(conn, session_id)
    if not units or not rows:
        return SessionRelevance({}, {}, 0.0, warnings)
    weights: dict[str, float] = {}
    matches: dict[str, tuple[set[int], set[int]]] = {}  # unit -> (all rowids, sub-word only)
    used: list[Unit] = []
    subwords = False
    counts: dict[str, int] = {}
    counted: dict[str, int] = {}
    light = (
        _light_units(conn, units, rows, warnings, counted, session_filter)
        if len(units) > MATCHED_UNITS
        else {}
    )
    for unit in units:
        if unit.text in light:  # counted, not read: its weight, no matches
            weights[unit.text] = light[unit.text]
            continue
        found = _unit_rowids(conn, unit, rows, warnings, counted, session_filter)
        if found is None:
            weights[unit.text] = 0.0
            continue
        rowids = found[0] | found[1]
        counts[unit.text] = len(rowids)
        boost = IDENTIFIER_BOOST if unit.identifier else 1.0
        weight = weights[unit.text] = unit_weight(rows, len(rowids)) * boost
        if weight <= 0:
            continue
        used.append(unit)
        subwords = subwords or bool(found[1])
        matches[unit.text] = (rowids, found[1] - found[0])
    total = sum(weights.values())
    if total <= 0 or not used:
        return SessionRelevance({}, weights, total, warnings)
    strongest = sorted(used, key=lambda u: -weights[u.text])[:BM25_UNITS]
    base, sub_bm25, meta = _bm25(
        conn, session_id, strongest, subwords, warnings, alone=session_filter is None
    )
    if not base and any(u.fts for u in strongest) and warnings:
        return SessionRelevance({}, weights, total, warnings, failed=True)
    ref = evidence_ref(rows)
    decisive = {
        u.text
        for u in used
        if u.identifier
        and (rows < COMMON_UNIT_MIN_ENTRIES or counts[u.text] <= rows * DECISIVE_SHARE)
    }
    scored: dict[int, EntryRelevance] = {}
    if branch is not None:
        base = {rowid: v for rowid, v in base.items() if meta[rowid][3] in branch}
    held: dict[int, list[str]] = {}  # rowid -> units it matches (request order)
    only_sub: dict[int, float] = {}  # rowid -> weights of the units it matches by sub-word only
    for text, (anywhere, only) in matches.items():
        for rowid in anywhere.intersection(base):
            held.setdefault(rowid, []).append(text)
        for rowid in only.intersection(base):
            only_sub[rowid] = only_sub.get(rowid, 0.0) + weights[text]
    for rowid, value in base.items():
        role, tokens, _seq, _entry_id = meta[rowid]
        units_here = tuple(held.get(rowid, ()))
        sub_only = only_sub.get(rowid, 0.0)
        evidence = sum(weights[u] for u in units_here)
        coverage = evidence / total
        role_factor = ROLE_FACTORS.get(role or "", OTHER_ROLE_FACTOR)
        bm25 = value + max(sub_bm25.get(rowid, 0.0), sub_only)
        plain = bm25 * (0.5 + coverage) * length_factor(tokens or 0)
        relevance = coverage * min(1.0, evidence / ref)
        holds_decisive = not decisive.isdisjoint(units_here)
        if holds_decisive:
            relevance = max(relevance, REQUEST_FLOOR)
        scored[rowid] = EntryRelevance(
            rowid,
            evidence,
            coverage,
            relevance,
            plain * role_factor,
            units_here,
            holds_decisive,
            plain,
        )
    _score_actions(conn, scored, meta)
    seqs = {rowid: m[2] for rowid, m in meta.items()}
    _score_conclusions(conn, session_id, scored, seqs, weights, total, ref, branch)
    return SessionRelevance(scored, weights, total, warnings)


def _score_actions(
    conn: sqlite3.Connection, scored: dict[int, EntryRelevance], meta: dict[int, tuple]
) -> None:
    """Apply `action_factor` to the assistant messages among the `ACTION_CHECKED` best."""
    best = sorted(scored.values(), key=lambda e: (-e.score, -e.rowid))[:ACTION_CHECKED]
    rowids = [e.rowid for e in best if meta[e.rowid][0] == "assistant"]
    if not rowids:
        return
    prose = dict(conn.execute(_PROSE_SQL + f"({placeholders(len(rowids))})", rowids).fetchall())
    for rowid in rowids:
        factor = action_factor(prose.get(rowid, -1))
        if factor < 1.0:
            scored[rowid] = replace(scored[rowid], score=scored[rowid].score * factor)


def _score_conclusions(
    conn: sqlite3.Connection,
    session_id: str,
    scored: dict[int, EntryRelevance],
    seqs: dict[int, int],
    weights: dict[str, float],
    total: float,
    ref: float,
    branch: Collection[str] | None,
) -> None:
    """Add each best turn's score to its conclusion (`retrieval/history_turns.py`)."""
    units = {rowid: e.units for rowid, e in scored.items() if e.units}
    turns = turn_evidence(conn, session_id, units, seqs, weights, total, branch)
    if not turns or not scored:
        return
    scale = max(e.score for e in scored.values()) / max(t.score for t in turns)
    for turn in turns:
        relevance = turn.coverage * min(1.0, turn.evidence / ref)
        own = scored.get(turn.conclusion)
        bonus = TURN_WEIGHT * turn.score * scale
        if own is None:
            scored[turn.conclusion] = EntryRelevance(
                turn.conclusion,
                turn.evidence,
                turn.coverage,
                relevance,
                bonus,
                turn.units,
                plain=bonus,
            )
        else:
            scored[turn.conclusion] = EntryRelevance(
                own.rowid,
                max(own.evidence, turn.evidence),
                max(own.coverage, turn.coverage),
                max(own.relevance, relevance),
                own.score + bonus,
                own.units if own.relevance >= relevance else turn.units,
                own.decisive,
                own.plain + bonus,
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
