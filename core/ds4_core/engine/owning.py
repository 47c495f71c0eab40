"""OwnedSessions: `ds4/sessionOpen` and `ds4/sessionAppend`, sessions the server owns and is
the only writer of (docs/sessions.md); `owned_file` tells compaction and memory writes when
they append their entry themselves.

The files and their locking are `ds4_core.sessions.owned`; this module finds the data
directory (the database file's directory, as for artifacts), checks ownership and the
messages, and turns every failure into a `RequestError` naming the field.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ..json_bounds import echo
from ..requests import RequestError, RequestFailedError, SessionAppendRequest, SessionOpenRequest
from ..results import SessionAppendResult, SessionOpenResult
from ..sessions import owned
from ..sessions.message_shapes import MessageShapeError, checked_message
from ..store import sessions as session_repo
from .context import EngineContext

log = logging.getLogger("ds4_core.engine")

MAX_APPEND_MESSAGES = 1000
"""Messages one `ds4/sessionAppend` may carry (the frame limit bounds their bytes)."""

NOT_OWNED = (
    "not a session this server owns; ds4/sessionAppend writes only the files ds4/sessionOpen "
    "made (in '{root}'); a Pi session is appended to by Pi"
)


def data_directory(context: EngineContext) -> Path | None:
    """The data directory (the database file's directory), or None for an in-memory database."""
    path = context.store().path
    if os.fspath(path) == ":memory:" or Path(path).name == ":memory:":
        return None
    return owned.data_directory(path)


def owned_file(context: EngineContext, path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a session file this server owns (`owned.is_owned` under the data
    directory); False with an in-memory database."""
    data_dir = data_directory(context)
    return data_dir is not None and owned.is_owned(data_dir, path)


def append_owned(
    path: str | os.PathLike[str],
    entries: Sequence[Mapping[str, Any]],
    parent_id: str | None,
    field: str = "session.file",
    *,
    descendant_of: str | None = None,
) -> list[str]:
    """`owned.append_entries` (with `descendant_of`, see there) with its failures as
    `RequestError`s: an unknown `parent_id` names `parentId`, a file that is not a usable
    session names `field`; other I/O failures are `RequestFailedError`s (nothing or a torn
    line was written, which the next append repairs)."""
    try:
        return owned.append_entries(path, entries, parent_id, descendant_of=descendant_of)
    except owned.UnknownParentError:
        raise RequestError(
            f"parentId: {echo(parent_id)} names no entry of this session", "parentId"
        ) from None
    except (owned.OwnedSessionError, OSError) as exc:
        raise _failure(exc, path, field, "append to") from None


def _failure(
    exc: owned.OwnedSessionError | OSError, path: str | os.PathLike[str], field: str, doing: str
) -> RequestError:
    """The request error of an owned-session failure: an unusable file names `field`, an I/O
    failure is a `RequestFailedError` saying what could not be done."""
    if isinstance(exc, owned.OwnedSessionError):
        return RequestError(f"{field}: {exc}", field)
    return RequestFailedError(
        f"cannot {doing} the owned session {echo(os.fspath(path))}: "
        f"{exc.strerror or type(exc).__name__}"
    )


@contextmanager
def owned_lock(path: str | os.PathLike[str], field: str = "session.file") -> Iterator[None]:
    """`owned.locked(path)` with its failures as request errors (as `append_owned`): a lock
    file that is a symbolic link names `field`, another I/O failure is a
    `RequestFailedError`."""
    with ExitStack() as stack:
        try:
            stack.enter_context(owned.locked(path))
        except (owned.OwnedSessionError, OSError) as exc:
            raise _failure(exc, path, field, "lock") from None
        yield


def _ours(data_dir: Path, indexed: Path) -> bool:
    """Whether the indexed file `indexed` is an owned session, or was one (in the sessions
    directory, since deleted)."""
    if owned.is_owned(data_dir, indexed):
        return True
    root = owned.sessions_directory(data_dir).resolve()
    return indexed.parent == root and not os.path.lexists(indexed)


class OwnedSessions:
    """Opening and appending to owned sessions (see the module docstring)."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context

    def open(self, request: SessionOpenRequest) -> SessionOpenResult:
        """Create an owned session, or reopen `request.session_id` (`ContextEngine.session_open`).

        Raises:
            RequestError: a bad `title` or `sessionId` (named); an explicit `cwd` other than
                the one a reopened session records (named `cwd`); or a `sessionId` that the index
                holds for a session file this server does not own (a Pi session: taking its
                id would merge the two sessions' history in the index), or for an owned file
                that no longer exists (reopening it would silently start an empty session).
            RequestFailedError: the database is in memory (no data directory), or the
                sessions directory cannot be used (the message says why).
        """
        data_dir = self._data_dir()
        cwd = request.cwd if request.cwd is not None else request.default_cwd or os.getcwd()
        if request.session_id is not None:
            indexed = session_repo.session_file(self._context.store(), request.session_id)
            if indexed is not None and not _ours(data_dir, Path(indexed)):
                raise RequestError(
                    f"sessionId: {echo(request.session_id)} is the id of the indexed session "
                    f"{echo(indexed)}, which this server does not own; choose another id",
                    "sessionId",
                )
            if indexed is not None and not os.path.lexists(indexed):
                raise RequestError(  # never a silent, empty session in the old one's place
                    f"sessionId: the owned session {echo(request.session_id)} was "
                    f"{echo(indexed)}, which no longer exists; restore that file, or open a "
                    "new session without sessionId",
                    "sessionId",
                )
        try:
            session = owned.open_session(
                data_dir, cwd, request.title, request.session_id, expect_cwd=request.cwd
            )
        except ValueError as exc:
            text = str(exc)
            name = text.partition(":")[0]
            field = name if name in ("title", "sessionId", "cwd") else None
            raise RequestError(text, field) from None
        except (owned.OwnedSessionError, OSError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise RequestFailedError(f"cannot open an owned session: {reason}") from None
        log.info("session open: session=%s created=%s", session.session_id, session.created)
        return SessionOpenResult(
            session_id=session.session_id,
            file=str(session.file),
            leaf_id=session.leaf_id,
            created=session.created,
            cwd=session.cwd,
        )

    def append(self, request: SessionAppendRequest) -> SessionAppendResult:
        """Append Pi messages to an owned session (`ContextEngine.session_append`).

        Raises:
            RequestError: `session.file` is not an owned session, `messages` is empty or
                holds more than `MAX_APPEND_MESSAGES`, a message is not one of Pi's shapes
                (`messages[3].role`, ...), or `parentId` / `session.leafId` names no entry.
            RequestFailedError: the file cannot be written.
        """
        data_dir = self._data_dir()
        file = owned.owned_path(data_dir, request.session.file) if request.session.file else None
        if file is None:
            root = owned.sessions_directory(data_dir)
            raise RequestError(
                f"session.file: {echo(request.session.file)} is " + NOT_OWNED.format(root=root),
                "session.file",
            )
        messages = request.messages
        if not messages or len(messages) > MAX_APPEND_MESSAGES:
            raise RequestError(
                f"messages: expected 1 to {MAX_APPEND_MESSAGES} messages, got {len(messages)}",
                "messages",
            )
        entries = []
        for index, message in enumerate(messages):
            try:
                checked = checked_message(message, f"messages[{index}]")
            except MessageShapeError as exc:
                raise RequestError(str(exc), exc.field) from None
            entries.append({"type": "message", "message": checked})
        parent_id = request.parent_id
        field = "parentId"
        if parent_id is None and request.session.leaf_id is not None:
            parent_id, field = request.session.leaf_id, "session.leafId"
        try:
            entry_ids = append_owned(file, entries, parent_id)
        except RequestError as exc:
            if exc.field == "parentId" and field != "parentId":
                raise RequestError(str(exc).replace("parentId", field, 1), field) from None
            raise
        result = SessionAppendResult(
            session_id=owned.session_id_of(file),
            file=str(file),
            entry_ids=tuple(entry_ids),
            leaf_id=entry_ids[-1],
        )
        log.info("session append: %s", result.log_summary())
        return result

    def _data_dir(self) -> Path:
        data_dir = data_directory(self._context)
        if data_dir is None:
            raise RequestFailedError(
                "owned sessions need a database file (their directory is the database's); "
                "this server runs on an in-memory database"
            )
        return data_dir
