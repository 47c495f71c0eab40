"""Repository for artifact references: `artifact_refs` (migration 12,
`store.artifact_schema`; docs/artifacts.md "References").

Derived from session files: the session sync records the references of the entries it
indexed (`record_references`: a rebuild replaces the session's rows, an incremental sync adds
rows), a plan adds the ones it offloaded that the sync did not record (`add_references`).
Reads: one session's references in file order, and the set of every referenced id (garbage
collection keeps those objects).

All functions take the `Store` first. Writes open `with store.write():` themselves (inside a
sync's write transaction they become a savepoint). Reads work from any thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from ds4_core.artifacts.references import ArtifactReference
from ds4_core.store.database import Store

_INSERT = (
    "INSERT INTO artifact_refs (session_id, entry_id, entry_order, artifact_id, "
    "original_chars, size_bytes) VALUES (?, ?, ?, ?, ?, ?)"
)


def _rows(session_id: str, references: Iterable[ArtifactReference]) -> list[tuple[object, ...]]:
    return [
        (session_id, r.entry_id, r.entry_order, r.artifact_id, r.original_chars, r.size_bytes)
        for r in references
    ]


def record_references(
    store: Store, session_id: str, references: Iterable[ArtifactReference], *, whole: bool
) -> int:
    """Store the references of the entries a sync indexed; with `whole` they replace the
    session's rows. An entry id met again replaces its row (last wins, as in the session
    reader). Returns the rows written."""
    rows = _rows(session_id, references)
    with store.write() as conn:
        if whole:
            conn.execute("DELETE FROM artifact_refs WHERE session_id = ?", (session_id,))
        conn.executemany(
            _INSERT + " ON CONFLICT (session_id, entry_id) DO UPDATE SET "
            "entry_order = excluded.entry_order, artifact_id = excluded.artifact_id, "
            "original_chars = excluded.original_chars, size_bytes = excluded.size_bytes",
            rows,
        )
    return len(rows)


def add_references(store: Store, session_id: str, references: Iterable[ArtifactReference]) -> int:
    """Add the references a plan offloaded that are not recorded yet (a row the sync wrote is
    kept as it is). Returns the rows added; no write transaction when all are known."""
    rows = _rows(session_id, references)
    if not rows:
        return 0
    known = {
        (entry_id, artifact_id)
        for entry_id, artifact_id in store.connection()
        .execute(
            "SELECT entry_id, artifact_id FROM artifact_refs WHERE session_id = ?", (session_id,)
        )
        .fetchall()
    }
    missing = [row for row in rows if (row[1], row[3]) not in known]
    if not missing:
        return 0
    with store.write() as conn:
        conn.executemany(_INSERT + " ON CONFLICT (session_id, entry_id) DO NOTHING", missing)
    return len(missing)


def session_references(store: Store, session_id: str) -> list[ArtifactReference]:
    """The session's references in file order."""
    rows = (
        store.connection()
        .execute(
            "SELECT entry_id, entry_order, artifact_id, original_chars, size_bytes "
            "FROM artifact_refs WHERE session_id = ? ORDER BY entry_order, entry_id",
            (session_id,),
        )
        .fetchall()
    )
    return [ArtifactReference(*row) for row in rows]


def referenced_ids(store: Store) -> set[str]:
    """Every artifact id some indexed session references. Rows of a session the index no
    longer holds (its file now holds another session: `sessions.replace_session` removed it)
    do not count."""
    rows = (
        store.connection()
        .execute(
            "SELECT DISTINCT artifact_id FROM artifact_refs "
            "WHERE session_id IN (SELECT session_id FROM sessions)"
        )
        .fetchall()
    )
    return {row[0] for row in rows}


def indexed_sessions(store: Store) -> int:
    """How many sessions the index holds (garbage collection refuses to run on none while
    objects exist: the database was probably deleted)."""
    return int(store.connection().execute("SELECT COUNT(*) FROM sessions").fetchone()[0])


def sessions_referencing(store: Store, artifact_id: str) -> list[tuple[str, str]]:
    """(session id, entry id) of every reference to `artifact_id`, in a stable order."""
    rows = (
        store.connection()
        .execute(
            "SELECT session_id, entry_id FROM artifact_refs WHERE artifact_id = ? "
            "ORDER BY session_id, entry_order",
            (artifact_id,),
        )
        .fetchall()
    )
    return [(row[0], row[1]) for row in rows]
