"""Server-owned session files: creation, appends read back by our reader, locking, crash safety."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from session_files import assistant_message, tool_result_message

from ds4_core.sessions import build_session_context, owned, read_all

USER = {"role": "user", "content": "read a.py \u2028 please", "timestamp": 1767225601000}
ASSISTANT = assistant_message(
    "Reading it.",
    [("call_1", "read", {"path": "a.py"})],
    api="openai-completions",
    usage={"input": 1, "output": 2, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 3},
    timestamp=1767225602000,
)
RESULT = tool_result_message("call_1", "read", "print('hi')\n", timestamp=1767225603000)


def _messages(*messages: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "message", "message": m} for m in messages]


def _lines(file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in file.read_bytes().split(b"\n") if line]


def test_open_writes_a_pi_v3_header_and_the_title_as_session_info(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj", title="Fix the\nparser")
    assert session.created and session.file.parent == tmp_path / "sessions"
    header, info = _lines(session.file)
    assert header["type"] == "session" and header["version"] == 3 and header["cwd"] == "/proj"
    assert header["id"] == session.session_id
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", session.session_id
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", header["timestamp"])
    assert session.file.name == (
        header["timestamp"].replace(":", "-").replace(".", "-") + f"_{session.session_id}.jsonl"
    )
    assert info["type"] == "session_info" and info["name"] == "Fix the parser"
    assert info["parentId"] is None and session.leaf_id == info["id"]
    assert stat.S_IMODE(session.file.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "sessions").stat().st_mode) == 0o700
    assert read_all(session.file).header.session_id == session.session_id  # type: ignore[union-attr]


def test_reopening_by_id_finds_the_file_and_a_new_title_is_appended(tmp_path: Path) -> None:
    first = owned.open_session(tmp_path, "/proj", session_id="my-chat.1")
    assert first.created and first.leaf_id is None
    (entry_id,) = owned.append_entries(first.file, _messages(USER))
    again = owned.open_session(tmp_path, "/elsewhere", session_id="my-chat.1")
    assert (again.file, again.leaf_id, again.created) == (first.file, entry_id, False)
    renamed = owned.open_session(tmp_path, "/p", title="Named", session_id="my-chat.1")
    assert _lines(renamed.file)[-1]["name"] == "Named"
    assert renamed.leaf_id == _lines(renamed.file)[-1]["id"]
    same = owned.open_session(tmp_path, "/p", title="Named", session_id="my-chat.1")
    assert same.leaf_id == renamed.leaf_id  # an unchanged title appends nothing
    other = owned.open_session(tmp_path, "/p", session_id="chat.1")  # a suffix of the other id
    assert other.created and other.file != first.file


@pytest.mark.parametrize("bad", ["", "-x", "a/b", "x" * 129, "a b", "..", "a\x00"])
def test_a_bad_session_id_is_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="sessionId"):
        owned.open_session(tmp_path, "/p", session_id=bad)


def test_a_title_over_200_characters_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="title"):
        owned.open_session(tmp_path, "/p", title="t" * 201)


def test_appended_messages_read_back_as_the_branch_context(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj", title="t")
    first = owned.append_entries(session.file, _messages(USER, ASSISTANT))
    second = owned.append_entries(session.file, _messages(RESULT))
    assert all(re.fullmatch(r"[0-9a-f]{8}", i) for i in first + second)
    parsed = read_all(session.file)
    assert parsed.malformed_lines == 0 and not parsed.torn_tail
    context = build_session_context(parsed.entries)
    assert context.messages == [USER, ASSISTANT, RESULT]
    assert context.message_entry_ids == first + second
    assert context.path_entry_ids == [session.leaf_id, *first, *second]
    assert b"\xe2\x80\xa8" in session.file.read_bytes()  # U+2028 stays raw: lines split on \n


def test_an_explicit_parent_starts_a_branch_and_an_unknown_one_is_refused(
    tmp_path: Path,
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    (user_id, assistant_id) = owned.append_entries(session.file, _messages(USER, ASSISTANT))
    (branch_id,) = owned.append_entries(session.file, _messages(USER), parent_id=user_id)
    context = build_session_context(read_all(session.file).entries)
    assert context.path_entry_ids == [user_id, branch_id]
    assert assistant_id not in context.path_entry_ids
    with pytest.raises(owned.UnknownParentError, match="parentId"):
        owned.append_entries(session.file, _messages(USER), parent_id="deadbeef")
    assert owned.current_leaf(session.file) == branch_id


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([], "at least one"),
        ([{"message": {}}], "string type"),
        ([{"type": "message", "id": "x"}], "'id'"),
        ([{"type": "message", "parentId": None}], "'parentId'"),
        ([{"type": "session"}], "header"),
        ([{"type": "custom", "data": float("nan")}], "not JSON"),
        ([{"type": "custom", "data": object()}], "not JSON"),
    ],
)
def test_bad_entries_are_refused_and_nothing_is_written(
    tmp_path: Path, entries: list[Any], match: str
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    before = session.file.read_bytes()
    with pytest.raises(ValueError, match=match):
        owned.append_entries(session.file, entries)
    assert session.file.read_bytes() == before


def test_a_lone_surrogate_is_written_escaped_and_reads_back(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj")
    message = {"role": "user", "content": "x\ud800y", "timestamp": 1}
    owned.append_entries(session.file, _messages(message))
    session.file.read_bytes().decode("utf-8")  # still valid UTF-8
    assert build_session_context(read_all(session.file).entries).messages == [message]


def test_ownership_needs_a_regular_file_directly_in_the_sessions_directory(
    tmp_path: Path,
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    assert owned.is_owned(tmp_path, session.file)
    assert owned.is_owned(tmp_path, str(session.file))
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_bytes(session.file.read_bytes())
    assert not owned.is_owned(tmp_path, outside)
    assert not owned.is_owned(tmp_path, tmp_path / "sessions" / ".." / "elsewhere.jsonl")
    link = tmp_path / "sessions" / "planted.jsonl"
    link.symlink_to(outside)
    assert not owned.is_owned(tmp_path, link)
    assert not owned.is_owned(tmp_path, f"{session.file}.lock")
    assert not owned.is_owned(tmp_path, tmp_path / "sessions" / "missing.jsonl")
    assert not owned.is_owned(tmp_path / "other", session.file)
    assert not owned.is_owned(tmp_path, "\x00")
    with pytest.raises(owned.OwnedSessionError, match="symbolic link"):
        owned.append_entries(link, _messages(USER))
    assert outside.read_bytes() == session.file.read_bytes()


def test_a_symlinked_sessions_directory_or_lock_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    (data / "sessions").symlink_to(real)
    with pytest.raises(owned.OwnedSessionError, match="not a directory"):
        owned.open_session(data, "/p")
    assert not list(real.iterdir())
    session = owned.open_session(tmp_path, "/p")
    target = tmp_path / "target"
    Path(f"{session.file}.lock").symlink_to(target)
    with pytest.raises(owned.OwnedSessionError, match="lock file"):
        owned.append_entries(session.file, _messages(USER))
    assert not target.exists()


def test_a_file_without_a_header_is_not_appended_to(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.mkdir()
    for name, data in [("a_x.jsonl", b""), ("b_x.jsonl", b'{"type":"message","id":"1"}\n')]:
        (root / name).write_bytes(data)
        with pytest.raises(owned.OwnedSessionError, match="header"):
            owned.append_entries(root / name, _messages(USER))
        assert (root / name).read_bytes() == data


def test_a_writer_killed_mid_line_leaves_a_torn_line_the_next_append_closes(
    tmp_path: Path,
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    (first,) = owned.append_entries(session.file, _messages(USER))
    script = textwrap.dedent(
        f"""
        import fcntl, os, signal
        lock = os.open({str(session.file) + ".lock"!r}, os.O_RDWR)
        fcntl.flock(lock, fcntl.LOCK_EX)
        fd = os.open({str(session.file)!r}, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b'{{"type":"message","id":"0badc0de","parentId":"{first}","mess')
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    killed = subprocess.run([sys.executable, "-c", script], check=False)
    assert killed.returncode == -9
    assert read_all(session.file).torn_tail
    (after,) = owned.append_entries(session.file, _messages(RESULT))  # the lock was released
    parsed = read_all(session.file)
    assert parsed.malformed_lines == 1 and not parsed.torn_tail
    assert [e.entry_id for e in parsed.entries] == [first, after]
    assert parsed.entries[-1].parent_id == first
    assert build_session_context(parsed.entries).messages == [USER, RESULT]


def test_a_torn_line_that_is_a_whole_record_becomes_the_parent(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj")
    (first,) = owned.append_entries(session.file, _messages(USER))
    record = {"type": "message", "id": "0badc0de", "parentId": first, "message": ASSISTANT}
    with session.file.open("ab") as handle:
        handle.write(json.dumps(record).encode())  # no newline: a writer died before it
    (after,) = owned.append_entries(session.file, _messages(RESULT))
    parsed = read_all(session.file)
    assert parsed.malformed_lines == 0
    assert [e.entry_id for e in parsed.entries] == [first, "0badc0de", after]
    assert build_session_context(parsed.entries).messages == [USER, ASSISTANT, RESULT]


def test_an_append_rereads_only_what_was_added_since_the_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    for _ in range(100):
        owned.append_entries(session.file, _messages(*[USER] * 100))
    size = session.file.stat().st_size
    read_bytes: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(
        owned.os, "pread", lambda fd, n, off: read_bytes.append(n) or real_pread(fd, n, off)
    )
    owned.append_entries(session.file, _messages(USER))
    assert sum(read_bytes) <= 1024, (sum(read_bytes), size)
    with session.file.open("ab") as handle:  # another writer's line
        handle.write(b'{"type":"custom","id":"aaaaaaaa","parentId":null,"customType":"x"}\n')
    read_bytes.clear()
    (child,) = owned.append_entries(session.file, _messages(USER))
    assert sum(read_bytes) < 2048
    assert read_all(session.file).entries[-1].parent_id == "aaaaaaaa"
    assert len(read_all(session.file).entries) == 10_003
    assert child == owned.current_leaf(session.file)


def test_a_file_rewritten_behind_the_cache_is_read_again(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj")
    owned.append_entries(session.file, _messages(USER, ASSISTANT))
    data = session.file.read_bytes()
    old_id = _lines(session.file)[-1]["id"]
    new_id = ("1" if old_id[0] == "0" else "0") + old_id[1:]
    session.file.write_bytes(data.replace(f'"id":"{old_id}"'.encode(), f'"id":"{new_id}"'.encode()))
    assert len(session.file.read_bytes()) == len(data)  # same size, other leaf id
    owned.append_entries(session.file, _messages(RESULT))
    assert _lines(session.file)[-1]["parentId"] == new_id


def _append_many(file: str, worker: int, batches: int, size: int) -> None:
    for batch in range(batches):
        owned.append_entries(
            file,
            [
                {"type": "custom", "customType": "t", "data": {"w": worker, "n": batch * size + i}}
                for i in range(size)
            ],
        )


def test_concurrent_processes_and_threads_lose_no_entry(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj")
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_append_many, args=(str(session.file), w, 20, 25)) for w in range(3)
    ]
    for process in workers:
        process.start()
    _append_many(str(session.file), 3, 20, 25)
    for process in workers:
        process.join(60)
        assert process.exitcode == 0
    records = _lines(session.file)[1:]
    assert sorted((r["data"]["w"], r["data"]["n"]) for r in records) == [
        (w, n) for w in range(4) for n in range(500)
    ]
    seen: set[str | None] = {None}
    for record in records:
        assert record["parentId"] in seen
        seen.add(record["id"])
    assert len(seen) == 2001


def test_a_writer_killed_at_any_moment_leaves_a_file_the_next_append_repairs(
    tmp_path: Path,
) -> None:
    """A real appender (1 MB batches) killed with SIGKILL while it writes: every entry the
    reader finds is whole, and the next append leaves a valid file whose new entry follows
    the last whole one."""
    session = owned.open_session(tmp_path, "/proj")
    script = textwrap.dedent(
        f"""
        import sys
        from ds4_core.sessions import owned
        entry = {{"type": "custom", "customType": "t", "data": "x" * 1000}}
        print("ready", flush=True)
        while True:
            owned.append_entries({str(session.file)!r}, [entry] * 1000)
        """
    )
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert writer.stdout is not None and writer.stdout.readline() == b"ready\n"
    deadline = time.monotonic() + 30
    while session.file.stat().st_size < 5_000_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    writer.kill()
    writer.wait(10)
    before = read_all(session.file)
    assert all(e.data.get("data") == "x" * 1000 for e in before.entries)
    (after,) = owned.append_entries(session.file, _messages(USER))
    parsed = read_all(session.file)
    assert parsed.malformed_lines <= 1 and not parsed.torn_tail
    assert parsed.entries[-1].entry_id == after
    assert parsed.entries[-1].parent_id == parsed.entries[-2].entry_id
    assert session.file.read_bytes().endswith(b"\n")


def test_a_line_longer_than_many_reads_is_read_in_linear_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = owned.open_session(tmp_path, "/proj")
    big = {"role": "user", "content": "x" * (8 << 20), "timestamp": 1}
    (first,) = owned.append_entries(session.file, _messages(big))
    with session.file.open("ab") as torn:  # and a torn tail longer than a read, too
        torn.write(b'{"type":"message","id":"0badf00d","parentId":null,"x":"' + b"y" * 40_000)
    monkeypatch.setattr(owned, "_READ_BYTES", 4096)  # 2,000+ reads for the long line
    owned._cache.clear()
    started = time.perf_counter()
    assert owned.current_leaf(session.file) == first  # the torn record is no entry
    assert time.perf_counter() - started < 1.0  # re-joining the line per read: 5 s and more
    (second,) = owned.append_entries(session.file, _messages(USER))
    context = build_session_context(read_all(session.file).entries)
    assert context.messages == [big, USER] and context.message_entry_ids == [first, second]


def test_only_a_header_with_the_owned_mark_is_owned(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/proj")
    header = _lines(session.file)[0]
    assert header[owned.OWNED_MARK] is True
    unmarked = session.file.with_name("2026-01-01T00-00-00-000Z_pi-made.jsonl")
    pi_header = {key: value for key, value in header.items() if key != owned.OWNED_MARK}
    unmarked.write_text(json.dumps({**pi_header, "id": "pi-made"}) + "\n")
    assert owned.is_owned(tmp_path, session.file) and not owned.is_owned(tmp_path, unmarked)
    marked_1 = unmarked.with_name("y_z.jsonl")
    marked_1.write_text(json.dumps({**header, owned.OWNED_MARK: 1}) + "\n")
    assert not owned.is_owned(tmp_path, marked_1)  # only `true` marks
    with pytest.raises(ValueError, match="sessionId: .* ds4 did not create"):
        owned.open_session(tmp_path, "/proj", session_id="pi-made")
