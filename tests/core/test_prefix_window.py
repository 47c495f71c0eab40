"""The request-path prefix check (`prefix.check`) still finds in-place rewrites, within the
window its docs state: at once in the last block, within ceil((n - 1) / ROLLING_BLOCKS) checks
by the rolling cursor (kept with the index across processes), and by the first check after a
background pass. Real session files on disk, real SQLite stores."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from ds4_core.sessions import prefix
from ds4_core.sessions.prefix import BLOCK_BYTES, check, hash_prefix
from ds4_core.sessions.reader import read_all, read_more
from ds4_core.sessions.sync import sync_session
from ds4_core.store import load_entries, open_store

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SOURCE = EXAMPLES / "pi-mono-v1-large-session.jsonl"
ROLLING = 2


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bounded checks from 2 blocks on, 2 rolling blocks per check, no background pass."""
    monkeypatch.setattr(prefix, "FULL_CHECK_BYTES", 2 * BLOCK_BYTES)
    monkeypatch.setattr(prefix, "ROLLING_BLOCKS", ROLLING)
    monkeypatch.setattr(prefix, "BACKGROUND_VERIFY", False)
    monkeypatch.setattr(prefix, "_findings", {})


def _rewrite_same_size(path: Path, block: int) -> tuple[int, bytes]:
    """Replace one word inside `block` by another of the same length, keeping the mtime;
    returns (offset, new word)."""
    data = bytearray(path.read_bytes())
    at = data.index(b'"text":"', block * BLOCK_BYTES) + len(b'"text":"')
    assert at < (block + 1) * BLOCK_BYTES - 8
    word = b"Zqxjvkw"
    data[at : at + len(word)] = word
    st = os.stat(path)
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return at, word


def _append_one(path: Path, line: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(line + b"\n")


def _a_message_line(path: Path) -> bytes:
    return next(line for line in path.read_bytes().split(b"\n") if b'"type":"message"' in line)


def test_check_finds_a_rewrite_within_the_rolling_bound(tmp_path: Path, small_window: None) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    hashes = hash_prefix(path, path.stat().st_size)
    count = len(hashes.blocks)
    bound = math.ceil((count - 1) / ROLLING)
    for block in (0, 3, count - 2):
        shutil.copyfile(SOURCE, path)
        verdict = check(path, hashes, cursor=0)
        assert verdict.changed is None and not verdict.complete
        cursor = verdict.cursor
        _rewrite_same_size(path, block)
        checks = 0
        while checks < bound:
            checks += 1
            verdict = check(path, hashes, cursor=cursor)
            if verdict.changed is not None:
                break
            cursor = verdict.cursor
        assert verdict.changed == block * BLOCK_BYTES, (block, checks)


def test_a_rewrite_of_the_last_block_is_found_at_once(tmp_path: Path, small_window: None) -> None:
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    hashes = hash_prefix(path, path.stat().st_size)
    last = len(hashes.blocks) - 1
    data = bytearray(path.read_bytes())
    data[last * BLOCK_BYTES + 5] ^= 0x01
    path.write_bytes(bytes(data))
    assert check(path, hashes, cursor=0).changed == last * BLOCK_BYTES


def test_index_sync_reindexes_a_rewrite_within_the_window_across_processes(
    tmp_path: Path, small_window: None
) -> None:
    """A rewrite far from the cursor, then appends: each sync reopens the store (a new
    process keeps only what the index stores); the rewrite is re-indexed within the bound."""
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    db = tmp_path / "index.db"
    store = open_store(db)
    first = sync_session(store, path)
    store.close()
    count = -(-path.stat().st_size // BLOCK_BYTES)
    bound = math.ceil(count / ROLLING)  # the file grows by a block at most meanwhile
    _offset, word = _rewrite_same_size(path, count // 2)
    line = _a_message_line(path)
    found = None
    for sync_number in range(1, bound + 1):
        _append_one(path, line)
        store = open_store(db)
        result = sync_session(store, path)
        texts = [row.searchable_text for row in load_entries(store, first.session_id)]
        store.close()
        if result.outcome == "rebuild":
            found = sync_number
            break
        assert result.outcome == "incremental"
        assert not any(word.decode() in text for text in texts)  # the window: still old text
    assert found is not None and found <= bound
    assert result.reason == f"in-place rewrite detected at byte {result.rewritten_at}"
    assert result.rewritten_at == (count // 2) * BLOCK_BYTES
    assert any("rewritten in place" in warning for warning in result.warnings)
    assert any(word.decode() in text for text in texts)
    assert result.entries_total == len(read_all(path).entries)


def test_noop_syncs_advance_and_keep_the_cursor(tmp_path: Path, small_window: None) -> None:
    """Same size, mtime restored: no-op syncs in fresh processes still reach the rewrite."""
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    db = tmp_path / "index.db"
    store = open_store(db)
    sync_session(store, path)
    store.close()
    count = -(-path.stat().st_size // BLOCK_BYTES)
    _rewrite_same_size(path, count - 3)
    outcomes = []
    for _ in range(math.ceil((count - 1) / ROLLING)):
        store = open_store(db)
        result = sync_session(store, path)
        store.close()
        outcomes.append(result.outcome)
        if result.outcome == "rebuild":
            break
    assert outcomes[-1] == "rebuild" and set(outcomes[:-1]) <= {"noop"}
    assert result.rewritten_at == (count - 3) * BLOCK_BYTES


def test_background_pass_reports_a_rewrite_to_the_next_check(
    tmp_path: Path, small_window: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With rolling blocks off, only the last block is compared on the request path; the
    background pass finds the rewrite and the next check (index sync and read_more) reports
    it."""
    monkeypatch.setattr(prefix, "BACKGROUND_VERIFY", True)
    monkeypatch.setattr(prefix, "BACKGROUND_DELAY_S", 0.5)  # the two checks below come first
    monkeypatch.setattr(prefix, "ROLLING_BLOCKS", 0)
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    store = open_store(tmp_path / "index.db")
    sync_session(store, path)
    parsed = read_all(path)
    parsed_hashes = hash_prefix(path, parsed.end_offset)
    assert prefix.wait_for_background()
    _rewrite_same_size(path, 1)
    line = _a_message_line(path)
    _append_one(path, line)
    assert sync_session(store, path).outcome == "incremental"  # the window
    assert read_more(path, parsed, parsed_hashes) is not None  # the window
    assert prefix.wait_for_background()
    _append_one(path, line)
    result = sync_session(store, path)
    assert result.outcome == "rebuild" and result.rewritten_at == BLOCK_BYTES
    assert read_more(path, parsed, parsed_hashes) is None
    store.close()


def test_a_grown_files_request_replaces_the_waiting_one(
    tmp_path: Path, small_window: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends between passes do not queue one full pass per append; hashes that do not
    extend the waiting ones (another reading of the file) get a pass of their own."""
    monkeypatch.setattr(prefix, "BACKGROUND_VERIFY", True)
    monkeypatch.setattr(prefix, "BACKGROUND_DELAY_S", 0.5)
    monkeypatch.setattr(prefix, "_pending", {})
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    hashes = hash_prefix(path, path.stat().st_size)
    assert not check(path, hashes).complete
    _append_one(path, _a_message_line(path))
    grown = prefix.extend(path, hashes, path.stat().st_size)
    assert not check(path, grown).complete
    assert [h for _name, h in prefix._pending] == [grown]
    other = prefix.PrefixHashes(hashes.length, ("0" * 32, *hashes.blocks[1:]))
    prefix._ask_background(path, other)
    assert [h for _name, h in prefix._pending] == [grown, other]
    assert prefix.wait_for_background()
    assert prefix._findings_for(path, other) == [0]  # block 0 is not what `other` expects


def test_the_bound_holds_when_the_file_grows_faster_than_the_cursor(
    tmp_path: Path, small_window: None
) -> None:
    """Each sync appends more blocks than ROLLING_BLOCKS; a rewrite just behind the cursor is
    still re-indexed within ceil(n / ROLLING_BLOCKS) syncs (n blocks when it happened)."""
    path = tmp_path / "s.jsonl"
    shutil.copyfile(SOURCE, path)
    store = open_store(tmp_path / "index.db")
    sync_session(store, path)
    line = _a_message_line(path)
    burst = line + b"\n"
    burst *= -(-3 * BLOCK_BYTES // len(burst))  # 3 blocks per sync, more than ROLLING
    _append_one(path, line)
    assert sync_session(store, path).outcome == "incremental"  # the cursor is now at block 2
    count = -(-path.stat().st_size // BLOCK_BYTES)
    _rewrite_same_size(path, 1)
    for _sync in range(math.ceil(count / ROLLING)):
        with open(path, "ab") as handle:
            handle.write(burst)
        result = sync_session(store, path)
        if result.outcome == "rebuild":
            break
    assert result.outcome == "rebuild"
    assert result.rewritten_at == BLOCK_BYTES
    store.close()
