"""Server-owned session files: Pi sessions that ds4 creates and is the only writer of.

Clients that do not write Pi sessions themselves open one here and append their messages to
it; compaction, pin and memory entries are then appended by ds4 too (docs/sessions.md). The
files are ordinary Pi v3 session files (docs/reference.md §P1-§P5), so every reader of Pi
sessions, ours included, reads them as any other.

One module: the header and line format, the per-file lock and the cache of what was read share
one invariant (what an append writes under the lock is what the cache holds as read), so they
stay side by side.

Layout: `<data dir>/sessions/<file timestamp>_<session id>.jsonl` (Pi's file name rule,
docs/reference.md §P1), where the data directory is the database file's directory, as for
artifacts. The directory is 0700, files are 0600; a `<file>.lock` beside each file serialises
appends across threads and processes (`fcntl.flock`). The header of a file made here holds
`"ds4Owned": true` (`OWNED_MARK`); only such a file is owned (`is_owned`), so a Pi session
written to the same directory is never appended to behind Pi's back.

Appends (`append_entries`):

* Under the lock, the current leaf (the last entry in file order, §P6) and the ids already used
  are read from the file. What was read is cached per file (device, inode), with the byte
  offset reached and the first KiB of the last line read (which holds the leaf's id); the next
  append re-reads only the bytes added since (by another process) after checking that line is
  unchanged, else reads the file again from the start.
* A batch is written as whole newline-terminated JSON lines in one `write`, then fsynced. JSON
  escapes every line break our reader splits on (`\\n`); U+2028 and other separators may stay
  raw inside strings because lines are split on `\\n` only (docs/reference.md §P2).
* A torn last line (a writer killed mid-write) is closed by a `\\n` written at the start of the
  next batch: the torn line then reads as one malformed line that every reader skips (or as an
  entry, when the torn bytes happen to be a complete JSON record, as Pi reads it, §P8).
* `locked(file)` holds that lock across a caller's read-check-append section (a memory write
  syncs, checks the current items and appends its entry with no other writer in between);
  the functions here, called by the same thread inside it, do not lock again.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import stat
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from ds4_core.sessions.reader import CURRENT_SESSION_VERSION

SESSIONS_DIRECTORY = "sessions"
"""Name of the owned-sessions directory inside the data directory."""

LOCK_SUFFIX = ".lock"
"""The lock file of `x.jsonl` is `x.jsonl.lock` (Pi's embedders use the same name, §P1)."""

SESSION_ID = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,126}[A-Za-z0-9])?")
"""A caller-chosen session id (Pi's `--session-id` rule, docs/reference.md §P1), at most 128
characters."""

OWNED_MARK = "ds4Owned"
"""The header key (value `true`) that marks a file ds4 created; Pi ignores unknown header keys
(docs/reference.md §P2). A Pi file in the sessions directory lacks it, so it is never owned."""

ENTRY_ID = re.compile(r"[0-9a-f]{8}")
"""The ids this module gives entries: 8 lower-case hex digits (Pi's own form, §P3)."""

MAX_TITLE_CHARS = 200
"""Longest session title (`session_info` name) accepted."""

MAX_CWD_CHARS = 4096
"""Longest working directory recorded in a header (PATH_MAX on Linux)."""

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_READ_BYTES = 1 << 20
_LAST_LINE_CHECK_BYTES = 1024
_CACHED_FILES = 64
_HEADER_BYTES = 64 * 1024  # an owned header: at most MAX_CWD_CHARS escaped characters and ids
_RESERVED_KEYS = ("id", "parentId", "timestamp")


class OwnedSessionError(Exception):
    """An owned session cannot be opened or appended to; the message says why and what to do."""


class UnknownParentError(OwnedSessionError):
    """`parent_id` names no entry of the file."""


@dataclass(frozen=True, slots=True)
class OwnedSession:
    """An owned session as `open_session` returns it.

    Attributes:
        session_id: the header `id`.
        file: absolute path of the session file.
        leaf_id: the id of the last entry in file order, or `None` when there is none.
        created: whether this call created the file.
        cwd: the working directory its header records (`None` when a reopened header holds
            none as a string).
    """

    session_id: str
    file: Path
    leaf_id: str | None
    created: bool
    cwd: str | None


@dataclass(slots=True)
class _FileState:
    """What was read of one file up to `offset` (a line boundary)."""

    offset: int = 0
    last_line_start: int = 0
    last_line: bytes = b""  # the start of the last line before `offset` (with its entry id)
    session_id: str | None = None
    cwd: str | None = None  # the header's
    ids: set[str] = field(default_factory=set)
    parents: dict[str, str | None] = field(default_factory=dict)  # entry id -> its parentId
    leaf_id: str | None = None
    name: str | None = None  # the latest `session_info` name
    torn: bool = False  # bytes after `offset` without a final newline


_cache: OrderedDict[tuple[int, int], _FileState] = OrderedDict()
_cache_lock = threading.Lock()
_held = threading.local()  # `locks`: the lock files this thread holds (`_locked`)


def sessions_directory(data_dir: str | os.PathLike[str]) -> Path:
    """`<data_dir>/sessions`: where owned sessions live (not created here)."""
    return Path(data_dir) / SESSIONS_DIRECTORY


def data_directory(database_path: str | os.PathLike[str]) -> Path:
    """The data directory of a database file: its parent directory (as for artifacts)."""
    return Path(database_path).absolute().parent


def is_owned(data_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether `path` is an owned session file of `data_dir` (`owned_path` is not None).

    Never raises for a bad path (False).
    """
    return owned_path(data_dir, path) is not None


def owned_path(data_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path | None:
    """The resolved path of `path` when it is an owned session file of `data_dir`, else None.

    Owned: the path has no `..` component (refused rather than resolved: the kernel resolves
    `link/..` through the link, so the file checked here and the file opened could differ),
    lies, resolved, directly in `<data_dir>/sessions` (itself a real directory, not a symbolic
    link, owned by this user), names a `.jsonl` file, that file is a regular file, not a
    symbolic link, with one hard link (`st_nlink == 1`: another name could be a Pi session's
    or another data directory's file, and appends through it would take another lock), and
    its first line is a session header holding `"ds4Owned": true` (`OWNED_MARK`:
    `open_session` made it; a Pi session written to the same directory is not owned). Append
    to the returned path. Never raises for a bad path (None).
    """
    try:
        if ".." in Path(os.fspath(path)).parts:
            return None
        root = sessions_directory(data_dir).absolute()
        root_stat = os.lstat(root)
        if not stat.S_ISDIR(root_stat.st_mode) or root_stat.st_uid != os.getuid():
            return None
        candidate = Path(os.path.abspath(os.fspath(path)))
        file_stat = os.lstat(candidate)
        if not stat.S_ISREG(file_stat.st_mode):  # a symbolic link is not S_ISREG under lstat
            return None
        resolved = candidate.resolve(strict=True)
        if resolved.parent != root.resolve(strict=True) or not resolved.name.endswith(".jsonl"):
            return None
        return resolved if _has_mark(resolved) else None
    except (OSError, ValueError, RuntimeError, OwnedSessionError):
        return None


def _has_mark(path: Path) -> bool:
    """Whether the first line of `path` is a session header holding `OWNED_MARK` (read
    without the lock: a header never changes after `_create_whole`)."""
    fd = _open_session_file(path, os.O_RDONLY)
    try:
        header = _parse(_pread(fd, 0, _HEADER_BYTES).partition(b"\n")[0])
    finally:
        os.close(fd)
    return header is not None and header["type"] == "session" and _marked(header)


def _marked(header: Mapping[str, Any]) -> bool:
    return header.get(OWNED_MARK) is True


def open_session(
    data_dir: str | os.PathLike[str],
    cwd: str,
    title: str | None = None,
    session_id: str | None = None,
    *,
    expect_cwd: str | None = None,
) -> OwnedSession:
    """Open the owned session `session_id`, or create one.

    A new file gets Pi's current header `{"type":"session","version":3,"id":<uuid v7>,
    "timestamp":<ISO UTC, ms>,"cwd":cwd}` and, when `title` is given, a `session_info` entry
    naming it (line breaks become spaces, as Pi does). The file appears whole or not at all: it
    is written to a temporary file, fsynced and linked into place.

    With `session_id`, the file `*_<session_id>.jsonl` is reopened when it exists (a `title`
    that differs from its current name appends a `session_info` entry); otherwise a session
    with that id is created. A file of that name without the owned mark (a Pi session written
    to the directory) or with more than one hard link is refused (ValueError naming
    `sessionId`), never taken over nor locked. With `expect_cwd`, a reopened session whose
    header records another working directory is refused (ValueError naming `cwd`, saying the
    session's): a session keeps the cwd it was created with, and project memory follows it.
    Paths are compared after `os.path.normpath` (`/a/` is `/a`).

    Args:
        data_dir: the data directory (`data_directory(database path)`).
        cwd: the working directory recorded in the header of a new session (any string).
        title: optional display name, at most `MAX_TITLE_CHARS` characters.
        session_id: optional id matching `SESSION_ID`.
        expect_cwd: the working directory the caller asked for explicitly, if it did (checked
            against a reopened session's header; a new session records it as `cwd`).

    Raises:
        ValueError: a bad `title`, `session_id` or `cwd` (the message names it).
        OwnedSessionError: the directory is not usable (a symbolic link, not ours) or a file
            with this id is not a session file.
        OSError: the directory or file cannot be written.
    """
    if not isinstance(cwd, str) or "\x00" in cwd or len(cwd) > MAX_CWD_CHARS:
        raise ValueError(
            f"cwd: expected a path of at most {MAX_CWD_CHARS} characters without NUL characters"
        )
    name = _check_title(title)
    if session_id is not None and (
        not isinstance(session_id, str) or not SESSION_ID.fullmatch(session_id)
    ):
        raise ValueError(
            "sessionId: expected 1 to 128 letters, digits, '.', '_' or '-', starting and "
            "ending with a letter or digit (Pi's rule for session ids)"
        )
    root = _ensure_directory(sessions_directory(data_dir))
    with _locked(root / LOCK_SUFFIX):  # one creator of a given id at a time
        if session_id is not None:
            existing = _find_file(root, session_id)
            try:
                marked = existing is not None and _has_mark(existing)
            except OwnedSessionError as exc:
                raise ValueError(f"sessionId: {exc}; or choose another id") from None
            if existing is not None and not marked:
                raise ValueError(
                    f"sessionId: '{existing}' has this id but is a session ds4 did not "
                    "create (no owned mark); choose another id"
                )
            state = _state_of(existing) if existing is not None else None
            if existing is not None and state is not None and state.session_id == session_id:
                if expect_cwd is not None and not _same_directory(expect_cwd, state.cwd):
                    raise ValueError(
                        f"cwd: the session {json.dumps(session_id)} was opened with cwd "
                        f"{json.dumps(state.cwd)}, not {json.dumps(expect_cwd)}; a session keeps "
                        "its cwd: leave cwd out to reopen it, or open a new session"
                    )
                if name is not None and name != state.name:
                    append_entries(existing, [{"type": "session_info", "name": name}])
                    state = _state_of(existing)
                return OwnedSession(session_id, existing, state.leaf_id, False, state.cwd)
        new_id = session_id or _uuid7()
        now = datetime.now(UTC)
        stamp = _iso(now)
        file = root / f"{stamp.replace(':', '-').replace('.', '-')}_{new_id}.jsonl"
        header = {
            "type": "session",
            "version": CURRENT_SESSION_VERSION,
            "id": new_id,
            "timestamp": stamp,
            "cwd": cwd,
            OWNED_MARK: True,
        }
        lines = [header]
        leaf_id = None
        if name is not None:
            leaf_id = _new_id(set())
            lines.append(
                {
                    "type": "session_info",
                    "id": leaf_id,
                    "parentId": None,
                    "timestamp": stamp,
                    "name": name,
                }
            )
        _create_whole(file, b"".join(_line(obj) for obj in lines))
        return OwnedSession(new_id, file, leaf_id, True, cwd)


def append_entries(
    file: str | os.PathLike[str],
    entries: Sequence[Mapping[str, Any]],
    parent_id: str | None = None,
    *,
    descendant_of: str | None = None,
) -> list[str]:
    """Append `entries` to the owned session `file`, chained, and return their new ids.

    Each entry is a JSON object with a string `type` and without `id`, `parentId` or
    `timestamp`: this function gives it a fresh 8-hex id (unique within the file), the
    `parentId` (the first entry's parent is `parent_id`, default the current leaf, i.e. the
    last entry in file order; each next one's parent is the entry before it) and the ISO UTC
    `timestamp`. All lines are written with one `write` and fsynced before returning, under
    the file's lock (see the module docstring), so concurrent appenders in any process never
    interleave or lose lines. The caller checks ownership (`is_owned`).

    Args:
        file: the session file (opened without following a symbolic link).
        entries: 1 or more entries (JSON-serialisable dicts).
        parent_id: the parent of the first entry; `None` means the current leaf.
        descendant_of: with `parent_id` None, the entry the caller's work was computed for
            (a compaction's leaf): the first entry's parent is the current leaf when that
            leaf is `descendant_of` or descends from it (entries appended since on the same
            branch stay before the new ones), else `descendant_of` itself (another branch
            grew meanwhile; the new entries stay on the caller's). Decided under the lock.

    Returns:
        The new entry ids, in the order of `entries`.

    Raises:
        ValueError: no entries, or an entry that is not a dict with a string `type`, holds a
            reserved key, or is not JSON-serialisable (no NaN or infinity).
        UnknownParentError: `parent_id` (or `descendant_of`) names no entry of the file.
        OwnedSessionError: the file is not a regular file or has no session header.
        OSError: the file cannot be read or written; nothing was written (or the write failed
            part way, which the next append repairs as a torn line).
    """
    if not entries:
        raise ValueError("at least one entry is needed")
    prepared = [_check_entry(index, entry) for index, entry in enumerate(entries)]
    path = Path(file)
    with _locked(Path(f"{os.fspath(path)}{LOCK_SUFFIX}")):
        fd = _open_session_file(path, os.O_RDWR | os.O_APPEND)
        try:
            state = _refresh(fd)
            if parent_id is None and descendant_of is not None:
                parent_id = _branch_tip(state, descendant_of)
            if parent_id is not None and parent_id not in state.ids:
                raise UnknownParentError("parentId names no entry of this session")
            parent = parent_id if parent_id is not None else state.leaf_id
            stamp = _iso(datetime.now(UTC))
            known = state.ids
            new_ids: list[str] = []
            batch_ids: set[str] = set()
            chunks: list[bytes] = [b"\n"] if state.torn else []
            for entry_type, body in prepared:
                entry_id = _new_id(known, batch_ids)
                batch_ids.add(entry_id)
                chunks.append(_record_line(entry_type, entry_id, parent, stamp, body))
                new_ids.append(entry_id)
                state.parents[entry_id] = parent
                parent = entry_id
            data = b"".join(chunks)
            start = os.fstat(fd).st_size
            _write_all(fd, data)
            os.fsync(fd)
            state.offset = start + len(data)
            state.last_line_start = state.offset - len(chunks[-1])
            state.last_line = chunks[-1][:_LAST_LINE_CHECK_BYTES]
            state.torn = False
            state.ids.update(new_ids)
            state.leaf_id = new_ids[-1]
            for entry in entries:
                if entry["type"] == "session_info":
                    name = entry.get("name")
                    state.name = name if isinstance(name, str) and name.strip() else None
            return new_ids
        finally:
            os.close(fd)


@contextmanager
def locked(file: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the append lock of the owned session `file` for a read-check-append section.

    Inside it no other thread or process appends to `file`; `append_entries`,
    `current_leaf` and `session_id_of` called by this thread inside it take no lock again.
    Reading the file (a sync) and appending then see the same leaf and ids.

    Raises:
        OwnedSessionError: the lock file is a symbolic link.
        OSError: the lock file cannot be created.
    """
    with _locked(Path(f"{os.fspath(file)}{LOCK_SUFFIX}")):
        yield


def current_leaf(file: str | os.PathLike[str]) -> str | None:
    """The id of the last entry of an owned session file (under its lock), or `None`.

    Raises:
        OwnedSessionError: the file is not a regular file or has no session header.
        OSError: the file cannot be read.
    """
    return _state_of(Path(file)).leaf_id


def session_id_of(file: str | os.PathLike[str]) -> str:
    """The header id of an owned session file (read under its lock; cached).

    Raises:
        OwnedSessionError: the file is not a regular file or has no session header.
        OSError: the file cannot be read.
    """
    session_id = _state_of(Path(file)).session_id
    assert session_id is not None  # _scan raises for a file without a header
    return session_id


def _branch_tip(state: _FileState, entry_id: str) -> str:
    """The current leaf when it is `entry_id` or one of its descendants, else `entry_id`."""
    node, seen = state.leaf_id, set[str]()
    while node is not None and node not in seen:  # `seen` stops a (hand-made) parent cycle
        if node == entry_id:
            return cast("str", state.leaf_id)
        seen.add(node)
        node = state.parents.get(node)
    return entry_id


# --------------------------------------------------------------------------------------------
# Reading under the lock


def _state_of(path: Path) -> _FileState:
    with _locked(Path(f"{os.fspath(path)}{LOCK_SUFFIX}")):
        fd = _open_session_file(path, os.O_RDONLY)
        try:
            return _refresh(fd)
        finally:
            os.close(fd)


def _refresh(fd: int) -> _FileState:
    """The file's state, reading only what was added since the cached offset (if the cached
    prefix still ends with the same bytes), else the whole file."""
    info = os.fstat(fd)
    key = (info.st_dev, info.st_ino)
    with _cache_lock:
        state = _cache.get(key)
        if state is not None:
            _cache.move_to_end(key)
    size = info.st_size
    if state is not None:
        start = state.last_line_start
        if size < state.offset or _pread(fd, start, len(state.last_line)) != state.last_line:
            state = None
    if state is None:
        state = _FileState()
    _scan(fd, state, size)
    with _cache_lock:
        _cache[key] = state
        _cache.move_to_end(key)
        while len(_cache) > _CACHED_FILES:
            _cache.popitem(last=False)
    return state


def _scan(fd: int, state: _FileState, size: int) -> None:
    """Read lines from `state.offset` to `size` into `state` (ids, leaf, name, torn tail).

    Linear in the bytes read: a line longer than a chunk is gathered in a list of chunks and
    joined once, when its end is found."""
    held: list[bytes] = []  # the start of a line continuing past the chunks read so far
    last_start, last_piece = 0, cast("bytes | None", None)
    position = state.offset
    line_start = state.offset
    while position < size:
        chunk = _pread(fd, position, min(_READ_BYTES, size - position))
        if not chunk:
            break
        position += len(chunk)
        pieces = chunk.split(b"\n")
        if held and len(pieces) > 1:
            pieces[0] = b"".join([*held, pieces[0]])
            held = []
        held.append(pieces.pop())
        for piece in pieces:
            _take_line(state, piece)
            last_start, last_piece = line_start, piece
            line_start += len(piece) + 1
    pending = b"".join(held)
    state.offset = line_start
    if last_piece is not None:
        state.last_line_start, state.last_line = last_start, last_piece[:_LAST_LINE_CHECK_BYTES]
    state.torn = bool(pending)
    if pending:  # a torn last line: a complete record counts as an entry (Pi reads it so)
        _take_record(state, _parse(pending))
    if state.session_id is None:
        raise OwnedSessionError("the file does not start with a Pi session header")


def _take_line(state: _FileState, data: bytes) -> None:
    obj = _parse(data)
    if state.session_id is None:
        if obj is None:
            if data.strip():
                raise OwnedSessionError("the file does not start with a Pi session header")
            return
        if obj.get("type") != "session" or not isinstance(obj.get("id"), str):
            raise OwnedSessionError("the file does not start with a Pi session header")
        state.session_id = obj["id"]
        cwd = obj.get("cwd")
        state.cwd = cwd if isinstance(cwd, str) else None
        return
    _take_record(state, obj)


def _take_record(state: _FileState, obj: dict[str, Any] | None) -> None:
    if obj is None or obj.get("type") == "session" or not isinstance(obj.get("id"), str):
        return
    state.ids.add(obj["id"])
    parent = obj.get("parentId")
    state.parents[obj["id"]] = parent if isinstance(parent, str) else None
    state.leaf_id = obj["id"]
    if obj.get("type") == "session_info":
        name = obj.get("name")
        state.name = name if isinstance(name, str) and name.strip() else None


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(data)
    except ValueError:  # also UnicodeDecodeError
        return None
    return obj if isinstance(obj, dict) and isinstance(obj.get("type"), str) else None


# --------------------------------------------------------------------------------------------
# Files, locks, values


@contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `lock_path` (created 0600, never through a symlink);
    nothing more when this thread holds it already (`locked`)."""
    held: set[str] = _held.__dict__.setdefault("locks", set())
    key = os.path.abspath(lock_path)
    if key in held:
        yield
        return
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OwnedSessionError(
                f"the lock file '{lock_path}' is a symbolic link; remove it and retry"
            ) from None
        raise
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        os.close(fd)  # closing releases the lock


def _open_session_file(path: Path, flags: int) -> int:
    """Open a session file without following a symbolic link; refuse anything but a regular
    file with one hard link (OwnedSessionError saying why), checked on the open descriptor."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OwnedSessionError(f"'{path}' is a symbolic link, not a session file") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise OwnedSessionError(f"'{path}' is not a regular file")
    if info.st_nlink != 1:
        os.close(fd)
        raise OwnedSessionError(
            f"'{path}' has {info.st_nlink} hard links; an owned session file has one (another "
            "name may be a file ds4 must not write); remove the other links"
        )
    return fd


def _ensure_directory(root: Path) -> Path:
    """Create `root` 0700 if needed; refuse a symbolic link or a directory of another user."""
    try:
        root.parent.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
        root.mkdir(mode=_DIR_MODE)
        os.chmod(root, _DIR_MODE)  # mkdir's mode is filtered by the umask
    except FileExistsError:
        pass
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OwnedSessionError(
            f"'{root}' is not a directory of this user (a symbolic link?); remove it and retry"
        )
    return root.absolute()


def _same_directory(asked: str, recorded: str | None) -> bool:
    """Whether the asked cwd is the recorded one, up to `os.path.normpath` (trailing and
    doubled slashes, `.` components)."""
    return recorded is not None and os.path.normpath(asked) == os.path.normpath(recorded)


def _find_file(root: Path, session_id: str) -> Path | None:
    """The regular file `<stamp>_<session_id>.jsonl` in `root` (stamps hold no `_`)."""
    wanted = f"{session_id}.jsonl"
    for path in sorted(root.iterdir()):
        stamp, _, rest = path.name.partition("_")
        if rest == wanted and stamp and not path.is_symlink() and path.is_file():
            return path
    return None


def _create_whole(file: Path, data: bytes) -> None:
    """Write `data` as the new file `file`: temp file, fsync, hard link into place (fails if
    `file` exists), directory fsync."""
    temporary = file.with_name(f".tmp-{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temporary, file)
    finally:
        temporary.unlink(missing_ok=True)
    dir_fd = os.open(file.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    except OSError:
        pass  # file systems that cannot fsync a directory
    finally:
        os.close(dir_fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _pread(fd: int, offset: int, length: int) -> bytes:
    if length <= 0:
        return b""
    return os.pread(fd, length, max(0, offset))


def _check_title(title: str | None) -> str | None:
    if title is None:
        return None
    if not isinstance(title, str) or len(title) > MAX_TITLE_CHARS or "\x00" in title:
        raise ValueError(f"title: expected a string of at most {MAX_TITLE_CHARS} characters")
    name = " ".join(title.splitlines()).strip()
    return name or None


def _check_entry(index: int, entry: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(the type as a JSON string, the entry's other keys as a JSON object), as bytes, of a
    valid entry."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("type"), str):
        raise ValueError(f"entries[{index}] must be an object with a string type")
    if entry["type"] == "session":
        raise ValueError(f"entries[{index}] cannot be a session header")
    for key in _RESERVED_KEYS:
        if key in entry:
            raise ValueError(f"entries[{index}] must not hold '{key}' (it is assigned here)")
    try:
        body = _json_bytes({k: v for k, v in entry.items() if k != "type"})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"entries[{index}] is not JSON: {exc}") from None
    return _json_bytes(entry["type"]), body


def _record_line(
    entry_type: bytes, entry_id: str, parent: str | None, stamp: str, body: bytes
) -> bytes:
    """One JSONL line: `type`, `id`, `parentId`, `timestamp` first, then the body object's
    keys, ending in `\\n`. `entry_type` is already JSON (`_check_entry`); `entry_id` and
    `stamp` need no escaping (hex digits, an ISO time); `parent` may be any id of the file."""
    parent_json = b"null" if parent is None else _json_bytes(parent)
    head = b'{"type":%b,"id":"%b","parentId":%b,"timestamp":"%b"' % (
        entry_type,
        entry_id.encode("ascii"),
        parent_json,
        stamp.encode("ascii"),
    )
    if body == b"{}":
        return head + b"}\n"
    return head + b"," + body[1:] + b"\n"


def _line(obj: Mapping[str, Any]) -> bytes:
    """One JSONL line: compact JSON, UTF-8, ending in `\\n` (JSON escapes every `\\n`)."""
    return _json_bytes(obj) + b"\n"


def _json_bytes(obj: Any) -> bytes:
    """Compact JSON as UTF-8; a lone surrogate (valid JSON, not UTF-8) is written escaped."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("ascii")


def _new_id(known: set[str], batch: set[str] | frozenset[str] = frozenset()) -> str:
    """8 random lower-case hex digits used by no entry of the file nor of the batch."""
    while True:
        entry_id = secrets.token_hex(4)
        if entry_id not in known and entry_id not in batch:
            return entry_id


def _iso(moment: datetime) -> str:
    """`2026-01-01T00:00:01.000Z`: UTC, milliseconds (the form Pi writes)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _uuid7() -> str:
    """A UUID version 7 (RFC 9562: 48-bit Unix ms time, then random bits), as Pi makes."""
    ms = time.time_ns() // 1_000_000
    value = (ms & ((1 << 48) - 1)) << 80 | int.from_bytes(secrets.token_bytes(10), "big")
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # variant
    return str(uuid.UUID(int=value))
