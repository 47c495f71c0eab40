"""Incremental session indexing (docs/reference.md §3.12) against real Pi session files.

The oracle everywhere is one full read (`read_all`, duplicate ids last-wins): whatever sequence
of syncs ran, the `entries` table must equal what a single read of the final file gives.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.sessions import sync as sync_module
from ds4_core.sessions.reader import (
    NotAPiSessionError,
    UnsupportedSessionVersionError,
    read_all,
)
from ds4_core.sessions.searchable import entry_role, searchable_text
from ds4_core.sessions.sync import SyncResult, sync_session
from ds4_core.store import (
    Store,
    entry_count,
    get_index_state,
    list_sessions,
    load_entries,
    open_store,
    session_for_file,
)
from ds4_core.tokens import estimate_text_tokens

FIXTURE_COUNTS = {
    "openclaw-v3-single-turn-6a5d2a19.jsonl": 5,
    "pi-mono-v1-large-session.jsonl": 1018,
    "v1-prompt-cache-replay.jsonl": 6,
    "v3-branching-compaction.jsonl": 8,
}
V3 = "v3-branching-compaction.jsonl"
V1_LARGE = "pi-mono-v1-large-session.jsonl"

Row = tuple[str, str | None, int, str, str]


def assert_fts_consistent(store: Store) -> None:
    """FTS5 'integrity-check' with rank 1 also compares the index with `entries` (SQLite docs,
    "The integrity-check Command")."""
    store.connection().execute(
        "INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)"
    )


def table(store: Store, session_id: str) -> list[Row]:
    """The comparable part of the entries table: (entry_key, parent_id, seq, hash, text).

    Also checks that the FTS index matches the table.
    """
    assert_fts_consistent(store)
    return sorted(
        (e.entry_key, e.parent_id, e.seq, e.content_hash, e.searchable_text)
        for e in load_entries(store, session_id)
    )


def full_read_table(path: Path) -> list[Row]:
    """What one full read of `path` gives (duplicate ids: last wins)."""
    session = read_all(path)
    assert session.header is not None
    last = {entry.entry_id: entry for entry in session.entries}
    sid = session.header.session_id
    return sorted(
        (f"{sid}:{e.entry_id}", e.parent_id, e.seq, e.content_hash, searchable_text(e))
        for e in last.values()
    )


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def bump_mtime(path: Path) -> None:
    """Move the mtime forward 2 s (writes within one clock tick can keep the same mtime)."""
    st_ = path.stat()
    os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns + 2_000_000_000))


def v3_line(entry_id: str, parent: str | None, text: str) -> bytes:
    parent_json = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        f'"timestamp":"2026-01-02T00:00:00.000Z","message":{{"role":"user",'
        f'"content":"{text}","timestamp":1}}}}\n'
    ).encode()


@pytest.fixture
def store(tmp_path: Path):
    opened = open_store(tmp_path / "db" / "context.db")
    yield opened
    opened.close()


@pytest.fixture
def indexed_copy(store: Store, pi_session_copy: Callable[[str], Path]):
    """Factory: copy a fixture, index it, return (path, first SyncResult)."""

    def make(name: str) -> tuple[Path, SyncResult]:
        path = pi_session_copy(name)
        return path, sync_session(store, path)

    return make


# --- full reads of every real fixture ------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_COUNTS))
def test_every_real_session_indexes_like_a_full_read(
    store: Store, pi_sessions_dir: Path, name: str
) -> None:
    path = pi_sessions_dir / name
    result = sync_session(store, path)
    full = read_all(path)
    assert full.header is not None
    assert (result.outcome, result.reason) == ("rebuild", "no prior state")
    assert result.session_id == full.header.session_id
    assert result.entries_total == result.entries_added == FIXTURE_COUNTS[name]
    assert entry_count(store, result.session_id) == FIXTURE_COUNTS[name]
    assert result.malformed_lines == full.malformed_lines == 0
    assert result.bytes_read == path.stat().st_size
    assert table(store, result.session_id) == full_read_table(path)
    by_id = {row.entry_id: row for row in load_entries(store, result.session_id)}
    for entry in full.entries:
        row = by_id[entry.entry_id]
        assert row.role == entry_role(entry)
        assert row.created_at == entry.timestamp
        assert row.token_estimate == estimate_text_tokens(row.searchable_text)
        assert row.line_number == entry.line_number
    assert session_for_file(store, path) == result.session_id
    again = sync_session(store, path)
    assert (again.outcome, again.entries_added, again.entries_total) == (
        "noop",
        0,
        FIXTURE_COUNTS[name],
    )


def test_an_empty_session_file_is_skipped(store: Store, pi_sessions_dir: Path) -> None:
    result = sync_session(store, pi_sessions_dir / "openclaw-v3-empty-862b07aa.jsonl")
    assert (result.outcome, result.reason, result.session_id) == (
        "skipped",
        "empty session file",
        None,
    )
    assert list_sessions(store) == []


def test_a_session_emptied_later_is_removed(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    path.write_bytes(b"")
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("skipped", "empty session file")
    assert entry_count(store, first.session_id) == 0 and list_sessions(store) == []


# --- incremental --------------------------------------------------------------------------


def test_appended_entries_are_indexed_incrementally(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    append(path, v3_line("n1", "e1", "new retry budget") + v3_line("n2", "n1", "more"))
    result = sync_session(store, path)
    assert (result.outcome, result.reason, result.entries_added) == ("incremental", None, 2)
    assert result.entries_total == first.entries_total + 2
    assert result.bytes_read == len(v3_line("n1", "e1", "new retry budget")) + len(
        v3_line("n2", "n1", "more")
    )
    assert table(store, first.session_id) == full_read_table(path)


def test_v1_ids_continue_across_incremental_syncs(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V1_LARGE)
    line = path.read_bytes().split(b"\n")[3] + b"\n"
    append(path, line + line)
    result = sync_session(store, path)
    assert (result.outcome, result.entries_added) == ("incremental", 2)
    ids = {row.entry_id for row in load_entries(store, first.session_id)}
    assert {"v1-1019", "v1-1020"} <= ids
    assert table(store, first.session_id) == full_read_table(path)


def test_malformed_lines_accumulate(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    append(path, b"not json\n" + v3_line("n1", "e1", "x"))
    assert sync_session(store, path).malformed_lines == 1
    append(path, b'{"no type": 1}\n[1,2]\n')
    result = sync_session(store, path)
    assert result.outcome == "incremental"
    assert result.malformed_lines == 3 == read_all(path).malformed_lines


def test_progress_reports_bytes(store: Store, pi_session_copy) -> None:
    path = pi_session_copy(V1_LARGE)
    calls: list[tuple[int, int]] = []
    sync_session(store, path, progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert calls[-1] == (size, size)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


# --- rebuild reasons ----------------------------------------------------------------------


def test_forced_sync_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    before = table(store, first.session_id)
    result = sync_session(store, path, force=True)
    assert (result.outcome, result.reason, result.entries_total) == (
        "rebuild",
        "forced",
        first.entries_total,
    )
    assert table(store, first.session_id) == before


def test_truncated_file_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(b"\n".join(lines[:5]) + b"\n")
    result = sync_session(store, path)
    assert (result.outcome, result.reason, result.entries_total) == ("rebuild", "file truncated", 4)
    assert table(store, first.session_id) == full_read_table(path)


def test_file_rewritten_in_place_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"sanitized"', b'"sanitizeD"', 1))
    bump_mtime(path)
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "in-place rewrite detected at byte 0")
    assert result.rewritten_at == 0
    assert table(store, first.session_id) == full_read_table(path)


def restore_stat(path: Path, before: os.stat_result) -> None:
    """Put back atime and mtime to the nanosecond (what `cp -p` or a careful editor does)."""
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def rewrite_same_size(path: Path, offset: int, old: bytes, new: bytes) -> None:
    """Replace `old` (found at or after `offset`) by `new` of the same length, in place."""
    assert len(old) == len(new)
    data = path.read_bytes()
    at = data.index(old, offset)
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(new)


def test_same_size_rewrite_with_the_mtime_restored_is_seen(store: Store, indexed_copy) -> None:
    """Size and mtime unchanged prove nothing: the rewritten text must be served."""
    path, first = indexed_copy(V3)
    before = path.stat()
    rewrite_same_size(path, 0, b'"sanitized"', b'"rewritten"')
    restore_stat(path, before)
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "in-place rewrite detected at byte 0")
    assert table(store, first.session_id) == full_read_table(path)
    assert any("rewritten" in row.searchable_text for row in load_entries(store, first.session_id))
    assert sync_session(store, path).outcome == "noop"


@pytest.mark.parametrize("offset", [34_000, 500_000])
def test_a_rewrite_deep_in_a_large_file_then_an_append_is_seen(
    store: Store, indexed_copy, offset: int
) -> None:
    """A 974 KB real session: rewrite an entry `offset` bytes in, append one entry, sync."""
    path, first = indexed_copy(V1_LARGE)
    data = path.read_bytes()
    at = data.index(b'"text":"', offset) + len(b'"text":"')
    old = data[at : at + 4]
    assert b"\\" not in old and b'"' not in old
    rewrite_same_size(path, at, old, b"QZQZ")
    append(path, data.split(b"\n")[3] + b"\n")
    result = sync_session(store, path)
    block = at - at % (64 * 1024)
    assert (result.outcome, result.reason, result.rewritten_at) == (
        "rebuild",
        f"in-place rewrite detected at byte {block}",
        block,
    )
    assert table(store, first.session_id) == full_read_table(path)
    assert any("QZQZ" in row.searchable_text for row in load_entries(store, first.session_id))


def test_changed_header_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"cwd":"/fixture"', b'"cwd":"/elsewhere"', 1))
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "header hash changed")
    assert list_sessions(store)[0]["project_path"] == "/elsewhere"


def test_edit_before_the_checkpoint_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"sanitized"', b'"sanitizeD"', 1))
    append(path, v3_line("n1", "e1", "x"))
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "in-place rewrite detected at byte 0")
    assert table(store, first.session_id) == full_read_table(path)


def test_missing_checkpoint_hash_rebuilds(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    with store.write() as conn:
        conn.execute("UPDATE session_index_state SET checkpoint_hash = NULL")
    append(path, v3_line("n1", "e1", "x"))
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "checkpoint hash missing")


def test_a_state_without_prefix_hashes_rebuilds_once(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    with store.write() as conn:
        conn.execute(
            "UPDATE session_index_state SET resume_json = json_remove(resume_json, '$.prefix')"
        )
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "prefix hashes missing")
    assert sync_session(store, path).outcome == "noop"


def test_moved_session_file_rebuilds_under_the_new_path(
    store: Store, indexed_copy, tmp_path: Path
) -> None:
    path, first = indexed_copy(V3)
    moved = tmp_path / "moved.jsonl"
    shutil.move(path, moved)
    result = sync_session(store, moved)
    assert (result.outcome, result.reason) == ("rebuild", "session file path changed")
    assert session_for_file(store, moved) == first.session_id
    assert get_index_state(store, first.session_id).session_file == str(moved.resolve())


def test_a_changed_entry_id_rebuilds_last_wins(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    append(path, v3_line("e1", None, "rewritten first entry"))
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "entry changed")
    rows = {row.entry_id: row for row in load_entries(store, first.session_id)}
    assert rows["e1"].searchable_text == "rewritten first entry"
    assert rows["e1"].seq == 8
    assert table(store, first.session_id) == full_read_table(path)


def test_an_identical_line_repeated_moves_the_entry(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    second_line = path.read_bytes().split(b"\n")[1] + b"\n"
    append(path, second_line)
    result = sync_session(store, path)
    assert (result.outcome, result.entries_added) == ("incremental", 0)
    assert table(store, first.session_id) == full_read_table(path)


# --- torn tails ---------------------------------------------------------------------------


def test_torn_tail_is_indexed_and_completed_incrementally(store: Store, pi_session_copy) -> None:
    path = pi_session_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data[:-1])  # the final entry without its newline
    first = sync_session(store, path)
    assert first.entries_total == 8
    state = get_index_state(store, first.session_id)
    assert state.checkpoint_offset < state.file_size == len(data) - 1
    append(path, b"\n" + v3_line("n1", "e8", "after the tear"))
    result = sync_session(store, path)
    assert (result.outcome, result.entries_added, result.entries_total) == ("incremental", 1, 9)
    assert table(store, first.session_id) == full_read_table(path)


def test_an_unparsable_torn_tail_is_picked_up_when_completed(store: Store, pi_session_copy) -> None:
    path = pi_session_copy(V3)
    line = v3_line("n1", "e1", "completed later")
    append(path, line[:20])
    first = sync_session(store, path)
    assert (first.entries_total, first.malformed_lines) == (8, 0)
    append(path, line[20:])
    result = sync_session(store, path)
    assert (result.outcome, result.entries_added, result.malformed_lines) == ("incremental", 1, 0)
    assert table(store, first.session_id) == full_read_table(path)


def test_a_torn_tail_that_turns_into_something_else_rebuilds(store: Store, pi_session_copy) -> None:
    path = pi_session_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data + v3_line("n1", "e1", "torn")[:-1])
    first = sync_session(store, path)
    assert first.entries_total == 9
    append(path, b" \n" + v3_line("n2", "e1", "after"))  # the torn line's bytes now differ
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "file grew after an unterminated tail")
    assert table(store, first.session_id) == full_read_table(path)


def test_a_rewritten_torn_tail_is_an_in_place_rewrite(store: Store, pi_session_copy) -> None:
    path = pi_session_copy(V3)
    data = path.read_bytes()
    path.write_bytes(data + v3_line("n1", "e1", "torn")[:-1])
    first = sync_session(store, path)
    path.write_bytes(data + v3_line("n2", "e1", "something else entirely"))
    result = sync_session(store, path)
    assert (result.outcome, result.reason) == ("rebuild", "in-place rewrite detected at byte 0")
    assert table(store, first.session_id) == full_read_table(path)


# --- errors -------------------------------------------------------------------------------


def test_not_a_session_is_an_error_and_keeps_the_index(store: Store, indexed_copy) -> None:
    path, first = indexed_copy(V3)
    path.write_bytes(v3_line("x", None, "no header here") * 20)
    with pytest.raises(NotAPiSessionError, match="Pi session header"):
        sync_session(store, path)
    assert entry_count(store, first.session_id) == first.entries_total


def test_a_newer_session_version_is_an_error(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session","version":4,"id":"s","cwd":"/"}\n')
    with pytest.raises(UnsupportedSessionVersionError, match="version 4"):
        sync_session(store, path)
    assert list_sessions(store) == []


def test_a_failed_write_leaves_the_previous_index(
    store: Store, indexed_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, first = indexed_copy(V3)
    before = table(store, first.session_id)

    def fail(*args: object, **kwargs: object) -> int:
        raise OSError("disk full")

    monkeypatch.setattr("ds4_core.store.sessions._insert_entries", fail)
    with pytest.raises(OSError, match="disk full"):
        sync_session(store, path, force=True)
    append(path, v3_line("n1", "e1", "x"))
    with pytest.raises(OSError, match="disk full"):
        sync_session(store, path)
    assert table(store, first.session_id) == before


def test_the_writer_thread_indexes_the_same_rows(
    store: Store, pi_session_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_module, "THREADED_REBUILD_BYTES", 0)
    monkeypatch.setattr(sync_module, "WRITER_BATCH_ROWS", 7)
    path = pi_session_copy(V1_LARGE)
    result = sync_session(store, path)
    assert result.entries_total == 1018
    assert table(store, result.session_id) == full_read_table(path)


def test_a_reader_failure_in_the_threaded_rebuild_rolls_back(
    store: Store, indexed_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, first = indexed_copy(V1_LARGE)
    before = table(store, first.session_id)
    monkeypatch.setattr(sync_module, "THREADED_REBUILD_BYTES", 0)
    monkeypatch.setattr(sync_module, "WRITER_BATCH_ROWS", 7)
    real = sync_module._to_row
    calls = 0

    def flaky(session_id: str, entry: object) -> object:
        nonlocal calls
        calls += 1
        if calls == 500:
            raise OSError("read error")
        return real(session_id, entry)  # type: ignore[arg-type]

    monkeypatch.setattr(sync_module, "_to_row", flaky)
    with pytest.raises(OSError, match="read error"):
        sync_session(store, path, force=True)
    assert table(store, first.session_id) == before


# --- properties ---------------------------------------------------------------------------


def _growth_sources() -> list[bytes]:
    base = Path(__file__).resolve().parents[1] / "fixtures" / "pi-sessions"
    assert base.is_dir(), f"Pi session fixtures are missing: {base}"
    sources = [(base / n).read_bytes() for n in sorted(FIXTURE_COUNTS) if n != V1_LARGE]
    large = (base / V1_LARGE).read_bytes()
    sources.append(large[: large.index(b"\n", 40_000) + 1])  # ~40 KB of the real v1 session
    return sources


GROWTH_SOURCES = _growth_sources()


@st.composite
def grown_file(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    """A real session and cut points: arbitrary bytes, and just before/after newlines."""
    data = draw(st.sampled_from(GROWTH_SOURCES))
    newlines = [i for i, byte in enumerate(data) if byte == 0x0A]
    cut = st.one_of(
        st.integers(min_value=0, max_value=len(data)),
        st.sampled_from(newlines),  # cut just before a newline: a parsable torn line
        st.sampled_from(newlines).map(lambda i: i + 1),
    )
    return data, sorted(draw(st.lists(cut, max_size=8)))


@pytest.mark.skipif(not GROWTH_SOURCES, reason="Pi session fixtures not found")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grown_file())
def test_any_append_sequence_indexes_like_one_read(case: tuple[bytes, list[int]]) -> None:
    """Growing a session in arbitrary chunks (torn lines included) gives the full-read index."""
    data, cuts = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "session.jsonl"
        path.write_bytes(b"")
        with open_store(root / "grown.db") as grown, open_store(root / "full.db") as full:
            written = 0
            for cut in [*cuts, len(data)]:
                append(path, data[written:cut])
                written = max(written, cut)
                sync_session(grown, path)
            one_read = sync_session(full, path)
            assert one_read.outcome == "rebuild"
            session_id = one_read.session_id
            assert session_id is not None
            assert table(grown, session_id) == table(full, session_id) == full_read_table(path)
            grown_state = get_index_state(grown, session_id)
            full_state = get_index_state(full, session_id)
            assert (
                grown_state.checkpoint_offset,
                grown_state.malformed_lines,
                grown_state.indexed_entries,
            ) == (
                full_state.checkpoint_offset,
                full_state.malformed_lines,
                full_state.indexed_entries,
            )


def _all_rows(store: Store) -> list[tuple[object, ...]]:
    assert_fts_consistent(store)
    return (
        store.connection()
        .execute(
            "SELECT session_id, entry_key, parent_id, entry_type, role, seq, line_number, "
            "content_hash, searchable_text FROM entries ORDER BY session_id, entry_key"
        )
        .fetchall()
    )


@pytest.mark.skipif(not GROWTH_SOURCES, reason="Pi session fixtures not found")
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.sampled_from(GROWTH_SOURCES),
    edits=st.lists(
        st.tuples(
            st.floats(min_value=0, max_value=1, exclude_max=True),
            st.binary(min_size=1, max_size=6).filter(lambda b: b != b"")
            | st.sampled_from([b"X", b"\n", b'"', b"}", b"{", b"\xc3"]),
        ),
        min_size=1,
        max_size=3,
    ),
    appended=st.sampled_from([b"", b"\n", b"not json\n"]),
)
def test_any_in_place_rewrite_then_sync_indexes_like_a_fresh_index(
    data: bytes, edits: list[tuple[float, bytes]], appended: bytes
) -> None:
    """Mutate bytes of the indexed prefix in place (same size, mtime restored), maybe append,
    sync: the index equals a fresh full index of the final file (or both reject it)."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "session.jsonl"
        path.write_bytes(data)
        with open_store(root / "synced.db") as synced, open_store(root / "fresh.db") as fresh:
            sync_session(synced, path)
            before = path.stat()
            mutated = bytearray(data)
            for where, new in edits:
                at = min(int(where * len(data)), len(data) - len(new))
                if at >= 0:
                    mutated[at : at + len(new)] = new
            path.write_bytes(bytes(mutated))
            restore_stat(path, before)
            append(path, appended)
            if appended:
                restore_stat(path, before)
            try:
                expected = sync_session(fresh, path)
            except (NotAPiSessionError, UnsupportedSessionVersionError) as exc:
                with pytest.raises(type(exc)):
                    sync_session(synced, path)
                return
            result = sync_session(synced, path)
            assert result.session_id == expected.session_id
            assert _all_rows(synced) == _all_rows(fresh)


def test_concurrent_syncs_of_one_file_agree(store: Store, indexed_copy) -> None:
    import threading

    path, first = indexed_copy(V3)
    append(path, b"".join(v3_line(f"n{i}", "e1", f"line {i}") for i in range(20)))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sync_session(store, path)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert table(store, first.session_id) == full_read_table(path)
    assert sync_session(store, path).outcome == "noop"


def test_sync_inside_a_callers_write_does_not_deadlock(
    store: Store, pi_session_copy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sync_module, "THREADED_REBUILD_BYTES", 0)
    path = pi_session_copy(V3)
    with store.write():
        result = sync_session(store, path)
    assert result.entries_total == 8
    assert table(store, result.session_id) == full_read_table(path)


# --- copies of one session file ---------------------------------------------------------


def test_two_copies_of_one_session_warn_that_they_share_an_id(
    store: Store, pi_session_copy, tmp_path: Path
) -> None:
    original = pi_session_copy(V3)
    copy = tmp_path / "copy" / "same-session.jsonl"
    copy.parent.mkdir()
    shutil.copyfile(original, copy)
    first = sync_session(store, original)
    assert first.warnings == ()
    second = sync_session(store, copy)
    assert second.session_id == first.session_id
    assert len(second.warnings) == 1 and str(original) in second.warnings[0]
    assert "share one index and summary graph" in second.warnings[0]
    assert sync_module.sessions_with_copies(store) == [
        (first.session_id, str(copy), (str(original),))
    ]
    assert str(copy) in sync_session(store, original).warnings[0]  # and back again
    append(original, v3_line("n1", "e8", "more"))
    assert str(copy) in sync_session(store, original).warnings[0]  # incremental
    assert str(copy) in sync_session(store, original).warnings[0]  # noop
    copy.unlink()
    assert sync_session(store, original).warnings == ()
    assert sync_module.sessions_with_copies(store) == []


def test_a_moved_session_file_is_not_a_copy(store: Store, indexed_copy, tmp_path: Path) -> None:
    path, first = indexed_copy(V3)
    moved = tmp_path / "moved.jsonl"
    shutil.move(path, moved)
    assert sync_session(store, moved).warnings == ()
    assert sync_module.sessions_with_copies(store) == []
