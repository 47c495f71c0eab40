"""Memory and pin writes: `ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget` (docs/memory.md
"Writes").

A write syncs the session, checks the would-be mutation against the current items with the
replay's rules (`memory.writes.check_write`) and answers the custom entry for the session's
writer to append, as `ds4/compact` answers its compaction entry: the server never writes a
session file it does not own. The answer carries the entry twice: `customType` and `data` for
Pi's `appendEntry`, and `entry`, the complete line (id, parent = the file's last entry,
timestamp) for a client that appends raw lines. On a session it owns (docs/sessions.md) the
server syncs, checks and appends the entry itself under the file's lock (`owned.locked`,
`owning.append_owned`), under the file's last entry, so the answer says `appended: true` with
the new entry's id and `ds4/memory` lists the item at once.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path
from typing import Any

from ..json_bounds import echo
from ..memory.events import (
    MAX_ID_CHARS,
    MAX_REASON_CHARS,
    MAX_SOURCE_ENTRY_IDS,
    MAX_TEXT_CHARS,
    MEMORY_SCOPES,
    MEMORY_STATUSES,
    PIN_SCOPES,
    Kind,
    MutationError,
)
from ..memory.replay import Replay
from ..memory.writes import (
    Write,
    WriteRefused,
    add_write,
    check_write,
    created_at,
    status_write,
)
from ..privacy.levels import RANK
from ..requests import MemoryWriteRequest, RequestError, RequestFailedError
from ..results import MemoryWriteResult
from ..store import Store
from ..store import memory as memory_repo
from ..store import sessions as session_repo
from ..store.database import utc_now_iso
from .context import EngineContext
from .indexing import Indexer
from .memories import canonical_project, session_project
from .owning import append_owned, owned_file, owned_lock
from .sessions import SESSION_FILE, resolve_session_path

log = logging.getLogger("ds4_core.engine")

_TEXT_FIELD = {"pin": "content", "remember": "claim"}
_TARGET_FIELD = {"unpin": "pinId", "forget": "memoryId"}
_KIND: dict[str, Kind] = {"pin": "pin", "unpin": "pin", "remember": "memory", "forget": "memory"}


def _text(
    value: str | None, field: str, limit: int, *, required: bool, setting: str | None = None
) -> str | None:
    """`value` checked: a string, non-blank when `required`, at most `limit` characters."""
    if value is None:
        if required:
            raise RequestError(f"{field}: is required", field)
        return None
    if not isinstance(value, str):
        raise RequestError(f"{field}: expected a string", field)
    if required and not value.strip():
        raise RequestError(f"{field}: must not be empty", field)
    if len(value) > limit:
        where = f" ({setting})" if setting else ""
        raise RequestError(f"{field}: longer than {limit} characters{where}", field)
    return value


def _choice(value: str | None, field: str, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise RequestError(
            f"{field}: must be one of {', '.join(allowed)}, got {echo(value)}", field
        )
    return value


def _classification(value: str | None) -> str | None:
    if value is not None and value not in RANK:
        raise RequestError(
            "classification: must be one of normal, internal, sensitive, local-only, "
            f"got {echo(value)}",
            "classification",
        )
    return value


def _unused_entry_id(store: Store, session_id: str) -> str:
    """8 random lower-case hex digits no indexed entry of the session uses (Pi's id form)."""
    while True:
        candidate = secrets.token_hex(4)
        if not session_repo.existing_entries(store, session_id, [candidate]):
            return candidate


def _field_of(error: MutationError, request: MemoryWriteRequest) -> str:
    """The request param an invalid entry field comes from (`item.claim` -> `claim`)."""
    name = error.field.removeprefix("item.")
    if name == "previousId":
        return "supersedes"
    if name in ("content", "claim") or error.field == "item":
        return _TEXT_FIELD.get(request.operation, name)
    return name.split("[")[0]


def _refuse_other_project(made: Write, state: Replay, project_path: str | None) -> None:
    """Refuse a status or supersede of a project item of another working directory than the
    session's (compared canonically): `ds4/memory` does not list it for this session, so the
    session may not retire it (the replay cannot check this: it does not know a session's
    directory). Session items of another session are refused by the replay itself.

    Raises:
        RequestFailedError: `data.kind` `elsewhere`, naming the param.
    """
    if made.data["operation"] == "status":
        target_id = made.item_id
        field = "params.pinId" if made.kind == "pin" else "params.memoryId"
    elif made.data["operation"] == "supersede":
        target_id, field = made.data["previousId"], "params.supersedes"
    else:
        return
    target = state.items.get(target_id)
    if target is None or target.item.scope != "project":
        return
    item_project = target.item.project_path
    if item_project is None or canonical_project(item_project) == project_path:
        return
    raise RequestFailedError(
        f"{made.kind} {echo(target_id)} does not apply to this session ({field}): it is a "
        "project item of another working directory; ds4/memory lists the items of this session",
        data={"kind": "elsewhere"},
    )


class MemoryWriter:
    """The memory and pin writes of one engine (see the module docstring)."""

    def __init__(self, context: EngineContext, indexer: Indexer) -> None:
        self._context = context
        self._indexer = indexer

    def write(self, request: MemoryWriteRequest) -> MemoryWriteResult:
        """The custom entry of one write (`ContextEngine.write_memory`).

        The session is synced first, so the write is checked against every entry appended so
        far (docs/memory.md "Writes"). On a session the server owns, the sync, the check and
        the append run under the file's lock (`owned.locked`), so two writers (threads or
        servers) cannot both pass the check and then clash in the replay.

        Raises:
            RequestError: a missing or unreadable session file (`session.file`), an unknown
                `session.leafId`, or a param out of range (named: `content`, `claim`,
                `scope`, `classification`, `sourceEntryIds`, ...).
            RequestFailedError: the current items refuse it (`data.kind`: a `repeat` or a
                `conflict`, with `data.conflictsWith`; an `unknown` or `inactive` `pinId`,
                `memoryId` or `supersedes`; `elsewhere`: an item of another session or
                project; `no-entries`: a branch pin on a session without
                entries), or an owned session's file cannot be written.
        """
        path = resolve_session_path(request.session.file, SESSION_FILE)
        if not owned_file(self._context, path):
            return self._write(request, path, owned=False)
        with owned_lock(path):
            return self._write(request, path, owned=True)

    def _write(self, request: MemoryWriteRequest, path: Path, *, owned: bool) -> MemoryWriteResult:
        config = self._context.config()
        store = self._context.store()
        session_id = self._indexer.sync(path, force=False, progress=None).session_id
        if session_id is None:
            raise RequestFailedError(
                f"{echo(request.session.file)} holds no session yet; append a message first",
                SESSION_FILE,
            )
        project_path = session_project(store, session_id)
        branch = session_repo.branch_entry_ids(store, session_id, request.session.leaf_id)
        if request.session.leaf_id is not None and not branch:
            raise RequestError(
                f"session.leafId: no entry {echo(request.session.leaf_id)} in the session",
                "session.leafId",
            )
        leaf_id = branch[-1] if branch else None
        kind = _KIND[request.operation]
        stored = [m for m in memory_repo.load_mutations(store) if m.kind == kind]
        now_ms = created_at(stored, int(time.time() * 1000))
        made = self._made(request, config.memory, project_path, leaf_id, now_ms)
        try:
            state = check_write(made, stored, session_id)
        except MutationError as exc:
            field = _field_of(exc, request)
            raise RequestError(f"{field}: {exc.problem}", field) from None
        except WriteRefused as exc:
            raise RequestFailedError(str(exc), data=exc.data()) from None
        _refuse_other_project(made, state, project_path)
        entry_id = None
        if owned:
            # under the file's current leaf, as Pi's appendEntry does (branchLeafId names the
            # branch of a branch pin): a custom entry never moves the conversation's leaf back
            (entry_id,) = append_owned(path, [made.entry()], None)
            self._indexer.sync(path, force=False, progress=None)
            parent_id, stamp = session_repo.entry_link(store, session_id, entry_id)
            line = made.entry_line(entry_id, parent_id, stamp or utc_now_iso())
        else:
            line = made.entry_line(
                _unused_entry_id(store, session_id),
                session_repo.last_entry_id(store, session_id),
                utc_now_iso(),
            )
        log.info(
            "memory write: session=%s operation=%s item=%s appended=%s",
            session_id,
            request.operation,
            made.item_id,
            entry_id is not None,
        )
        return MemoryWriteResult(
            custom_type=made.custom_type,
            data=made.data,
            item_id=made.item_id,
            appended=entry_id is not None,
            entry_id=entry_id,
            entry=line,
        )

    def _made(
        self,
        request: MemoryWriteRequest,
        settings: Any,
        project_path: str | None,
        leaf_id: str | None,
        now_ms: int,
    ) -> Write:
        """The `Write` of `request` stamped `now_ms`, with its params checked (RequestError
        naming the param)."""
        operation = request.operation
        kind = _KIND[operation]
        if operation in ("unpin", "forget"):
            field = _TARGET_FIELD[operation]
            target = _text(request.target_id, field, MAX_ID_CHARS, required=True)
            reason = _text(request.reason, "reason", MAX_REASON_CHARS, required=False)
            status = (
                "deleted"
                if operation == "unpin"
                else _choice(request.status, "status", MEMORY_STATUSES, "invalid")
            )
            assert target is not None
            return status_write(kind, target, status, now_ms, reason)
        supersedes = _text(request.supersedes, "supersedes", MAX_ID_CHARS, required=False)
        classification = _classification(request.classification)
        if operation == "pin":
            limit = min(settings.max_pin_chars, MAX_TEXT_CHARS)
            content = _text(
                request.text, "content", limit, required=True, setting="memory.maxPinChars"
            )
            scope = _choice(request.scope, "scope", PIN_SCOPES, "session")
            if scope == "branch" and leaf_id is None:
                raise RequestFailedError(
                    "a branch pin needs an entry on the branch, and the session has none yet; "
                    'append a message first, or pass params.scope: "session"',
                    data={"kind": "no-entries"},
                )
            item: dict[str, Any] = {
                "scope": scope,
                "projectPath": project_path if scope == "project" else None,
                "branchLeafId": leaf_id if scope == "branch" else None,
                "classification": classification,
                "content": content,
                "sourceEntryId": _text(
                    request.source_entry_id, "sourceEntryId", MAX_ID_CHARS, required=False
                ),
                "sourceFile": _text(
                    request.source_file, "sourceFile", MAX_TEXT_CHARS, required=False
                ),
            }
            return add_write("pin", item, now_ms, supersedes)
        limit = min(settings.max_claim_chars, MAX_TEXT_CHARS)
        claim = _text(request.text, "claim", limit, required=True, setting="memory.maxClaimChars")
        scope = _choice(request.scope, "scope", MEMORY_SCOPES, "project")
        sources = request.source_entry_ids
        if len(sources) > MAX_SOURCE_ENTRY_IDS:
            raise RequestError(
                f"sourceEntryIds: more than {MAX_SOURCE_ENTRY_IDS} ids", "sourceEntryIds"
            )
        for index, source in enumerate(sources):
            _text(source, f"sourceEntryIds[{index}]", MAX_ID_CHARS, required=True)
        item = {
            "scope": scope,
            "projectPath": project_path if scope == "project" else None,
            "key": _text(request.key, "key", MAX_ID_CHARS, required=False),
            "classification": classification,
            "claim": claim,
            "sourceEntryIds": list(sources),
        }
        return add_write("memory", item, now_ms, supersedes)
