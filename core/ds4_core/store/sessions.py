"""Repository for indexed sessions: `sessions`, `entries` (+ `entries_fts`), `session_index_state`.

All functions take the `Store` first. Reads work from any thread. Writes open
`with store.write():` themselves (nested inside a caller's write they become a savepoint), so a
caller that must check and write atomically wraps both in one `store.write()`.

Bulk inserts use multi-row `INSERT ... VALUES` statements of up to `INSERT_BATCH_ROWS` rows
(bound parameters); the FTS index follows through the triggers of migration 1
(`store.migrations`). Never use
`INSERT OR REPLACE` on `entries` (it would desynchronise the external-content FTS index).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, NamedTuple, TypedDict

from ds4_core.sessions.subwords import subword_text
from ds4_core.store.database import Store, utc_now_iso
from ds4_core.store.sql import chunked, placeholders

INSERT_BATCH_ROWS = 2000
"""Most rows per multi-row INSERT statement (fewer when SQLite's bound-variable limit is lower)."""


class IndexedEntry(NamedTuple):
    """One row of `entries`, in the order the columns are read and written here.

    Attributes:
        entry_key: `session_id + ":" + entry_id` (unique across sessions).
        entry_id: the Pi entry id (v1 files: `v1-<n>`).
        parent_id: the parent entry id, or `None` for a root.
        entry_type: the entry `type` (`message`, `compaction`, `custom`, ...).
        role: the message role (`custom` for custom_message), else `None`.
        created_at: the entry's ISO-8601 timestamp string, or `None`.
        seq: 0-based position among the file's entries (header excluded).
        line_number: 1-based physical line of the entry in the file.
        searchable_text: the text indexed by FTS5 (docs/reference.md §3.12 "Searchable text").
        token_estimate: `chars-v2` tokens of `searchable_text`.
        content_hash: sha256 hex of the raw line bytes.
    """

    entry_key: str
    entry_id: str
    parent_id: str | None
    entry_type: str
    role: str | None
    created_at: str | None
    seq: int
    line_number: int
    searchable_text: str
    token_estimate: int
    content_hash: str


@dataclass(frozen=True)
class IndexState:
    """One row of `session_index_state`: the sync checkpoint of docs/reference.md §3.12.

    Attributes:
        session_id: the session.
        session_file: canonical path of the file this state describes.
        header_hash: sha256 hex of the header line bytes.
        file_size: bytes of the file as last read.
        file_mtime_ms: its modification time in ms since the epoch (float).
        checkpoint_offset: end of the last `\\n`-terminated line indexed (bytes).
        checkpoint_hash_start: where the hashed range before the checkpoint begins (bytes).
        checkpoint_hash: sha256 hex of bytes `[checkpoint_hash_start, checkpoint_offset)`
            (at most 64 KiB), or `None` when unknown.
        indexed_entries: rows in `entries` for this session.
        malformed_lines: malformed terminated lines before the checkpoint (accumulated).
        resume_json: JSON object the sync needs to continue (reader `ResumeState`, header
            location, torn-tail entry); owned by `sessions.sync`.
        indexed_at: ISO-8601 UTC time of the last write.
    """

    session_id: str
    session_file: str
    header_hash: str
    file_size: int
    file_mtime_ms: float
    checkpoint_offset: int
    checkpoint_hash_start: int | None
    checkpoint_hash: str | None
    indexed_entries: int
    malformed_lines: int
    resume_json: str
    indexed_at: str


class SessionSummary(TypedDict):
    """A row of `list_sessions`: an indexed session and how many entries it has."""

    session_id: str
    session_file: str
    project_path: str | None
    indexed_at: str
    entry_count: int


_STATE_COLUMNS = (
    "session_id, session_file, header_hash, file_size, file_mtime_ms, checkpoint_offset, "
    "checkpoint_hash_start, checkpoint_hash, indexed_entries, malformed_lines, resume_json, "
    "indexed_at"
)
_ENTRY_COLUMNS = (
    "entry_key, entry_id, parent_id, entry_type, role, created_at, seq, line_number, "
    "searchable_text, token_estimate, content_hash"
)
_UPSERT_STATE_SQL = (
    f"INSERT INTO session_index_state ({_STATE_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (session_id) DO UPDATE SET session_file = excluded.session_file, "
    "header_hash = excluded.header_hash, file_size = excluded.file_size, "
    "file_mtime_ms = excluded.file_mtime_ms, checkpoint_offset = excluded.checkpoint_offset, "
    "checkpoint_hash_start = excluded.checkpoint_hash_start, "
    "checkpoint_hash = excluded.checkpoint_hash, indexed_entries = excluded.indexed_entries, "
    "malformed_lines = excluded.malformed_lines, resume_json = excluded.resume_json, "
    "indexed_at = excluded.indexed_at"
)


def canonical_session_file(path: str | os.PathLike[str]) -> str:
    """The key under which a session file is stored: its absolute path, symlinks resolved.

    Two spellings of one file (relative, via a symlinked directory) map to the same key, so a
    session is not rebuilt just because it was named differently.
    """
    return str(Path(path).expanduser().resolve())


def entry_key(session_id: str, entry_id: str) -> str:
    """`session_id + ":" + entry_id` (docs/reference.md §3.11 v2)."""
    return f"{session_id}:{entry_id}"


def _state_from_row(row: Sequence[Any] | None) -> IndexState | None:
    return IndexState(*row) if row is not None else None


def get_index_state(store: Store, session_id: str) -> IndexState | None:
    """The sync checkpoint of `session_id`, or `None` when it was never indexed."""
    row = (
        store.connection()
        .execute(
            f"SELECT {_STATE_COLUMNS} FROM session_index_state WHERE session_id = ?", (session_id,)
        )
        .fetchone()
    )
    return _state_from_row(row)


def index_state_for_file(store: Store, session_file: str) -> IndexState | None:
    """The sync checkpoint of the session stored for `session_file` (a canonical path)."""
    row = (
        store.connection()
        .execute(
            f"SELECT {', '.join('s.' + c.strip() for c in _STATE_COLUMNS.split(','))} "
            "FROM sessions AS x JOIN session_index_state AS s ON s.session_id = x.session_id "
            "WHERE x.session_file = ?",
            (session_file,),
        )
        .fetchone()
    )
    return _state_from_row(row)


def session_for_file(store: Store, path: str | os.PathLike[str]) -> str | None:
    """The session id indexed from the file at `path` (canonicalised), or `None`."""
    row = (
        store.connection()
        .execute(
            "SELECT session_id FROM sessions WHERE session_file = ?",
            (canonical_session_file(path),),
        )
        .fetchone()
    )
    return row[0] if row else None


def session_file(store: Store, session_id: str) -> str | None:
    """The canonical file path stored for `session_id`, or `None` when not indexed."""
    row = (
        store.connection()
        .execute("SELECT session_file FROM sessions WHERE session_id = ?", (session_id,))
        .fetchone()
    )
    return row[0] if row else None


def session_header(store: Store, session_id: str) -> dict[str, Any] | None:
    """The session header object as parsed from the file (`sessions.header_json`), or `None`."""
    row = (
        store.connection()
        .execute("SELECT header_json FROM sessions WHERE session_id = ?", (session_id,))
        .fetchone()
    )
    if row is None:
        return None
    value = json.loads(row[0])
    return value if isinstance(value, dict) else None


def list_sessions(store: Store) -> list[SessionSummary]:
    """Every indexed session as a dict (`SessionSummary` keys), most recently indexed first."""
    rows = (
        store.connection()
        .execute(
            "SELECT s.session_id, s.session_file, s.project_path, s.indexed_at, "
            "COALESCE(st.indexed_entries, 0) FROM sessions AS s "
            "LEFT JOIN session_index_state AS st ON st.session_id = s.session_id "
            "ORDER BY s.indexed_at DESC, s.session_id"
        )
        .fetchall()
    )
    return [
        SessionSummary(
            session_id=row[0],
            session_file=row[1],
            project_path=row[2],
            indexed_at=row[3],
            entry_count=row[4],
        )
        for row in rows
    ]


def counts(store: Store) -> dict[str, int]:
    """`{"sessions": indexed sessions, "entries": indexed entries}` over the whole store."""
    conn = store.connection()
    sessions = conn.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    entries = conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    return {"sessions": int(sessions), "entries": int(entries)}


def entry_count(store: Store, session_id: str) -> int:
    """Number of rows in `entries` for `session_id` (0 when not indexed)."""
    row = (
        store.connection()
        .execute("SELECT COUNT(*) FROM entries WHERE session_id = ?", (session_id,))
        .fetchone()
    )
    return int(row[0])


def load_entries(store: Store, session_id: str) -> list[IndexedEntry]:
    """All indexed entries of `session_id` in file order (`seq`); empty when not indexed."""
    rows = (
        store.connection()
        .execute(
            f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq, entry_id",
            (session_id,),
        )
        .fetchall()
    )
    make = IndexedEntry._make
    return [make(row) for row in rows]


def existing_entries(
    store: Store, session_id: str, entry_ids: Iterable[str]
) -> dict[str, tuple[str, int]]:
    """`{entry_id: (content_hash, seq)}` for those of `entry_ids` already indexed."""
    ids = list(dict.fromkeys(entry_ids))
    found: dict[str, tuple[str, int]] = {}
    conn = store.connection()
    for chunk in chunked(ids):
        marks = placeholders(len(chunk))
        for entry_id, content_hash, seq in conn.execute(
            f"SELECT entry_id, content_hash, seq FROM entries "
            f"WHERE session_id = ? AND entry_id IN ({marks})",
            (session_id, *chunk),
        ):
            found[entry_id] = (content_hash, seq)
    return found


def last_entry_id(store: Store, session_id: str) -> str | None:
    """The id of the session's last indexed entry in file order (Pi's default leaf, §P6),
    or None when it has none."""
    row = (
        store.connection()
        .execute(
            "SELECT entry_id FROM entries WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        )
        .fetchone()
    )
    return row[0] if row else None


def entry_link(store: Store, session_id: str, entry_id: str) -> tuple[str | None, str | None]:
    """`(parent_id, timestamp)` of an indexed entry (the entry's `parentId` and `timestamp`
    as read), or `(None, None)` when it is not indexed."""
    row = (
        store.connection()
        .execute(
            "SELECT parent_id, created_at FROM entries WHERE session_id = ? AND entry_id = ?",
            (session_id, entry_id),
        )
        .fetchone()
    )
    return (row[0], row[1]) if row else (None, None)


def branch_entry_ids(store: Store, session_id: str, leaf_id: str | None = None) -> list[str]:
    """Entry ids on the path from the root to `leaf_id`, root first.

    The default leaf is the entry with the highest `seq` (the last entry in file order, as Pi's
    default leaf; docs/reference.md §P6). The walk follows `parent_id` links and stops at a root,
    at a parent that is not indexed (an orphan), or when an id repeats (a cycle), so it always
    ends. Returns `[]` when the session or `leaf_id` is not indexed.
    """
    rows = (
        store.connection()
        .execute("SELECT entry_id, parent_id, seq FROM entries WHERE session_id = ?", (session_id,))
        .fetchall()
    )
    if not rows:
        return []
    parents = {entry_id: parent_id for entry_id, parent_id, _seq in rows}
    if leaf_id is None:
        leaf_id = max(rows, key=lambda row: row[2])[0]
    elif leaf_id not in parents:
        return []
    path: list[str] = []
    seen: set[str] = set()
    current: str | None = leaf_id
    while current is not None and current in parents and current not in seen:
        seen.add(current)
        path.append(current)
        current = parents[current]
    path.reverse()
    return path


_ENTRY_INSERT_COLUMNS = 13  # IndexedEntry's 11 fields + session_id + indexed_at


_UPSERT_ENTRY_CLAUSE = (
    " ON CONFLICT (entry_key) DO UPDATE SET parent_id = excluded.parent_id, "
    "entry_type = excluded.entry_type, role = excluded.role, created_at = excluded.created_at, "
    "seq = excluded.seq, line_number = excluded.line_number, "
    "searchable_text = excluded.searchable_text, token_estimate = excluded.token_estimate, "
    "content_hash = excluded.content_hash, indexed_at = excluded.indexed_at"
)


@lru_cache(maxsize=16)
def _insert_sql(rows: int, upsert: bool) -> str:
    values = ", ".join([f"({placeholders(_ENTRY_INSERT_COLUMNS)})"] * rows)
    return (
        "INSERT INTO entries (entry_key, entry_id, parent_id, entry_type, role, created_at, seq, "
        "line_number, searchable_text, token_estimate, content_hash, session_id, indexed_at) "
        f"VALUES {values}" + (_UPSERT_ENTRY_CLAUSE if upsert else "")
    )


def _rows_per_statement(conn: sqlite3.Connection) -> int:
    limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(INSERT_BATCH_ROWS, limit // _ENTRY_INSERT_COLUMNS))


def _insert_entries(
    conn: sqlite3.Connection,
    session_id: str,
    entries: Iterable[IndexedEntry],
    indexed_at: str,
    *,
    upsert: bool = False,
) -> int:
    """Insert rows with multi-row `INSERT ... VALUES (...), (...)` statements.

    With `upsert`, a row whose `entry_key` exists (earlier in `entries` or already stored)
    replaces it via `ON CONFLICT DO UPDATE` (which fires the FTS update trigger; REPLACE would
    not). Returns the number of rows processed (updates included).

    Why not `executemany`: every statement that writes through the FTS5 trigger makes FTS5
    flush its pending index data (FTS5 syncs at each statement savepoint), so one statement per
    row is about 5x slower than a few thousand rows per statement (measured on this machine:
    8 vs 28 MB/s of indexed text). Parameters are still all bound.
    """
    per_statement = _rows_per_statement(conn)
    tail = (session_id, indexed_at)
    count = 0
    iterator = iter(entries)
    while batch := list(islice(iterator, per_statement)):
        params = [value for row in batch for value in (*row, *tail)]
        conn.execute(_insert_sql(len(batch), upsert), params)
        _insert_subwords(conn, batch, upsert=upsert)
        count += len(batch)
    return count


SUBWORD_ENTRY_TYPES = frozenset({"message", "custom_message"})
SUBWORD_SCAN_CHARS = 1500
"""Sub-words are taken from the prose of user and assistant messages: their first this many
characters, up to the first tool call (`name {json}`); tool results and call arguments are
not scanned. The regular-expression scan is the costly part of indexing sub-words
(bench/session_index.py: scanning whole texts cost about a third of the indexing speed)."""


@lru_cache(maxsize=16)
def _subwords_sql(rows: int, replace_rows: bool) -> str:
    values = ", ".join(["(?, ?)"] * rows)
    verb = "INSERT OR REPLACE" if replace_rows else "INSERT"
    return (
        f"{verb} INTO entries_subwords (rowid, words) SELECT e.rowid, v.column2 "
        f"FROM (VALUES {values}) AS v CROSS JOIN entries AS e ON e.entry_key = v.column1"
    )


def _insert_subwords(
    conn: sqlite3.Connection, batch: Sequence[IndexedEntry], *, upsert: bool
) -> None:
    """Write the `entries_subwords` rows (migration 9) of the history entries in `batch`, just
    inserted or upserted (`sessions.subwords.subword_text` of their prose,
    `SUBWORD_SCAN_CHARS`; entries without sub-words, and tool results, get no row). With `upsert`, a row of an entry whose
    text did not change is replaced (its trigger did not drop it)."""
    params: list[str] = []
    for row in batch:
        text = row.searchable_text
        if row.entry_type in SUBWORD_ENTRY_TYPES and text and row.role != "toolResult":
            call = text.find(' {"', 0, SUBWORD_SCAN_CHARS)  # prose ends at the first tool call
            words = subword_text(text[: call if call >= 0 else SUBWORD_SCAN_CHARS])
            if words:
                params += (row.entry_key, words)
    if params:
        conn.execute(_subwords_sql(len(params) // 2, upsert), params)


def _state_params(state: IndexState, indexed_at: str) -> tuple[Any, ...]:
    return (
        state.session_id,
        state.session_file,
        state.header_hash,
        state.file_size,
        state.file_mtime_ms,
        state.checkpoint_offset,
        state.checkpoint_hash_start,
        state.checkpoint_hash,
        state.indexed_entries,
        state.malformed_lines,
        state.resume_json,
        indexed_at,
    )


def delete_session(store: Store, session_id: str) -> bool:
    """Remove a session, its entries (and their FTS rows) and its index state.

    Returns whether the session existed.
    """
    with store.write() as conn:
        conn.execute("DELETE FROM entries WHERE session_id = ?", (session_id,))
        cursor = conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
        return cursor.rowcount > 0


def replace_session(
    store: Store,
    *,
    session_id: str,
    session_file: str,
    project_path: str | None,
    header_json: str,
    entries: Iterable[IndexedEntry],
    state: IndexState | Callable[[], IndexState],
) -> int:
    """Replace everything indexed for `session_id` with `entries`, in one write transaction.

    Any other session stored for the same `session_file` is removed first (the file now holds
    this session). `entries` may repeat an `entry_id`: the last occurrence wins
    (docs/reference.md §P8.6). `entries` is consumed inside the transaction, so it may be a
    generator that streams a file. `state` may be a callable, called once `entries` is
    exhausted; its `indexed_entries` is replaced by the number of distinct rows stored.
    Returns that number. On any exception (from `entries`, `state` or SQLite) the transaction
    rolls back and the previous index stays as it was.
    """
    now = utc_now_iso()
    with store.write() as conn:
        for (other,) in conn.execute(
            "SELECT session_id FROM sessions WHERE session_file = ? AND session_id <> ?",
            (session_file, session_id),
        ).fetchall():
            conn.execute("DELETE FROM entries WHERE session_id = ?", (other,))
            conn.execute("DELETE FROM sessions WHERE session_id = ?", (other,))
        conn.execute(
            "INSERT INTO sessions (session_id, session_file, project_path, header_json, "
            "indexed_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "session_file = excluded.session_file, project_path = excluded.project_path, "
            "header_json = excluded.header_json, indexed_at = excluded.indexed_at",
            (session_id, session_file, project_path, header_json, now),
        )
        old_ids = {
            row[0]
            for row in conn.execute(
                "SELECT entry_id FROM entries WHERE session_id = ?", (session_id,)
            )
        }
        seen: set[str] = set()

        def tracked() -> Iterator[IndexedEntry]:
            for row in entries:
                seen.add(row.entry_id)
                yield row

        # Upsert over the old rows instead of deleting them first: an unchanged entry then
        # costs no FTS work (see the update trigger in store.migrations).
        _insert_entries(conn, session_id, tracked(), now, upsert=True)
        stale = sorted(old_ids - seen)
        for chunk in chunked(stale):
            marks = placeholders(len(chunk))
            conn.execute(
                f"DELETE FROM entries WHERE session_id = ? AND entry_id IN ({marks})",
                (session_id, *chunk),
            )
        final = state() if callable(state) else state
        count = len(seen)
        conn.execute(_UPSERT_STATE_SQL, _state_params(replace(final, indexed_entries=count), now))
    return count


def append_entries(
    store: Store,
    session_id: str,
    entries: Iterable[IndexedEntry],
    state: IndexState,
    *,
    reposition: Iterable[tuple[str, int, int]] = (),
) -> int:
    """Insert new `entries` of an indexed session and store its new `state`, in one write.

    `reposition` holds `(entry_id, seq, line_number)` for entries already indexed whose identical
    line reappeared later in the file (last-wins moves them). Returns the rows inserted.

    Raises:
        sqlite3.IntegrityError: an entry id is already indexed, or the session is not; nothing
            is changed.
    """
    now = utc_now_iso()
    with store.write() as conn:
        inserted = _insert_entries(conn, session_id, entries, now)
        moves = [(seq, line, session_id, entry_id) for entry_id, seq, line in reposition]
        if moves:
            conn.executemany(
                "UPDATE entries SET seq = ?, line_number = ? WHERE session_id = ? AND entry_id = ?",
                moves,
            )
        conn.execute("UPDATE sessions SET indexed_at = ? WHERE session_id = ?", (now, session_id))
        conn.execute(_UPSERT_STATE_SQL, _state_params(state, now))
    return inserted


def update_index_state(store: Store, state: IndexState) -> None:
    """Store `state` alone (e.g. a sync that read no new entries)."""
    with store.write() as conn:
        conn.execute(_UPSERT_STATE_SQL, _state_params(state, utc_now_iso()))


def update_resume_json(store: Store, session_id: str, resume_json: str) -> None:
    """Replace the stored `resume_json` of `session_id` alone (other columns, `indexed_at`
    included, stay as they are); nothing happens when the session is not indexed."""
    with store.write() as conn:
        conn.execute(
            "UPDATE session_index_state SET resume_json = ? WHERE session_id = ?",
            (resume_json, session_id),
        )
