"""Repository for memory and pins: `context_mutations`, `memory_items`, `pins` (migration 11,
`store.memory_schema`; docs/memory.md "Storage").

The session files are the truth; these tables are a projection of them:

* `record_mutations` stores the memory and pin custom entries a sync read (a rebuild replaces
  the session's rows, an incremental sync adds the new ones; an entry id met again replaces its
  row, last wins as in the session reader). An invalid entry is stored with its `error`
  (`field: problem`) and no payload: skipped by the replay, counted by `counts`.
* `project` replays every stored mutation of every session (`memory.replay`) and replaces
  `memory_items` and `pins` whole, and marks the rejected mutations with their reason. Project
  memory spans sessions, so one session's new entry can change another's items: the replay is
  global. It costs O(mutations) and runs only when a sync met mutation entries.

All functions take the `Store` first. Writes open `with store.write():` themselves (inside a
sync's write transaction they become a savepoint). Reads work from any thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ds4_core.memory.events import MemoryItem, Mutation, MutationError, kind_of, parse_mutation
from ds4_core.memory.replay import CurrentItem, Replay, replay
from ds4_core.store.database import Store

_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode


@dataclass(frozen=True, slots=True)
class MutationCounts:
    """How many mutation entries are stored, by fate.

    Attributes:
        applied: valid mutations the replay applied.
        rejected: valid mutations the replay rejected (`rejected_reason`).
        invalid: entries that are not valid mutations (`error`).
    """

    applied: int
    rejected: int
    invalid: int


def _row(session_id: str, entry: Any) -> tuple[Any, ...] | None:
    """The `context_mutations` row of a custom entry, or None when it is not ours."""
    kind = kind_of(entry.data.get("customType"))
    if kind is None:
        return None
    key = f"{session_id}:{entry.entry_id}"
    data = entry.data.get("data")
    try:
        mutation = parse_mutation(
            kind, data, session_id=session_id, entry_id=entry.entry_id, entry_order=entry.seq
        )
    except MutationError as exc:
        return (key, session_id, entry.entry_id, entry.seq, kind, None, None, None, str(exc))
    return (
        key,
        session_id,
        entry.entry_id,
        entry.seq,
        kind,
        mutation.mutation_id,
        mutation.created_at_ms,
        _compact(data),
        None,
    )


def record_mutations(
    store: Store, session_id: str, entries: Iterable[Any], *, whole: bool
) -> tuple[int, int]:
    """Store the memory and pin mutations among a session's custom `entries`
    (`sessions.reader.SessionEntry`); with `whole`, they replace the session's earlier rows.

    Returns `(changed, invalid)`: rows written plus rows a `whole` replacement removed (the
    projection is stale when it is non-zero: call `project`), and how many written rows are
    invalid entries. Nothing is replayed here.
    """
    rows = [row for row in (_row(session_id, e) for e in entries) if row is not None]
    with store.write() as conn:
        removed = 0
        if whole:
            removed = conn.execute(
                "DELETE FROM context_mutations WHERE session_id = ?", (session_id,)
            ).rowcount
        conn.executemany(
            "INSERT INTO context_mutations (mutation_key, session_id, entry_id, entry_order, "
            "kind, mutation_id, created_at_ms, payload_json, error) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (mutation_key) DO UPDATE SET "
            "entry_order = excluded.entry_order, kind = excluded.kind, "
            "mutation_id = excluded.mutation_id, created_at_ms = excluded.created_at_ms, "
            "payload_json = excluded.payload_json, error = excluded.error, "
            "rejected_reason = NULL",
            rows,
        )
    invalid = sum(1 for row in rows if row[-1] is not None)
    return len(rows) + removed, invalid


def load_mutations(store: Store) -> list[Mutation]:
    """Every valid stored mutation (parsed again from its payload), in no particular order.

    Raises:
        MutationError: a stored payload no longer parses (a database written by another
            version); rebuilding the index (`ds4 rebuild`) rewrites it.
    """
    rows = (
        store.connection()
        .execute(
            "SELECT kind, payload_json, session_id, entry_id, entry_order FROM context_mutations "
            "WHERE payload_json IS NOT NULL"
        )
        .fetchall()
    )
    return [
        parse_mutation(
            kind, json.loads(payload), session_id=session, entry_id=entry, entry_order=order
        )
        for kind, payload, session, entry, order in rows
    ]


def _item_row(position: int, current: CurrentItem) -> tuple[Any, ...]:
    """The `memory_items` or `pins` row of an item (the columns of `memory_schema`, in order)."""
    item = current.item
    own: tuple[Any, ...]
    if isinstance(item, MemoryItem):
        own = (current.key, item.claim, _compact(list(item.source_entry_ids)))
    else:
        own = (item.branch_leaf_id, item.content, item.source_entry_id, item.source_file)
    return (
        item.item_id,
        item.scope,
        current.origin_session_id,
        item.project_path,
        item.classification,
        *own,
        current.status,
        item.created_at_ms,
        current.updated_at_ms,
        current.superseded_by,
        current.status_reason,
        current.origin_mutation_key,
        _compact(list(current.mutation_keys)),
        position,
    )


def project(store: Store) -> tuple[Replay, Replay]:
    """Replay all stored mutations and replace `memory_items` and `pins` with the result;
    returns the `(memory, pins)` replays.

    Raises:
        MutationError: see `load_mutations`.
    """
    _count_projection()  # before and after: a reader of this thread reads again either way
    try:
        return _project(store)
    finally:
        _count_projection()


def _project(store: Store) -> tuple[Replay, Replay]:
    with store.write() as conn:
        mutations = load_mutations(store)
        memory = replay(m for m in mutations if m.kind == "memory")
        pins = replay(m for m in mutations if m.kind == "pin")
        conn.execute("DELETE FROM memory_items")
        conn.execute("DELETE FROM pins")
        conn.executemany(
            f"INSERT INTO memory_items VALUES ({', '.join('?' * 16)})",
            [_item_row(i, item) for i, item in enumerate(memory.items.values())],
        )
        conn.executemany(
            f"INSERT INTO pins VALUES ({', '.join('?' * 17)})",
            [_item_row(i, item) for i, item in enumerate(pins.items.values())],
        )
        conn.execute("UPDATE context_mutations SET rejected_reason = NULL")
        conn.executemany(
            "UPDATE context_mutations SET rejected_reason = ? WHERE mutation_key = ?",
            [
                (rejection.reason, rejection.mutation.mutation_key)
                for rejection in (*memory.rejected, *pins.rejected)
            ],
        )
    return memory, pins


def counts(store: Store) -> MutationCounts:
    """The stored mutation entries by fate (`MutationCounts`)."""
    applied, rejected, invalid = (
        store.connection()
        .execute(
            "SELECT COALESCE(SUM(error IS NULL AND rejected_reason IS NULL), 0), "
            "COALESCE(SUM(rejected_reason IS NOT NULL), 0), COALESCE(SUM(error IS NOT NULL), 0) "
            "FROM context_mutations"
        )
        .fetchone()
    )
    return MutationCounts(applied, rejected, invalid)


_COPY_SESSIONS = (
    "CASE WHEN scope = 'project' OR json_array_length(mutation_keys_json) < 2 THEN NULL ELSE "
    "(SELECT json_group_array(c.session_id) FROM json_each(mutation_keys_json) AS j "
    "JOIN context_mutations AS c ON c.mutation_key = j.value "
    "JOIN context_mutations AS o ON o.mutation_key = origin_mutation_key "
    "WHERE c.mutation_id = o.mutation_id AND c.session_id != o.session_id) END"
)
"""SQL of an item row's `copy_sessions_json`: the other sessions holding a copy of the
creating mutation (`replay.CurrentItem.copy_sessions`: the replay adds the copies' keys to
`mutation_keys_json`), as a JSON array, or NULL (a project item, or no copy)."""

_MEMORY_COLUMNS = (
    "memory_id, scope, session_id, project_path, memory_key, classification, claim, status, "
    "created_at_ms, updated_at_ms, superseded_by, status_reason, origin_mutation_key, "
    f"source_entry_ids_json, mutation_keys_json, {_COPY_SESSIONS} AS copy_sessions_json"
)
_PIN_COLUMNS = (
    "pin_id, scope, session_id, project_path, branch_leaf_id, classification, content, "
    "source_entry_id, source_file, status, created_at_ms, updated_at_ms, superseded_by, "
    f"status_reason, origin_mutation_key, mutation_keys_json, "
    f"{_COPY_SESSIONS} AS copy_sessions_json"
)


def _rows(store: Store, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cursor = store.connection().execute(sql, params)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def list_memory(store: Store, *, include_inactive: bool = False) -> list[dict[str, Any]]:
    """The memory items (active ones only unless `include_inactive`), in creation order, as
    column -> value dicts (`*_json` columns are JSON arrays as text; `copy_sessions_json`
    may be None, see `_COPY_SESSIONS`)."""
    where = "" if include_inactive else "WHERE status = 'active' "
    return _rows(store, f"SELECT {_MEMORY_COLUMNS} FROM memory_items {where}ORDER BY position", ())


def list_pins(store: Store, *, include_inactive: bool = False) -> list[dict[str, Any]]:
    """The pins (active ones only unless `include_inactive`), in creation order, as
    column -> value dicts."""
    where = "" if include_inactive else "WHERE status = 'active' "
    return _rows(store, f"SELECT {_PIN_COLUMNS} FROM pins {where}ORDER BY position", ())


_projections = 0
"""How many times this process has begun or ended replacing the projection (`project`)."""
_projections_lock = threading.Lock()


def _count_projection() -> None:
    global _projections
    with _projections_lock:
        _projections += 1


def active_for_planning(store: Store) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The active pins and memory items as tuples, for planning, in creation order:
    pins `(pin_id, scope, session_id, project_path, branch_leaf_id, classification, content,
    source_file, created_at_ms, updated_at_ms, copy_sessions_json)`; memory `(memory_id, scope,
    session_id, project_path, memory_key, classification, claim, created_at_ms,
    updated_at_ms, copy_sessions_json)` (`copy_sessions_json`: see `_COPY_SESSIONS`).

    Read again only when the projection may have changed: each thread keeps the rows it read
    with the stamp (`PRAGMA data_version` of its connection, which moves when another
    connection commits; the count of this process's `project` calls, for its own writes).
    The same lists are returned while the stamp holds (callers must not change them)."""
    connection = store.connection()
    (version,) = connection.execute("PRAGMA data_version").fetchone()
    stamp = (version, _projections)
    cache = store.thread_cache
    kept = getattr(cache, "memory_planning", None)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    pins = connection.execute(
        "SELECT pin_id, scope, session_id, project_path, branch_leaf_id, classification, "
        f"content, source_file, created_at_ms, updated_at_ms, {_COPY_SESSIONS} FROM pins "
        "WHERE status = 'active' ORDER BY position"
    ).fetchall()
    memory = connection.execute(
        "SELECT memory_id, scope, session_id, project_path, memory_key, classification, claim, "
        f"created_at_ms, updated_at_ms, {_COPY_SESSIONS} FROM memory_items "
        "WHERE status = 'active' ORDER BY position"
    ).fetchall()
    cache.memory_planning = (stamp, (pins, memory))
    return pins, memory


MAX_PROBLEMS = 100
"""Most rejected or invalid mutation entries `list_problems` returns (the newest)."""


def list_problems(store: Store, limit: int = MAX_PROBLEMS) -> list[dict[str, Any]]:
    """The stored mutation entries the replay did not apply, newest first (at most `limit`):
    `{mutationKey, sessionId, entryId, kind, problem}` with `problem` the rejection reason or
    the validation error (`field: problem`)."""
    rows = (
        store.connection()
        .execute(
            "SELECT mutation_key, session_id, entry_id, kind, COALESCE(error, rejected_reason) "
            "FROM context_mutations WHERE error IS NOT NULL OR rejected_reason IS NOT NULL "
            "ORDER BY created_at_ms DESC, session_id, entry_order DESC LIMIT ?",
            (limit,),
        )
        .fetchall()
    )
    return [
        {"mutationKey": key, "sessionId": session, "entryId": entry, "kind": kind, "problem": text}
        for key, session, entry, kind, text in rows
    ]
