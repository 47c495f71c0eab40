"""Session files as the engine reads them: resolving a session path a caller named, the one
translation of session-file failures into `RequestError`, and the cache of parsed files.

Every request and command that names a session file resolves it with `resolve_session_path`,
and every read of one (parse, prefix hashes, header, index sync) runs inside
`session_file_errors`, so a failure reads the same, and names the same field, from every entry
point (`ds4/plan`, `ds4/retrieve`, `ds4/manifest`, `ds4/compact`, the lifecycle notifications,
`ds4.summaries`, `ds4 index`).

`SessionCache` keeps the last `SESSION_CACHE_SIZE` parsed files (an LRU), each valid while its
size stays the same and its bytes hash to the stored prefix hashes (size and mtime alone are not
trusted: `ds4_core.sessions.prefix`; over 4 MiB a request compares the last block and what a
background pass found, a background pass the rest: `prefix.check`, windows (a) and (c)); a
file that only grew is parsed from where the last parse stopped. Per file it also keeps the
contexts built per leaf (`BuiltContext`) with their messages' token estimates and, built on
first use, the planner's `MessageStructure` and the set of the branch's entry ids: what a plan
or a retrieval would otherwise rebuild from every message of the session on each request
(issue 13).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..json_bounds import echo
from ..planner.structure import MessageStructure, StructureError, build_structure
from ..requests import RequestError, SessionRef
from ..sessions import LAST_ENTRY, SessionContext, SessionFormatError, context_for_path, read_all
from ..sessions.context import extend_context, has_context_edit
from ..sessions.paths import PathIndex
from ..sessions.prefix import FileShrankError, PrefixHashes, check, extend, hash_prefix
from ..sessions.reader import SessionEntry, SessionFile, SessionHeader, read_header, read_more
from ..tokens import estimate_message_tokens

SESSION_CACHE_SIZE = 8
"""Parsed session files kept (LRU), and contexts kept per file (cleared when full)."""

SESSION_FILE = "session.file"
"""The wire field naming a session file in requests (`ds4/plan`, `ds4/compact`, ...)."""


@contextmanager
def session_file_errors(path: Path | str, field: str) -> Iterator[None]:
    """Turn a failure to read session file `path` into `RequestError` naming `field`: the one
    place where session-file read errors get their message (the frontends put the field in
    front: `ds4/plan: params.session.file: ...`, `--session: ...`).

    Raises:
        RequestError: for `FileShrankError` (`session file '<path>' changed while it was
            read; try again`), `SessionFormatError` (its own message, `cannot read session
            file '<path>': ...`: not a Pi session, an unsupported version, ...) and `OSError`
            (`cannot read session file '<path>': <reason>`).
    """
    try:
        yield
    except FileShrankError as exc:  # the file shrank between the read and the hashing
        raise RequestError(
            f"session file '{path}' changed while it was read; try again", field
        ) from exc
    except SessionFormatError as exc:
        raise RequestError(str(exc), field) from exc
    except OSError as exc:
        raise RequestError(
            f"cannot read session file '{path}': {exc.strerror or exc}", field
        ) from exc


def resolve_session_path(file: str, field: str) -> Path:
    """The resolved session file `file`.

    Raises:
        RequestError: naming `field`, when `file` is empty or not a usable file, also for a
            path the system refuses (too long: ENAMETOOLONG, a NUL byte, a lone surrogate)
            and for one that is not valid UTF-8 (a file name with byte 0xFF arrives from
            `os.listdir` or `sys.argv` as the lone surrogate U+DCFF): the index stores
            session paths as SQLite text, which is UTF-8, so such a file must be renamed. The
            path is quoted through `json_bounds.echo`.
    """
    if not file:
        raise RequestError(f"{field}: a session file path is required", field)
    resolved: Path | None = None
    try:
        path = Path(file).expanduser()
        if path.is_file():
            resolved = path.resolve()
        problem = "does not exist or is not a file"
    except (OSError, ValueError) as exc:  # UnicodeEncodeError is a ValueError
        problem = f"cannot be used ({getattr(exc, 'strerror', None) or type(exc).__name__})"
    if resolved is not None:
        not_utf8 = _utf8_path_problem(resolved)
        if not_utf8 is None:
            return resolved
        raise RequestError(f"{field}: session file {echo(file)} {not_utf8}", field)
    raise RequestError(
        f"{field}: session file {echo(file)} {problem}; pass the path of a Pi session .jsonl file",
        field,
    )


def read_session_header(path: Path, field: str = SESSION_FILE) -> SessionHeader | None:
    """The Pi session header of `path` (None while the file holds none yet), read without
    parsing the rest of the file.

    Raises:
        RequestError: naming `field` (`session_file_errors`).
    """
    with session_file_errors(path, field):
        return read_header(path)


@dataclass
class BuiltContext:
    """The context of one leaf with its messages' `chars-v2` token estimates; the planner's
    structure of those messages and the set of the branch's entry ids are built on first use
    and kept (callers must not mutate any of them)."""

    context: SessionContext
    tokens: list[int]
    extendable: bool = False
    """Whether `extended` may build the context of a longer path from this one (no
    `context_edit` on its path: `sessions.context.extend_context`)."""
    _structure: MessageStructure | None = None
    _branch: frozenset[str] | None = None
    _native: frozenset[int] | None = None
    verbatim: dict[Any, tuple[bool, frozenset[str]]] = field(default_factory=dict)
    """What dry plans of this context kept verbatim, by plan inputs
    (`planning.Planner.kept_verbatim`): (fell back?, source ids of the kept messages)."""
    artifacts: dict[Any, Any] = field(default_factory=dict)
    """This context with its large tool results condensed, by artifact settings
    (`artifacts.ArtifactOffloads`)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def extended(self, path: list[SessionEntry], thinking_level: str) -> BuiltContext | None:
        """The built context of `path`, the path of this context followed by appended
        entries: the new messages' tokens estimated, the kept structure extended
        (`MessageStructure.extended`) and the id sets grown; None when that is not sound
        (`extend_context`): build it again."""
        if not self.extendable:
            return None
        context = extend_context(self.context, path, thinking_level)
        if context is None:
            return None
        known = len(self.context.messages)
        added = context.messages[known:]
        tokens = [*self.tokens, *(estimate_message_tokens(m) for m in added)]
        grown = BuiltContext(context, tokens, extendable=True)
        with self._lock:
            structure, native, branch = self._structure, self._native, self._branch
        if structure is not None:
            try:
                grown._structure = structure.extended(
                    context.messages, tokens[known:], context.message_entry_ids[known:]
                )
            except StructureError:
                grown._structure = None  # built on first use, and fails there as in a plan
        if native is not None:
            grown._native = native | {id(m) for m in added}
        if branch is not None:
            grown._branch = branch | set(context.path_entry_ids[len(self.context.path_entry_ids) :])
        return grown

    def structure(self) -> MessageStructure:
        """`build_structure` of the context's messages, tokens and entry ids (built once)."""
        with self._lock:
            if self._structure is None:
                context = self.context
                self._structure = build_structure(
                    context.messages, self.tokens, context.message_entry_ids
                )
            return self._structure

    def native_ids(self) -> frozenset[int]:
        """The object ids of the context's messages (built once): the messages whose privacy
        writes are kept between plans (`privacy_cache`)."""
        with self._lock:
            if self._native is None:
                self._native = frozenset(id(message) for message in self.context.messages)
            return self._native

    def branch(self) -> frozenset[str]:
        """The entry ids of the context's path (built once)."""
        with self._lock:
            if self._branch is None:
                self._branch = frozenset(self.context.path_entry_ids)
            return self._branch


@dataclass
class CachedSession:
    """A parsed session file, valid while its size stays the same and its bytes hash to
    `prefix`, with the contexts built from it per leaf and their messages' token estimates.
    `read_more` extends the parse when the file only grew."""

    size: int
    mtime_ns: int
    file: SessionFile
    prefix: PrefixHashes
    contexts: dict[str | None, BuiltContext] = field(default_factory=dict)
    paths: PathIndex | None = None
    grown_from: dict[str | None, BuiltContext] = field(default_factory=dict)
    """The contexts of this file before it grew (`read_more`): the newest leaf's context is
    extended from its old one (`BuiltContext.extended`) instead of built again."""

    def index(self) -> PathIndex:
        """Entries by id and the active paths walked (built on first use)."""
        if self.paths is None:
            self.paths = PathIndex(self.file.entries)
        return self.paths

    def entry(self, entry_id: str) -> SessionEntry | None:
        """The entry with `entry_id` (the last one on duplicate ids), or None."""
        return self.index().entry(entry_id)


class SessionCache:
    """Parsed session files by resolved path (see the module docstring). Thread-safe: one
    lock guards the cache; parsing runs outside it."""

    def __init__(self, capacity: int = SESSION_CACHE_SIZE) -> None:
        self._capacity = capacity
        self._sessions: OrderedDict[str, CachedSession] = OrderedDict()
        self._lock = threading.Lock()

    def load(self, path: Path) -> SessionFile:
        """Parsed entries of `path`, cached while its bytes stay the same.

        Raises:
            RequestError: `path` cannot be read or is not a Pi session (field `session.file`).
        """
        return self.cached(path).file

    def cached(self, path: Path) -> CachedSession:
        """The cache entry of `path`, parsed (or extended, when the file only grew) as needed.

        Raises:
            RequestError: `path` cannot be read or is not a Pi session (field `session.file`).
        """
        key = str(path)
        with self._lock:
            cached = self._sessions.get(key)
        with session_file_errors(path, SESSION_FILE):
            stat = path.stat()  # inside: a file deleted since it was resolved is a RequestError
            if (
                cached is not None
                and cached.size == stat.st_size
                and check(path, cached.prefix, rolling_blocks=0).changed is None
            ):
                with self._lock:
                    if key in self._sessions:
                        self._sessions.move_to_end(key)
                return cached
            parsed = None
            paths = None
            grown_from: dict[str | None, BuiltContext] = {}
            if cached is not None and stat.st_size > cached.size:
                # Pi appends: parse only the new bytes when the old ones are unchanged, and
                # extend the walked paths instead of walking them again.
                parsed = read_more(path, cached.file, cached.prefix)
                if parsed is not None and cached.paths is not None and not cached.file.torn_tail:
                    old = len(cached.file.entries)
                    added = parsed.entries[old:]
                    paths = cached.paths.extended(parsed.entries, added)
                    if not any(entry.entry_id in cached.paths.by_id for entry in added):
                        with self._lock:  # no id reused: the old paths still hold
                            grown_from = dict(cached.contexts)
            if parsed is None or cached is None:
                parsed = read_all(path)
                prefix = hash_prefix(path, parsed.end_offset)
            else:
                prefix = extend(path, cached.prefix, parsed.end_offset)
        cached = CachedSession(
            stat.st_size, stat.st_mtime_ns, parsed, prefix, paths=paths, grown_from=grown_from
        )
        with self._lock:
            self._sessions[key] = cached
            self._sessions.move_to_end(key)
            while len(self._sessions) > self._capacity:
                self._sessions.popitem(last=False)
        return cached

    def context(self, ref: SessionRef) -> tuple[SessionFile, SessionContext, list[int], Path]:
        """The session's parsed file, the context of `ref.leaf_id` (default: the last entry),
        the `chars-v2` tokens of each context message, and the resolved path. Callers must not
        mutate them.

        Raises:
            RequestError: a missing or unreadable session file (field `session.file`), or an
                unknown leaf (field `session.leafId`).
        """
        cached, built, path = self.built_context(ref)
        return cached.file, built.context, built.tokens, path

    def built_context(self, ref: SessionRef) -> tuple[CachedSession, BuiltContext, Path]:
        """As `context`, with the cache entry of the file (its parse and entries by id) and the
        context's kept structure (`BuiltContext`).

        Raises:
            RequestError: as `context`.
        """
        path = resolve_session_path(ref.file, SESSION_FILE)
        cached = self.cached(path)
        with self._lock:
            found = cached.contexts.get(ref.leaf_id)
        if found is None:
            try:
                entries, level = cached.index().path_and_level(
                    ref.leaf_id if ref.leaf_id else LAST_ENTRY
                )
            except SessionFormatError as exc:  # an unknown leaf: not a session-file failure
                raise RequestError(str(exc), "session.leafId") from exc
            previous = cached.grown_from.get(ref.leaf_id)
            found = previous.extended(entries, level) if previous is not None else None
            if found is None:
                context = context_for_path(entries, level)
                found = BuiltContext(
                    context,
                    [estimate_message_tokens(m) for m in context.messages],
                    extendable=not has_context_edit(entries),
                )
            with self._lock:
                if len(cached.contexts) >= self._capacity:
                    cached.contexts.clear()
                cached.contexts[ref.leaf_id] = found
        return cached, found, path


def _utf8_path_problem(path: Path) -> str | None:
    """None when `path` is valid UTF-8, else what to rename: the file, or the folder above
    it whose name is not UTF-8 (a byte the file system decoding kept as a lone surrogate)."""
    if not _is_utf8(str(path)):
        if not _is_utf8(path.name):
            return "cannot be indexed: the file name is not valid UTF-8; rename it"
        return (
            "cannot be indexed: the file name is not valid UTF-8 (a folder in its path); "
            "rename it or move the file"
        )
    return None


def _is_utf8(text: str) -> bool:
    """Whether `text` encodes as UTF-8 (holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
