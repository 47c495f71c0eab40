"""`sessions.prefix`: whole-prefix block hashes find any in-place change, at its block."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.sessions.prefix import (
    BLOCK_BYTES,
    FileShrankError,
    PrefixHashes,
    extend,
    first_change,
    hash_prefix,
)

SIZES = st.integers(min_value=0, max_value=3 * BLOCK_BYTES + 17)


@settings(max_examples=60, deadline=None)
@given(size=SIZES, grow=st.integers(min_value=0, max_value=BLOCK_BYTES + 5), data=st.data())
def test_a_change_anywhere_is_found_at_its_block_and_extend_equals_a_fresh_hash(
    size: int, grow: int, data: st.DataObject
) -> None:
    content = bytes((i * 31 + 7) % 251 for i in range(size + grow))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.jsonl"
        path.write_bytes(content[:size])
        hashes = hash_prefix(path, size)
        assert len(hashes.blocks) == -(-size // BLOCK_BYTES)
        assert PrefixHashes.from_json(hashes.to_json()) == hashes
        assert first_change(path, hashes) is None
        path.write_bytes(content)  # appended bytes are not a change of the prefix
        assert first_change(path, hashes) is None
        assert extend(path, hashes, size + grow) == hash_prefix(path, size + grow)
        if size:
            at = data.draw(st.integers(min_value=0, max_value=size - 1))
            changed = bytearray(content)
            changed[at] ^= 0xFF
            path.write_bytes(bytes(changed))
            assert first_change(path, hashes) == at - at % BLOCK_BYTES


def test_a_shorter_file_is_a_change_and_cannot_be_hashed(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"x" * (BLOCK_BYTES + 10))
    hashes = hash_prefix(path, BLOCK_BYTES + 10)
    path.write_bytes(b"x" * BLOCK_BYTES)
    assert first_change(path, hashes) == BLOCK_BYTES
    with pytest.raises(FileShrankError):
        hash_prefix(path, BLOCK_BYTES + 10)


@pytest.mark.parametrize(
    "stored",
    [None, [], {"length": 3, "blockBytes": 4096, "blocks": ["a"]}, {"length": 3, "blocks": []}],
)
def test_malformed_stored_hashes_read_as_missing(stored: object) -> None:
    assert PrefixHashes.from_json(stored) is None


def _age(path: Path, seconds: float) -> None:
    """Make the file's stamp look settled: the check is done `seconds` after its last change."""
    import ds4_core.sessions.prefix as prefix

    prefix.RACY_MARGIN_NS = 0  # restored by the monkeypatch fixture in the callers
    time.sleep(seconds)


def test_a_settled_unchanged_file_is_not_read_again_but_a_same_size_rewrite_still_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stat-stamp shortcut: a repeated check of a settled file reads nothing; rewriting a
    byte in place and restoring the mtime (to the nanosecond) moves the ctime, so the next
    check reads the file and finds the change."""
    import ds4_core.sessions.prefix as prefix

    monkeypatch.setattr(prefix, "RACY_MARGIN_NS", prefix.RACY_MARGIN_NS)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"a" * (BLOCK_BYTES + 10))
    hashes = hash_prefix(path, BLOCK_BYTES + 10)
    _age(path, 0.05)
    reads: list[int] = []
    real = prefix._first_changed_block
    monkeypatch.setattr(prefix, "_first_changed_block", lambda p, h: reads.append(1) or real(p, h))
    assert first_change(path, hashes) is None and len(reads) == 1
    assert first_change(path, hashes) is None and len(reads) == 1  # nothing read
    stat = path.stat()
    with open(path, "r+b") as handle:
        handle.seek(BLOCK_BYTES + 3)
        handle.write(b"b")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert first_change(path, hashes) == BLOCK_BYTES and len(reads) == 2


def test_a_file_changed_just_before_its_check_is_read_on_every_check(tmp_path: Path) -> None:
    """Racily clean (as Git's index): a stamp whose ctime is within the margin of its check
    could hide a change made in the same clock tick, so it is never trusted."""
    import ds4_core.sessions.prefix as prefix

    path = tmp_path / "s.jsonl"
    path.write_bytes(b"x" * 100)
    hashes = hash_prefix(path, 100)
    calls: list[int] = []
    real = prefix._first_changed_block
    prefix._first_changed_block = lambda p, h: calls.append(1) or real(p, h)  # type: ignore[assignment]
    try:
        assert first_change(path, hashes) is None
        assert first_change(path, hashes) is None
    finally:
        prefix._first_changed_block = real  # type: ignore[assignment]
    assert len(calls) == 2


def test_a_file_on_a_network_filesystem_is_read_on_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a filesystem outside LOCAL_FILESYSTEMS (NFS, SMB, FUSE) `stat` may come from a cache,
    so even a settled, unchanged stamp is never trusted: every check reads the file."""
    import ds4_core.sessions.prefix as prefix

    monkeypatch.setattr(prefix, "RACY_MARGIN_NS", 0)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"z" * 1000)
    monkeypatch.setitem(prefix._local_devices, path.stat().st_dev, False)
    hashes = hash_prefix(path, 1000)
    time.sleep(0.05)
    reads: list[int] = []
    real = prefix._first_changed_block
    monkeypatch.setattr(prefix, "_first_changed_block", lambda p, h: reads.append(1) or real(p, h))
    for _ in range(3):
        assert first_change(path, hashes) is None
    assert len(reads) == 3
