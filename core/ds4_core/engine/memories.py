"""Memories: the current memory items and pins with their provenance (`ds4/memory`,
docs/memory.md). Read-only: the projection is filled by the session sync
(`engine/indexing.py`, `store/memory.py`); a named session is synced first, so an entry the
client has just appended is listed.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from ..requests import SessionRef
from ..results import MemoryResult
from ..store import Store
from ..store import memory as memory_repo
from ..store import sessions as session_repo
from .context import EngineContext
from .indexing import Indexer
from .sessions import SESSION_FILE, resolve_session_path


def _provenance(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "sessionId": row["session_id"],
        "mutationKey": row["origin_mutation_key"],
        "mutationKeys": json.loads(row["mutation_keys_json"]),
        **extra,
    }


def _common(row: dict[str, Any], id_column: str) -> dict[str, Any]:
    return {
        "id": row[id_column],
        "scope": row["scope"],
        "status": row["status"],
        "projectPath": row["project_path"],
        "classification": row["classification"],
        "createdAt": row["created_at_ms"],
        "updatedAt": row["updated_at_ms"],
        "supersededBy": row["superseded_by"],
        "statusReason": row["status_reason"],
    }


def memory_wire(row: dict[str, Any]) -> dict[str, Any]:
    """A `memory_items` row as the wire item of `ds4/memory` (times in ms since the epoch)."""
    return {
        **_common(row, "memory_id"),
        "key": row["memory_key"],
        "claim": row["claim"],
        "provenance": _provenance(row, sourceEntryIds=json.loads(row["source_entry_ids_json"])),
    }


def pin_wire(row: dict[str, Any]) -> dict[str, Any]:
    """A `pins` row as the wire item of `ds4/memory` (times in ms since the epoch)."""
    return {
        **_common(row, "pin_id"),
        "content": row["content"],
        "provenance": _provenance(
            row,
            branchLeafId=row["branch_leaf_id"],
            sourceEntryId=row["source_entry_id"],
            sourceFile=row["source_file"],
        ),
    }


@functools.lru_cache(maxsize=1024)
def canonical_project(path: str | None) -> str | None:
    """The canonical form of a project path (docs/memory.md "Writes"): an absolute path with
    its symbolic links resolved (`os.path.realpath`, which also drops trailing separators and
    `.`/`..`); a relative one normalised only; None and "" stay None. Cached (1,024 paths): a
    link changed while the server runs keeps its old target here."""
    if not path:
        return None
    if "\x00" in path:
        return path
    if os.path.isabs(path):
        return os.path.realpath(path)
    return os.path.normpath(path)


def session_project(store: Store, session_id: str | None) -> str | None:
    """The canonical project path of a session: its header's `cwd` (`canonical_project`), or
    None when it has none."""
    header = session_repo.session_header(store, session_id) if session_id else None
    cwd = header.get("cwd") if header else None
    return canonical_project(cwd) if isinstance(cwd, str) else None


def applies_to(
    scope: str,
    origin: str,
    item_project: str | None,
    session_id: str,
    project_path: str | None,
    copies_json: str | None = None,
) -> bool:
    """Whether an item (`scope`, the session `origin` whose file holds it, its project path,
    the JSON array of the sessions holding a copy of it, or None) applies to the session
    `session_id` of the canonical working directory `project_path`: session and branch items
    of that session or of a session holding a copy (a Pi `/fork`), project items of its
    working directory compared canonically (or of no project path)."""
    if scope == "project":
        return item_project is None or canonical_project(item_project) == project_path
    if origin == session_id:
        return True
    return copies_json is not None and session_id in json.loads(copies_json)


def applies(row: dict[str, Any], session_id: str, project_path: str | None) -> bool:
    """`applies_to` for a `memory_items` or `pins` row (`store.memory.list_memory`)."""
    return applies_to(
        row["scope"],
        row["session_id"],
        row["project_path"],
        session_id,
        project_path,
        row["copy_sessions_json"],
    )


class Memories:
    """`ds4/memory` over the engine's store."""

    def __init__(self, context: EngineContext, indexer: Indexer) -> None:
        self._context = context
        self._indexer = indexer

    def list(self, session: SessionRef | None, *, include_inactive: bool = False) -> MemoryResult:
        """The memory items and pins (`ContextEngine.memory`): all of them, or those that
        apply to `session` (synced first); active ones only unless `include_inactive`.
        `session.leafId` is not used yet (branch pins are listed for the whole session).

        Raises:
            RequestError: naming `session.file`, for a missing, unreadable or non-Pi file.
        """
        store = self._context.store()
        session_id: str | None = None
        project_path: str | None = None
        if session is not None:
            path = resolve_session_path(session.file, SESSION_FILE)
            session_id = self._indexer.sync(path, force=False, progress=None).session_id
            project_path = session_project(store, session_id)
        memory = memory_repo.list_memory(store, include_inactive=include_inactive)
        pins = memory_repo.list_pins(store, include_inactive=include_inactive)
        if session is not None:
            memory = [row for row in memory if applies(row, session_id or "", project_path)]
            pins = [row for row in pins if applies(row, session_id or "", project_path)]
        counts = memory_repo.counts(store)
        return MemoryResult(
            session_id=session_id,
            memory=tuple(memory_wire(row) for row in memory),
            pins=tuple(pin_wire(row) for row in pins),
            counts={
                "applied": counts.applied,
                "rejected": counts.rejected,
                "invalid": counts.invalid,
            },
            problems=tuple(memory_repo.list_problems(store)),
        )
