"""`ds4 session open` / `ds4 session append` and `ds4 compact` on a server-owned session,
in process (`cli.run(argv, out, err, stdin)`)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

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
