"""Historical retrieval: literal + FTS5 bm25 search over one session's index
(docs/reference.md §3.2).

The parts live next to this module: literal matching in `retrieval/literal.py`, the FTS query
terms and bm25 statistics in `retrieval/history_terms.py`, the entries read and term matching
over them in `retrieval/history_candidates.py`, the results, excerpts and dedup in
`retrieval/history_results.py`, the score in `retrieval/scoring.py`. This module holds the
statements and the search (`_Search`) and runs the pipeline (`retrieve_history`).

Pipeline (all within one session, only `message` / `custom_message` entries):

1. **Literal pass** (`exact=True`): every exact identifier and every quoted phrase of the
   `TaskDescriptor` is searched literally; each term keeps its `query_limit` newest matches
   (file order), `query_limit = max(max_results, min(100, max_results * 6))`.
2. **FTS pass** (`fts=True`): `build_fts_query(informative_terms(query_terms))` bound to
   `entries_fts MATCH ?`, ordered by `bm25(entries_fts)` (ties: lower rowid first, which is what
   the plain `ORDER BY bm25 LIMIT` gives), first `query_limit` rows. The FTS terms of a hit are
   the query terms that occur in its text as substrings.
3. **Eligibility**: an entry already in the caller's context (`exclude_entry_ids`) is dropped
   (`already_in_context`); an entry not on the active branch (`branch_entry_ids`) is dropped and
   counted in `alternate_branch_candidates`.
4. **Score** (docs/reference.md §3.2): which descriptor files, symbols and errors each eligible
   candidate's text holds is checked here (`_count_descriptor_matches`, with the speed measures
   below); the score itself and the sort order are pure functions of what was found, in
   `retrieval/scoring.py` (`rank_history`, weights `HistoryWeights`): +100 + min(12, 3
   (nExact - 1)) for literal identifiers, +85 + min(8, 2 (nPhrases - 1)) for phrases, +60 +
   max(0, 10 - ftsRank) for FTS, +12 per descriptor file, +10 per symbol and +12 per error found
   in the text, +15 base, role authority (user 8, assistant 5, toolResult / bashExecution 4,
   other 1), up to +8 recency (linear between the oldest and newest eligible candidate), minus
   min(12, token_estimate / 1000); rounded to 6 decimals. Sorted by literal priority (2
   identifier, 1 phrase, 0), score, created_at (newest first), entry id.
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
* FTS pass: bm25 is a sum over the query's phrases that an entry contains, each part under
  idf (k1 + 1). The entries containing a rarer phrase are scored first; when the
  `query_limit`-th score beats the most that the common phrases alone can add up to (their
  document counts are known: fts5vocab, or one count query), no entry holding only common
  phrases can enter the result, and those are never scored (`_Search._ranked_scores`).
* Dedup groups texts by the start of their key and builds the key (white-space runs as one
  space) only for different texts of one group (`_SeenTexts`).

Every user-supplied term reaches SQLite as a bound parameter; FTS5 text comes only from
`descriptor.fts_phrase` (OR-ed by `build_fts_query` or `_Search._ranked_scores`) and
`_prefilter_query`, which quote every term.

Failures: an `sqlite3.Error` raised by an FTS5 statement never escapes. The literal pass falls
back to the `LIKE` scan (same matches, slower), the FTS pass is skipped, and a warning says so in
`HistoryRetrieval.warnings`; the status stays `ok`. Errors of the `entries` table itself
propagate (the engine fails open).
"""

from __future__ import annotations

import math
import sqlite3
import time
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
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
    BM25_K1,
    COMMON_TERM_MIN_ENTRIES,
    PRUNE_MIN_DOCS,
    _bm25_bound,
    _fts_phrases,
    _fts_row_count,
    _fts_warning,
    _informative_terms,
    _Phrase,
    _single_ascii_token,
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
# bm25 ties go to the lower rowid: what SQLite's `ORDER BY ... LIMIT` sorter does with rows that
# arrive in rowid order, spelled out so every form of the statement below agrees.
_FTS_RANKED_SQL = (
    "SELECT f.rowid, bm25(entries_fts) FROM entries_fts AS f "
    "CROSS JOIN entries AS e ON e.rowid = f.rowid "
    f"WHERE entries_fts MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "ORDER BY bm25(entries_fts), f.rowid LIMIT ?"
)
_FTS_RANKED_AMONG_SQL = (  # the same, scored only for the entries matching a second query
    "SELECT f.rowid, bm25(entries_fts) FROM entries_fts AS f "
    "CROSS JOIN entries AS e ON e.rowid = f.rowid "
    "WHERE entries_fts MATCH ? "
    "AND +f.rowid IN (SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?) "
    f"AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "ORDER BY bm25(entries_fts), f.rowid LIMIT ?"
)

PRUNE_MAX_BOUND = 6.0
"""Phrases are left out of the scored set while their bm25 bound (`_Search._ranked_scores`)
stays under this; past it the `query_limit`-th score would rarely beat the bound."""


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

    def _scored(self, sql: str, params: tuple) -> list[tuple[int, float]]:
        return [(row[0], row[1]) for row in self.conn.execute(sql, params)]

    def ranked(
        self, terms: Sequence[str], fts_query: str, vocab: dict[str, int]
    ) -> list[_Candidate]:
        """The first `limit` eligible entries by bm25 (ties: lower rowid), best first.

        `fts_query` is `build_fts_query(terms)`; `vocab`: document counts by token, as far as
        known (`_informative_terms`). [] after an FTS error. See `_ranked_scores`.
        """
        try:
            scored = self._ranked_scores(terms, fts_query, vocab)
        except sqlite3.Error as exc:
            self.index_usable = False
            self.warnings.append(_fts_warning("FTS pass", exc))
            return []
        rowids = [rowid for rowid, _score in scored]
        self._load(rowids)
        found = [self.rows[rowid] for rowid in rowids if rowid in self.rows]
        for candidate in found:
            self.candidates.setdefault(candidate.rowid, candidate)
        return found

    def _counted(self, phrase: _Phrase, vocab: dict[str, int], least: float) -> _Phrase:
        """`phrase` with its document count, if cheap to know or likely to be at least `least`.

        A one-token phrase takes it from `vocab`. A longer one is counted with FTS5 when its
        literal search stopped at `limit` matches and their spread over the rowids read so far
        suggests `least` or more entries.
        """
        token = _single_ascii_token(phrase.term)
        if token is not None:
            docs = vocab.get(token)
            return phrase if docs is None else replace(phrase, docs=docs)
        span = self.span.get(phrase.term)
        if span is None or self.limit * (max(self.rows) - min(self.rows) + 1) < least * span:
            return phrase
        (docs,) = self.conn.execute(
            "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH ?", (phrase.text,)
        ).fetchone()
        return replace(phrase, docs=docs)

    def _fewer_than_limit(self, phrases: list[_Phrase]) -> bool:
        """A guess: do the entries containing `phrases` fall short of `limit`?

        Counted from what is known without a query: the literal matches of terms searched to
        the end, and document counts. A phrase with neither makes the answer no.
        """
        seen: set[int] = set()
        docs = 0
        for phrase in phrases:
            if phrase.term in self.exhausted:
                seen |= self.matched[phrase.term]
            elif phrase.docs is not None:
                docs += phrase.docs
            else:
                return False
        return len(seen) + docs < self.limit

    def _ranked_scores(
        self, terms: Sequence[str], fts_query: str, vocab: dict[str, int]
    ) -> list[tuple[int, float]]:
        """(rowid, bm25) of the first `limit` eligible entries `fts_query` matches, best first.

        Same result as scoring every entry the query matches, with less scoring: bm25 is a sum
        over the query's phrases an entry contains, so an entry containing only phrases of a
        set C scores no better than -bound(C) (`_bm25_bound`). The entries containing another
        phrase are scored first (by the full query: the values are FTS5's own); if the
        `limit`-th of them beats -bound(C), no entry containing only C can enter. Otherwise C
        shrinks to what that score allows and the scoring is redone once, or done on every
        entry. C: phrases in at least PRUNE_MIN_DOCS indexed entries (known counts only), most
        common first, while bound(C) stays under PRUNE_MAX_BOUND; never every phrase.
        """
        full = (fts_query, self.session_id, self.limit)
        phrases = _fts_phrases(terms)
        rows = _fts_row_count(self.conn)
        if (
            rows is None
            or rows < COMMON_TERM_MIN_ENTRIES
            or " OR ".join(p.text for p in phrases) != fts_query
        ):
            return self._scored(_FTS_RANKED_SQL, full)
        ratio = math.exp(PRUNE_MAX_BOUND / (BM25_K1 + 1))
        least = max(PRUNE_MIN_DOCS, (rows + 0.5 - 0.5 * ratio) / (1 + ratio))
        phrases = [self._counted(p, vocab, least / 2) for p in phrases]
        common = sorted(
            (p for p in phrases if p.docs is not None and p.docs >= least),
            key=lambda p: -(p.docs or 0),
        )
        left_out: list[_Phrase] = []
        for phrase in common:
            if _bm25_bound([*left_out, phrase], rows) >= PRUNE_MAX_BOUND:
                break
            left_out.append(phrase)
        if left_out and self._fewer_than_limit([p for p in phrases if p not in left_out]):
            left_out = []  # the scored set would not fill `limit`: not worth a try
        for _attempt in range(2):
            if not left_out or len(left_out) >= len(phrases):
                break
            kept = " OR ".join(p.text for p in phrases if p not in left_out)
            scored = self._scored(
                _FTS_RANKED_AMONG_SQL, (fts_query, kept, self.session_id, self.limit)
            )
            if len(scored) < self.limit:
                break
            worst = scored[-1][1]
            if worst < -_bm25_bound(left_out, rows):
                return scored
            allowed: list[_Phrase] = []
            for phrase in left_out:
                if worst < -_bm25_bound([*allowed, phrase], rows):
                    allowed.append(phrase)
            left_out = allowed if len(allowed) < len(left_out) else []
        return self._scored(_FTS_RANKED_SQL, full)


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
    relevant = fts  # the relevance search (`history_relevance`) replaces the bm25 FTS pass
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
    if fts and search.index_usable and not relevant:
        fts_terms, doc_counts = _informative_terms(conn, descriptor.query_terms)
        fts_query = build_fts_query(fts_terms)
    else:
        fts_query = None
    if fts_query is not None and search.index_usable:
        needles = [(t, fold(replace_lone_surrogates(t))) for t in descriptor.query_terms]
        for rank, c in enumerate(search.ranked(fts_terms, fts_query, doc_counts)):
            if c.fts_rank is None:
                c.fts_rank = rank
                folded = c.folded
                c.fts_terms = [t for t, needle in needles if needle and needle in folded]

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
    units = request_units(descriptor) if relevant else []
    relevance = session_relevance(conn, session_id, units, branch)
    ranked, below, below_count = select(
        search,
        eligible,
        relevance,
        branch=branch,
        excluded=excluded,
        floor=relevant and not relevance.failed,
    )
    for item in ranked:
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
        candidates=len(search.candidates),
        duplicates=duplicates,
        alternate_branch_candidates=alternate,
        already_in_context=in_context,
        latency_ms=elapsed_ms(),
        below_floor=below_count,
    )
    warnings = [*search.warnings, *relevance.warnings]
    return HistoryRetrieval("ok", hits, stats, warnings, tuple(below))


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
