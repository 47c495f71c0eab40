"""`ds4 memory`: the report and `--json` (equal to the `ds4/memory` result)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from session_files import SessionWriter, memory_item

from ds4_core import cli
from ds4_core.engine import ContextEngine
from ds4_core.requests import SessionRef


@pytest.fixture
def no_db_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DS4_DB", raising=False)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_memory_lists_items_and_json_equals_the_engine_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DS4_DB", raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    db = str(tmp_path / "state" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-cli")
    source = writer.user("note it")
    writer.mutation(
        "memory", "mu1", 10, operation="add",
        item=memory_item("m1", "retries defaults to 3", 10, [source]),
    )  # fmt: skip
    writer.mutation(
        "memory", "mu2", 11, operation="status", memoryId="m1", status="expired", reason="old"
    )
    writer.mutation(
        "pin", "pu1", 12, operation="add",
        item={"id": "p1", "scope": "session", "content": "Keep the v1\x1b[31m API", "createdAt": 12},
    )  # fmt: skip
    code, text, _ = run("--db", db, "memory", "--session", str(writer.path))
    assert code == 0
    assert "memory (0)" in text and "pins (1)" in text and "p1 · session" in text
    assert "\x1b" not in text  # escaped for the terminal
    code, text, _ = run("--db", db, "memory", "--all")
    assert "m1 · project · expired · key retries" in text and "retries defaults to 3" in text
    code, printed, _ = run("--db", db, "memory", "--session", str(writer.path), "--all", "--json")
    engine = ContextEngine(database_path=db)
    expected = engine.memory(SessionRef(str(writer.path)), include_inactive=True).to_wire()
    engine.close()
    assert json.loads(printed) == expected


def test_write_commands_print_the_entry_to_append_and_refuse_conflicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DS4_DB", raising=False)
    db = str(tmp_path / "state" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-cli-w")
    writer.user("note it")
    session = str(writer.path)
    code, printed, note = run("--db", db, "remember", "--session", session, "retries is 3")
    assert code == 0 and "does not write this session file" in note
    entry = json.loads(printed)
    assert entry["type"] == "custom" and entry["customType"] == "ds4-context-memory-v1"
    assert len(entry["id"]) == 8 and entry["parentId"] and entry["timestamp"].endswith("Z")
    with writer.path.open("a", encoding="utf-8") as file:  # `>> FILE`, as the note says
        file.write(printed)
    code, _, message = run("--db", db, "remember", "--session", session, "retries is 4")
    assert code == 2 and f"conflicts with active memory '{entry['data']['item']['id']}'" in message
    assert f"pass --supersedes {entry['data']['item']['id']} to replace it" in message
    assert "params." not in message  # the CLI's own option, not the wire field
    code, printed, _ = run("--db", db, "pin", "--session", session, "--json", "use tabs")
    assert code == 0 and json.loads(printed)["appended"] is False


def test_a_write_to_an_owned_session_is_appended_by_ds4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DS4_DB", raising=False)
    db = str(tmp_path / "state" / "context.db")
    code, printed, _ = run("--db", db, "session", "open", "--cwd", str(tmp_path), "--json")
    assert code == 0
    file = json.loads(printed)["file"]
    code, printed, note = run("--db", db, "remember", "--session", file, "--json", "x is 1")
    result = json.loads(printed)
    assert code == 0 and result["appended"] is True and result["entryId"]
    code, printed, note = run("--db", db, "pin", "--session", file, "keep it short")
    assert code == 0 and note.startswith("ds4: appended as entry ")
    code, printed, _ = run("--db", db, "memory", "--session", file, "--json")
    listed = json.loads(printed)
    assert [m["claim"] for m in listed["memory"]] == ["x is 1"]
    assert [p["content"] for p in listed["pins"]] == ["keep it short"]


@pytest.mark.usefixtures("no_db_env")
def test_the_printed_line_appends_whole_to_a_file_without_its_final_newline(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "state" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-cli-nl")
    leaf = writer.user("note it")
    writer.path.write_bytes(writer.path.read_bytes()[:-1])  # no final newline
    code, printed, _ = run("--db", db, "pin", "--session", str(writer.path), "use tabs")
    assert code == 0 and printed.startswith("\n") and json.loads(printed)["parentId"] == leaf
    with writer.path.open("a", encoding="utf-8") as file:
        file.write(printed)
    code, listed, _ = run("--db", db, "memory", "--session", str(writer.path), "--json")
    assert [p["content"] for p in json.loads(listed)["pins"]] == ["use tabs"]


@pytest.mark.usefixtures("no_db_env")
def test_a_session_cannot_retire_the_items_of_an_unrelated_session(tmp_path: Path) -> None:
    """Two owned sessions of two projects: C can neither unpin A's pin, forget A's session or
    project memory, nor supersede them; A can, and a chain's hint names its active end."""
    db = str(tmp_path / "state" / "context.db")
    files = {}
    for name in ("pa", "pc"):
        (tmp_path / name).mkdir()
        code, printed, _ = run(
            "--db", db, "session", "open", "--cwd", str(tmp_path / name), "--json"
        )
        assert code == 0
        files[name] = json.loads(printed)["file"]
    a, c = files["pa"], files["pc"]

    def write(*argv: str) -> tuple[int, dict[str, object] | None, str]:
        code, printed, message = run("--db", db, *argv, "--json")
        return code, json.loads(printed) if code == 0 else None, message

    _, pinned, _ = write("pin", "--session", a, "A-only pin")
    _, mine, _ = write("remember", "--session", a, "--scope", "session", "alpha is one")
    _, shared, _ = write("remember", "--session", a, "beta is two")
    assert pinned and mine and shared
    for argv in (
        ("unpin", "--session", c, str(pinned["itemId"])),
        ("forget", "--session", c, str(mine["itemId"])),
        ("forget", "--session", c, str(shared["itemId"])),
        ("remember", "--session", c, "--supersedes", str(mine["itemId"]), "alpha is two"),
    ):
        code, _, message = write(*argv)
        assert code == 2 and "does not apply to this session" in message, argv
    code, printed, _ = run("--db", db, "memory", "--session", a, "--json")
    listed = json.loads(printed)
    assert len(listed["memory"]) == 2 and len(listed["pins"]) == 1
    _, second, _ = write(
        "remember", "--session", a, "--supersedes", str(mine["itemId"]), "alpha is 2"
    )
    assert second
    _, third, _ = write(
        "remember", "--session", a, "--supersedes", str(second["itemId"]), "alpha is 3"
    )
    assert third
    code, _, message = write("forget", "--session", a, str(mine["itemId"]))
    assert code == 2 and f"not active; use '{third['itemId']}'" in message
    code, _, _ = write("unpin", "--session", a, str(pinned["itemId"]))
    assert code == 0
