"""`sessions.prefix`: whole-prefix block hashes find any in-place change, at its block."""

from __future__ import annotations

import tempfile
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
