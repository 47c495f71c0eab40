"""`ds4 compact` and `ds4 summaries` on real Pi sessions (copies) and a temp database.

Each test calls `cli.run(argv, out, err)` in-process, as `test_cli.py` does, and checks what a
user sees. The session is continued the way an agent would: the compaction entry printed by
`ds4 compact --entry` is appended to the JSONL (ds4 itself never writes the session), and the
next command's sync finds it and marks the prepared batch committed (docs/compaction.md).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ds4_core import cli

V1_LARGE = "pi-mono-v1-large-session.jsonl"
V3 = "v3-branching-compaction.jsonl"
SINGLE = "openclaw-v3-single-turn-6a5d2a19.jsonl"
V1_LARGE_LAST_ENTRY = "v1-1018"
SUMMARY_ID = re.compile(r"s-[0-9a-f]{16}")
PI_SUMMARY_ID = re.compile(r"pi-[0-9a-f]{16}")
REBUILT_FIELDS = (
    "summaryId",
    "kind",
    "level",
    "lifecycle",
    "childIds",
    "piEntryId",
    "firstKeptEntryId",
    "sourceEntryCount",
    "validationStatus",
)
"""Node fields the JSONL alone must restore exactly when the database is gone."""


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "context.db"


@pytest.fixture
def ds4(db: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Run]:
    """Run `ds4 --db <temp db> ARGS...` (DS4_DB unset, so nothing touches the user's database)."""
    monkeypatch.delenv("DS4_DB", raising=False)

    def run(*argv: str) -> Run:
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(["--db", str(db), *argv], out, err)
        return Run(code, out.getvalue(), err.getvalue())

    return run


def append_lines(session: Path, *records: dict[str, Any]) -> None:
    """Append `records` to the session file, one JSON object per line (as Pi writes them)."""
    with session.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def v1_message(role: str, text: str, second: int) -> dict[str, Any]:
    """A v1 message entry (no id, no parentId: the reader numbers it)."""
    content: Any = [{"type": "text", "text": text}]
    message: dict[str, Any] = {"role": role, "content": content, "timestamp": 1_763_700_000_000}
    if role == "assistant":
        message.update(api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5")
        message["stopReason"] = "stop"
    return {
        "type": "message",
        "timestamp": f"2025-11-21T03:00:{second:02d}.000Z",
        "message": message,
    }


def new_turns(count: int, start_second: int = 0) -> list[dict[str, Any]]:
    """`count` user/assistant exchanges about a follow-up task, as v1 entries."""
    entries: list[dict[str, Any]] = []
    for i in range(count):
        entries.append(
            v1_message(
                "user",
                f"Next, port session-selector.ts step {i}: keep the keybindings of "
                "oauth-selector and the theme colors from theme.ts.",
                start_second + 2 * i,
            )
        )
        entries.append(
            v1_message(
                "assistant",
                f"Step {i} done: session-selector.ts now follows oauth-selector's layout.",
                start_second + 2 * i + 1,
            )
        )
    return entries


def compact_entry(ds4: Callable[..., Run], session: Path, *options: str) -> dict[str, Any]:
    """`ds4 compact --entry` on `session`: the compaction entry, checked to be one JSON line."""
    printed = ds4("compact", "--session", str(session), "--entry", *options)
    assert printed.code == 0, printed.err
    assert printed.out.endswith("\n") and printed.out.count("\n") == 1, "one line to append"
    entry = printed.json()
    assert isinstance(entry, dict)
    return entry


def ds4_record(entry: dict[str, Any]) -> dict[str, Any]:
    record = entry["details"]["ds4ContextEngine"]
    assert isinstance(record, dict)
    return record


def nodes_by_id(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {node["summaryId"]: node for node in view["nodes"]}


# --------------------------------------------------------------------------------- compact


def test_compact_report_shows_span_nodes_validation_summary_and_that_nothing_was_written(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V1_LARGE)
    before = session.read_bytes()

    report = ds4("compact", "--session", str(session))

    assert report.code == 0, report.err
    text = report.out
    assert re.search(r"prepared segment s-[0-9a-f]{16} \(level 0\) · offline summary", text)
    span = re.search(
        r"span\s+(\d[\d,]*) message\(s\), ([\d,]+) tokens summarized \(([\d,]+) entries\)\s+"
        r"([\d,]+) tokens kept verbatim from entry (v1-\d+) · split turn (yes|no)",
        text,
    )
    assert span, text
    assert int(span.group(1).replace(",", "")) > 100
    assert int(span.group(4).replace(",", "")) >= 20_000  # compaction.keepRecentTokens
    assert "nothing: this is the branch's first summary" in text
    assert re.search(r"validation\s+valid", text)
    assert "summarizer  offline" in text
    assert "## Objective" in text and "## Critical Exact Values" in text  # the summary itself
    flat = " ".join(text.split())
    assert (
        "ds4 never writes your session file; append this compaction entry through Pi (or your "
        "agent), and the next sync marks it committed." in flat
    )
    assert "--entry" in flat
    assert session.read_bytes() == before


def test_compact_json_is_the_engines_result(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V1_LARGE)
    result = ds4("compact", "--session", str(session), "--reason", "threshold", "--json").json()

    assert {
        "compaction",
        "summaryId",
        "segmentSummaryId",
        "operationId",
        "summaryKind",
        "graphLevel",
        "summarizer",
        "fallbackReason",
        "validation",
        "span",
        "tokens",
        "warnings",
        "session",
        "durationMs",
    } <= result.keys()
    assert result["summarizer"] == "offline" and result["summaryKind"] == "segment"
    assert result["session"]["leafId"] == V1_LARGE_LAST_ENTRY
    assert ds4_record(result["compaction"])["reason"] == "threshold"
    assert result["tokens"]["summary"] <= result["tokens"]["limit"]


def test_compact_appended_entry_is_committed_and_active_then_aggregates_the_next_one(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path], db: Path
) -> None:
    """The whole loop on the real 914-message session: compact, append the entry as an agent
    would, continue the session, compact again (aggregate), and rebuild from the JSONL alone."""
    session = pi_session_copy(V1_LARGE)

    first = compact_entry(ds4, session)
    assert re.fullmatch(r"[0-9a-f]{8}", first["id"])
    assert first["type"] == "compaction" and first["fromHook"] is True
    assert first["parentId"] == V1_LARGE_LAST_ENTRY
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["timestamp"])
    assert first["summary"].startswith("## Objective")
    first_root = ds4_record(first)["summaryId"]
    assert SUMMARY_ID.fullmatch(first_root)
    assert ds4_record(first)["summaryKind"] == "segment"

    view = ds4("summaries", "--session", str(session), "--json").json()
    # Not in the session yet: the batch waits, prepared, for the entry to be appended (only a
    # server start marks leftover batches failed).
    assert nodes_by_id(view)[first_root]["lifecycle"] == "prepared"
    assert view["activeRootId"] is None

    append_lines(session, first)
    view = ds4("summaries", "--session", str(session), "--json").json()
    node = nodes_by_id(view)[first_root]
    assert node["lifecycle"] == "committed"
    assert node["kind"] == "segment" and node["level"] == 0
    assert node["piEntryId"] == "v1-1019"  # the reader numbers the appended v1 line
    assert view["activeRootId"] == first_root

    append_lines(session, *new_turns(3))  # v1-1020 .. v1-1025
    # The default cut keeps compaction.keepRecentTokens, which the first compaction's kept
    # messages still fill; keep from the first new message instead.
    second = compact_entry(ds4, session, "--first-kept", "v1-1020")
    record = ds4_record(second)
    aggregate, segment = record["summaryId"], record["segmentSummaryId"]
    assert record["summaryKind"] == "aggregate" and record["graphLevel"] == 1
    assert record["childSummaryIds"] == [first_root, segment]
    assert [n["summaryId"] for n in record["embeddedNodes"]] == [segment]

    append_lines(session, second)
    view = ds4("summaries", "--session", str(session), "--json").json()
    nodes = nodes_by_id(view)
    assert view["activeRootId"] == aggregate
    assert nodes[aggregate]["kind"] == "aggregate" and nodes[aggregate]["level"] == 1
    assert nodes[aggregate]["childIds"] == [first_root, segment]
    assert {nodes[i]["lifecycle"] for i in (first_root, segment, aggregate)} == {"committed"}

    report = ds4("summaries", "--session", str(session))
    assert report.code == 0, report.err
    assert f"active    {aggregate}" in report.out
    marked = [line for line in report.out.splitlines() if "*" in line]
    for node_id in (aggregate, first_root, segment):  # the active root and what it contains
        assert any(node_id in line for line in marked), report.out

    dot = ds4("summaries", "--session", str(session), "--dot")
    assert dot.code == 0, dot.err
    assert dot.out.lstrip().startswith("digraph")
    for node_id in nodes:
        assert node_id in dot.out

    # Rebuild from the JSONL alone: the database is gone, the graph comes back exactly.
    committed = {
        i: {f: n.get(f) for f in REBUILT_FIELDS}
        for i, n in nodes.items()
        if n["lifecycle"] == "committed"
    }
    assert set(committed) == {first_root, segment, aggregate}
    for path in db.parent.iterdir():
        path.unlink()
    rebuilt = ds4("summaries", "--session", str(session), "--json").json()
    assert {i: {f: n.get(f) for f in REBUILT_FIELDS} for i, n in nodes_by_id(rebuilt).items()} == (
        committed
    )
    assert rebuilt["activeRootId"] == aggregate


def test_compact_first_kept_chooses_the_span(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V1_LARGE)
    result = ds4("compact", "--session", str(session), "--first-kept", "v1-4", "--json")
    assert result.code == 0, result.err
    span = result.json()["span"]
    assert span["firstKeptEntryId"] == "v1-4"
    assert span["sourceEntryCount"] == 2  # v1-1 (user) and v1-2 (assistant); v1-3 is no message


def test_compact_on_a_pi_native_compaction_aggregates_over_its_branch_node(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V3)
    entry = compact_entry(ds4, session, "--leaf", "e6", "--first-kept", "e6")
    record = ds4_record(entry)
    assert entry["parentId"] == "e6"
    assert record["summaryKind"] == "aggregate" and record["graphLevel"] == 1
    pi_node, segment = record["childSummaryIds"]
    assert PI_SUMMARY_ID.fullmatch(pi_node) and segment == record["segmentSummaryId"]
    assert record["sourceEntryIds"] == ["e3", "e4"]


# ------------------------------------------------------------------------------- summaries


def test_summaries_of_a_pi_native_compaction_show_a_branch_node_active_only_on_its_branch(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V3)

    on_e6 = ds4("summaries", "--session", str(session), "--leaf", "e6", "--json")
    assert on_e6.code == 0, on_e6.err
    view = on_e6.json()
    (node,) = view["nodes"]
    assert PI_SUMMARY_ID.fullmatch(node["summaryId"])
    assert node["kind"] == "branch" and node["level"] == 0
    assert node["piEntryId"] == "e5" and node["firstKeptEntryId"] == "e3"
    assert node["lifecycle"] == "committed"
    assert "imported-pi-summary-unverified" in node["validationIssueCodes"]
    assert view["activeRootId"] == node["summaryId"] and view["leafId"] == "e6"

    elsewhere = ds4("summaries", "--session", str(session), "--json").json()  # leaf e8
    assert elsewhere["leafId"] == "e8"
    assert elsewhere["activeRootId"] is None
    assert [n["summaryId"] for n in elsewhere["nodes"]] == [node["summaryId"]]

    report = ds4("summaries", "--session", str(session), "--leaf", "e6")
    assert report.code == 0, report.err
    assert node["summaryId"] in report.out and "branch" in report.out
    report_e8 = ds4("summaries", "--session", str(session))
    assert "active    none" in report_e8.out
    assert not any("*" in line and node["summaryId"] in line for line in report_e8.out.splitlines())


def test_v1_compaction_with_first_kept_entry_index_imports_as_a_branch_node(
    ds4: Callable[..., Run], tmp_path: Path
) -> None:
    """A v1 file (no ids, compaction by `firstKeptEntryIndex`) is migrated on read: its
    compaction becomes a branch node keeping from `v1-<index>`, and a ds4 compaction extends it."""
    session = tmp_path / "v1-synthetic.jsonl"
    session.write_text("")
    append_lines(
        session,
        {
            "type": "session",
            "id": "synthetic-v1",
            "timestamp": "2025-11-21T03:00:00.000Z",
            "cwd": "/home/me/pi-mono",
        },
        *new_turns(2),  # v1-1 .. v1-4
        {
            "type": "compaction",
            "timestamp": "2025-11-21T03:00:10.000Z",
            "summary": "Ported session-selector.ts steps 0 and 1.",
            "firstKeptEntryIndex": 3,
            "tokensBefore": 420,
        },  # v1-5
        *new_turns(2, start_second=20),  # v1-6 .. v1-9
    )

    view = ds4("summaries", "--session", str(session), "--json").json()
    (node,) = view["nodes"]
    assert node["kind"] == "branch" and node["level"] == 0
    assert node["piEntryId"] == "v1-5"
    assert node["firstKeptEntryId"] == "v1-3"
    assert view["activeRootId"] == node["summaryId"]

    entry = compact_entry(ds4, session, "--first-kept", "v1-8")
    record = ds4_record(entry)
    assert record["childSummaryIds"][0] == node["summaryId"]
    assert record["sourceEntryIds"] == ["v1-3", "v1-4", "v1-6", "v1-7"]
    append_lines(session, entry)
    after = ds4("summaries", "--session", str(session), "--json").json()
    assert after["activeRootId"] == record["summaryId"]
    assert nodes_by_id(after)[record["summaryId"]]["lifecycle"] == "committed"


def test_summaries_dot_to_a_file(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path], tmp_path: Path
) -> None:
    session = pi_session_copy(V3)
    target = tmp_path / "graph.dot"
    written = ds4("summaries", "--session", str(session), "--dot", "--output", str(target))
    assert written.code == 0, written.err
    assert written.out == ""
    assert str(target) in written.err
    dot = target.read_text(encoding="utf-8")
    assert dot.lstrip().startswith("digraph") and "pi-" in dot


def test_summaries_of_a_session_without_compactions(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    report = ds4("summaries", "--session", str(pi_sessions_dir / SINGLE))
    assert report.code == 0, report.err
    assert "active    none" in report.out
    assert "No summaries yet" in report.out


# ---------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("command", ["compact", "summaries"])
def test_a_missing_session_file_is_a_usage_error_naming_it(
    ds4: Callable[..., Run], tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nope.jsonl"
    result = ds4(command, "--session", str(missing))
    assert result.code == 2
    assert "--session" in result.err and "does not exist" in result.err
    assert str(missing) in result.err
    assert result.out == ""


def test_nothing_to_compact_says_how_to_choose_the_span(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(SINGLE)
    result = ds4("compact", "--session", str(session))
    assert result.code == 2
    assert "nothing to compact" in result.err
    assert "--first-kept" in result.err and "compaction.keepRecentTokens" in result.err
    assert result.out == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--first-kept", "no-such-entry"], "--first-kept"),
        (["--first-kept", "e4", "--leaf", "e6"], "tool call"),  # would split call from result
        (["--leaf", "e42"], "--leaf"),
        (["--reason", "bored"], "invalid choice"),
        (["--json", "--entry"], "not allowed with"),
    ],
)
def test_bad_compact_options_are_usage_errors(
    ds4: Callable[..., Run],
    pi_session_copy: Callable[[str], Path],
    argv: list[str],
    message: str,
) -> None:
    session = pi_session_copy(V3)
    result = ds4("compact", "--session", str(session), *argv)
    assert result.code == 2
    assert message in result.err
    assert result.out == ""


def test_compaction_turned_off_is_a_usage_error_naming_the_setting(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V1_LARGE)
    result = ds4("--set", "compaction.enabled=false", "compact", "--session", str(session))
    assert result.code == 2
    assert "compaction.enabled" in result.err


def test_entry_starts_on_its_own_line_when_the_session_lacks_a_final_newline(
    ds4: Callable[..., Run], tmp_path: Path
) -> None:
    """`ds4 compact --entry >> FILE` (the README's recipe) never glues the entry to an
    unterminated last line: the output then starts with a newline."""
    from session_files import SessionWriter

    writer = SessionWriter(tmp_path / "torn.jsonl")
    for n in range(1, 7):
        writer.turn(n)
    writer.path.write_bytes(writer.path.read_bytes().rstrip(b"\n"))
    printed = ds4("compact", "--session", str(writer.path), "--entry", "--first-kept", "00000009")
    assert printed.code == 0, printed.err
    assert printed.out.startswith("\n{")
    with writer.path.open("a", encoding="utf-8") as handle:
        handle.write(printed.out)
    view = ds4("summaries", "--session", str(writer.path), "--json").json()
    assert [n["lifecycle"] for n in view["nodes"]] == ["committed"]


def test_the_append_command_is_printed_whole_and_terminal_safe(
    tmp_path: Path, ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    """The `ds4 compact ... --entry` hint is on a line of its own (copyable: not wrapped, spaces
    kept) and a session path holding a terminal escape is shown escaped."""
    folder = tmp_path / "my  sessions"
    folder.mkdir()
    session = folder / "a\x1b]0;pwned\x07.jsonl"
    session.write_bytes(pi_session_copy(V1_LARGE).read_bytes())
    run = ds4("compact", "--session", str(session))
    assert run.code == 0, run.err
    assert "\x1b" not in run.out and "\x07" not in run.out
    command = [line for line in run.out.split("\n") if "ds4 compact --session" in line]
    assert len(command) == 1 and command[0].strip().endswith("--entry"), run.out
    assert "my  sessions" in command[0]
