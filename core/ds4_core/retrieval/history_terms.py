"""FTS query terms and bm25 statistics of history retrieval (`retrieval/history.py`).

How many rows a pass reads (`query_limit`), which query terms are informative enough for a
bm25 query (`informative_terms`), the bm25 row count FTS5 keeps (`_fts_row_count`), and the
entry counts and session-filtered statements of the relevance pass (`_session_rows`,
`retrieval/history_relevance.py`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable

from ds4_core.store.sql import placeholders

_UNICODE_WORD = re.compile(r"[^\W_]+")  # runs of letters and digits: unicode61 tokens, roughly


def query_limit(max_results: int) -> int:
    """Rows each pass may return: max(max_results, min(100, max_results * 6))
    (docs/reference.md §3.2)."""
    return max(max_results, min(100, max_results * 6))


def _fts_warning(where: str, exc: sqlite3.Error) -> str:
    return (
        f"ds4: full-text search of the session history failed in the {where} ({exc}); "
        "history results come from a literal scan only. If this persists, rebuild the index "
        "(ds4.rebuildIndex)."
    )


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
        words = sorted(set(single.values()))  # terms that fold to one word are one lookup
        counts = dict(
            conn.execute(
                f"SELECT term, doc FROM entries_fts_vocab WHERE term IN ({placeholders(len(words))})",
                words,
            ).fetchall()
        )
    except sqlite3.Error:
        return terms, {}
    limit = total * COMMON_TERM_SHARE
    kept = [t for t in terms if t not in single or counts.get(single[t], 0) <= limit]
    for word in single.values():
        counts.setdefault(word, 0)  # not in the vocabulary: in no entry
    return kept or terms, counts


_SESSION_ROWIDS_SQL = {  # the same reads, kept to one session when others share the index
    table: f"SELECT f.rowid FROM {table} AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
    f"WHERE {table} MATCH ? AND e.session_id = ? LIMIT ?"
    for table in ("entries_fts", "entries_subwords")
}
_SESSION_COUNT_SQL = {  # counted up to a limit
    table: f"SELECT count(*) FROM (SELECT 1 FROM {table} AS f CROSS JOIN entries AS e "
    f"ON e.rowid = f.rowid WHERE {table} MATCH ? AND e.session_id = ? LIMIT ?)"
    for table in ("entries_fts", "entries_subwords")
}


def _index_rows(conn: sqlite3.Connection) -> int:
    """Rows indexed in `entries_fts` (bm25's N), or the `entries` count when unknown."""
    rows = _fts_row_count(conn)
    if rows is None:
        (rows,) = conn.execute("SELECT count(*) FROM entries").fetchone()
    return int(rows)


def _session_rows(conn: sqlite3.Connection, session_id: str) -> tuple[int, str | None]:
    """(N: the entries of `session_id`, the session filter for the unit reads: None when the
    index holds no other session's entries, so the plain statements already read only it).

    Weights are the session's own (issue 11: "how informative it is in this corpus"): a word
    common in other sessions indexed in the same database does not change this session's
    answer."""
    (rows,) = conn.execute(
        "SELECT count(*) FROM entries WHERE session_id = ?", (session_id,)
    ).fetchone()
    return int(rows), (None if rows >= _index_rows(conn) else session_id)
