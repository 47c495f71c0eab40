"""Historical retrieval: literal + FTS5 bm25 search over one session's index
(docs/reference.md §3.2).

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
4. **Score** (docs/reference.md §3.2): +100 + min(12, 3 (nExact - 1)) for literal identifiers,
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
import re
import sqlite3
import time
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Literal

from ds4_core.retrieval.descriptor import (
    FTS_TERM_LIMIT,
    TaskDescriptor,
    build_fts_query,
    fts_phrase,
    has_token_characters,
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
_ASCII_WHITESPACE = b" \t\n\r\x0b\x0c"  # what `bytes.split()` splits on
_TYPES_SQL = "(" + ", ".join(f"'{t}'" for t in ELIGIBLE_ENTRY_TYPES) + ")"  # our constants
# The text comes as the stored UTF-8 bytes (no decoding into `str` for rows never quoted).
_ROW_COLUMNS = (
    "e.rowid, e.entry_key, e.entry_id, e.role, e.created_at, e.token_estimate, "
    "CAST(e.searchable_text AS BLOB)"
)
_ROWID_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 500)  # `IN (...)` sizes
_ROWS_BY_ID_SQL = {
    size: f"SELECT {_ROW_COLUMNS} FROM entries AS e WHERE e.rowid IN ({', '.join('?' * size)})"
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
    "AND e.searchable_text LIKE ? ESCAPE '\\' "
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


@dataclass(frozen=True)
class HistoryHit:
    """One retrieved history entry, ready to be rendered as evidence (`render_evidence`).

    Attributes:
        entry_key: `session_id:entry_id` (the `entries` primary key).
        entry_id: the Pi entry id.
        role: the message role (`custom` for custom_message), or None.
        created_at: the entry's ISO-8601 timestamp as stored, or None.
        score: the docs/reference.md §3.2 score, rounded to 6 decimals.
        reason: e.g. `exact identifier: Foo.bar; FTS: foo; active branch`.
        excerpt: the quoted text (the whole text, or a window with "…" at each cut end).
        tokens: `chars-v2` tokens of the rendered evidence message.
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


class _Candidate:
    """One entry read from the store, and what the passes found in it."""

    __slots__ = (
        "rowid", "entry_key", "entry_id", "role", "created_at", "token_estimate", "raw",
        "folded", "exact", "phrases", "fts_terms", "fts_rank", "_text",
    )  # fmt: skip

    def __init__(self, row: tuple) -> None:
        self.rowid: int = row[0]
        self.entry_key: str = row[1]
        self.entry_id: str = row[2]
        self.role: str | None = row[3]
        self.created_at: str | None = row[4]
        self.token_estimate = int(row[5] or 0)
        self.raw: bytes = row[6]  # the stored UTF-8 of searchable_text
        self.folded: bytes = self.raw.lower()  # = fold(self.text)
        self.exact: list[str] = []
        self.phrases: list[str] = []
        self.fts_terms: list[str] = []
        self.fts_rank: int | None = None
        self._text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.raw.decode("utf-8", "replace")  # the store writes valid UTF-8
        return self._text


def implies(inner: LiteralTerm, outer: LiteralTerm) -> bool:
    """True when every text `outer` matches is also matched by `inner` (word-start rule kept).

    That holds when `inner.needle` occurs inside `outer.needle` at an offset where the rule of
    `inner` is guaranteed: anywhere if `inner` need not start a word; otherwise at offset 0 of an
    `outer` that itself starts a word, or right after an ASCII character that is not a letter or
    digit (`cli.ts` inside `src/cli.ts`, `ModuleJob` inside `ModuleJob.run`).
    """
    needle = inner.needle
    if not needle or len(needle) > len(outer.needle):
        return False
    at = outer.needle.find(needle)
    while at >= 0:
        if not inner.word_start:
            return True
        if at == 0:
            if outer.word_start:
                return True
        else:
            previous = outer.needle[at - 1]
            if previous < 0x80 and previous not in _ASCII_ALNUM_BYTES:
                return True
        at = outer.needle.find(needle, at + 1)
    return False


class _Pool:
    """Candidates in rowid order, their folded texts joined by NUL: one `find` scan per term."""

    def __init__(self, candidates: Iterable[_Candidate]) -> None:
        self.candidates = sorted(candidates, key=lambda c: c.rowid)
        self.rowids = [c.rowid for c in self.candidates]
        self._corpus: tuple[bytes, list[int]] | None = None

    def _joined(self) -> tuple[bytes, list[int]]:
        if self._corpus is None:
            starts: list[int] = []
            at = 0
            for c in self.candidates:
                starts.append(at)
                at += len(c.folded) + 1
            self._corpus = (b"\x00".join(c.folded for c in self.candidates), starts)
        return self._corpus

    def matching(self, term: LiteralTerm, below: int | None = None) -> set[int]:
        """Rowids of the candidates (under rowid `below`, if given) that `term` matches.

        Same result as `term.occurs_in` on each: a needle without NUL cannot match across the
        NUL separators, and a match right after a separator starts a word, as one at offset 0
        of its text does.
        """
        needle = term.needle
        count = len(self.rowids) if below is None else bisect_left(self.rowids, below)
        if not needle or not count:
            return set()
        if 0 in needle:
            return {c.rowid for c in self.candidates[:count] if term.occurs_in(c.folded)}
        corpus, starts = self._joined()
        end = starts[count] - 1 if count < len(starts) else len(corpus)
        rowids = self.rowids
        found: set[int] = set()
        find = corpus.find
        at = find(needle, 0, end)
        while at >= 0:
            if term.word_start and at > 0 and not _starts_word(corpus, at):
                at = find(needle, at + 1, end)
                continue
            index = bisect_right(starts, at) - 1
            found.add(rowids[index])
            if index + 1 >= count:
                break
            at = find(needle, starts[index + 1], end)
        return found


@dataclass(frozen=True)
class _Phrase:
    """One OR-ed phrase of the FTS query, with its document count when known."""

    term: str
    text: str  # `fts_phrase(term)`
    docs: int | None = None


def _fts_phrases(terms: Iterable[str]) -> list[_Phrase]:
    """The phrases `build_fts_query(terms)` OR-es together, in its order."""
    phrases: list[_Phrase] = []
    for term in unique(terms, None):
        if has_token_characters(term):
            phrases.append(_Phrase(term, fts_phrase(term)))
            if len(phrases) >= FTS_TERM_LIMIT:
                break
    return phrases


def _single_ascii_token(term: str) -> str | None:
    """The one FTS5 token of an ASCII `term` with a single run of letters and digits, or None.

    unicode61 keeps only letters and digits of ASCII text in tokens and lowercases them, so for
    such a term the phrase and the token match the same entries (fts5vocab counts those).
    """
    if not term.isascii():
        return None
    words = _ASCII_WORD.findall(term)
    return words[0].lower() if len(words) == 1 else None


def _varint(data: bytes, at: int) -> int:
    """The SQLite varint at `data[at:]` (the format FTS5 stores its statistics in)."""
    value = 0
    for offset in range(8):
        byte = data[at + offset]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value
    return (value << 8) | data[at + 8]


def _fts_row_count(conn: sqlite3.Connection) -> int | None:
    """The row count bm25 uses (`xRowCount`), or None when it cannot be read with certainty.

    FTS5 keeps it as the first varint of its "averages" record (`entries_fts_data` id 1); it is
    taken only when it equals the number of `entries_fts_docsize` rows (one per indexed row).
    """
    try:
        block = conn.execute("SELECT block FROM entries_fts_data WHERE id = 1").fetchone()
        (sizes,) = conn.execute("SELECT count(*) FROM entries_fts_docsize").fetchone()
        rows = _varint(block[0], 0) if block is not None and block[0] else None
    except (sqlite3.Error, IndexError, TypeError):
        return None
    return rows if rows is not None and rows == sizes and rows > 0 else None


BM25_K1 = 1.2
"""FTS5's bm25 k1: one phrase adds at most idf * (k1 + 1) to an entry's score."""
PRUNE_MIN_DOCS = 150
"""A phrase in fewer indexed entries than this is never left out of the scored set."""
PRUNE_MAX_BOUND = 6.0
"""Phrases are left out of the scored set while their bm25 bound (`_Search._ranked_scores`)
stays under this; past it the `query_limit`-th score would rarely beat the bound."""


def _bm25_bound(phrases: Iterable[_Phrase], rows: int) -> float:
    """More than any bm25 score (negated) an entry matching only `phrases` can get.

    FTS5 adds idf * f (k1 + 1) / (f + k1 (1 - b + b D / avgdl)) per phrase, which is under
    idf (k1 + 1), with idf = log((N - n + 0.5) / (n + 0.5)) (1e-6 when not positive). The
    relative margin covers rounding (ours and SQLite's).
    """
    bound = 0.0
    for phrase in phrases:
        docs = phrase.docs if phrase.docs is not None else 0
        idf = math.log((rows - docs + 0.5) / (docs + 0.5))
        bound += (idf if idf > 0 else 1e-6) * (BM25_K1 + 1)
    return bound * (1 + 1e-9) + 1e-9


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
        pattern = _like_pattern(replace_lone_surrogates(term.text))
        if pattern is None:
            self.complete.add(term.text)  # an all-NUL term: no match, and it implies nothing
            return []
        cursor = self.conn.execute(_LITERAL_BY_SCAN_SQL, (self.session_id, pattern))
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
    return _informative_terms(conn, terms)[0]


def _informative_terms(
    conn: sqlite3.Connection, terms: Iterable[str]
) -> tuple[list[str], dict[str, int]]:
    """`informative_terms`, and the document counts it read (one-word terms, by word)."""
    terms = list(terms)
    single = {t: words[0] for t in terms if len(words := _UNICODE_WORD.findall(t.lower())) == 1}
    if not single:
        return terms, {}
    try:
        (total,) = conn.execute("SELECT count(*) FROM entries").fetchone()
        if total < COMMON_TERM_MIN_ENTRIES:
            return terms, {}
        marks = ", ".join("?" * len(single))
        counts = dict(
            conn.execute(
                f"SELECT term, doc FROM entries_fts_vocab WHERE term IN ({marks})",
                list(set(single.values())),
            ).fetchall()
        )
    except sqlite3.Error:
        return terms, {}
    limit = total * COMMON_TERM_SHARE
    kept = [t for t in terms if t not in single or counts.get(single[t], 0) <= limit]
    for word in single.values():
        counts.setdefault(word, 0)  # not in the vocabulary: in no entry
    return kept or terms, counts


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
    `match` (or at 0), clamped to the text, with "…" on each cut side (docs/reference.md §3.2).
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


def _rank(
    search: _Search, eligible: list[_Candidate], descriptor: TaskDescriptor
) -> Iterator[_Ranked]:
    """Score and sort the eligible candidates (docs/reference.md §3.2 "Score", "Sort order")."""
    bonus: dict[int, float] = dict.fromkeys((c.rowid for c in eligible), 0.0)
    matching: dict[str, set[int]] = {}
    pool: _Pool | None = None
    for terms, points in (
        (descriptor.files, 12),
        (descriptor.symbols, 10),
        (descriptor.errors, 12),
    ):
        for text in terms:
            rowids = matching.get(text)
            if rowids is None:
                if pool is None:
                    pool = _Pool(eligible)
                rowids = matching[text] = search.matching(LiteralTerm.of(text), pool)
            for rowid in rowids:
                if rowid in bonus:
                    bonus[rowid] += points
    created = [iso_to_ms(c.created_at) for c in eligible]
    times = [ms for ms in created if ms is not None]
    oldest = min(times, default=0)
    newest = max(times, default=0)
    spread = newest > oldest
    scored: list[tuple[int, float, int, str, int]] = []  # the sort key, then the index
    for index, c in enumerate(eligible):
        score = bonus[c.rowid]
        if c.exact:
            score += 100 + min(12, 3 * (len(c.exact) - 1))
        if c.phrases:
            score += 85 + min(8, 2 * (len(c.phrases) - 1))
        if c.fts_terms:
            score += 60 + max(0, 10 - (c.fts_rank if c.fts_rank is not None else 10))
        score += 15 + _ROLE_AUTHORITY.get(c.role or "", 1)
        ms = created[index]
        if ms is not None and spread:
            score += (ms - oldest) / (newest - oldest) * 8
        score -= min(12, max(0, c.token_estimate) / 1000)
        priority = 2 if c.exact else 1 if c.phrases else 0
        scored.append((-priority, -round(score, 6), -(ms or 0), c.entry_id, index))
    scored.sort()
    for neg_priority, neg_score, _ms, _entry_id, index in scored:
        yield _Ranked(eligible[index], -neg_score, -neg_priority, created[index])


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


class _SeenTexts:
    """Texts already ranked, compared by their dedup key `b" ".join(folded.split())`.

    Texts are grouped by the first 64 bytes of the key without its spaces (a function of the key,
    read from the start of the text); within a group, equal texts are equal, and the key is
    computed only for texts that differ.
    """

    def __init__(self) -> None:
        self.groups: dict[bytes, list[bytes]] = {}

    @staticmethod
    def _head(folded: bytes) -> bytes:
        head = folded[:256].translate(None, _ASCII_WHITESPACE)
        if len(head) < 64 and len(folded) > 256:
            head = folded.translate(None, _ASCII_WHITESPACE)
        return head[:64]

    def add(self, folded: bytes) -> bool:
        """Record `folded`; False when its key was already recorded."""
        head = self._head(folded)
        group = self.groups.get(head)
        if group is None:
            self.groups[head] = [folded]
            return True
        if folded in group:
            return False
        key = b" ".join(folded.split())
        if any(b" ".join(other.split()) == key for other in group):
            return False
        group.append(folded)
        return True


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
    if fts and search.index_usable:
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
    for item in _rank(search, eligible, descriptor):
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
    )
    return HistoryRetrieval("ok", hits, stats, search.warnings)
