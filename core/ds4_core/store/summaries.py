"""Repository for the summary graph: `summaries`, `summary_sources`, `summary_edges` (migration 7).

One module: it is the one repository of the summary graph's three tables, and the graph rules below
are enforced by its writers and assumed by its readers; no other module writes those tables.

Rules (docs/compaction.md "Graph rules", "Storage"; docs/reference.md §3.11 v5/v6 and §3.13):

* A node is keyed by `(session_id, summary_id)`: every lookup names the session. A session
  forked by Pi copies the compaction entries of its path, summary ids included; importing them
  gives the fork its own rows, so each session's graph is complete and independent, and a
  node's children are always nodes of the same session.
* A node is immutable once stored: its content, kind, level, sources and children never change.
  Only its lifecycle (`prepared` -> `committed` | `failed`, `failed` -> `committed`), its
  `failure_reason` and the Pi compaction entry id that carries it are updated.
* The unit of change is the *operation*: every node created by one compaction shares the
  `operation_id` (the summary id of the operation's root) and is committed or failed together
  (within its session).
* Children are stored before their parents (a child must already exist in the same session or
  come earlier in the same batch), so the graph is acyclic by construction, and a parent's
  `graph_level` is above every child's (checked on insert and on import). A batch
  (`insert_prepared`, `import_committed`) belongs to one session.
* Every call costs O(its batch) (primary-key and index lookups only), never O(graph), except
  `session_nodes`, `export_graph`, `counts` and `fail_leftover_prepared`, which read what they
  return or scan once at startup; `transitive_sources` costs O(the nodes under the root) and
  `sessions_with_pending` O(the sessions holding the id).

All functions take the `Store` first. Writes open `with store.write():` themselves (a caller's
enclosing write turns them into a savepoint), so an exception inside leaves nothing behind.
Reads work from any thread.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import fields
from typing import Any, cast

from ds4_core.compaction.nodes import (
    LIFECYCLES,
    SUMMARY_KINDS,
    Lifecycle,
    SummaryKind,
    SummaryNode,
    ValidationStatus,
)
from ds4_core.store.database import Store
from ds4_core.store.sql import chunked, placeholders

VALIDATION_STATUSES: tuple[str, ...] = ("valid", "warning", "invalid")
"""Allowed `validation_status` values (the CHECK of migration 7)."""

DEFAULT_LEFTOVER_REASON = "left prepared when the server stopped"
"""`failure_reason` of batches found `prepared` at startup (docs/compaction.md "The flow" 6)."""

_COLUMNS = (
    "summary_id",
    "session_id",
    "summary_kind",
    "content",
    "source_hash",
    "graph_level",
    "created_at",
    "validation_status",
    "validation_issue_codes_json",
    "provider",
    "model",
    "first_kept_entry_id",
    "tokens_before",
    "compaction_reason",
    "lifecycle_status",
    "pi_compaction_entry_id",
    "operation_id",
    "metadata_json",
)
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM summaries"
_INSERT = f"INSERT INTO summaries ({', '.join(_COLUMNS)}) VALUES ({placeholders(len(_COLUMNS))})"


def _encode_json(node: SummaryNode, value: Any, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"summary node {node.summary_id!r}: its {what} is not JSON-ready ({exc})"
        ) from None


def _row_params(node: SummaryNode, lifecycle: str) -> tuple[Any, ...]:
    """The `summaries` row of `node` (in `_COLUMNS` order) with `lifecycle`."""
    return (
        node.summary_id,
        node.session_id,
        node.kind,
        node.content,
        node.source_hash,
        node.graph_level,
        node.created_at,
        node.validation_status,
        _encode_json(node, list(node.validation_issue_codes), "validation_issue_codes"),
        node.provider,
        node.model,
        node.first_kept_entry_id,
        node.tokens_before,
        node.reason,
        lifecycle,
        node.pi_entry_id,
        node.operation_id or node.summary_id,
        _encode_json(node, node.metadata, "metadata"),
    )


_SQLITE_MAX_INT = 2**63 - 1
"""Largest INTEGER SQLite stores (sqlite.org/datatype3.html: 8-byte signed)."""


def _check_node(node: SummaryNode) -> None:
    """Raise ValueError when `node` would violate a CHECK of migration 7 (clearer than
    SQLite's "CHECK constraint failed")."""
    problems: list[str] = []
    if not isinstance(node.summary_id, str) or not node.summary_id:
        problems.append("an empty summary_id")
    if not isinstance(node.session_id, str) or not node.session_id:
        problems.append("an empty session_id")
    if node.kind not in SUMMARY_KINDS:
        problems.append(f"kind {node.kind!r} (expected one of {', '.join(SUMMARY_KINDS)})")
    if isinstance(node.graph_level, bool) or not isinstance(node.graph_level, int):
        problems.append(f"graph_level {node.graph_level!r} (expected an integer >= 0)")
    elif not 0 <= node.graph_level <= _SQLITE_MAX_INT:
        problems.append(f"graph_level {node.graph_level} (expected 0..2**63-1)")
    tokens = node.tokens_before
    if tokens is not None and (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or not -_SQLITE_MAX_INT - 1 <= tokens <= _SQLITE_MAX_INT
    ):
        problems.append(f"tokens_before {tokens!r} (expected a 64-bit integer)")
    if node.validation_status not in VALIDATION_STATUSES:
        problems.append(f"validation_status {node.validation_status!r}")
    if node.summary_id in node.child_ids:
        problems.append("itself as a child")
    if node.tokens_before is not None and (
        isinstance(node.tokens_before, bool) or not isinstance(node.tokens_before, int)
    ):
        problems.append(f"tokens_before {node.tokens_before!r} (expected an integer or None)")
    if problems:
        raise ValueError(f"cannot store summary node {node.summary_id!r}: " + "; ".join(problems))


def _one_session(nodes: Sequence[SummaryNode], what: str) -> str:
    """The session every node of `nodes` belongs to; ValueError when they differ."""
    sessions = list(dict.fromkeys(node.session_id for node in nodes))
    if len(sessions) != 1:
        raise ValueError(
            f"{what} must belong to one session; got nodes of sessions "
            + ", ".join(repr(s) for s in sessions)
        )
    return sessions[0]


def _stored_ids(conn: sqlite3.Connection, session_id: str, ids: Iterable[str]) -> set[str]:
    """The ids among `ids` stored for `session_id`."""
    found: set[str] = set()
    for chunk in chunked(dict.fromkeys(ids)):
        rows = conn.execute(
            "SELECT summary_id FROM summaries WHERE session_id = ? AND summary_id IN "
            f"({placeholders(len(chunk))})",
            [session_id, *chunk],
        ).fetchall()
        found.update(row[0] for row in rows)
    return found


def _stored_levels(conn: sqlite3.Connection, session_id: str, ids: Iterable[str]) -> dict[str, int]:
    """`{summary_id: graph_level}` of the ids among `ids` stored for `session_id`."""
    found: dict[str, int] = {}
    for chunk in chunked(dict.fromkeys(ids)):
        rows = conn.execute(
            "SELECT summary_id, graph_level FROM summaries WHERE session_id = ? AND summary_id "
            f"IN ({placeholders(len(chunk))})",
            [session_id, *chunk],
        ).fetchall()
        found.update((row[0], int(row[1])) for row in rows)
    return found


def _level_violations(
    nodes: Sequence[SummaryNode], stored: dict[str, int], skip: set[str] | None = None
) -> list[str]:
    """`id (level L, child C at level K)` for each node of `nodes` (not in `skip`) whose
    `graph_level` is not above a child's level. A child's level is the stored one, else that
    of its node earlier in `nodes`; children found nowhere are `_missing_children`' concern."""
    levels = dict(stored)
    bad: list[str] = []
    for node in nodes:
        if skip is None or node.summary_id not in skip:
            for child in node.child_ids:
                level = levels.get(child)
                if level is not None and node.graph_level <= level:
                    bad.append(
                        f"{node.summary_id} (level {node.graph_level}, child {child} at "
                        f"level {level})"
                    )
                    break
        levels.setdefault(node.summary_id, node.graph_level)
    return bad


def _missing_children(
    nodes: Sequence[SummaryNode], stored: set[str], skip: set[str] | None = None
) -> list[str]:
    """`child (of parent)` descriptions of children that are neither stored (in the batch's
    session) nor earlier in `nodes`; nodes whose id is in `skip` are not checked (their edges
    are not written)."""
    available = set(stored)
    missing: list[str] = []
    for node in nodes:
        if skip is None or node.summary_id not in skip:
            missing.extend(
                f"{child} (child of {node.summary_id})"
                for child in node.child_ids
                if child not in available
            )
        available.add(node.summary_id)
    return missing


def _write_node(conn: sqlite3.Connection, node: SummaryNode, lifecycle: str) -> None:
    conn.execute(_INSERT, _row_params(node, lifecycle))
    if node.source_entry_ids:
        conn.executemany(
            "INSERT INTO summary_sources (session_id, summary_id, position, entry_id) "
            "VALUES (?, ?, ?, ?)",
            [
                (node.session_id, node.summary_id, i, entry_id)
                for i, entry_id in enumerate(node.source_entry_ids)
            ],
        )
    if node.child_ids:
        conn.executemany(
            "INSERT INTO summary_edges (session_id, parent_id, child_order, child_id) "
            "VALUES (?, ?, ?, ?)",
            [
                (node.session_id, node.summary_id, i, child)
                for i, child in enumerate(node.child_ids)
            ],
        )


def insert_prepared(
    store: Store,
    nodes: Sequence[SummaryNode],
    *,
    after_insert: Callable[[SummaryNode], None] | None = None,
) -> None:
    """Store one compaction operation's nodes as `prepared`, in ONE write transaction.

    Each node's row (lifecycle forced to `prepared`, whatever `node.lifecycle` says; an empty
    `operation_id` becomes the node's own id), its sources (in order) and its edges (in child
    order) are written in list order, so children must already be stored in the same session or
    come earlier in `nodes`. All nodes belong to one session (`node.session_id`). `after_insert(node)` runs after each node's rows are written (a failure-injection
    hook for tests): if it raises, the whole batch is rolled back and the exception propagates.

    Raises:
        ValueError: before anything is written, when the nodes belong to several sessions, a
            node id is repeated in the batch or already stored for the session, a child is
            neither stored for the session nor earlier in the batch, a node's `graph_level` is
            not above each child's, a field violates the schema (empty id or session, kind,
            level, validation status, self-edge), or the metadata is not JSON-ready. The
            message names the ids.
        sqlite3.IntegrityError: e.g. a `pi_entry_id` already used by another node of the
            session (prepared nodes normally have none).
    """
    if not nodes:
        return
    session_id = _one_session(nodes, "a prepared batch")
    seen: set[str] = set()
    repeated: list[str] = []
    for node in nodes:
        _check_node(node)
        if node.summary_id in seen:
            repeated.append(node.summary_id)
        seen.add(node.summary_id)
    if repeated:
        raise ValueError(f"summary ids repeated in one batch: {', '.join(repeated)}")
    for node in nodes:
        _row_params(node, "prepared")  # metadata that is not JSON-ready fails before writing
    with store.write() as conn:
        batch_ids = [node.summary_id for node in nodes]
        already = _stored_ids(conn, session_id, batch_ids)
        if already:
            raise ValueError(
                f"summary ids already stored for session {session_id!r} (node ids are "
                "immutable; make new ids): " + ", ".join(i for i in batch_ids if i in already)
            )
        children = {c for node in nodes for c in node.child_ids} - seen
        child_levels = _stored_levels(conn, session_id, children)
        missing = _missing_children(nodes, set(child_levels))
        if missing:
            raise ValueError(
                "summary children must be stored (in the same session) before their parents; "
                "missing: " + ", ".join(missing)
            )
        too_low = _level_violations(nodes, child_levels)
        if too_low:
            raise ValueError(
                "a summary node's graph_level must be above each child's: " + ", ".join(too_low)
            )
        for node in nodes:
            _write_node(conn, node, "prepared")
            if after_insert is not None:
                after_insert(node)


def _operation_rows(
    conn: sqlite3.Connection, session_id: str, summary_id: str
) -> tuple[str, list[tuple[str, str]]]:
    """(operation id, [(summary_id, lifecycle)] in insertion order) of the operation holding
    `summary_id` in `session_id`; ("", []) when the session has no such node."""
    row = conn.execute(
        "SELECT operation_id FROM summaries WHERE session_id = ? AND summary_id = ?",
        (session_id, summary_id),
    ).fetchone()
    if row is None:
        return "", []
    operation_id = row[0]
    rows = conn.execute(
        "SELECT summary_id, lifecycle_status FROM summaries "
        "WHERE session_id = ? AND operation_id = ? ORDER BY rowid",
        (session_id, operation_id),
    ).fetchall()
    return operation_id, [(r[0], r[1]) for r in rows]


def _pi_entry_holder(conn: sqlite3.Connection, session_id: str, pi_entry_id: str) -> str | None:
    row = conn.execute(
        "SELECT summary_id FROM summaries WHERE session_id = ? AND pi_compaction_entry_id = ?",
        (session_id, pi_entry_id),
    ).fetchone()
    return None if row is None else str(row[0])


def mark_committed(
    store: Store, session_id: str, summary_id: str, pi_entry_id: str | None = None
) -> list[str]:
    """Mark every node of the operation holding `summary_id` in `session_id` `committed`.

    `prepared` and `failed` nodes become `committed` (their `failure_reason` is cleared);
    committed ones stay. When `pi_entry_id` is given it is recorded on the operation's root
    (the node whose id is the operation id) if the root has none yet and no other node of the
    session already carries that entry id (an entry id, once recorded, is kept: the session
    file is re-imported by `import_committed`, which is authoritative).

    Returns the ids whose row changed, in insertion order; empty for an id the session does
    not hold (never raises for one). Other sessions' rows (a fork's copies) are never touched.
    """
    with store.write() as conn:
        operation_id, rows = _operation_rows(conn, session_id, summary_id)
        if not rows:
            return []
        changed = [sid for sid, lifecycle in rows if lifecycle != "committed"]
        if changed:
            conn.execute(
                "UPDATE summaries SET lifecycle_status = 'committed', failure_reason = NULL "
                "WHERE session_id = ? AND operation_id = ? AND lifecycle_status <> 'committed'",
                (session_id, operation_id),
            )
        if pi_entry_id:
            root = conn.execute(
                "SELECT pi_compaction_entry_id FROM summaries "
                "WHERE session_id = ? AND summary_id = ?",
                (session_id, operation_id),
            ).fetchone()
            if (
                root is not None
                and root[0] is None
                and _pi_entry_holder(conn, session_id, pi_entry_id) is None
            ):
                conn.execute(
                    "UPDATE summaries SET pi_compaction_entry_id = ? "
                    "WHERE session_id = ? AND summary_id = ?",
                    (pi_entry_id, session_id, operation_id),
                )
                if operation_id not in changed:
                    changed.append(operation_id)
        return changed


def mark_failed(
    store: Store, session_id: str, summary_id: str, reason: str | None = None
) -> list[str]:
    """Mark the `prepared` nodes of the operation holding `summary_id` in `session_id`
    `failed`, storing `reason` as their `failure_reason`. Committed nodes stay committed (the
    session file proved them), failed ones keep their first reason.

    Returns the ids changed, in insertion order; empty for an id the session does not hold
    (never raises).
    """
    with store.write() as conn:
        operation_id, rows = _operation_rows(conn, session_id, summary_id)
        changed = [sid for sid, lifecycle in rows if lifecycle == "prepared"]
        if changed:
            conn.execute(
                "UPDATE summaries SET lifecycle_status = 'failed', failure_reason = ? "
                "WHERE session_id = ? AND operation_id = ? AND lifecycle_status = 'prepared'",
                (reason, session_id, operation_id),
            )
        return changed


def sessions_with_pending(
    store: Store, summary_id: str, *, include_failed: bool = True
) -> list[str]:
    """The sessions whose node `summary_id` is `prepared` (or `failed`, unless
    `include_failed` is false), in the order their rows were stored.

    For the `ds4/compactCommitted` / `ds4/compactFailed` notifications, which name a summary id
    but no session: committing applies to the prepared and failed rows, failing to the prepared
    ones. A fork's rows are imported `committed`, so normally one session answers. One indexed
    lookup; empty for an unknown id.
    """
    lifecycles = ("prepared", "failed") if include_failed else ("prepared",)
    rows = (
        store.connection()
        .execute(
            "SELECT session_id FROM summaries WHERE summary_id = ? AND lifecycle_status IN "
            f"({placeholders(len(lifecycles))}) GROUP BY session_id ORDER BY MIN(rowid)",
            (summary_id, *lifecycles),
        )
        .fetchall()
    )
    return [str(row[0]) for row in rows]


def fail_leftover_prepared(store: Store, reason: str = DEFAULT_LEFTOVER_REASON) -> int:
    """Mark every `prepared` node (all sessions) `failed` with `reason`; returns how many.

    Called once at server start (docs/compaction.md "The flow" 6): a batch still prepared then
    was never confirmed. A later sync that finds its compaction entry commits it again. Scans
    `summaries` once (startup only).
    """
    with store.write() as conn:
        cursor = conn.execute(
            "UPDATE summaries SET lifecycle_status = 'failed', failure_reason = ? "
            "WHERE lifecycle_status = 'prepared'",
            (reason,),
        )
        return int(cursor.rowcount)


def import_committed(store: Store, nodes: Sequence[SummaryNode]) -> list[str]:
    """Idempotently store nodes reconstructed from a session file as `committed`.

    One write transaction, nodes processed in list order:

    * a node whose id the session already holds (or that came earlier in `nodes`) is set
      `committed` (its `failure_reason` cleared) and, when the given node has a `pi_entry_id`
      different from the row's, gets it (the session file wins over a client's report); its
      content, kind, level, sources and edges are never changed;
    * a node the session does not hold is inserted `committed` with its sources and edges,
      even when another session holds the same id (a fork copied the compaction entry: it gets
      its own rows, and the other session's are not touched).

    All nodes belong to one session (`node.session_id`), and children must exist in that
    session.

    The session file is authoritative for which node a Pi compaction entry carries: when
    another node of the session already holds that `pi_entry_id` (e.g. a client reported the
    wrong entry to `mark_committed`), the other node loses it.

    Returns the ids inserted or changed (including ones that lost a `pi_entry_id`), unique, in
    the order they were touched; empty when everything was already stored as given.

    Raises:
        ValueError: before anything is written, when the nodes belong to several sessions, a
            node to insert has a child that is neither stored for the session nor earlier in
            `nodes` (the message names the ids; the caller logs it and skips that compaction
            entry, so import entry by entry), or a node to insert violates the schema or has
            metadata that is not JSON-ready, or a node to insert has a `graph_level` not above
            each child's; or (rolling back) when a node's id is already held in the session
            with another text, kind, source hash, graph level or time (a reused id must match
            exactly; the caller then imports the entry as an unverified Pi-native node).
    """
    if not nodes:
        return []
    session_id = _one_session(nodes, "an import")
    with store.write() as conn:
        ids = [node.summary_id for node in nodes]
        stored = _stored_ids(conn, session_id, ids)
        to_insert: set[str] = set()
        seen = set(stored)
        for node in nodes:
            if node.summary_id not in seen:
                _check_node(node)
                _row_params(node, "committed")  # JSON problems before writing
                to_insert.add(node.summary_id)
                seen.add(node.summary_id)
        children = {c for node in nodes for c in node.child_ids} - set(ids)
        skip = {node.summary_id for node in nodes} - to_insert
        levels = _stored_levels(conn, session_id, stored | children)
        missing = _missing_children(nodes, stored | set(levels), skip)
        if missing:
            raise ValueError(
                "cannot import summary nodes whose children exist nowhere (not stored for "
                f"session {session_id!r}, not earlier in the same import): " + ", ".join(missing)
            )
        too_low = _level_violations(nodes, levels, skip)
        if too_low:
            raise ValueError(
                "cannot import summary nodes whose graph_level is not above each child's: "
                + ", ".join(too_low)
            )
        changed: dict[str, None] = {}
        for node in nodes:
            if node.summary_id in to_insert:
                to_insert.discard(node.summary_id)  # a repeat later in the list updates
                if node.pi_entry_id:
                    changed.update(_release_pi_entry(conn, session_id, node.pi_entry_id))
                _write_node(conn, node, "committed")
                changed[node.summary_id] = None
                continue
            row = conn.execute(
                "SELECT lifecycle_status, pi_compaction_entry_id, content, summary_kind, "
                "source_hash, graph_level, created_at FROM summaries "
                "WHERE session_id = ? AND summary_id = ?",
                (session_id, node.summary_id),
            ).fetchone()
            if row[2] != node.content:
                raise ValueError(
                    f"summary id {node.summary_id!r} already holds another text in session "
                    f"{session_id!r}"
                )
            differs = [
                f"{name} {given!r} (stored {held!r})"
                for name, given, held in (
                    ("kind", node.kind, row[3]),
                    ("source hash", node.source_hash, row[4]),
                    ("graph level", node.graph_level, row[5]),
                    ("time", node.created_at, row[6]),
                )
                if given != held
            ]
            if differs:
                raise ValueError(
                    f"summary id {node.summary_id!r} is already stored in session "
                    f"{session_id!r} with other fields: " + ", ".join(differs)
                )
            if row[0] != "committed":
                conn.execute(
                    "UPDATE summaries SET lifecycle_status = 'committed', failure_reason = NULL "
                    "WHERE session_id = ? AND summary_id = ?",
                    (session_id, node.summary_id),
                )
                changed[node.summary_id] = None
            if node.pi_entry_id and row[1] != node.pi_entry_id:  # the session file wins
                changed.update(_release_pi_entry(conn, session_id, node.pi_entry_id))
                conn.execute(
                    "UPDATE summaries SET pi_compaction_entry_id = ? "
                    "WHERE session_id = ? AND summary_id = ?",
                    (node.pi_entry_id, session_id, node.summary_id),
                )
                changed[node.summary_id] = None
        return list(changed)


def _release_pi_entry(
    conn: sqlite3.Connection, session_id: str, pi_entry_id: str
) -> dict[str, None]:
    """Clear `pi_entry_id` from whichever node of the session holds it; returns that id."""
    holder = _pi_entry_holder(conn, session_id, pi_entry_id)
    if holder is None:
        return {}
    conn.execute(
        "UPDATE summaries SET pi_compaction_entry_id = NULL "
        "WHERE session_id = ? AND summary_id = ?",
        (session_id, holder),
    )
    return {holder: None}


def _decode_list(text: str) -> tuple[str, ...]:
    try:
        value = json.loads(text)
    except ValueError:
        return ()
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def _decode_dict(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _node_from_row(
    row: Sequence[Any], sources: Sequence[str], children: Sequence[str]
) -> SummaryNode:
    return SummaryNode(
        summary_id=row[0],
        session_id=row[1],
        kind=cast(SummaryKind, row[2]),
        content=row[3],
        source_hash=row[4],
        graph_level=row[5],
        created_at=row[6],
        validation_status=cast(ValidationStatus, row[7]),
        validation_issue_codes=_decode_list(row[8]),
        provider=row[9],
        model=row[10],
        first_kept_entry_id=row[11],
        tokens_before=row[12],
        reason=row[13],
        lifecycle=cast(Lifecycle, row[14]),
        pi_entry_id=row[15],
        operation_id=row[16],
        source_entry_ids=tuple(sources),
        child_ids=tuple(children),
        metadata=_decode_dict(row[17]),
    )


def get_node(store: Store, session_id: str, summary_id: str) -> SummaryNode | None:
    """The node `summary_id` of `session_id` with its sources and ordered children, or None."""
    conn = store.connection()
    key = (session_id, summary_id)
    row = conn.execute(f"{_SELECT} WHERE session_id = ? AND summary_id = ?", key).fetchone()
    if row is None:
        return None
    sources = conn.execute(
        "SELECT entry_id FROM summary_sources WHERE session_id = ? AND summary_id = ? "
        "ORDER BY position",
        key,
    ).fetchall()
    children = conn.execute(
        "SELECT child_id FROM summary_edges WHERE session_id = ? AND parent_id = ? "
        "ORDER BY child_order",
        key,
    ).fetchall()
    return _node_from_row(row, [r[0] for r in sources], [r[0] for r in children])


def session_nodes(
    store: Store, session_id: str, *, lifecycles: Collection[str] | None = None
) -> list[SummaryNode]:
    """Every node of `session_id` (only those whose lifecycle is in `lifecycles` when given),
    with sources and ordered children, ordered by `created_at` then insertion.

    Three queries, each O(the session's nodes). Raises ValueError for an unknown lifecycle.
    """
    wanted: set[str] | None = None
    if lifecycles is not None:
        wanted = set(lifecycles)
        unknown = wanted - set(LIFECYCLES)
        if unknown:
            raise ValueError(
                f"unknown lifecycle(s) {sorted(unknown)}; expected {', '.join(LIFECYCLES)}"
            )
    conn = store.connection()
    rows = [
        row
        for row in conn.execute(
            f"{_SELECT} WHERE session_id = ? ORDER BY created_at, rowid", (session_id,)
        )
        if wanted is None or row[14] in wanted
    ]
    if not rows:
        return []
    sources: dict[str, list[str]] = {}
    for summary_id, entry_id in conn.execute(
        "SELECT summary_id, entry_id FROM summary_sources WHERE session_id = ? "
        "ORDER BY summary_id, position",
        (session_id,),
    ):
        sources.setdefault(summary_id, []).append(entry_id)
    children: dict[str, list[str]] = {}
    for parent_id, child_id in conn.execute(
        "SELECT parent_id, child_id FROM summary_edges WHERE session_id = ? "
        "ORDER BY parent_id, child_order",
        (session_id,),
    ):
        children.setdefault(parent_id, []).append(child_id)
    return [_node_from_row(row, sources.get(row[0], ()), children.get(row[0], ())) for row in rows]


def node_for_entry(store: Store, session_id: str, pi_entry_id: str) -> SummaryNode | None:
    """The node carried by Pi compaction entry `pi_entry_id` of `session_id`, or None."""
    row = (
        store.connection()
        .execute(
            "SELECT summary_id FROM summaries WHERE session_id = ? AND pi_compaction_entry_id = ?",
            (session_id, pi_entry_id),
        )
        .fetchone()
    )
    return None if row is None else get_node(store, session_id, row[0])


_REACH = (
    "WITH RECURSIVE reach(id) AS (SELECT :root UNION "
    "SELECT e.child_id FROM summary_edges AS e "
    "JOIN reach ON e.session_id = :session AND e.parent_id = reach.id) "
)


def transitive_sources(store: Store, session_id: str, summary_id: str) -> list[str]:
    """The entry ids node `summary_id` of `session_id` summarizes, transitively: the union of
    the direct sources of the node and every node under it, in order of first appearance
    walking depth-first (pre-order, children in `child_order`). For an aggregate chain that is
    the oldest span first. Empty for an id the session does not hold.

    Two recursive-CTE queries over the nodes under the root (each visited once, shared
    children included), then an iterative walk: no recursion limit, O(nodes under the root).
    """
    conn = store.connection()
    children: dict[str, list[str]] = {}
    params = {"root": summary_id, "session": session_id}
    for parent_id, child_id in conn.execute(
        _REACH + "SELECT e.parent_id, e.child_id FROM summary_edges AS e "
        "WHERE e.session_id = :session AND e.parent_id IN (SELECT id FROM reach) "
        "ORDER BY e.parent_id, e.child_order",
        params,
    ):
        children.setdefault(parent_id, []).append(child_id)
    sources: dict[str, list[str]] = {}
    for node_id, entry_id in conn.execute(
        _REACH + "SELECT src.summary_id, src.entry_id FROM summary_sources AS src "
        "WHERE src.session_id = :session AND src.summary_id IN (SELECT id FROM reach) "
        "ORDER BY src.summary_id, src.position",
        params,
    ):
        sources.setdefault(node_id, []).append(entry_id)
    result: dict[str, None] = {}
    visited: set[str] = set()
    stack = [summary_id]
    while stack:
        node_id = stack.pop()
        if node_id in visited:
            continue
        visited.add(node_id)
        result.update(dict.fromkeys(sources.get(node_id, ())))
        stack.extend(reversed(children.get(node_id, ())))
    return list(result)


def node_record(node: SummaryNode) -> dict[str, Any]:
    """`node` as a JSON-ready dict: every `SummaryNode` field by its Python name, tuples as
    lists, metadata as stored."""
    record: dict[str, Any] = {}
    for spec in fields(node):
        value = getattr(node, spec.name)
        record[spec.name] = list(value) if isinstance(value, tuple) else value
    return record


def export_graph(store: Store, session_id: str) -> dict[str, Any]:
    """The canonical JSON-ready form of the session's COMMITTED graph, for equality checks
    ("rebuilding from the JSONL restores everything exactly").

    Shape: `{"sessionId": str, "nodes": [node_record(node), ...] sorted by summary_id,
    "edges": [[parent_id, child_order, child_id], ...] sorted}`. Node records hold every
    `SummaryNode` field (lifecycle included, always "committed" here); `failure_reason` and
    row order are bookkeeping and are left out.
    """
    nodes = sorted(
        session_nodes(store, session_id, lifecycles=("committed",)), key=lambda n: n.summary_id
    )
    edges = sorted(
        [node.summary_id, order, child]
        for node in nodes
        for order, child in enumerate(node.child_ids)
    )
    return {"sessionId": session_id, "nodes": [node_record(n) for n in nodes], "edges": edges}


def counts(store: Store) -> dict[str, int]:
    """Stored nodes across all sessions: `{"summaries", "prepared", "committed", "failed"}`."""
    result = {"summaries": 0, **dict.fromkeys(LIFECYCLES, 0)}
    for lifecycle, count in store.connection().execute(
        "SELECT lifecycle_status, COUNT(*) FROM summaries GROUP BY lifecycle_status"
    ):
        result[lifecycle] = int(count)
        result["summaries"] += int(count)
    return result


__all__ = [
    "DEFAULT_LEFTOVER_REASON",
    "VALIDATION_STATUSES",
    "counts",
    "export_graph",
    "fail_leftover_prepared",
    "get_node",
    "import_committed",
    "insert_prepared",
    "mark_committed",
    "mark_failed",
    "node_for_entry",
    "node_record",
    "session_nodes",
    "sessions_with_pending",
    "transitive_sources",
]
