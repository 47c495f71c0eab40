"""Per-block hashes of a session file's already-read prefix, to detect rewrites in place.

Pi only appends to a session file (docs/reference.md §P1), but an editor, a `sed -i`, a copy
or a restore from backup can rewrite bytes anywhere, keep the size and even restore the mtime
(`os.utime(..., ns=...)`). Size and mtime therefore prove nothing; what was read must be hashed
again. `PrefixHashes` holds the sha256 of every `BLOCK_BYTES` block of the bytes
`[0, length)` (the last block may be shorter), and `first_change` re-reads and re-hashes the
**whole** prefix, block by block, stopping at the first block that differs. It does not sample:
every byte that was read before is compared on every check.

Cost of a full check: one sequential read plus sha256 of `length` bytes, about 1 ms per MB on
an idle development machine (sha256 at ~1 GB/s; 3-4 ms per MB on the shared 2-core machine
under load; bench/session_index.py prints it). Appends re-hash only from the last complete
block (`extend`). Storage: 33 bytes per 64 KiB of session file (~0.5 KB per MB) in the JSON
of `to_json`.

Checks on the request path (`check`). A full check of a 50 MB session costs 50-200 ms, on
every request after each append: too much. So `check` compares in full only prefixes of at
most `FULL_CHECK_BYTES`; for a longer prefix it compares, on the request path:

* the last block of the prefix (where the previous append ended: appends land there),
* `ROLLING_BLOCKS` blocks from a rolling cursor that the caller keeps and passes back (the
  index keeps it with its state, so it survives restarts), wrapping over the other blocks,
  plus one more for each block the file grew by since the hashes (so the cursor gains on the
  end however fast the file grows, and a check stays proportional to the appended bytes),
* every block a background pass found changed against these same hashes (below),

and leaves the rest to a **background pass**: a daemon thread (at the lowest CPU priority)
re-reads and re-hashes the whole prefix of the file off the request path, starting
`BACKGROUND_DELAY_S` after the first check that asked for it, or when the pass before it ends
(one pass runs at a time; a request for hashes that extend a waiting request's, as after an
append, replaces it and keeps its place; at most `_PENDING_MAX` requests wait, the oldest
dropped first). A pass that finds a changed block records it as a finding
`(block index, expected hash)`; the next `check` whose hashes expect that hash there compares
that block on the request path and reports it. A pass that matches records the stat stamp
(below) like a full check.

The window this leaves, exactly: a rewrite of bytes already hashed is reported by `check`
(a) at once when it touches the last block, shortens the file, or the prefix is at most
`FULL_CHECK_BYTES`; else (b) by the `ceil(n / ROLLING_BLOCKS)`-th check after it at the
latest (`n` blocks when it happened; the cursor visits every block but the last once per that
many checks, however the file grows), whatever the process; and (c) in a process that stays up (the LSP server), by the first check
that starts after a background pass that started after the rewrite has finished (every check
that did not compare everything asks for one; it starts `BACKGROUND_DELAY_S` later, or when
the pass running then ends, and takes about 1 ms per MB on an idle machine), if that comes
first. Until then a consumer can still serve the old bytes' content. A full
check (`first_change`) still compares every byte.

Checks repeated on an unchanged file are free: once the whole prefix matched, the file's stat
stamp `(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)` at that moment is remembered (in
memory, per process, for the newest `_VERIFIED_MAX` files), and a later check of the same
hashes on a file with the same stamp answers "unchanged" without reading. This is sound because
on POSIX every write, truncation and `utime` call sets `st_ctime` to the current time and no
unprivileged call can set it back (POSIX.1-2017, `write()`, `utime()`: "shall mark for update
the last file status change timestamp"); so a rewrite that keeps size and restores the mtime
still changes the stamp. The stamp is only trusted when the file's ctime is more than
`RACY_MARGIN_NS` older than the verification (the same "racily clean" rule as Git's index:
a change in the same clock tick as the verification could otherwise keep the stamp), never
on Windows, where `st_ctime` is the creation time, and on Linux only on a local filesystem
(`LOCAL_FILESYSTEMS`: a network filesystem may answer `stat` from a cache or with a
server's clock).

The hash is truncated to 128 bits: it detects accidental and deliberate edits of a file the
user can write anyway; it is not a signature.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ds4_core.sessions.jsonl import StrPath

BLOCK_BYTES = 64 * 1024
"""Bytes per hashed block; a rewrite is located to the start of its block."""

_READ_BYTES = 16 * BLOCK_BYTES  # bytes per read() call (1 MiB)

FULL_CHECK_BYTES = 4 << 20
"""`check` compares prefixes of at most this many bytes in full (a few ms); longer ones are
checked in part on the request path and in full by a background pass (module docstring)."""

ROLLING_BLOCKS = 8
"""Blocks (512 KiB) that `check` compares from the caller's rolling cursor besides the last."""

BACKGROUND_DELAY_S = 0.2
"""A background pass starts this long after the check that asked for it (later while another
pass runs), so a burst of requests is not slowed by it."""

BACKGROUND_VERIFY = True
"""Whether `check` asks for background passes (tests turn it off to prove the rolling bound)."""

_FINDINGS_MAX = 64

RACY_MARGIN_NS = 3_000_000_000
"""A stamp is trusted only when the file's ctime is this much older than the verification
(covers coarse filesystem timestamps, up to 2 s on FAT, and the kernel's coarse clock)."""

_VERIFIED_MAX = 256
_STAMP_TRUSTED = os.name != "nt"

LOCAL_FILESYSTEMS = frozenset(
    {"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "jfs",
     "reiserfs", "bcachefs", "ramfs", "nilfs2"}
)  # fmt: skip
"""Linux filesystems whose ctime the kernel keeps itself. On others (NFS, SMB, sshfs and
other FUSE mounts, 9p) `stat` may return cached attributes or a server's clock, so the stamp
is not trusted there and every check re-reads the file (an open() revalidates, as NFS's
close-to-open consistency promises)."""

_local_devices: dict[int, bool] = {}


def _on_local_filesystem(st: os.stat_result) -> bool:
    """Whether the file of `st` is on a `LOCAL_FILESYSTEMS` filesystem, by its device number
    in /proc/self/mountinfo (Linux). Elsewhere (no /proc) True: the other POSIX systems keep
    ctime as POSIX says, and network mounts there are not detected."""
    known = _local_devices.get(st.st_dev)
    if known is not None:
        return known
    device = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    local = True
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split(" ")
                if len(fields) > 2 and fields[2] == device and " - " in line:
                    local = line.split(" - ", 1)[1].split(" ", 1)[0] in LOCAL_FILESYSTEMS
                    break
    except OSError:
        pass
    _local_devices[st.st_dev] = local
    return local


_verified: dict[str, tuple[tuple[int, ...], int, tuple[str, ...], int]] = {}
"""path -> (stat stamp, length, blocks, verified_at_ns): the last full check that matched."""
_verified_lock = threading.Lock()


def _stamp(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _known_unchanged(path: StrPath, st: os.stat_result, hashes: PrefixHashes) -> bool:
    """Did a full check of these very hashes match this file while its stat stamp was the
    same as now, with the file's ctime settled before that check (module docstring)?"""
    if not _STAMP_TRUSTED or not _on_local_filesystem(st):
        return False
    with _verified_lock:
        known = _verified.get(os.fspath(path))
    if known is None:
        return False
    stamp, length, blocks, verified_at_ns = known
    return (
        stamp == _stamp(st)
        and st.st_ctime_ns + RACY_MARGIN_NS < verified_at_ns
        and length == hashes.length
        and blocks == hashes.blocks
    )


def _remember_unchanged(
    path: StrPath, before: os.stat_result, hashes: PrefixHashes, verified_at_ns: int
) -> None:
    """Record a full check that matched, if the file's stamp did not move while it ran."""
    if not _STAMP_TRUSTED:
        return
    try:
        after = os.stat(path)
    except OSError:
        return
    if _stamp(after) != _stamp(before):
        return
    key = os.fspath(path)
    with _verified_lock:
        _verified.pop(key, None)
        _verified[key] = (_stamp(before), hashes.length, hashes.blocks, verified_at_ns)
        while len(_verified) > _VERIFIED_MAX:
            _verified.pop(next(iter(_verified)))


_DIGEST_HEX = 32  # hex characters kept of each sha256 (128 bits)


class FileShrankError(ValueError):
    """The file is shorter than the prefix to hash (it was truncated or replaced meanwhile)."""


def _digest(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()[:_DIGEST_HEX]


@dataclass(frozen=True)
class PrefixHashes:
    """Hashes of the bytes `[0, length)` of a file, one per `BLOCK_BYTES` block.

    Attributes:
        length: bytes covered (from offset 0).
        blocks: sha256 hex (first 32 characters) of each block `[i * BLOCK_BYTES,
            min(length, (i + 1) * BLOCK_BYTES))`, in file order; `ceil(length / BLOCK_BYTES)`
            items.
    """

    length: int
    blocks: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """`{"length": int, "blockBytes": int, "blocks": [hex, ...]}` (JSON-ready)."""
        return {"length": self.length, "blockBytes": BLOCK_BYTES, "blocks": list(self.blocks)}

    @classmethod
    def from_json(cls, value: Any) -> PrefixHashes | None:
        """The hashes stored by `to_json`, or `None` when `value` is missing, malformed, of
        another block size, or does not hold exactly one hash per block."""
        if not isinstance(value, dict) or value.get("blockBytes") != BLOCK_BYTES:
            return None
        length, blocks = value.get("length"), value.get("blocks")
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            return None
        if not isinstance(blocks, list) or not set(map(type, blocks)) <= {str}:
            return None
        if len(blocks) != -(-length // BLOCK_BYTES):
            return None
        return cls(length, tuple(blocks))


def _hash_range(path: StrPath, start: int, end: int) -> list[str]:
    """Hashes of the blocks of `[start, end)`; `start` must be a multiple of `BLOCK_BYTES`.

    Raises:
        OSError: the file cannot be read. A file shorter than `end` hashes what there is.
    """
    hashes: list[str] = []
    with open(path, "rb") as handle:
        handle.seek(start)
        offset = start
        while offset < end:
            data = handle.read(min(_READ_BYTES, end - offset))
            if not data:
                break
            view = memoryview(data)
            hashes.extend(
                _digest(view[i : i + BLOCK_BYTES]) for i in range(0, len(data), BLOCK_BYTES)
            )
            offset += len(data)
            if len(data) % BLOCK_BYTES:
                break  # short read: the file ended
    return hashes


def hash_prefix(path: StrPath, length: int) -> PrefixHashes:
    """`PrefixHashes` of the bytes `[0, length)` of the file at `path`.

    Raises:
        ValueError: `length < 0`.
        FileShrankError: the file is shorter than `length` bytes.
        OSError: the file cannot be read.
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    blocks = _hash_range(path, 0, length)
    if len(blocks) != -(-length // BLOCK_BYTES) or os.stat(path).st_size < length:
        raise FileShrankError(f"'{path}' is shorter than {length} bytes")
    return PrefixHashes(length, tuple(blocks))


def extend(path: StrPath, verified: PrefixHashes, length: int) -> PrefixHashes:
    """`hash_prefix(path, length)` reusing the complete blocks of `verified`.

    Only blocks from the last complete block of `verified` on are read, so appending to a large
    file costs one block plus the appended bytes. The caller must have checked `verified`
    against the file (`first_change(...) is None`) and `length >= verified.length`.

    Raises:
        ValueError: `length < verified.length`.
        FileShrankError: the file is shorter than `length` bytes.
        OSError: the file cannot be read.
    """
    if length < verified.length:
        raise ValueError(f"length {length} is below the verified {verified.length} bytes")
    keep = verified.length // BLOCK_BYTES
    blocks = _hash_range(path, keep * BLOCK_BYTES, length)
    result = PrefixHashes(length, (*verified.blocks[:keep], *blocks))
    if len(result.blocks) != -(-length // BLOCK_BYTES) or os.stat(path).st_size < length:
        raise FileShrankError(f"'{path}' is shorter than {length} bytes")
    return result


def first_change(path: StrPath, hashes: PrefixHashes) -> int | None:
    """Where the file's bytes `[0, hashes.length)` first differ from `hashes`, or `None`.

    Returns the byte offset of the first block whose bytes changed (the change is somewhere in
    `[offset, offset + BLOCK_BYTES)`), or where the file now ends when it is shorter than
    `hashes.length`. Reads the whole prefix unless a change is found earlier, or unless the
    same hashes matched this file before and its stat stamp has not moved since (module
    docstring: then nothing is read).

    Raises:
        OSError: the file cannot be read.
    """
    before = os.stat(path)
    if _known_unchanged(path, before, hashes):
        return None
    return _full_check(path, before, hashes)


def _full_check(path: StrPath, before: os.stat_result, hashes: PrefixHashes) -> int | None:
    verified_at_ns = time.time_ns()
    changed = _first_changed_block(path, hashes)
    if changed is None:
        _remember_unchanged(path, before, hashes, verified_at_ns)
    return changed


@dataclass(frozen=True)
class Verdict:
    """What `check` found.

    Attributes:
        changed: the byte offset of the first changed block (or where a shorter file now
            ends), as `first_change` returns it; `None` when no compared block changed.
        cursor: the rolling cursor to pass to the next `check` of these hashes (a block index).
        complete: every block was compared (or known unchanged by the stat stamp); when False,
            only the blocks of the module docstring were, and a background pass was asked for.
    """

    changed: int | None
    cursor: int
    complete: bool


def check(
    path: StrPath,
    hashes: PrefixHashes,
    *,
    cursor: int = 0,
    rolling_blocks: int | None = None,
) -> Verdict:
    """`first_change` bounded for the request path: in full up to `FULL_CHECK_BYTES`, else the
    last block, `rolling_blocks` (default `ROLLING_BLOCKS`) blocks from `cursor` and the
    background findings, with a background pass of the rest (module docstring, "Checks on the
    request path", states the window this leaves). When a compared block differs, the whole
    prefix is compared to report the first changed block, exactly as `first_change` does.

    Raises:
        OSError: the file cannot be read.
    """
    if rolling_blocks is None:
        rolling_blocks = ROLLING_BLOCKS
    before = os.stat(path)
    if _known_unchanged(path, before, hashes):
        return Verdict(None, cursor, True)
    count = len(hashes.blocks)
    if (
        hashes.length <= FULL_CHECK_BYTES
        or before.st_size < hashes.length
        or count <= rolling_blocks + 1
    ):
        return Verdict(_full_check(path, before, hashes), 0, True)
    last = count - 1
    if rolling_blocks:  # one more old block per block appended: the cursor outruns the end
        rolling_blocks += -(-(before.st_size - hashes.length) // BLOCK_BYTES)
        if rolling_blocks >= last:
            return Verdict(_full_check(path, before, hashes), 0, True)
    start = cursor % last if cursor > 0 else 0
    picked = {last, *((start + i) % last for i in range(rolling_blocks))}
    picked.update(_findings_for(path, hashes))
    if _changed_among(path, hashes, sorted(picked)):
        changed = _first_changed_block(path, hashes)
        if changed is not None:
            return Verdict(changed, 0, True)
    _ask_background(path, hashes)
    return Verdict(None, (start + rolling_blocks) % last, False)


def _changed_among(path: StrPath, hashes: PrefixHashes, indexes: Sequence[int]) -> bool:
    """Whether any block of `indexes` (sorted) differs from `hashes` (runs read at once)."""
    with open(path, "rb") as handle:
        i = 0
        while i < len(indexes):
            j = i
            while j + 1 < len(indexes) and indexes[j + 1] == indexes[j] + 1:
                j += 1
            begin = indexes[i] * BLOCK_BYTES
            end = min(hashes.length, (indexes[j] + 1) * BLOCK_BYTES)
            handle.seek(begin)
            data = memoryview(handle.read(end - begin))
            for k in range(i, j + 1):
                offset = (indexes[k] - indexes[i]) * BLOCK_BYTES
                block = data[offset : min(len(data), offset + BLOCK_BYTES)]
                wanted = min(BLOCK_BYTES, hashes.length - indexes[k] * BLOCK_BYTES)
                if len(block) != wanted or _digest(block) != hashes.blocks[indexes[k]]:
                    return True
            i = j + 1
    return False


_findings: dict[str, dict[tuple[int, str], None]] = {}
"""path -> {(block index, expected hash)} that a background pass found changed (oldest first;
at most `_FINDINGS_MAX` files, and as many findings per file)."""
_pending: dict[tuple[str, PrefixHashes], float] = {}
"""(path, hashes) a check asked a background pass for -> when first asked (monotonic s).
Equal hashes of one file are coalesced; different ones (the index's and the session cache's
may differ after a rewrite) each get their pass."""
_PENDING_MAX = 64
_running = 0
_worker: threading.Thread | None = None
_background = threading.Condition()


def _findings_for(path: StrPath, hashes: PrefixHashes) -> list[int]:
    with _background:
        found = _findings.get(os.fspath(path), ())
        return [
            index
            for index, expected in found
            if index < len(hashes.blocks) and hashes.blocks[index] == expected
        ]


def _ask_background(path: StrPath, hashes: PrefixHashes) -> None:
    global _worker
    if not BACKGROUND_VERIFY:
        return
    name = os.fspath(path)
    with _background:
        asked = time.monotonic()
        for older in [k for k in _pending if k[0] == name and _supersedes(hashes, k[1])]:
            asked = min(asked, _pending.pop(older))  # a growing file keeps its place
        _pending[name, hashes] = asked
        while len(_pending) > _PENDING_MAX:
            _pending.pop(next(iter(_pending)))
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_verify_in_background, name="ds4-prefix-verify")
            _worker.daemon = True
            _worker.start()
        _background.notify_all()


def _supersedes(new: PrefixHashes, old: PrefixHashes) -> bool:
    """Whether a pass over `new` compares every complete block of `old` (the file only grew
    between them; `old`'s last block was compared on the request path when `new` was made)."""
    keep = len(old.blocks) - 1
    return old.length <= new.length and new.blocks[:keep] == old.blocks[:keep]


def _lower_priority() -> None:
    try:  # Linux: nice applies per thread
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        pass


def _verify_in_background() -> None:
    """The background pass loop: the oldest request first, each `BACKGROUND_DELAY_S` after it
    was asked for; the thread ends after 30 s without requests."""
    global _running
    _lower_priority()
    while True:
        with _background:
            while not _pending:
                if not _background.wait(timeout=30.0) and not _pending:
                    return
            (key, hashes), asked = next(iter(_pending.items()))  # the oldest request
            delay = asked + BACKGROUND_DELAY_S - time.monotonic()
            if delay > 0:
                _background.wait(timeout=delay)
                continue
            del _pending[key, hashes]
            _running += 1
        try:
            before = os.stat(key)
            changed = _full_check(key, before, hashes)
        except OSError:
            changed = None
        with _background:
            _running -= 1
            if changed is not None and changed // BLOCK_BYTES < len(hashes.blocks):
                index = changed // BLOCK_BYTES
                found = _findings.setdefault(key, {})
                found[index, hashes.blocks[index]] = None
                while len(found) > _FINDINGS_MAX:
                    del found[next(iter(found))]
                while len(_findings) > _FINDINGS_MAX:
                    _findings.pop(next(iter(_findings)))
            _background.notify_all()


def wait_for_background(timeout: float = 10.0) -> bool:
    """Wait until no background pass is asked for or running; False when `timeout` (s) ran
    out first. For tests and benchmarks."""
    deadline = time.monotonic() + timeout
    with _background:
        while _pending or _running:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _background.wait(timeout=min(left, 0.05))
    return True


def _first_changed_block(path: StrPath, hashes: PrefixHashes) -> int | None:
    """`first_change` by reading and hashing the whole prefix."""
    expected: Sequence[str] = hashes.blocks
    index = 0
    with open(path, "rb") as handle:
        offset = 0
        while offset < hashes.length:
            data = handle.read(min(_READ_BYTES, hashes.length - offset))
            if not data:
                return offset
            view = memoryview(data)
            for i in range(0, len(data), BLOCK_BYTES):
                if index >= len(expected) or _digest(view[i : i + BLOCK_BYTES]) != expected[index]:
                    return offset + i
                index += 1
            offset += len(data)
            if len(data) % BLOCK_BYTES and offset < hashes.length:
                return offset  # short read: the file ended inside the prefix
    return None
