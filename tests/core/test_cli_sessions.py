"""`ds4 session open` / `ds4 session append` and `ds4 compact` on a server-owned session,
in process (`cli.run(argv, out, err, stdin)`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from session_files import turn_messages

from ds4_core import cli
from ds4_core.sessions import build_session_context, read_all


def ds4(db: Path, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["--db", str(db), *argv], out, err, io.StringIO(stdin))
    return code, out.getvalue(), err.getvalue()


def jsonl(messages: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps(m) for m in messages) + "\n"


def test_open_append_and_compact_an_owned_session(tmp_path: Path) -> None:
    db = tmp_path / "data" / "ds4.db"
    code, out, _ = ds4(db, "session", "open", "--title", "cli", "--cwd", "/srv", "--json")
    assert code == 0
    opened = json.loads(out)
    assert opened["created"] and Path(opened["file"]).parent == tmp_path / "data" / "sessions"

    messages = turn_messages(tmp_path, 3)
    source = tmp_path / "messages.jsonl"
    source.write_text(jsonl(messages[:5]), encoding="utf-8")
    code, out, err = ds4(db, "session", "append", opened["file"], "--messages", str(source))
    assert (code, err) == (0, "") and "5 message(s) appended" in out
    code, out, _ = ds4(db, "session", "append", opened["file"], "--json", stdin=jsonl(messages[5:]))
    assert code == 0
    appended = json.loads(out)
    assert len(appended["entryIds"]) == len(messages) - 5
    parsed = read_all(Path(opened["file"]))
    assert [m["role"] for m in build_session_context(parsed.entries).messages] == [
        m["role"] for m in messages
    ]
    kept = parsed.entries[17].entry_id  # the third turn's user message (after the title)

    code, out, err = ds4(db, "compact", "--session", opened["file"], "--first-kept", kept)
    assert code == 0
    assert "server-owned" in err and "Appended as entry" in out
    last = read_all(Path(opened["file"])).entries[-1]
    assert last.entry_type == "compaction" and last.entry_id in out

    code, out, _ = ds4(db, "session", "open", "--id", opened["sessionId"], "--json")
    assert json.loads(out)["leafId"] == last.entry_id and not json.loads(out)["created"]


def test_more_than_a_thousand_messages_go_in_chained_batches(tmp_path: Path) -> None:
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    messages = [{"role": "user", "content": f"m{n}", "timestamp": n} for n in range(2500)]
    code, out, _ = ds4(db, "session", "append", file, "--json", stdin=jsonl(messages))
    assert code == 0 and len(json.loads(out)["entryIds"]) == 2500
    context = build_session_context(read_all(Path(file)).entries)
    assert context.messages == messages


def test_bad_input_names_the_line_or_the_option(tmp_path: Path) -> None:
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    before = Path(file).read_bytes()
    good = json.dumps({"role": "user", "content": "x"})
    cases = [
        ([file], f"{good}\n\n{good}\nnot json\n", "--messages: line 4 is not JSON"),
        ([file], f'{good}\n{{"role": "system"}}\n', "--messages: line 2: messages[1].role"),
        ([file], "", "standard input was empty"),
        ([file, "--parent", "deadbeef"], good, "--parent:"),
        ([str(tmp_path / "elsewhere.jsonl")], good, "FILE:"),
        ([file, "--messages", str(tmp_path / "missing")], "", "--messages: cannot read"),
    ]
    for argv, stdin, expected in cases:
        code, _, err = ds4(db, "session", "append", *argv, stdin=stdin)
        assert code == 2 and expected in err, err
    assert Path(file).read_bytes() == before
    code, _, err = ds4(db, "session", "open", "--title", "t" * 201)
    assert code == 2 and err.startswith("ds4: --title: expected")


def test_compact_entry_on_an_owned_session_prints_nothing_to_append(tmp_path: Path) -> None:
    """The server appended the compaction entry itself: `--entry >> FILE` must not add a
    second one (TRIAL15 item 2); stdout stays empty, stderr names the appended entry."""
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    ds4(db, "session", "append", file, stdin=jsonl(turn_messages(tmp_path, 3)))
    kept = read_all(Path(file)).entries[-5].entry_id
    code, out, err = ds4(db, "compact", "--session", file, "--first-kept", kept, "--entry")
    entries = read_all(Path(file)).entries
    assert (code, out) == (0, "")
    assert entries[-1].entry_type == "compaction"
    assert f"appended as entry {entries[-1].entry_id}" in err and "--entry" in err
    assert sum(e.entry_type == "compaction" for e in entries) == 1

    ds4(db, "session", "append", file, stdin=jsonl(turn_messages(tmp_path, 2)))
    kept = read_all(Path(file)).entries[-5].entry_id
    code, out, err = ds4(db, "compact", "--session", file, "--first-kept", kept, "--json")
    result = json.loads(out)
    last = read_all(Path(file)).entries[-1]
    assert code == 0 and result["appended"] and result["entryId"] == last.entry_id


def test_empty_append_input_asks_for_json_lines_messages(tmp_path: Path) -> None:
    """The hint shows a JSON Lines message that `session append` accepts, not plain text."""
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    for argv, stdin in (([], ""), (["--messages", str(empty)], "")):
        code, _, err = ds4(db, "session", "append", file, *argv, stdin=stdin)
        assert code == 2 and "JSON Lines" in err and "fix the login bug" in err, err
        example = err.split("`echo '", 1)[1].split("'", 1)[0]
        code, out, _ = ds4(db, "session", "append", file, "--json", stdin=example)
        assert code == 0 and len(json.loads(out)["entryIds"]) == 1


def test_append_reports_each_batch_and_resumes_with_skip(tmp_path: Path) -> None:
    """Batches of 1000 are written one by one: each finished one is said on stderr with its
    input lines and last entry, and `--skip N` resumes after the lines already appended."""
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    messages = [{"role": "user", "content": f"m{n}", "timestamp": n} for n in range(2500)]
    text = "\n" + jsonl(messages)  # a blank first line: input line n + 1 holds message n
    code, _, err = ds4(db, "session", "append", file, stdin=text)
    ids = [e.entry_id for e in read_all(Path(file)).entries if e.entry_type == "message"]
    assert code == 0 and len(ids) == 2500
    progress = [line for line in err.splitlines() if "appended batch" in line]
    assert progress == [
        f"ds4 session append: appended batch 1/3: lines 1-1001, last entry {ids[999]}"
        " (resume after it with --skip 1001)",
        f"ds4 session append: appended batch 2/3: lines 1002-2001, last entry {ids[1999]}"
        " (resume after it with --skip 2001)",
        f"ds4 session append: appended batch 3/3: lines 2002-2501, last entry {ids[2499]}",
    ]

    code, out, _ = ds4(db, "session", "append", file, "--skip", "2001", "--json", stdin=text)
    context = build_session_context(read_all(Path(file)).entries)
    assert code == 0 and len(json.loads(out)["entryIds"]) == 500
    assert context.messages == messages + messages[2000:]
    code, _, err = ds4(db, "session", "append", file, "--skip", "2501", stdin=text)
    assert code == 2 and "--skip 2501" in err and "no message" in err
    code, _, err = ds4(db, "session", "append", file, "--skip", "-1", stdin=text)
    assert code == 2 and "--skip" in err
    code, _, err = ds4(db, "session", "append", file, "--skip", "1", stdin="{}\nnot json\n")
    assert code == 2 and "line 2 is not JSON" in err


def test_a_refused_later_batch_leaves_the_finished_ones_and_says_where_to_resume(
    tmp_path: Path,
) -> None:
    """docs/sessions.md "Long appends from the CLI": batch 1 stays when batch 2 is refused,
    stderr says so before the error, and the fixed input resumes with --skip."""
    db = tmp_path / "ds4.db"
    _, out, _ = ds4(db, "session", "open", "--json")
    file = json.loads(out)["file"]
    messages = [{"role": "user", "content": f"m{n}", "timestamp": n} for n in range(1500)]
    lines = jsonl(messages).splitlines()
    lines[1200] = '{"role": "system"}'
    code, _, err = ds4(db, "session", "append", file, stdin="\n".join(lines))
    assert code == 2 and "line 1201: messages[200].role" in err
    assert "appended batch 1/2: lines 1-1000" in err and "--skip 1000" in err
    assert build_session_context(read_all(Path(file)).entries).messages == messages[:1000]
    lines[1200] = json.dumps(messages[1200])
    code, _, err = ds4(db, "session", "append", file, "--skip", "1000", stdin="\n".join(lines))
    assert code == 0 and err == ""
    assert build_session_context(read_all(Path(file)).entries).messages == messages


def test_reopening_with_another_cwd_is_refused_naming_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "ds4.db"
    code, out, _ = ds4(db, "session", "open", "--id", "reopen1", "--cwd", "/a", "--json")
    assert code == 0 and json.loads(out)["cwd"] == "/a"
    code, out, err = ds4(db, "session", "open", "--id", "reopen1", "--cwd", "/b")
    assert code != 0 and out == ""
    assert "--cwd" in err and 'was opened with cwd "/a"' in err, err
    monkeypatch.chdir(tmp_path)  # another current directory: a reopen keeps the session's
    code, out, _ = ds4(db, "session", "open", "--id", "reopen1", "--json")
    assert code == 0 and json.loads(out)["cwd"] == "/a" and not json.loads(out)["created"]
    file = Path(json.loads(out)["file"])
    assert read_all(file).header.cwd == "/a"  # type: ignore[union-attr]
    code, out, _ = ds4(db, "session", "open", "--json")
    assert json.loads(out)["cwd"] == str(tmp_path)
