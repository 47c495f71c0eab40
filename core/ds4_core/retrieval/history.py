"""Historical retrieval: literal search + relevance over one session's index
(docs/reference.md §3.2; docs/retrieval.md "History scope").

The parts live next to this module: literal matching in `retrieval/literal.py`, FTS query
terms and the bm25 row count in `retrieval/history_terms.py`, relevance in
`retrieval/history_relevance.py` and the modules it names, the entries read and term matching
over them in `retrieval/history_candidates.py`, the results, excerpts and dedup in
`retrieval/history_results.py`, the score in `retrieval/scoring.py`. This module holds the
statements and the search (`_Search`) and runs the pipeline (`retrieve_history`).

Pipeline (all within one session, only `message` / `custom_message` entries):

1. **Literal pass** (`exact=True`): every exact identifier and every quoted phrase of the
   `TaskDescriptor` is searched literally; each term keeps its `query_limit` newest matches
   (file order), `query_limit = max(max_results, min(100, max_results * 6))`.
2. **Relevance** (`fts=True`): the request's units (`retrieval/history_words.py`) are weighed
   and matched in `entries_fts` and `entries_subwords`, and the session's entries are scored
   (`retrieval/history_relevance.py`, docs/retrieval.md "History scope"); it replaces the
   bm25 FTS pass of docs/reference.md §3.2 (docs/architecture.md, "Decisions").
3. **Eligibility**: an entry already in the caller's context (`exclude_entry_ids`) is dropped
   (`already_in_context`); an entry not on the active branch (`branch_entry_ids`) is dropped and
   counted in `alternate_branch_candidates`.
4. **Rank and floor** (`retrieval/history_select.py`): entries found by relevance join the
   eligible candidates; those over the floor are ordered by relevance score, the DS4 order
   (`retrieval/scoring.py`, `rank_history`: literal priority, score, time, id; the descriptor
   files, symbols and errors each holds are counted here, `_count_descriptor_matches`) breaking
   ties; the others become `HistoryRetrieval.below_floor`. With `fts=False`, or when the FTS
   index cannot be read, every eligible candidate is ranked in the DS4 order, with no floor.
5. **Dedup and budget**: a text equal to an already selected one (ASCII case and ASCII
   white-space runs ignored) counts in `duplicates` and is skipped; the loop stops when fewer than
   48 tokens remain; each excerpt starts at `min(6000, max(256, remaining * 4 - 800))` characters
   around the first matched term and shrinks by x0.7 (down to 256) while its rendered evidence is
   over the remaining budget.

Literal matching (a decision; ds4 uses a case-sensitive `instr` scan): the rules are in
`retrieval/literal.py` (`LiteralTerm`: ASCII case folded, an ASCII term starting with a letter or
digit must start a word).
* Speed: for ASCII terms the FTS index selects the entries holding the term's words in sequence
  (its last word as a prefix) and each is then checked literally, newest first, stopping at
  `query_limit` matches; other terms are found by a `LIKE` scan, newest first, with the same
  stop. A plain substring scan of 5,000 messages costs 3-9 ms per term; the index path costs
  0.05-1 ms. Both paths give the same matches ("newest" is rowid order on the index path and
  `seq` order on the scan path; the store inserts entries in file order, so they agree).

Speed measures. None changes a result: each is exact, and tests compare each with the plain
computation on real requests (bench/history_retrieval.py: the worst requests are pasted stack
traces with two dozen paths and identifiers).

* Rows are read once per request, their text as the stored UTF-8 bytes (decoded only to quote
  it). The index path streams rowids and reads the rows not read yet in batches of the next
  `query_limit - found` rowids, so it never reads past the last match it keeps. A term of
  `LONG_TERM_WORDS` words or more (a path: rare, and slow for FTS5 to read backwards) takes all
  its rowids oldest first in one go and walks them newest first.
* Terms are searched shortest first. A term containing a term that was searched to the end
  (fewer than `query_limit` matches), at a place where that term's word-start rule is sure to
  hold (`implies`: `cli.ts` in `src/cli.ts`), has its matches among that term's: they are
  checked there, without a query.
* Bonuses: a term the literal pass searched to the end has its match set; one it stopped at
  `query_limit` matches has it for every entry above the rowid of the last one (all were
  checked), so only older candidates are checked. Other terms check the candidates their FTS
  prefilter selects when it selects no more entries than there are candidates, else every
  candidate, in one `find` scan over their texts joined by NUL.
* Dedup groups texts by the start of their key and builds the key (white-space runs as one
  space) only for different texts of one group (`_SeenTexts`).

Every user-supplied term reaches SQLite as a bound parameter; FTS5 text comes only from
`descriptor.fts_phrase`, `_prefilter_query` and `history_words.Unit` expressions, which quote
every term.

Failures: an `sqlite3.Error` raised by an FTS5 statement never escapes. The literal pass falls
back to the `LIKE` scan (same matches, slower), relevance is skipped, and a warning says so in
`HistoryRetrieval.warnings`; the status stays `ok`. Errors of the `entries` table itself
propagate (the engine fails open).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Collection, Iterable, Iterator
from itertools import islice

from ds4_core.retrieval.descriptor import TaskDescriptor, build_fts_query, replace_lone_surrogates
from ds4_core.retrieval.history_candidates import _Candidate, _count_descriptor_matches, _Pool
from ds4_core.retrieval.history_relevance import session_relevance
from ds4_core.retrieval.history_results import (
    MIN_REMAINING_TOKENS,
    HistoryHit,
    HistoryRetrieval,
    RetrievalStats,
    RetrievalStatus,
    _as_set,
    _fit,
    _SeenTexts,
)
from ds4_core.retrieval.history_select import select
from ds4_core.retrieval.history_terms import (
    _fts_warning,
    informative_terms,
    query_limit,
)
from ds4_core.retrieval.history_words import request_units
from ds4_core.retrieval.literal import _ASCII_WORD, LiteralTerm, fold, implies
from ds4_core.store.database import Store
from ds4_core.store.sql import LIKE_ESCAPE, like_literal, placeholders

ELIGIBLE_ENTRY_TYPES = ("message", "custom_message")
_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in ELIGIBLE_ENTRY_TYPES) + ")"  # our constants
# The text comes as the stored UTF-8 bytes (no decoding into `str` for rows never quoted).
_ROW_COLUMNS = (
    "e.rowid, e.entry_key, e.entry_id, e.role, e.created_at, e.token_estimate, "
    "CAST(e.searchable_text AS BLOB)"
)
_ROWID_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 500)  # `IN (...)` sizes
_ROWS_BY_ID_SQL = {
    size: f"SELECT {_ROW_COLUMNS} FROM entries AS e WHERE e.rowid IN ({placeholders(size)})"
    for size in _ROWID_BATCHES
}

_LITERAL_BY_INDEX_SQL = (
    "SELECT f.rowid FROM entries_fts AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
    f"WHERE entries_fts MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "ORDER BY f.rowid DESC"
)
_LITERAL_BY_INDEX_ASC_SQL = _LITERAL_BY_INDEX_SQL.replace("DESC", "ASC")
LONG_TERM_WORDS = 4
"""A term of this many words or more is read from the index oldest first, whole (then taken
newest first): such terms are rare, and FTS5 reads a phrase of common words backwards slowly."""
_LITERAL_BY_SCAN_SQL = (
    f"SELECT {_ROW_COLUMNS} FROM entries AS e "
    f"WHERE e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    f"AND e.searchable_text LIKE ? {LIKE_ESCAPE} "
    "ORDER BY e.seq DESC"
)


class _Search:
    """One `retrieve_history` call: the connection, rows read, candidates, term matches."""

    def __init__(self, conn: sqlite3.Connection, session_id: str, limit: int) -> None:
        self.conn = conn
        self.session_id = session_id
        self.limit = limit
        self.rows: dict[int, _Candidate] = {}  # every row read, by rowid
        self.candidates: dict[int, _Candidate] = {}  # rows found by a pass, in finding order
        self.matched: dict[str, set[int]] = {}  # term text -> rowids where it matched
        self.complete: set[str] = set()  # terms whose `matched` covers the whole session
        self.exhausted: dict[str, LiteralTerm] = {}  # those of them searched to the end
        self.floor: dict[str, int] = {}  # term -> rowid above which `matched` is complete
        self.span: dict[str, int] = {}  # term -> rowids its `limit` newest matches spread over
        self.warnings: list[str] = []
        self.index_usable = True

    def _row(self, row: tuple) -> _Candidate:
        found = self.rows.get(row[0])
        if found is None:
            found = self.rows[row[0]] = _Candidate(row)
        return found

    def _load(self, rowids: list[int]) -> None:
        """Read the rows of `rowids` not read yet (they are known to be eligible)."""
        rows = self.rows
        missing = [rowid for rowid in rowids if rowid not in rows]
        while missing:
            size = next((n for n in _ROWID_BATCHES if n >= len(missing)), _ROWID_BATCHES[-1])
            chunk, missing = missing[:size], missing[size:]
            chunk += [chunk[-1]] * (size - len(chunk))  # padded: a few distinct statements
            for row in self.conn.execute(_ROWS_BY_ID_SQL[size], chunk):
                if row[0] not in rows:
                    rows[row[0]] = _Candidate(row)

    def _found(self, candidate: _Candidate, matched: set[int]) -> None:
        matched.add(candidate.rowid)
        self.candidates.setdefault(candidate.rowid, candidate)

    def _take(self, term: LiteralTerm, rows: Iterable[tuple]) -> list[_Candidate]:
        """The first `limit` of `rows` (whole rows) the term matches; records the matches."""
        found: list[_Candidate] = []
        matched = self.matched.setdefault(term.text, set())
        for row in rows:
            candidate = self._row(row)
            if term.occurs_in(candidate.folded):
                self._found(candidate, matched)
                found.append(candidate)
                if len(found) >= self.limit:
                    return found
        self._exhausted(term)
        return found

    def _exhausted(self, term: LiteralTerm) -> None:
        self.complete.add(term.text)
        self.exhausted[term.text] = term

    def _take_rowids(self, term: LiteralTerm, rowids: Iterator[int]) -> list[_Candidate]:
        """`_take` over rowids, newest first: rows not read yet are read in batches.

        A batch is the next `limit - found` rowids, so it never reads past the last match kept.
        Stopping there, every entry above that rowid has been checked (`floor`).
        """
        found: list[_Candidate] = []
        matched = self.matched.setdefault(term.text, set())
        rows, candidates, occurs_in, limit = self.rows, self.candidates, term.occurs_in, self.limit
        while True:
            batch = list(islice(rowids, limit - len(found)))
            if not batch:
                self._exhausted(term)
                return found
            self._load(batch)
            for rowid in batch:
                candidate = rows.get(rowid)
                if candidate is not None and occurs_in(candidate.folded):
                    matched.add(rowid)
                    candidates.setdefault(rowid, candidate)
                    found.append(candidate)
                    if len(found) >= limit:
                        self.floor[term.text] = rowid
                        self.span[term.text] = found[0].rowid - rowid + 1
                        return found

    def _implied(self, term: LiteralTerm) -> list[_Candidate] | None:
        """The matches of `term` from those of a complete term it implies (`implies`), or None.

        All matches of `term` are among those of such a term, which are fewer than `limit`.
        """
        best: set[int] | None = None
        for text, inner in self.exhausted.items():
            rowids = self.matched[text]
            if (best is None or len(rowids) < len(best)) and implies(inner, term):
                best = rowids
        if best is None:
            return None
        matched = self.matched.setdefault(term.text, set())
        found: list[_Candidate] = []
        for rowid in sorted(best, reverse=True):
            candidate = self.rows[rowid]
            if term.occurs_in(candidate.folded):
                self._found(candidate, matched)
                found.append(candidate)
        self._exhausted(term)
        return found

    def literal(self, term: LiteralTerm) -> list[_Candidate]:
        """The newest (file order) `limit` eligible entries the term matches."""
        implied = self._implied(term)
        if implied is not None:
            return implied
        if term.prefilter is not None and self.index_usable:
            params = (term.prefilter, self.session_id)
            try:
                if len(_ASCII_WORD.findall(term.text)) >= LONG_TERM_WORDS:
                    rowids = [
                        row[0] for row in self.conn.execute(_LITERAL_BY_INDEX_ASC_SQL, params)
                    ]
                    return self._take_rowids(term, reversed(rowids))
                cursor = self.conn.execute(_LITERAL_BY_INDEX_SQL, params)
                try:
                    return self._take_rowids(term, (row[0] for row in cursor))
                finally:
                    cursor.close()
            except sqlite3.Error as exc:
                self.index_usable = False
                self.warnings.append(_fts_warning("literal pass", exc))
        piece = like_literal(replace_lone_surrogates(term.text))
        if piece is None:
            self.complete.add(term.text)  # an all-NUL term: no match, and it implies nothing
            return []
        cursor = self.conn.execute(_LITERAL_BY_SCAN_SQL, (self.session_id, f"%{piece}%"))
        try:
            return self._take(term, cursor)
        finally:
            cursor.close()

    def matching(self, term: LiteralTerm, pool: _Pool) -> set[int]:
        """Rowids of the candidates in `pool` that `term` matches, plus its literal matches.

        A term searched to the end by the literal pass has its full match set already; one the
        index path stopped at `limit` matches has it above its `floor` rowid (every entry there
        was checked), so only older candidates are checked. Other terms: when the term's FTS
        prefilter selects no more entries (all sessions) than the pool holds, only the selected
        candidates are checked; otherwise the whole pool is scanned (`_Pool.matching`).
        """
        known = self.matched.get(term.text, set())
        if term.text in self.complete:
            return known
        floor = self.floor.get(term.text)
        if floor is not None:
            return known | pool.matching(term, below=floor)
        occurs_in = term.occurs_in
        if term.prefilter is not None and self.index_usable and len(pool.candidates) > 8:
            cap = len(pool.candidates)
            try:
                rows = self.conn.execute(
                    "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ? LIMIT ?",
                    (term.prefilter, cap + 1),
                ).fetchall()
            except sqlite3.Error as exc:
                self.index_usable = False
                self.warnings.append(_fts_warning("ranking", exc))
            else:
                if len(rows) <= cap:
                    selected = {row[0] for row in rows}
                    return known | {
                        c.rowid
                        for c in pool.candidates
                        if c.rowid in selected and occurs_in(c.folded)
                    }
        return known | pool.matching(term)


def retrieve_history(
    store: Store,
    session_id: str,
    descriptor: TaskDescriptor,
    *,
    branch_entry_ids: Collection[str],
    exclude_entry_ids: Collection[str],
    max_results: int,
    max_tokens: int,
    exact: bool = True,
    fts: bool = True,
) -> HistoryRetrieval:
    """Rank evidence from the indexed history of `session_id` (docs/reference.md §3.2).

    Args:
        store: an open store; read through the calling thread's connection.
        session_id: the session to search (no other session is ever read).
        descriptor: the request's `TaskDescriptor` (`describe_task`).
        branch_entry_ids: entry ids on the active branch (root to leaf); pass a `set` or
            `frozenset` to avoid a copy.
        exclude_entry_ids: entry ids already in the caller's context.
        max_results: most hits to return (<= 0: status `disabled`).
        max_tokens: `chars-v2` token budget for all rendered evidence (<= 0: `disabled`).
        exact: run the literal pass over exact identifiers and phrases.
        fts: run the FTS5 bm25 pass over the query terms.

    Returns:
        `HistoryRetrieval`; hits in rank order, the sum of their `tokens` <= `max_tokens`,
        at most `max_results` of them.

    Raises:
        sqlite3.Error: from the `entries` table itself (never from FTS5: its errors become a
            warning and a literal-only result).
    """
    started = time.perf_counter()

    def elapsed_ms() -> float:
        return (time.perf_counter() - started) * 1000

    if (not exact and not fts) or max_results <= 0 or max_tokens <= 0:
        return HistoryRetrieval("disabled", stats=RetrievalStats(latency_ms=elapsed_ms()))
    if not descriptor.query_terms:
        return HistoryRetrieval("no-query", stats=RetrievalStats(latency_ms=elapsed_ms()))
    conn = store.connection()
    indexed = conn.execute(
        "SELECT 1 FROM entries WHERE session_id = ? LIMIT 1", (session_id,)
    ).fetchone()
    if indexed is None:
        return HistoryRetrieval("no-session", stats=RetrievalStats(latency_ms=elapsed_ms()))

    search = _Search(conn, session_id, query_limit(max_results))
    if exact:
        # Shorter terms first, so a longer one can take its matches from one it contains
        # (`_Search._implied`); each term's matches do not depend on the order.
        found: dict[str, list[_Candidate]] = {}
        terms = {t: LiteralTerm.of(t) for t in (*descriptor.exact_identifiers, *descriptor.phrases)}
        for text, term in sorted(terms.items(), key=lambda item: len(item[1].needle)):
            found[text] = search.literal(term)
        for identifier in descriptor.exact_identifiers:
            for c in found[identifier]:
                if identifier not in c.exact:
                    c.exact.append(identifier)
        for phrase in descriptor.phrases:
            for c in found[phrase]:
                if phrase not in c.phrases:
                    c.phrases.append(phrase)

    branch = _as_set(branch_entry_ids)
    excluded = _as_set(exclude_entry_ids)
    eligible: list[_Candidate] = []
    alternate = in_context = 0
    for c in search.candidates.values():
        if not c.raw:
            continue
        if c.entry_id in excluded:
            in_context += 1
        elif c.entry_id not in branch:
            alternate += 1
        else:
            eligible.append(c)

    hits: list[HistoryHit] = []
    seen = _SeenTexts()
    duplicates = used_tokens = 0
    _count_descriptor_matches(search, eligible, descriptor)
    units = request_units(descriptor) if fts else []
    relevance = session_relevance(conn, session_id, units, branch)
    selection = select(
        search,
        eligible,
        relevance,
        branch=branch,
        excluded=excluded,
        floor=fts and not relevance.failed,
    )
    for item in selection.ranked:
        if len(hits) >= max_results:
            break
        if not seen.add(item.candidate.folded):
            duplicates += 1
            continue
        remaining = max_tokens - used_tokens
        if remaining < MIN_REMAINING_TOKENS:
            break
        hit = _fit(item, remaining)
        if hit is None:
            continue
        used_tokens += hit.tokens
        hits.append(hit)
    stats = RetrievalStats(
        candidates=len(search.candidates) + selection.added,
        duplicates=duplicates,
        alternate_branch_candidates=alternate,
        already_in_context=in_context + selection.added_in_context,
        latency_ms=elapsed_ms(),
        below_floor=selection.below_count,
    )
    warnings = [*search.warnings, *relevance.warnings]
    return HistoryRetrieval("ok", hits, stats, warnings, tuple(selection.below))


__all__ = [
    "HistoryHit",
    "HistoryRetrieval",
    "LiteralTerm",
    "RetrievalStats",
    "RetrievalStatus",
    "build_fts_query",
    "fold",
    "implies",
    "informative_terms",
    "query_limit",
    "retrieve_history",
]
