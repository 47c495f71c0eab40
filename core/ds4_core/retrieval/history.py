"""Historical retrieval: literal + FTS5 bm25 search over one session's index (ds4-reference.md 3.2).

Pipeline (all within one session, only `message` / `custom_message` entries):

1. **Literal pass** (`exact=True`): every exact identifier and every quoted phrase of the
   `TaskDescriptor` is searched literally; each term keeps its `query_limit` newest matches
   (file order), `query_limit = max(max_results, min(100, max_results * 6))`.
2. **FTS pass** (`fts=True`): `build_fts_query(query_terms)` bound to `entries_fts MATCH ?`,
   ordered by `bm25(entries_fts)`, first `query_limit` rows. The FTS terms of a hit are the query
   terms that occur in its text as substrings.
3. **Eligibility**: an entry already in the caller's context (`exclude_entry_ids`) is dropped
   (`already_in_context`); an entry not on the active branch (`branch_entry_ids`) is dropped and
   counted in `alternate_branch_candidates`.
4. **Score** (ds4-reference.md 3.2): +100 + min(12, 3 (nExact - 1)) for literal identifiers,
   +85 + min(8, 2 (nPhrases - 1)) for phrases, +60 + max(0, 10 - ftsRank) for FTS, +12 per
   descriptor file, +10 per symbol and +12 per error found in the text, +15 base, role authority
   (user 8, assistant 5, toolResult / bashExecution 4, other 1), up to +8 recency (linear between
   the oldest and newest eligible candidate), minus min(12, token_estimate / 1000); rounded to 6
   decimals. Sorted by literal priority (2 identifier, 1 phrase, 0), score, created_at (newest
   first), entry id.
5. **Dedup and budget**: a text equal to an already selected one (ASCII case and ASCII
   white-space runs ignored) counts in `duplicates` and is skipped; the loop stops when fewer than
   48 tokens remain; each excerpt starts at `min(6000, max(256, remaining * 4 - 800))` characters
   around the first matched term and shrinks by x0.7 (down to 256) while its rendered evidence is
   over the remaining budget.

Literal matching (a decision; ds4 uses a case-sensitive `instr` scan):

* ASCII letters compare case-insensitively, every other character exactly (SQLite's `lower()`
  rule), on UTF-8 bytes.
* A term made only of ASCII characters that starts with a letter or digit must start a word of
  the text: the character before it is not a letter, digit or combining mark (FTS5 `unicode61`'s
  word characters). So `SessionManager` matches `SessionManagerImpl` and `new SessionManager(`,
  not `createSessionManager`; `theme.ts` matches `src/theme.ts`, not `mytheme.ts`. Any other
  term (CJK, accented words, one starting with punctuation) matches anywhere.
* The same rule decides the file / symbol / error bonuses, so "found in the text" means one
  thing throughout.
* Speed: for ASCII terms the FTS index selects the entries holding the term's words in sequence
  (its last word as a prefix) and each is then checked literally, newest first, stopping at
  `query_limit` matches; other terms are found by a `LIKE` scan, newest first, with the same
  stop. A plain substring scan of 5,000 messages costs 3-9 ms per term; the index path costs
  0.05-1 ms. Both paths give the same matches ("newest" is rowid order on the index path and
  `seq` order on the scan path; the store inserts entries in file order, so they agree).

Every user-supplied term reaches SQLite as a bound parameter; FTS5 text comes only from
`descriptor.build_fts_query` and `_prefilter_query`, which quote every term.

Failures: an `sqlite3.Error` raised by an FTS5 statement never escapes. The literal pass falls
back to the `LIKE` scan (same matches, slower), the FTS pass is skipped, and a warning says so in
`HistoryRetrieval.warnings`; the status stays `ok`. Errors of the `entries` table itself
propagate (the engine fails open).
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

from ds4_core.retrieval.descriptor import (
    TaskDescriptor,
    build_fts_query,
    is_token_char,
    replace_lone_surrogates,
    unique,
)
from ds4_core.retrieval.evidence import evidence_tokens
from ds4_core.sessions.context import iso_to_ms
from ds4_core.store.database import Store

RetrievalStatus = Literal["ok", "no-query", "disabled", "no-session"]

ELIGIBLE_ENTRY_TYPES = ("message", "custom_message")
MIN_REMAINING_TOKENS = 48
MAX_EXCERPT_CHARS = 6000
MIN_EXCERPT_CHARS = 256
EXCERPT_SHRINK = 0.7
ELLIPSIS = "…"

_ROLE_AUTHORITY = {"user": 8, "assistant": 5, "toolResult": 4, "bashExecution": 4}
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_UNICODE_WORD = re.compile(r"[^\W_]+")  # runs of letters and digits: unicode61 tokens, roughly
_ALNUM_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_ASCII_ALNUM = frozenset(_ALNUM_CHARS)
_ASCII_ALNUM_BYTES = frozenset(_ALNUM_CHARS.encode("ascii"))
_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in ELIGIBLE_ENTRY_TYPES) + ")"  # our constants
_ROW_COLUMNS = "e.rowid, e.entry_key, e.entry_id, e.role, e.created_at, e.token_estimate"
_CHUNK = 500  # rowids per `IN (...)` lookup

_LITERAL_BY_INDEX_SQL = (
    f"SELECT {_ROW_COLUMNS}, e.searchable_text "
    "FROM entries_fts AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
    f"WHERE entries_fts MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "ORDER BY f.rowid DESC"
)
_LITERAL_BY_SCAN_SQL = (
    f"SELECT {_ROW_COLUMNS}, e.searchable_text FROM entries AS e "
    f"WHERE e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "AND e.searchable_text LIKE ? ESCAPE '\\' "
    "ORDER BY e.seq DESC"
)
_FTS_RANKED_SQL = (
    "SELECT f.rowid FROM entries_fts AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
    f"WHERE entries_fts MATCH ? AND e.session_id = ? AND e.entry_type IN {_TYPES_SQL} "
    "ORDER BY bm25(entries_fts) LIMIT ?"
)


@dataclass(frozen=True)
class HistoryHit:
    """One retrieved history entry, ready to be rendered as evidence (`render_evidence`).

    Attributes:
        entry_key: `session_id:entry_id` (the `entries` primary key).
        entry_id: the Pi entry id.
        role: the message role (`custom` for custom_message), or None.
        created_at: the entry's ISO-8601 timestamp as stored, or None.
        score: the ds4-reference.md 3.2 score, rounded to 6 decimals.
        reason: e.g. `exact identifier: Foo.bar; FTS: foo; active branch`.
        excerpt: the quoted text (the whole text, or a window with "…" at each cut end).
        tokens: `chars-v1` tokens of the rendered evidence message.
        literal_priority: 2 if an exact identifier matched, 1 if only a phrase did, else 0.
        matched_terms: exact identifiers, phrases and FTS terms found, in that order.
    """

    entry_key: str
    entry_id: str
    role: str | None
    created_at: str | None
    score: float
    reason: str
    excerpt: str
    tokens: int
    literal_priority: int
    matched_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class RetrievalStats:
    """Counters of one retrieval.

    Attributes:
        candidates: distinct entries found by the literal and FTS passes.
        duplicates: ranked entries skipped because an equal text was already selected.
        alternate_branch_candidates: candidates dropped for not being on the active branch.
        already_in_context: candidates dropped because the caller already sends them.
        latency_ms: wall time of `retrieve_history` (ms).
    """

    candidates: int = 0
    duplicates: int = 0
    alternate_branch_candidates: int = 0
    already_in_context: int = 0
    latency_ms: float = 0.0


@dataclass(frozen=True)
class HistoryRetrieval:
    """Result of `retrieve_history`.

    `status`: `ok` (searched; `hits` may be empty), `no-query` (the descriptor has no query
    terms), `disabled` (both passes off, or `max_results` / `max_tokens` <= 0), `no-session`
    (nothing is indexed for the session). `warnings` are user-readable sentences (e.g. the FTS
    index failed and only literal matches were used).
    """

    status: RetrievalStatus
    hits: list[HistoryHit] = field(default_factory=list)
    stats: RetrievalStats = field(default_factory=RetrievalStats)
    warnings: list[str] = field(default_factory=list)


def fold(text: str) -> bytes:
    """`text` as UTF-8 with ASCII letters lowercased: the form literal matching compares.

    A substring test on this form equals SQLite's `instr(lower(a), lower(b)) > 0`; UTF-8 is
    self-synchronising, so a byte match is always a match of whole characters.
    """
    return text.encode("utf-8", "surrogatepass").lower()


def query_limit(max_results: int) -> int:
    """Rows each pass may return: max(max_results, min(100, max_results * 6)) (3.2)."""
    return max(max_results, min(100, max_results * 6))


@dataclass(frozen=True)
class LiteralTerm:
    """A search term prepared for literal matching (rules in the module docstring).

    Attributes:
        text: the term as the descriptor spells it.
        needle: `fold(text)`.
        word_start: the match must start a word (ASCII term starting with a letter or digit).
        prefilter: FTS5 text selecting a superset of the matching entries, or None (scan).
    """

    text: str
    needle: bytes
    word_start: bool
    prefilter: str | None

    @classmethod
    def of(cls, term: str) -> LiteralTerm:
        """Prepare `term` (lone surrogates become U+FFFD)."""
        clean = replace_lone_surrogates(term)
        ascii_only = clean.isascii()
        return cls(
            text=term,
            needle=fold(clean),
            word_start=ascii_only and clean[:1] in _ASCII_ALNUM,
            prefilter=_prefilter_query(clean) if ascii_only else None,
        )

    def occurs_in(self, folded_text: bytes) -> bool:
        """True when the term matches `folded_text` (a `fold()` result)."""
        needle = self.needle
        if not needle:
            return False
        at = folded_text.find(needle)
        if not self.word_start:
            return at >= 0
        while at >= 0:
            if at == 0 or _starts_word(folded_text, at):
                return True
            at = folded_text.find(needle, at + 1)
        return False


def _starts_word(text: bytes, at: int) -> bool:
    """True when the character before byte offset `at` of UTF-8 `text` is not a word char."""
    previous = text[at - 1]
    if previous < 0x80:
        return previous not in _ASCII_ALNUM_BYTES
    start = at - 1
    while start > 0 and 0x80 <= text[start] < 0xC0:
        start -= 1
    char = text[start:at].decode("utf-8", "replace")[:1]
    return not (char and is_token_char(char))


def _prefilter_query(term: str) -> str | None:
    """FTS5 text selecting every entry where the ASCII `term` can match (a superset).

    The term's words must appear in sequence, the last one as a prefix when the term ends with a
    letter or digit (the word may continue in the text). The first word is whole: a match starts
    a word, or follows punctuation that is part of the term. None when the term has no letter or
    digit. The text holds only `[a-z0-9 "*]`, so it is always valid FTS5 syntax.
    """
    words = _ASCII_WORD.findall(term)
    if not words:
        return None
    prefix = " *" if term[-1] in _ASCII_ALNUM else ""
    return '"' + " ".join(words).lower() + '"' + prefix


def _like_pattern(term: str) -> str | None:
    """A `LIKE ... ESCAPE '\\'` pattern selecting a superset of texts containing `term`.

    SQLite reads LIKE patterns up to the first NUL, so a term with NULs is represented by its
    longest NUL-free piece (the caller re-checks the whole term). None for an all-NUL term.
    """
    piece = max(term.split("\x00"), key=len)
    if not piece:
        return None
    escaped = piece.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _fts_warning(where: str, exc: sqlite3.Error) -> str:
    return (
        f"ds4: full-text search of the session history failed in the {where} ({exc}); "
        "history results come from a literal scan only. If this persists, rebuild the index "
        "(ds4.rebuildIndex)."
    )


@dataclass(eq=False)
class _Candidate:
    rowid: int
    entry_key: str
    entry_id: str
    role: str | None
    created_at: str | None
    token_estimate: int
    text: str
    exact: list[str] = field(default_factory=list)
    phrases: list[str] = field(default_factory=list)
    fts_terms: list[str] = field(default_factory=list)
    fts_rank: int | None = None
    _folded: bytes | None = None

    def folded(self) -> bytes:
        if self._folded is None:
            self._folded = fold(self.text)
        return self._folded


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
        self.warnings: list[str] = []
        self.index_usable = True

    def _row(self, row: tuple) -> _Candidate:
        found = self.rows.get(row[0])
        if found is None:
            found = _Candidate(row[0], row[1], row[2], row[3], row[4], int(row[5] or 0), row[6])
            self.rows[row[0]] = found
        return found

    def _take(self, term: LiteralTerm, rows: Iterable[tuple]) -> list[_Candidate]:
        """The first `limit` of `rows` the term matches; records the matches."""
        found: list[_Candidate] = []
        matched = self.matched.setdefault(term.text, set())
        for row in rows:
            candidate = self._row(row)
            if term.occurs_in(candidate.folded()):
                matched.add(candidate.rowid)
                self.candidates.setdefault(candidate.rowid, candidate)
                found.append(candidate)
                if len(found) >= self.limit:
                    return found
        self.complete.add(term.text)
        return found

    def literal(self, term: LiteralTerm) -> list[_Candidate]:
        """The newest (file order) `limit` eligible entries the term matches."""
        if term.prefilter is not None and self.index_usable:
            try:
                cursor = self.conn.execute(_LITERAL_BY_INDEX_SQL, (term.prefilter, self.session_id))
                try:
                    return self._take(term, cursor)
                finally:
                    cursor.close()
            except sqlite3.Error as exc:
                self.index_usable = False
                self.warnings.append(_fts_warning("literal pass", exc))
        pattern = _like_pattern(replace_lone_surrogates(term.text))
        if pattern is None:
            self.complete.add(term.text)
            return []
        cursor = self.conn.execute(_LITERAL_BY_SCAN_SQL, (self.session_id, pattern))
        try:
            return self._take(term, cursor)
        finally:
            cursor.close()

    def matching(self, term: LiteralTerm, pool: list[_Candidate]) -> set[int]:
        """Rowids of the candidates in `pool` that `term` matches.

        Reuses the literal pass: a term searched to the end has its full match set already.
        Otherwise the term's FTS prefilter (all sessions, rowids only) narrows the pool before
        the literal check; without one (or after an FTS error) every candidate is checked.
        """
        known = self.matched.get(term.text, set())
        if term.text in self.complete:
            return known
        rest = [c for c in pool if c.rowid not in known]
        if term.prefilter is not None and self.index_usable and len(rest) > 8:
            try:
                selected = {
                    row[0]
                    for row in self.conn.execute(
                        "SELECT rowid FROM entries_fts WHERE entries_fts MATCH ?",
                        (term.prefilter,),
                    )
                }
            except sqlite3.Error as exc:
                self.index_usable = False
                self.warnings.append(_fts_warning("ranking", exc))
            else:
                rest = [c for c in rest if c.rowid in selected]
        return known | {c.rowid for c in rest if term.occurs_in(c.folded())}

    def ranked(self, fts_query: str) -> list[_Candidate]:
        """The first `limit` eligible entries by bm25, best first ([] after an FTS error)."""
        try:
            rowids = [
                row[0]
                for row in self.conn.execute(
                    _FTS_RANKED_SQL, (fts_query, self.session_id, self.limit)
                )
            ]
        except sqlite3.Error as exc:
            self.index_usable = False
            self.warnings.append(_fts_warning("FTS pass", exc))
            return []
        missing = [rowid for rowid in rowids if rowid not in self.rows]
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            for row in self.conn.execute(
                f"SELECT {_ROW_COLUMNS}, e.searchable_text FROM entries AS e "
                f"WHERE e.rowid IN ({marks})",
                chunk,
            ):
                self._row(row)
        found = [self.rows[rowid] for rowid in rowids if rowid in self.rows]
        for candidate in found:
            self.candidates.setdefault(candidate.rowid, candidate)
        return found


COMMON_TERM_SHARE = 0.25
"""A one-word term found in more than this share of all indexed entries is left out of the FTS
query (see `informative_terms`)."""
COMMON_TERM_MIN_ENTRIES = 200
"""Below this many indexed entries every term is kept: shares are meaningless on tiny indexes."""


def informative_terms(conn: sqlite3.Connection, terms: Iterable[str]) -> list[str]:
    """`terms` without the one-word terms that occur in more than 25% of all indexed entries.

    bm25's inverse document frequency, log((N - n + 0.5) / (n + 0.5)), is at most log(3) ~ 1.1
    for such a term (and clamped to ~0 by FTS5 past n = N/2), against 5 or more for a term that
    names something specific. Left in an OR query, such a term adds almost nothing to any score
    but makes FTS5 score every entry that contains it, which is where the time of a prose query
    goes (measured with bench/history_retrieval.py: FTS pass about 2x faster, 97% of the same
    top-12). Multi-word terms (phrases, paths) are always kept. If every term is common, all
    are kept. Document counts come from the fts5vocab table `entries_fts_vocab`; if it cannot
    be read, the terms are returned unchanged.
    """
    terms = list(terms)
    single = {t: words[0] for t in terms if len(words := _UNICODE_WORD.findall(t.lower())) == 1}
    if not single:
        return terms
    try:
        (total,) = conn.execute("SELECT count(*) FROM entries").fetchone()
        if total < COMMON_TERM_MIN_ENTRIES:
            return terms
        marks = ", ".join("?" * len(single))
        counts = dict(
            conn.execute(
                f"SELECT term, doc FROM entries_fts_vocab WHERE term IN ({marks})",
                list(set(single.values())),
            ).fetchall()
        )
    except sqlite3.Error:
        return terms
    limit = total * COMMON_TERM_SHARE
    kept = [t for t in terms if t not in single or counts.get(single[t], 0) <= limit]
    return kept or terms


def first_match(text: str, terms: tuple[str, ...]) -> int:
    """Index in `text` of the earliest case-insensitive occurrence of any of `terms`, or -1."""
    lowered = text.lower()
    found = -1
    for term in terms:
        index = lowered.find(term.lower())
        if index >= 0 and (found < 0 or index < found):
            found = index
    return found


def excerpt_around(text: str, match: int, max_chars: int) -> str:
    """At most `max_chars` characters of `text` around index `match` (-1: no match).

    The whole text when it fits; otherwise a window starting `max_chars // 3` characters before
    `match` (or at 0), clamped to the text, with "…" on each cut side (ds4-reference.md 3.2).
    """
    if len(text) <= max_chars:
        return text
    start = max(0, min(len(text) - max_chars, max(match, 0) - max_chars // 3))
    end = min(len(text), start + max_chars)
    return (ELLIPSIS if start > 0 else "") + text[start:end] + (ELLIPSIS if end < len(text) else "")


@dataclass
class _Ranked:
    candidate: _Candidate
    score: float
    literal_priority: int
    created_ms: int | None

    @property
    def matched_terms(self) -> tuple[str, ...]:
        c = self.candidate
        return unique([*c.exact, *c.phrases, *c.fts_terms], None)

    @property
    def reason(self) -> str:
        c = self.candidate
        reasons = []
        if c.exact:
            reasons.append("exact identifier: " + ", ".join(c.exact))
        if c.phrases:
            reasons.append("exact phrase: " + ", ".join(c.phrases))
        if c.fts_terms:
            reasons.append("FTS: " + ", ".join(c.fts_terms))
        reasons.append("active branch")
        return "; ".join(reasons)


def _rank(search: _Search, eligible: list[_Candidate], descriptor: TaskDescriptor) -> list[_Ranked]:
    """Score and sort the eligible candidates (ds4-reference.md 3.2 "Score", "Sort order")."""
    bonus: dict[int, float] = dict.fromkeys((c.rowid for c in eligible), 0.0)
    matching: dict[str, set[int]] = {}
    for terms, points in (
        (descriptor.files, 12),
        (descriptor.symbols, 10),
        (descriptor.errors, 12),
    ):
        for text in terms:
            rowids = matching.get(text)
            if rowids is None:
                rowids = matching[text] = search.matching(LiteralTerm.of(text), eligible)
            for rowid in rowids:
                if rowid in bonus:
                    bonus[rowid] += points
    created = {c.rowid: iso_to_ms(c.created_at) for c in eligible}
    times = [ms for ms in created.values() if ms is not None]
    oldest = min(times, default=0)
    newest = max(times, default=0)
    ranked: list[_Ranked] = []
    for c in eligible:
        score = bonus[c.rowid]
        if c.exact:
            score += 100 + min(12, 3 * (len(c.exact) - 1))
        if c.phrases:
            score += 85 + min(8, 2 * (len(c.phrases) - 1))
        if c.fts_terms:
            score += 60 + max(0, 10 - (c.fts_rank if c.fts_rank is not None else 10))
        score += 15 + _ROLE_AUTHORITY.get(c.role or "", 1)
        ms = created[c.rowid]
        if ms is not None and newest > oldest:
            score += (ms - oldest) / (newest - oldest) * 8
        score -= min(12, max(0, c.token_estimate) / 1000)
        literal_priority = 2 if c.exact else 1 if c.phrases else 0
        ranked.append(_Ranked(c, round(score, 6), literal_priority, ms))
    ranked.sort(
        key=lambda r: (-r.literal_priority, -r.score, -(r.created_ms or 0), r.candidate.entry_id)
    )
    return ranked


def _fit(item: _Ranked, remaining: int) -> HistoryHit | None:
    """The hit for `item` with the largest excerpt whose evidence fits `remaining` tokens."""
    c = item.candidate
    terms = item.matched_terms
    match = first_match(c.text, terms) if len(c.text) > MIN_EXCERPT_CHARS else -1
    max_chars = min(MAX_EXCERPT_CHARS, max(MIN_EXCERPT_CHARS, remaining * 4 - 800))
    hit = HistoryHit(
        entry_key=c.entry_key,
        entry_id=c.entry_id,
        role=c.role,
        created_at=c.created_at,
        score=item.score,
        reason=item.reason,
        excerpt=excerpt_around(c.text, match, max_chars),
        tokens=0,
        literal_priority=item.literal_priority,
        matched_terms=terms,
    )
    tokens = evidence_tokens(hit)
    while tokens > remaining and max_chars > MIN_EXCERPT_CHARS:
        max_chars = max(MIN_EXCERPT_CHARS, int(max_chars * EXCERPT_SHRINK))
        hit = replace(hit, excerpt=excerpt_around(c.text, match, max_chars))
        tokens = evidence_tokens(hit)
    if tokens > remaining:
        return None
    return replace(hit, tokens=tokens)


def _as_set(ids: Collection[str]) -> Collection[str]:
    return ids if isinstance(ids, set | frozenset) else set(ids)


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
    """Rank evidence from the indexed history of `session_id` (ds4-reference.md 3.2).

    Args:
        store: an open store; read through the calling thread's connection.
        session_id: the session to search (no other session is ever read).
        descriptor: the request's `TaskDescriptor` (`describe_task`).
        branch_entry_ids: entry ids on the active branch (root to leaf); pass a `set` or
            `frozenset` to avoid a copy.
        exclude_entry_ids: entry ids already in the caller's context.
        max_results: most hits to return (<= 0: status `disabled`).
        max_tokens: `chars-v1` token budget for all rendered evidence (<= 0: `disabled`).
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
        for identifier in descriptor.exact_identifiers:
            for c in search.literal(LiteralTerm.of(identifier)):
                if identifier not in c.exact:
                    c.exact.append(identifier)
        for phrase in descriptor.phrases:
            for c in search.literal(LiteralTerm.of(phrase)):
                if phrase not in c.phrases:
                    c.phrases.append(phrase)
    fts_query = build_fts_query(informative_terms(conn, descriptor.query_terms)) if fts else None
    if fts_query is not None and search.index_usable:
        needles = [(t, fold(replace_lone_surrogates(t))) for t in descriptor.query_terms]
        for rank, c in enumerate(search.ranked(fts_query)):
            if c.fts_rank is None:
                c.fts_rank = rank
                text = c.folded()
                c.fts_terms = [t for t, needle in needles if needle and needle in text]

    branch = _as_set(branch_entry_ids)
    excluded = _as_set(exclude_entry_ids)
    eligible: list[_Candidate] = []
    alternate = in_context = 0
    for c in search.candidates.values():
        if not c.text:
            continue
        if c.entry_id in excluded:
            in_context += 1
        elif c.entry_id not in branch:
            alternate += 1
        else:
            eligible.append(c)

    hits: list[HistoryHit] = []
    seen: set[bytes] = set()
    duplicates = used_tokens = 0
    for item in _rank(search, eligible, descriptor):
        if len(hits) >= max_results:
            break
        key = b" ".join(item.candidate.folded().split())
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
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
    )
    return HistoryRetrieval("ok", hits, stats, search.warnings)
