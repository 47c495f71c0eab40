"""Opening the derived SQLite store: location, pragmas, file modes, migration, move-aside.

Storage rules (docs/architecture.md "Storage rules"; docs/reference.md §3.11):

* One database file, mode 0600, in a directory created with mode 0700. The default location is
  `$XDG_DATA_HOME/ds4-lsp/context.db` (`~/.local/share/ds4-lsp/context.db` when unset; XDG
  Base Directory Specification 0.8).
* Pragmas on every connection: `journal_mode=WAL` (readers never block on a writer),
  `foreign_keys=1`, `busy_timeout` (setting `storage.busyTimeoutMs`, default 5000 ms),
  `synchronous=NORMAL` (durable against application crashes; a power loss may drop the last
  commits, which is fine for a projection that is rebuilt from the session files).
* Connections are per thread (peewee's thread-local connection state), so reads work from any
  thread. Every write goes through `with store.write():`, which takes a process-wide lock for
  the database file and then `BEGIN IMMEDIATE` (`db.atomic("IMMEDIATE")`), so there is exactly
  one writer and the write lock is taken up front instead of on the first write statement.
* A database of ours from a newer schema version, a corrupt one, or one whose applied
  migration checksums do not match, is renamed to `<name>.<reason>-<UTC timestamp>` (its `-wal`
  and `-shm` files follow), a fresh database is created, and `Store.notices` says what happened
  and where the old file is. The store is a projection of the session files, so nothing is lost.
* A file that is not ours is never renamed or changed: a non-empty file without the SQLite
  header (a session file given as `--db` by mistake, say), or an SQLite database with tables
  but no `schema_migrations`, raises `ForeignDatabaseError` saying to choose another path.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import peewee

from ds4_core.store.migrations import (
    LATEST_VERSION,
    SchemaProblem,
    apply_migrations,
    check_applied,
    user_version,
)
from ds4_core.store.models import StoreModels, build_models

DEFAULT_BUSY_TIMEOUT_MS = 5000
"""`storage.busyTimeoutMs` default (docs/reference.md §2)."""

DATABASE_ENV_VAR = "DS4_DB"
"""Environment variable that overrides the database path (below CLI / initializationOptions)."""

APP_DIR_NAME = "ds4-lsp"
DATABASE_FILE_NAME = "context.db"
SIDECAR_SUFFIXES = ("-wal", "-shm")
"""SQLite WAL-mode companion files of a database (they move and are chmod-ed with it)."""

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_CORRUPTION_CODES = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})

_write_locks: dict[str, threading.RLock] = {}
_write_locks_guard = threading.Lock()


def utc_now_iso() -> str:
    """The current UTC time as ISO-8601 with ms and `Z`, e.g. `2026-11-30T10:15:00.123Z`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def default_database_path(env: Mapping[str, str] = os.environ) -> Path:
    """`$XDG_DATA_HOME/ds4-lsp/context.db`, or `~/.local/share/ds4-lsp/context.db`.

    A relative `XDG_DATA_HOME` is ignored, as the XDG Base Directory Specification requires.
    """
    data_home = env.get("XDG_DATA_HOME", "")
    base = Path(data_home) if data_home and os.path.isabs(data_home) else None
    if base is None:
        base = Path(env.get("HOME") or Path.home()) / ".local" / "share"
    return base / APP_DIR_NAME / DATABASE_FILE_NAME


def _expand(value: str, env: Mapping[str, str]) -> Path:
    if value == "~" or value.startswith("~/"):
        home = env.get("HOME") or str(Path.home())
        return Path(home + value[1:])
    return Path(value).expanduser()


def resolve_database_path(
    cli: str | None,
    init_option: str | None,
    env: Mapping[str, str] = os.environ,
    setting: str | None = None,
) -> Path:
    """Pick the database file: the first non-empty of, in order,

    1. `cli` (`--db`), then `init_option` (LSP `initializationOptions.databasePath`);
    2. the `DS4_DB` environment variable;
    3. `setting` (`storage.databasePath`);
    4. `default_database_path(env)`.

    `~` is expanded. A relative `cli`, `init_option` or `DS4_DB` value is relative to the current
    directory; a relative `setting` is relative to the default data directory
    (`$XDG_DATA_HOME/ds4-lsp`), as ds4's setting is relative to its own data directory
    (docs/reference.md §2). Returns an absolute path; nothing is created.
    """
    for value in (cli, init_option, env.get(DATABASE_ENV_VAR)):
        if value and value.strip():
            return _expand(value.strip(), env).absolute()
    if setting and setting.strip():
        path = _expand(setting.strip(), env)
        if not path.is_absolute():
            path = default_database_path(env).parent / path
        return path.absolute()
    return default_database_path(env).absolute()


def _write_lock_for(path: Path) -> threading.RLock:
    key = os.path.normcase(str(path))
    with _write_locks_guard:
        lock = _write_locks.get(key)
        if lock is None:
            lock = _write_locks[key] = threading.RLock()
        return lock


class _TrackingSqliteDatabase(peewee.SqliteDatabase):
    """`peewee.SqliteDatabase` that remembers every per-thread connection it opens.

    peewee keeps one connection per thread; `close()` only closes the calling thread's one. We
    record all of them (opened with `check_same_thread=False`, each still used by one thread
    only) so `Store.close()` can close every connection before a file is moved or deleted.
    Connections of threads that have ended are closed when the next connection is opened.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._opened: list[tuple[threading.Thread, sqlite3.Connection]] = []
        self._opened_guard = threading.Lock()
        super().__init__(*args, **kwargs)

    def _connect(self) -> sqlite3.Connection:
        # peewee-stubs omit the private `_connect` that peewee's own subclasses override.
        conn: sqlite3.Connection = super()._connect()  # type: ignore[misc]
        with self._opened_guard:
            alive = []
            for thread, other in self._opened:
                if thread.is_alive():
                    alive.append((thread, other))
                else:
                    other.close()
            alive.append((threading.current_thread(), conn))
            self._opened = alive
        return conn

    def close_all(self) -> None:
        """Close the calling thread's connection and every other one this object opened."""
        try:
            self.close()
        except peewee.OperationalError:
            pass  # "Attempting to close database while a transaction is open": closed below
        with self._opened_guard:
            opened, self._opened = self._opened, []
        for _thread, conn in opened:
            try:
                conn.close()
            except sqlite3.Error:
                pass


def _make_database(path: Path, busy_timeout_ms: int) -> _TrackingSqliteDatabase:
    return _TrackingSqliteDatabase(
        str(path),
        pragmas=[
            ("journal_mode", "wal"),
            ("foreign_keys", 1),
            ("busy_timeout", int(busy_timeout_ms)),
            ("synchronous", "normal"),
        ],
        timeout=busy_timeout_ms / 1000.0,
        check_same_thread=False,
    )


class Store:
    """An open derived store. Create it with `open_store`.

    Attributes:
        path: the database file (absolute).
        db: the peewee `SqliteDatabase` (per-thread connections; `db.connection()` gives the
            calling thread's `sqlite3.Connection`).
        notices: messages for the user about what happened while opening (e.g. a database that
            was moved aside), in order; empty when nothing noteworthy happened.
        busy_timeout_ms: the SQLite busy timeout of every connection (ms).
        thread_cache: per-thread values a repository keeps between calls on the calling
            thread's connection (`threading.local`; e.g. `store.memory` planning rows).
    """

    def __init__(
        self, path: Path, db: _TrackingSqliteDatabase, notices: list[str], busy_timeout_ms: int
    ) -> None:
        self.path = path
        self.db = db
        self.notices = notices
        self.busy_timeout_ms = busy_timeout_ms
        self._write_lock = _write_lock_for(path)
        self._local = threading.local()
        self.thread_cache = threading.local()

    @cached_property
    def models(self) -> StoreModels:
        """peewee model classes bound to this store's database (`store.models`)."""
        return build_models(self.db)

    @property
    def schema_version(self) -> int:
        """`PRAGMA user_version` (the highest applied migration)."""
        return user_version(self.db.connection())

    def connection(self) -> sqlite3.Connection:
        """The calling thread's `sqlite3.Connection` (opened on first use, pragmas applied)."""
        return self.db.connection()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """The single-writer context: process-wide lock for this file, then `BEGIN IMMEDIATE`.

        Yields the calling thread's connection. Commits on normal exit, rolls back (and
        re-raises) on an exception, so a failed write leaves the previous data intact. Nested
        use in the same thread becomes a savepoint. Waiting for another process's write lock is
        bounded by `busy_timeout_ms`; then `peewee.OperationalError("database is locked")`.
        """
        with self._write_lock:
            self._local.depth = getattr(self._local, "depth", 0) + 1
            try:
                with self.db.atomic("IMMEDIATE"):
                    yield self.db.connection()
            finally:
                self._local.depth -= 1

    def in_write(self) -> bool:
        """Whether the calling thread is inside `write()` (so it holds the writer lock)."""
        return getattr(self._local, "depth", 0) > 0

    def close(self) -> None:
        """Close every connection of this store (all threads). The store is unusable after."""
        self.db.close_all()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({str(self.path)!r})"


def _ensure_directory(directory: Path) -> None:
    """Create `directory` and missing parents with mode 0700; existing ones are left alone."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=_DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(folder, _DIR_MODE)  # mkdir's mode is filtered by the umask
    if not directory.is_dir():
        raise NotADirectoryError(
            f"ds4: cannot create the database directory '{directory}': a file is in the way; "
            "choose another database path (--db, DS4_DB or storage.databasePath)"
        )


def _restrict_file_modes(path: Path) -> None:
    for candidate in (path, *(Path(f"{path}{s}") for s in SIDECAR_SUFFIXES)):
        try:
            if stat.S_IMODE(candidate.stat().st_mode) != _FILE_MODE:
                os.chmod(candidate, _FILE_MODE)
        except FileNotFoundError:
            continue


def _precreate(path: Path) -> None:
    """Create an empty database file with mode 0600 before SQLite opens it (no 0644 window)."""
    if path.exists():
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def _sqlite_error(exc: BaseException) -> sqlite3.Error | None:
    if isinstance(exc, sqlite3.Error):
        return exc
    orig = getattr(exc, "orig", None)  # peewee wraps driver errors and keeps the original
    if isinstance(orig, sqlite3.Error):
        return orig
    cause = exc.__cause__ or exc.__context__
    return cause if isinstance(cause, sqlite3.Error) else None


def _is_corruption(exc: BaseException) -> bool:
    error = _sqlite_error(exc)
    if error is None:
        return False
    if getattr(error, "sqlite_errorname", None) in _CORRUPTION_CODES:
        return True
    text = str(error).lower()
    return "file is not a database" in text or "malformed" in text


def is_database_locked(exc: BaseException) -> bool:
    """Whether `exc` (sqlite3's, or peewee's wrapping of it) is SQLite's SQLITE_BUSY or
    SQLITE_LOCKED: another connection held the lock longer than the busy timeout. The write
    did not happen and may be retried; nothing is wrong with the database."""
    error = _sqlite_error(exc)
    if error is None:
        return False
    name = getattr(error, "sqlite_errorname", None) or ""
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):  # extended codes too
        return True
    text = str(error).lower()
    return "database is locked" in text or "database table is locked" in text


def _inspect(db: _TrackingSqliteDatabase, check_integrity: bool) -> SchemaProblem | None:
    conn = db.connection()
    problem = check_applied(conn)
    if problem is not None:
        return problem
    if check_integrity:
        rows = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
        if rows != ["ok"]:
            shown = "; ".join(str(r) for r in rows[:3])
            return SchemaProblem("corrupt", f"SQLite's integrity check failed ({shown})")
    return None


def _timestamp_slug() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def move_aside(path: Path, reason: str) -> Path:
    """Rename `path` (and its `-wal`/`-shm`) to `<name>.<reason>-<UTC timestamp>[-n]`.

    Returns the new path of the main file. The caller must have closed every connection.

    Raises:
        OSError: if the rename fails (e.g. permissions).
    """
    base = f"{path.name}.{reason}-{_timestamp_slug()}"
    target = path.with_name(base)
    counter = 1
    while target.exists() or any(Path(f"{target}{s}").exists() for s in SIDECAR_SUFFIXES):
        target = path.with_name(f"{base}-{counter}")
        counter += 1
    os.replace(path, target)
    for suffix in SIDECAR_SUFFIXES:
        sidecar = Path(f"{path}{suffix}")
        if sidecar.exists():
            os.replace(sidecar, Path(f"{target}{suffix}"))
    return target


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database file (sqlite.org "Database File Format" 1.3)."""


class ForeignDatabaseError(OSError):
    """The database path holds a file ds4 did not create; it is left untouched."""


def _refuse_foreign_file(db_path: Path) -> None:
    """Raise `ForeignDatabaseError` when `db_path` is a non-empty file that is not SQLite."""
    try:
        with open(db_path, "rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise ForeignDatabaseError(
            f"the database path '{db_path}' is a directory; give a file path "
            "(--db, initializationOptions.databasePath or DS4_DB)"
        ) from None
    if head and head != SQLITE_HEADER:
        raise ForeignDatabaseError(
            f"'{db_path}' is not an SQLite database, so ds4 will not use or replace it; "
            "choose another database path (--db, initializationOptions.databasePath or DS4_DB)"
        )
    if head == SQLITE_HEADER:
        # Read-only look before our pragmas (WAL) touch the file: tables but none of ours?
        try:
            probe = sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True)
            try:
                names = {r[0] for r in probe.execute("SELECT name FROM sqlite_master")}
            finally:
                probe.close()
        except sqlite3.DatabaseError:
            return  # damaged: a corrupt file of ours is moved aside later
        if names and "schema_migrations" not in names:
            raise ForeignDatabaseError(
                f"'{db_path}' is an SQLite database that ds4 did not create (no "
                "schema_migrations table); ds4 will not use or replace it: choose another "
                "database path (--db, initializationOptions.databasePath or DS4_DB)"
            )


def open_store(
    path: str | os.PathLike[str],
    *,
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
    check_integrity: bool = True,
) -> Store:
    """Open (creating if needed) the store at `path` and bring its schema up to date.

    Creates missing directories with mode 0700 and the file with mode 0600 (its `-wal`/`-shm`
    too), sets the pragmas, checks the schema (and `PRAGMA quick_check` when `check_integrity`),
    and applies pending migrations in one transaction. A newer, corrupt or tampered database
    of ours is moved aside (see `move_aside`) and replaced by a fresh one; each such event adds
    a message to `Store.notices`.

    Args:
        path: the database file (`~` is NOT expanded here; see `resolve_database_path`).
        busy_timeout_ms: SQLite busy timeout in ms (setting `storage.busyTimeoutMs`).
        check_integrity: run `PRAGMA quick_check` (time linear in the file size).

    Raises:
        ForeignDatabaseError: `path` holds a file ds4 did not create (not SQLite, or an SQLite
            database without our schema); it is left untouched.
        OSError: the directory or file cannot be created, chmod-ed or moved aside.
        peewee.OperationalError: e.g. "database is locked" when another process holds the
            write lock longer than the busy timeout while we migrate; a locked database is
            never moved aside.
    """
    if busy_timeout_ms < 1:
        raise ValueError(f"busy_timeout_ms must be >= 1, got {busy_timeout_ms}")
    db_path = Path(path).absolute()
    _refuse_foreign_file(db_path)
    _ensure_directory(db_path.parent)
    notices: list[str] = []
    for _attempt in range(3):
        _precreate(db_path)
        _restrict_file_modes(db_path)
        db = _make_database(db_path, busy_timeout_ms)
        try:
            problem = _inspect(db, check_integrity)
            if problem is None:
                apply_migrations(db.connection())
                _restrict_file_modes(db_path)
                return Store(db_path, db, notices, busy_timeout_ms)
        except (sqlite3.DatabaseError, peewee.DatabaseError) as exc:
            if not _is_corruption(exc):
                db.close_all()
                raise
            problem = SchemaProblem("corrupt", f"SQLite reports: {_sqlite_error(exc)}")
        db.close_all()
        if problem.reason == "unrecognized":
            raise ForeignDatabaseError(
                f"'{db_path}' is an SQLite database that ds4 did not create ({problem.detail}); "
                "ds4 will not use or replace it: choose another database path (--db, "
                "initializationOptions.databasePath or DS4_DB)"
            )
        moved = move_aside(db_path, problem.reason)
        notices.append(
            f"ds4: the database '{db_path}' could not be used: {problem.detail}. It was moved "
            f"aside to '{moved}' and a fresh database was created; sessions are re-indexed "
            "from their JSONL files on next use. Delete the old file once you no longer need it."
        )
    raise RuntimeError(  # pragma: no cover - a freshly created database always passes
        f"ds4: could not create a usable database at '{db_path}' after moving bad files aside"
    )


def database_locked_message(path: str | os.PathLike[str], busy_timeout_ms: int) -> str:
    """What to tell the user when `is_database_locked`: the lock is another connection's
    (nothing is damaged, nothing was written), and how to get past it (wait, or a longer
    `storage.busyTimeoutMs`). `busy_timeout_ms` is the timeout that ran out (ms)."""
    return (
        f"the database '{path}' is locked: another connection (a ds4-lsp server or another "
        f"ds4 command) held its write lock longer than storage.busyTimeoutMs ({busy_timeout_ms}"
        " ms); nothing was written and the database is not damaged. Try again when that "
        "writer is done, or wait longer: raise the setting storage.busyTimeoutMs (ds4 --set "
        "storage.busyTimeoutMs=N)"
    )


__all__ = [
    "DATABASE_ENV_VAR",
    "ForeignDatabaseError",
    "DEFAULT_BUSY_TIMEOUT_MS",
    "LATEST_VERSION",
    "Store",
    "default_database_path",
    "move_aside",
    "open_store",
    "resolve_database_path",
    "utc_now_iso",
]
