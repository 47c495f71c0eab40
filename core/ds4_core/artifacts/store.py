"""The content-addressed artifact store (docs/artifacts.md; docs/reference.md §3.14).

An object is the bytes of one large tool result, named by their SHA-256:
`<root>/<first 2 hex>/<64 hex>`, where `<root>` is the `artifacts` directory beside the
database file (`artifact_root`). Directories are 0700 and objects 0600, like the database.

Writing is crash-safe: the bytes go to a temporary file in the object's directory, opened with
exclusive create (`O_CREAT | O_EXCL`, never an existing file), fsynced, then renamed over the
object's name (`os.replace`, atomic on POSIX) and the directory fsynced. A crash before the
rename leaves at most a temporary file, whose name (`.tmp-...`) is never an object name; so a
reader sees a whole object or none. `sweep_temporaries` removes temporaries a crashed writer
left. An object already present is re-hashed before it is trusted (dedup); a corrupt one is
moved to `<root>/quarantine/` and written again. Every read re-hashes too: a corrupt object is
quarantined and `ArtifactCorruptError` raised, never wrong bytes returned.

`put` and garbage collection exclude each other through `<root>/.lock` (`ArtifactStore.locked`:
`flock`, shared for `put`, exclusive while garbage collection reads an object's age and
removes it), so an object `put` has just found and touched is never removed by a collection
that read its age before the touch.

Symbolic links are never followed, as in the owned sessions directory: a root, shard or
quarantine directory that is a link (or another user's) is refused (`ArtifactStoreRefusedError`),
objects are opened with `O_NOFOLLOW`, and a link (or any file that is not a regular file)
standing in an object's place is not an object: it is not listed or counted, and a read or a
`put` moves it to quarantine.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ARTIFACT_ID = re.compile(r"[0-9a-f]{64}")
"""An artifact id: the lower-case hex SHA-256 of the object's bytes."""

URI_PREFIX = "artifact://sha256/"
"""`artifact_uri(id)` is this prefix and the id (the reference's `artifact://sha256/...`)."""

TEMPORARY_PREFIX = ".tmp-"
"""Temporary files of writes in progress start with this; object names never do."""

LOCK_FILE = ".lock"
"""The lock file in the store's root (`ArtifactStore.locked`)."""

_DIR_MODE = 0o700
_FILE_MODE = 0o600
_CHUNK_BYTES = 1 << 20


class ArtifactError(Exception):
    """An artifact cannot be read; the message names the artifact and what to do."""


class ArtifactMissingError(ArtifactError):
    """No object has this id (never stored, or removed)."""


class ArtifactCorruptError(ArtifactError):
    """The object's bytes no longer hash to its id, or it is not a regular file (a symbolic
    link); it was moved to quarantine."""


class ArtifactStoreRefusedError(OSError):
    """A directory of the store is a symbolic link, not a directory, or another user's: nothing
    is read or written through it. The message names it and what to do."""


@dataclass(frozen=True, slots=True)
class StoredArtifact:
    """The outcome of `ArtifactStore.put`."""

    artifact_id: str
    """SHA-256 hex of the bytes."""
    size_bytes: int
    """Length of the bytes stored."""
    deduplicated: bool
    """An intact object with this id was already there; nothing was written."""
    quarantined: Path | None
    """Where a corrupt object with this id was moved before the new one was written."""


def artifact_uri(artifact_id: str) -> str:
    """`artifact://sha256/<id>`. Raises ValueError when `artifact_id` is not 64 hex digits."""
    _check_id(artifact_id)
    return URI_PREFIX + artifact_id


def artifact_root(database_path: str | os.PathLike[str]) -> Path:
    """The artifact directory for a database file: `artifacts` beside it (the data directory
    of docs/configuration.md "Database location")."""
    return Path(database_path).parent / "artifacts"


def _check_id(artifact_id: str) -> None:
    if not isinstance(artifact_id, str) or not ARTIFACT_ID.fullmatch(artifact_id):
        raise ValueError(f"not an artifact id (64 lower-case hex digits): {artifact_id!r:.80}")


class ArtifactStore:
    """Objects under `root` (created on the first write, 0700). Safe for several threads and
    processes writing at once: each writes its own temporary file, and two renames of the same
    content leave the same bytes."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path_for(self, artifact_id: str) -> Path:
        """The object's path. Raises ValueError for an id that is not 64 hex digits."""
        _check_id(artifact_id)
        return self.root / artifact_id[:2] / artifact_id

    def put(self, data: bytes) -> StoredArtifact:
        """Store `data` under its SHA-256 and return the id.

        An existing object is re-hashed: intact -> `deduplicated`, nothing written (its
        modification time set to now, for garbage collection's grace period); corrupt
        -> moved to quarantine (`quarantined`) and written again.

        Raises:
            OSError: the directory or file cannot be written (disk full, permissions); no
                partial object is left, and the temporary file is removed when possible.
        """
        artifact_id = hashlib.sha256(data).hexdigest()
        path = self.path_for(artifact_id)
        quarantined: Path | None = None
        _make_directory(self.root)
        _check_directory(self.root)
        with self.locked(shared=True):  # no garbage collection between the check and the touch
            found = _kind(path)
            if found not in (
                "file",
                "missing",
            ):  # a link or a special file: not an object, never followed
                quarantined = self._quarantine(path)
            elif found == "file":
                if _file_sha256(path) == artifact_id:
                    _touch(
                        path
                    )  # young again: garbage collection spares it while a plan refers to it
                    return StoredArtifact(artifact_id, len(data), True, None)
                quarantined = self._quarantine(path)
            _make_directory(path.parent)
            _check_directory(path.parent)
            self._write_atomically(path, data)
        return StoredArtifact(artifact_id, len(data), False, quarantined)

    @contextmanager
    def locked(self, *, shared: bool) -> Iterator[None]:
        """Hold the store's lock (`<root>/LOCK_FILE`, `flock`): shared (`put`: several at once)
        or exclusive (garbage collection). Blocks until granted; released on exit. Without a
        root directory nothing can be collected, so nothing is locked; a lock file that cannot
        be opened (a read-only store) is skipped too, as nothing can be removed there either.

        Raises:
            ArtifactStoreRefusedError: the root is a symbolic link or another user's.
        """
        _check_directory(self.root)
        try:
            fd = os.open(
                self.root / LOCK_FILE,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                _FILE_MODE,
            )
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def read(self, artifact_id: str) -> bytes:
        """The object's bytes, re-hashed before they are returned.

        Raises:
            ValueError: `artifact_id` is not 64 hex digits.
            ArtifactMissingError: no such object.
            ArtifactCorruptError: the bytes do not hash to the id, or the object is a symbolic
                link or not a regular file (it is quarantined, never followed).
            ArtifactStoreRefusedError: the root or the shard directory is a symbolic link.
            OSError: the object cannot be read.
        """
        path = self.path_for(artifact_id)
        self._check_directories(path)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise ArtifactMissingError(
                f"artifact {artifact_id} is not in the store '{self.root}'"
            ) from None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            fd = -1
        regular, data = False, b""
        if fd >= 0:
            with os.fdopen(fd, "rb") as handle:
                regular = stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
                data = handle.read() if regular else b""
        if fd < 0 or not regular:
            moved = self._quarantine(path)
            raise ArtifactCorruptError(
                f"artifact {artifact_id} is a symbolic link or not a regular file, never "
                f"followed; it was moved to '{moved}'"
            )
        if hashlib.sha256(data).hexdigest() != artifact_id:
            moved = self._quarantine(path)
            raise ArtifactCorruptError(
                f"artifact {artifact_id} is corrupt (its bytes hash differently); it was moved "
                f"to '{moved}'"
            )
        return data

    def contains(self, artifact_id: str) -> bool:
        """Whether an object file with this id exists, a regular file (not re-hashed: `read`
        checks; a symbolic link is not an object)."""
        return _kind(self.path_for(artifact_id)) == "file"

    def artifact_ids(self) -> list[str]:
        """Ids of the objects present, sorted; temporaries, quarantine, symbolic links and
        shard directories that are links are not objects.

        Raises:
            ArtifactStoreRefusedError: the root is a symbolic link or another user's.
        """
        return sorted(path.name for path in self._named_like_objects("file"))

    def quarantine_links(self) -> int:
        """Move every entry of a shard named like an object that is not a regular file (a
        symbolic link, a special file) to quarantine, never following it; returns how many
        (garbage collection calls it, so a planted link does not wait for a read).

        Raises:
            ArtifactStoreRefusedError: the root is a symbolic link or another user's.
        """
        moved = 0
        for path in list(self._named_like_objects("other")):
            try:
                self._quarantine(path)
            except FileNotFoundError:
                continue
            moved += 1
        return moved

    def stats(self) -> dict[str, int]:
        """What the store holds, for `ds4.health`: `{objects, bytes, quarantined,
        quarantinedBytes}` (sizes in bytes; an object removed while counting is skipped).
        Objects are counted, not re-hashed."""
        objects = total = 0
        for artifact_id in self.artifact_ids():
            try:
                total += self.path_for(artifact_id).lstat().st_size
                objects += 1
            except FileNotFoundError:
                continue
        quarantined = quarantined_bytes = 0
        folder = self.root / "quarantine"
        if _kind(folder) == "directory":
            for path in folder.iterdir():
                try:
                    quarantined_bytes += path.lstat().st_size
                    quarantined += 1
                except FileNotFoundError:
                    continue
        return {
            "objects": objects,
            "bytes": total,
            "quarantined": quarantined,
            "quarantinedBytes": quarantined_bytes,
        }

    def sweep_temporaries(self, older_than_s: float = 3600.0) -> int:
        """Remove temporary files of writes that crashed, older than `older_than_s` seconds
        (a younger one may belong to a write in progress). Returns how many were removed."""
        removed = 0
        cutoff = time.time() - older_than_s
        for shard in self._shards():
            for path in shard.glob(TEMPORARY_PREFIX + "*"):
                try:
                    if path.lstat().st_mtime <= cutoff:
                        path.unlink()
                        removed += 1
                except FileNotFoundError:
                    continue
        return removed

    def _shards(self) -> Iterator[Path]:
        """The shard directories (two-character names, real directories, not links); none
        while the root does not exist. Raises ArtifactStoreRefusedError when the root is a
        symbolic link or another user's."""
        if not _check_directory(self.root):
            return
        for shard in self.root.iterdir():
            if len(shard.name) == 2 and _kind(shard) == "directory":
                yield shard

    def _named_like_objects(self, kind: str) -> Iterator[Path]:
        """Entries of the shards named like an object of their shard (`<shard><62 hex>`) whose
        `_kind` is `kind` ("file": the objects; "other": links and special files)."""
        for shard in self._shards():
            for path in shard.iterdir():
                if (
                    ARTIFACT_ID.fullmatch(path.name)
                    and path.name[:2] == shard.name
                    and _kind(path) == kind
                ):
                    yield path

    def _check_directories(self, path: Path) -> None:
        """Refuse (`ArtifactStoreRefusedError`) a root or shard directory of `path` that is a
        symbolic link."""
        if _check_directory(self.root):
            _check_directory(path.parent)

    def _write_atomically(self, path: Path, data: bytes) -> None:
        temporary = path.with_name(f"{TEMPORARY_PREFIX}{path.name[:16]}-{secrets.token_hex(8)}")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, _FILE_MODE)
        renamed = False
        try:
            with os.fdopen(fd, "wb") as handle:
                view = memoryview(data)
                for start in range(0, len(view), _CHUNK_BYTES):
                    handle.write(view[start : start + _CHUNK_BYTES])
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, path)
            renamed = True
            _fsync_directory(path.parent)
        finally:
            if not renamed:
                try:
                    temporary.unlink()
                except FileNotFoundError:
                    pass

    def _quarantine(self, path: Path) -> Path:
        """Move a corrupt object to `<root>/quarantine/<id>.<UTC stamp>[-n]`."""
        folder = self.root / "quarantine"
        _make_directory(folder)
        _check_directory(folder)
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = folder / f"{path.name}.{stamp}"
        counter = 1
        while os.path.lexists(target):
            target = folder / f"{path.name}.{stamp}-{counter}"
            counter += 1
        os.replace(path, target)
        return target


def _file_sha256(path: Path) -> str | None:
    """SHA-256 hex of a file read in chunks (never through a symbolic link: None, as for a
    file that vanished meanwhile)."""
    digest = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    try:
        with os.fdopen(fd, "rb") as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                digest.update(chunk)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def _kind(path: Path) -> str:
    """`file` (a regular file), `directory`, `missing` or `other` (a symbolic link, a special
    file), read without following a link."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    return "directory" if stat.S_ISDIR(mode) else "other"


def _check_directory(directory: Path) -> bool:
    """Whether `directory` exists (False: not yet). Raises `ArtifactStoreRefusedError` when it
    is a symbolic link, not a directory, or not this user's (the rule of the owned sessions
    directory, docs/sessions.md)."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ArtifactStoreRefusedError(
            f"the artifact store's directory '{directory}' is not a directory of this user (a "
            "symbolic link?); nothing is read or written through it: remove or rename it",
        )
    return True


def _touch(path: Path) -> None:
    """Set the object's modification time to now (`collect_garbage` never removes an object
    modified within its grace period); a vanished or read-only object is left as it is."""
    try:
        os.utime(path)
    except OSError:
        pass


def _make_directory(directory: Path) -> None:
    """Create `directory` (0700, parents too); an existing one is left as it is."""
    if directory.is_dir():
        return
    directory.mkdir(mode=_DIR_MODE, parents=True, exist_ok=True)
    os.chmod(directory, _DIR_MODE)  # mkdir's mode is filtered by the umask


def _fsync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable; file systems that cannot fsync a directory
    (EINVAL, EBADF on some platforms) are skipped."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)
