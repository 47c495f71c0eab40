"""The `ds4` command line (`ds4_core.cli.run`) on the real Pi sessions and a temp database.

Each test calls `run(argv, out, err)` in-process and checks what a user sees: the exit code
(0 ok, 1 internal error, 2 bad usage or input, 3 some sessions failed), the report or JSON on
stdout, and an actionable message on stderr.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ds4_core import cli
from ds4_core.engine import ContextEngine
from ds4_core.engine import preparing as engine_preparing
from ds4_core.requests import PlanRequest, RetrieveRequest, SessionRef

V1_LARGE = "pi-mono-v1-large-session.jsonl"
V3 = "v3-branching-compaction.jsonl"
SINGLE = "openclaw-v3-single-turn-6a5d2a19.jsonl"
EMPTY = "openclaw-v3-empty-862b07aa.jsonl"
REPLAY = "v1-prompt-cache-replay.jsonl"
FIXTURE_ENTRIES = {V1_LARGE: 1018, V3: 8, SINGLE: 5, REPLAY: 6, EMPTY: 0}
EARLY_REQUEST = (
    "Let's get back to porting user-message-selector.ts: which patterns from oauth-selector "
    "and theme.ts did we say it should follow?"
)
MANIFEST_ID = re.compile(r"\bm-[0-9a-f]{28}\b")


def flat(report: str) -> str:
    """`report` with its line breaks and runs of spaces as one space (a wrapped line read whole)."""
    return " ".join(report.split())


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


class Terminal(io.StringIO):
    """stderr that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "context.db"


@pytest.fixture
def ds4(db: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Run]:
    """Run `ds4 --db <temp db> ARGS...` (DS4_DB unset, so nothing touches the user's database)."""
    monkeypatch.delenv("DS4_DB", raising=False)
    monkeypatch.setenv("COLUMNS", str(cli.REPORT_WIDTH))  # the width off a terminal

    def run(
        *argv: str,
        db_path: Path | None = db,
        err: io.StringIO | None = None,
        stdin: io.StringIO | None = None,
    ) -> Run:
        out, err = io.StringIO(), err if err is not None else io.StringIO()
        prefix = ["--db", str(db_path)] if db_path is not None else []
        piped = {} if stdin is None else {"stdin": stdin}
        code = cli.run([*prefix, *argv], out, err, **piped)
        return Run(code, out.getvalue(), err.getvalue())

    return run


# ------------------------------------------------------------------------------------------ plan


def test_plan_report_shows_budget_tail_evidence_exclusions_and_manifest(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    result = ds4("plan", "--session", str(pi_sessions_dir / V1_LARGE), EARLY_REQUEST)

    assert result.code == 0, result.err
    report = result.out
    assert "anthropic/claude-sonnet-4-5" in report
    assert "window 200,000 tokens (from the table of well-known models (claude-sonnet-4))" in flat(
        report
    )
    assert re.search(r"budget\s+hard [\d,]+ · target [\d,]+ · output reserve [\d,]+", report)
    assert re.search(r"Recent tail kept: \d+ messages in \d+ turn group\(s\)", report)
    evidence = re.search(r"Historical evidence retrieved: (\d+) item\(s\)", report)
    assert evidence and int(evidence.group(1)) > 0
    lines = report.splitlines()
    early = next(i for i, line in enumerate(lines) if re.match(r"\s+[\d.]+\s+v1-4\s", line))
    assert lines[early + 1].lstrip().startswith("why: relevance ")  # the reason it matched
    assert re.search(r"Excluded: \d+ item\(s\)", report)
    assert "older turn outside the recent tail" in report
    manifest_ids = MANIFEST_ID.findall(report)
    assert manifest_ids and "(stored)" in report

    shown = ds4("manifest", manifest_ids[0], "--json")
    assert shown.code == 0 and shown.json()["id"] == manifest_ids[0]


def test_plan_json_is_the_engines_plan_result(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """`--json` prints the same object the `ds4/plan` request answers with."""
    printed = ds4("plan", "--session", str(pi_sessions_dir / V1_LARGE), "--json", EARLY_REQUEST)
    assert printed.code == 0, printed.err
    plan = printed.json()

    engine = ContextEngine(database_path=tmp_path / "other.db")
    try:
        direct = engine.plan(
            PlanRequest(session=SessionRef(str(pi_sessions_dir / V1_LARGE)), request=EARLY_REQUEST)
        ).to_wire()
    finally:
        engine.close()

    assert plan.keys() == direct.keys()
    assert {"mode", "messages", "manifestId", "estimatedTokens", "budget", "model", "warnings"} <= (
        plan.keys()
    )
    assert plan["stats"].keys() == direct["stats"].keys()
    assert {"counts", "tokens", "included", "excluded", "durationMs"} <= plan["stats"].keys()
    assert plan["budget"] == direct["budget"] and plan["model"] == direct["model"]
    assert plan["mode"] == direct["mode"] == "managed"
    # the same messages, apart from the timestamp of the new user message
    assert plan["messages"][:-1] == direct["messages"][:-1]
    assert plan["messages"][-1]["content"] == direct["messages"][-1]["content"]
    assert MANIFEST_ID.fullmatch(plan["manifestId"])


def test_plan_leaf_picks_the_branch(ds4: Callable[..., Run], pi_sessions_dir: Path) -> None:
    session = str(pi_sessions_dir / V3)
    on_e6 = ds4("plan", "--session", session, "--leaf", "e6", "--json", "next").json()
    latest = ds4("plan", "--session", session, "--json", "next").json()

    assert on_e6["session"]["leafId"] == "e6" and latest["session"]["leafId"] == "e8"
    call_ids = [
        block["id"]
        for m in on_e6["messages"]
        if m["role"] == "assistant"
        for block in m["content"]
        if block.get("type") == "toolCall"
    ]
    assert call_ids == ["call-1"]
    assert "call-2" in json.dumps(latest["messages"]) and "call-2" not in json.dumps(on_e6)


def test_plan_unknown_leaf_is_a_usage_error_naming_the_leaf(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    result = ds4("plan", "--session", str(pi_sessions_dir / V3), "--leaf", "e42", "x")
    assert result.code == 2
    assert result.out == ""
    assert "--leaf" in result.err and "'e42'" in result.err


def test_plan_missing_session_file(ds4: Callable[..., Run], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.jsonl"
    result = ds4("plan", "--session", str(missing), "x")
    assert result.code == 2
    assert "--session" in result.err and "does not exist" in result.err
    assert str(missing) in result.err


def test_model_and_context_window_change_the_budget_and_say_where_the_window_came_from(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    session = str(pi_sessions_dir / V1_LARGE)

    def plan(*options: str) -> Run:
        result = ds4("plan", "--session", session, *options, "x")
        assert result.code == 0, result.err
        return result

    table = plan("--model", "openai/gpt-5")
    assert "openai/gpt-5 window 400,000 tokens (from the table of well-known models (gpt-5))" in (
        flat(table.out)
    )
    given = plan("--context-window", "50000")
    assert "anthropic/claude-sonnet-4-5 window 50,000 tokens (from --context-window)" in flat(
        given.out
    )
    unknown = plan("--model", "acme/beta")
    assert "acme/beta window 128,000 tokens (unknown model" in flat(unknown.out)
    assert "warning: context window of model 'acme/beta' is unknown" in unknown.out

    def budget(*options: str) -> dict[str, Any]:
        return ds4("plan", "--session", session, *options, "--json", "x").json()["budget"]

    assert budget("--model", "openai/gpt-5")["contextWindow"] == 400_000
    assert budget("--context-window", "50000")["contextWindow"] == 50_000
    assert budget()["contextWindow"] == 200_000  # the session's own model
    assert budget("--context-window", "50000")["hardInputLimit"] < budget()["hardInputLimit"]


def test_the_default_model_is_the_sessions_current_model(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    plan = ds4("plan", "--session", str(pi_sessions_dir / V3), "--json", "x").json()
    assert (plan["model"]["provider"], plan["model"]["id"]) == ("acme", "alpha")
    assert plan["model"]["source"] == "default"
    assert any("'acme/alpha'" in w for w in plan["warnings"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--model", "claude"], "--model: expected PROVIDER/ID"),
        (["--context-window", "0"], "--context-window: expected a positive number"),
        (["--fixed-tokens", "-1"], "--fixed-tokens: expected a non-negative integer"),
    ],
)
def test_bad_plan_options_are_usage_errors(
    ds4: Callable[..., Run], pi_sessions_dir: Path, options: list[str], message: str
) -> None:
    result = ds4("plan", "--session", str(pi_sessions_dir / V3), *options, "x")
    assert result.code == 2
    assert message in result.err


@pytest.mark.parametrize("command", ["plan", "retrieve"])
def test_a_workspace_that_is_not_a_directory_is_a_usage_error_naming_the_option(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path, command: str
) -> None:
    missing = tmp_path / "nosuchdir"
    result = ds4(
        command, "--session", str(pi_sessions_dir / V3), "--workspace", str(missing), "--trust", "x"
    )
    assert result.code == 2
    assert result.err == f"ds4: --workspace: '{missing}' is not a directory\n"


def test_trust_without_a_workspace_is_a_usage_error_naming_trust(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    result = ds4("plan", "--session", str(pi_sessions_dir / V3), "--trust", "x")
    assert result.code == 2
    assert result.err == "ds4: --trust needs --workspace DIR\n"


def test_plan_report_of_a_fallback_says_why(
    ds4: Callable[..., Run], pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(engine_preparing, "plan_context", broken)
    result = ds4("plan", "--session", str(pi_sessions_dir / V3), "x")
    assert result.code == 0, result.err
    assert "mode fallback" in result.out
    assert "internal error while planning (RuntimeError)" in " ".join(result.out.split())


def test_plan_of_an_empty_session_says_the_manifest_is_not_stored(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    result = ds4("plan", "--session", str(pi_sessions_dir / EMPTY), "hello")
    assert result.code == 0, result.err
    assert "not stored" in result.out
    assert "inspect with" not in result.out  # another process could not show it


def test_plan_report_counts_every_excluded_item_of_a_long_session(
    ds4: Callable[..., Run], tmp_path: Path
) -> None:
    """A long session's older turns are one bulk item of the manifest (issue 13), so the
    manifest stays small (no rollup); the report still gives every excluded message and its
    tokens, and the manifest view names the range."""
    from session_files import SessionWriter

    writer = SessionWriter(tmp_path / "long.jsonl")
    for n in range(1_500):
        writer.user(f"Question {n} about the parser module and its error recovery.")
        writer.assistant(f"Answer {n}: the parser recovers at the next statement boundary.")
    printed = ds4(
        "plan", "--session", str(writer.path), "--context-window", "64000", "--json", "next?"
    )
    assert printed.code == 0, printed.err
    manifest_id = printed.json()["manifestId"]
    manifest = ds4("manifest", manifest_id, "--view", "full", "--json").json()
    assert "excludedRollup" not in manifest
    bulk = [item for item in manifest["excluded"] if "count" in item]
    assert len(bulk) == 1 and bulk[0]["count"] > 2_000 and bulk[0]["sourceId"] == "00000001"
    total = manifest["planning"]["counts"]["excluded"]
    assert total == sum(item.get("count", 1) for item in manifest["excluded"]) > 2_000
    tokens = sum(item["tokens"] for item in manifest["excluded"])

    report = ds4("plan", "--session", str(writer.path), "--context-window", "64000", "next?")
    assert report.code == 0, report.err
    heading = section(report.out, "Excluded:").splitlines()[0]
    assert heading == f"Excluded: {total:,} item(s), {tokens:,} tokens"
    shown = ds4("manifest", manifest_id, "--view", "excluded")
    assert f"excluded ({total})" in shown.out
    assert f"00000001 .. {bulk[0]['lastSourceId']} ({bulk[0]['count']:,} messages)" in shown.out


def section(report: str, title: str) -> str:
    """The lines of the report section whose heading starts with `title` (up to a blank line)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def test_plan_report_of_a_fallback_says_the_messages_are_sent_unchanged(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    """A window too small for the current turn: nothing is presented as a tail or evidence."""
    session = str(pi_sessions_dir / V3)
    result = ds4("plan", "--session", session, "--leaf", "e6", "--context-window", "1", "x")

    assert result.code == 0, result.err
    flat = " ".join(result.out.split())
    assert "mode fallback" in flat and "the same 5 sent unchanged" in flat
    assert "so the original messages are sent unchanged. Why: the current turn" in flat
    assert "Sent unchanged: 5 message(s), 85 tokens (1 summary, 3 older, 1 current turn)" in flat
    for managed_only in ("Recent tail", "Historical evidence", "Excluded", "Summaries kept"):
        assert managed_only not in result.out

    printed = ds4(
        "plan", "--session", session, "--leaf", "e6", "--context-window", "1", "--json", "x"
    ).json()
    assert printed["overHardLimit"] is True
    assert (printed["currentTurnTokens"], printed["fixedTokens"]) == (14, 0)
    assert printed["hardInputLimit"] == printed["budget"]["hardInputLimit"] == 0


def test_plan_report_in_observer_mode_says_what_a_managed_plan_would_have_done(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    session = str(pi_sessions_dir / V1_LARGE)
    observed = ds4("--set", "context.mode=observer", "plan", "--session", session, EARLY_REQUEST)
    planned = ds4("--set", "context.mode=observer", "plan", "--session", session, "--json",
                  EARLY_REQUEST).json()  # fmt: skip

    assert observed.code == 0, observed.err
    flat = " ".join(observed.out.split())
    assert "mode observer · 915 messages (active branch + request) → the same 915 sent" in flat
    would_send = (
        f"what a managed plan would have done: send {planned['stats']['counts']['output']} "
        f"messages, ~{planned['stats']['plannedTokens']:,} tokens"
    )
    assert would_send in flat
    assert re.search(r"^Recent tail a managed plan would keep: \d+ messages", observed.out, re.M)
    # how many depends on the relevance floor (issue 11), no longer on maxResults alone
    assert re.search(r"^Historical evidence a managed plan would add: \d+ item", observed.out, re.M)
    assert re.search(r"^A managed plan would exclude: \d+ item", observed.out, re.M)
    assert not re.search(r"^(Recent tail kept|Historical evidence retrieved|Excluded):",
                         observed.out, re.M)  # fmt: skip


def test_plan_report_shows_the_summaries_kept(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    """The compaction summary e5 is kept: it has a section, and the sections add up."""
    session = str(pi_sessions_dir / V3)
    result = ds4("plan", "--session", session, "--leaf", "e6", "x")
    plan = ds4("plan", "--session", session, "--leaf", "e6", "--json", "x").json()

    assert result.code == 0, result.err
    summaries = section(result.out, "Summaries kept:")
    assert summaries.startswith("Summaries kept: 1 item(s), 16 tokens")
    assert re.search(r"^\s+e5\s+16\s+group:0-0$", summaries, re.M)
    tail = re.search(r"Recent tail kept: (\d+) messages", result.out)
    assert tail and int(tail.group(1)) + 1 == plan["stats"]["counts"]["included"] == 5


def test_plan_manifest_hint_repeats_db_and_works(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The printed `inspect with:` command runs as is: it names the --db the plan used."""
    db = tmp_path / "odd dir" / "plans.db"
    result = ds4("plan", "--session", str(pi_sessions_dir / V3), "x", db_path=db)
    assert result.code == 0, result.err
    hint = result.out.split("inspect with:\n", 1)[1].splitlines()[0].strip()
    assert hint.startswith(f"ds4 --db '{db}' manifest m-") and hint.endswith(" --view full")
    shown = ds4(*shlex.split(hint)[1:], db_path=None)
    assert shown.code == 0, shown.err
    assert shown.out.startswith("manifest m-")

    monkeypatch.setenv("DS4_DB", str(db))
    from_env = ds4("plan", "--session", str(pi_sessions_dir / V3), "x", db_path=None)
    assert re.search(
        r"inspect with:\n  ds4 manifest m-[0-9a-f]{28} --view full$", from_env.out, re.M
    )


def test_plan_report_shows_reasons_in_full(ds4: Callable[..., Run], pi_sessions_dir: Path) -> None:
    """Evidence is score | entry | excerpt with the whole reason (relevance part too) on the next
    line; exclusion reasons are not cut either; reason lines wrap at the report width."""
    result = ds4("plan", "--session", str(pi_sessions_dir / V1_LARGE), EARLY_REQUEST)
    assert result.code == 0, result.err
    plan = ds4("plan", "--session", str(pi_sessions_dir / V1_LARGE), "--json", EARLY_REQUEST)
    manifest = ds4("manifest", plan.json()["manifestId"], "--view", "full", "--json").json()

    evidence = section(result.out, "Historical evidence retrieved:")
    assert re.search(r"^\s+score\s+entry\s+excerpt$", evidence, re.M)
    flat_evidence = " ".join(evidence.split())
    for retrieved in manifest["retrieved"]:
        assert f"why: {retrieved['reason']}" in flat_evidence
        assert retrieved["reason"].startswith("relevance ")
    excluded = " ".join(section(result.out, "Excluded:").split())
    reasons = {item["reason"] for item in manifest["excluded"]}
    assert any("would exceed the tail limit of" in reason for reason in reasons)
    for reason in reasons:
        assert f"why: {reason}" in excluded
    for line in evidence.splitlines() + section(result.out, "Excluded:").splitlines():
        assert len(line) <= cli.REPORT_WIDTH, line


# -------------------------------------------------------------------------------------- retrieve


def test_retrieve_report_and_json(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    session = str(pi_sessions_dir / V1_LARGE)
    report = ds4("retrieve", "--session", session, EARLY_REQUEST)
    assert report.code == 0, report.err
    assert report.out.startswith("ds4 retrieve: status ok")
    assert re.search(r"^\s+[\d.]+\s+v1-4\s+user\s", report.out, re.MULTILINE)

    printed = ds4("retrieve", "--session", session, "--json", EARLY_REQUEST)
    engine = ContextEngine(database_path=tmp_path / "other.db")
    try:
        direct = engine.retrieve(
            RetrieveRequest(query=EARLY_REQUEST, session=SessionRef(session))
        ).to_wire()
    finally:
        engine.close()
    found = printed.json()
    assert found.keys() == direct.keys()
    assert found["history"] == direct["history"]
    assert found["status"] == "ok" and found["query"] == EARLY_REQUEST


def test_request_and_query_of_dash_are_read_from_standard_input(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    session = str(pi_sessions_dir / V1_LARGE)
    piped = ds4(
        "plan", "--session", session, "--json", "-", stdin=io.StringIO(EARLY_REQUEST + "\n")
    )
    given = ds4("plan", "--session", session, "--json", EARLY_REQUEST)
    assert piped.code == 0, piped.err
    assert piped.json()["messages"][-1]["content"] == given.json()["messages"][-1]["content"]

    found = ds4("retrieve", "--session", session, "--json", "-", stdin=io.StringIO("theme.ts\n"))
    assert found.code == 0, found.err
    assert found.json()["query"] == "theme.ts"

    empty = ds4("retrieve", "--session", session, "-", stdin=io.StringIO("\n"))
    assert empty.code == cli.EXIT_USAGE
    assert "QUERY (-): standard input was empty" in empty.err


def test_a_request_of_dash_is_read_as_utf8_whatever_the_locale(
    pi_sessions_dir: Path, tmp_path: Path
) -> None:
    session = str(pi_sessions_dir / V3)
    db = str(tmp_path / "context.db")
    request = "déployer la fusée 🚀"
    done = run_ds4_process(
        "--db", db, "plan", "--session", session, "--json", "-",
        encoding="ascii", stdin=request.encode(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    plan = json.loads(done.stdout)
    assert plan["messages"][-1]["content"][0]["text"] == request

    bad = run_ds4_process(
        "--db", db, "plan", "--session", session, "-", encoding="utf-8", stdin=b"caf\xe9\n"
    )
    assert bad.returncode == cli.EXIT_USAGE
    assert b"REQUEST (-): standard input is not UTF-8 text (byte 3 of 5)" in bad.stderr


def test_retrieve_excerpts_fit_the_terminal_width(
    ds4: Callable[..., Run], pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Excerpts (and wrapped reasons) use `COLUMNS`, the terminal's width; 100 off a terminal."""
    session = str(pi_sessions_dir / V1_LARGE)
    excerpt_widths = {}
    for columns in (80, 100, 180):
        monkeypatch.setenv("COLUMNS", str(columns))
        report = ds4("retrieve", "--session", session, "--max-results", "3", EARLY_REQUEST)
        assert report.code == 0, report.err
        rows = [line for line in report.out.splitlines() if re.match(r"^\s+\d+\.\d{3}\s", line)]
        assert rows and all(len(line) <= columns for line in report.out.splitlines()[3:])
        excerpt_widths[columns] = max(len(line) for line in rows)
    assert excerpt_widths[80] < excerpt_widths[100] < excerpt_widths[180]
    assert excerpt_widths[180] > 100
    monkeypatch.delenv("COLUMNS")
    assert cli.report_width() == cli.REPORT_WIDTH  # pytest's stdout is not a terminal


def test_retrieve_bad_max_results(ds4: Callable[..., Run], pi_sessions_dir: Path) -> None:
    result = ds4("retrieve", "--session", str(pi_sessions_dir / V3), "--max-results", "0", "q")
    assert result.code == 2
    assert "--max-results" in result.err


def test_retrieve_does_not_warn_about_the_context_window(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    """The model (here an unknown one) does not matter to `ds4 retrieve`: no window warning
    in the report. `--json` is the engine's result, warnings included."""
    session = str(pi_sessions_dir / V3)
    report = ds4("retrieve", "--session", session, "sanitized")
    assert report.code == 0, report.err
    assert "context window" not in report.out + report.err
    printed = ds4("retrieve", "--session", session, "--json", "sanitized").json()
    assert any(w.startswith("context window of model 'acme/alpha'") for w in printed["warnings"])


def test_retrieve_report_shows_the_whole_reason_under_each_hit(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    session = str(pi_sessions_dir / V1_LARGE)
    report = ds4("retrieve", "--session", session, "--max-results", "3", EARLY_REQUEST)
    found = ds4("retrieve", "--session", session, "--max-results", "3", "--json", EARLY_REQUEST)
    assert report.code == 0, report.err
    assert re.search(r"^\s+score\s+entry\s+role\s+created\s+excerpt$", report.out, re.M)
    flat = " ".join(report.out.split())
    for hit in found.json()["history"]:
        assert f"why: {hit['reason']}" in flat


# -------------------------------------------------------------------------------------- manifest


def test_manifest_by_id_latest_and_views(ds4: Callable[..., Run], pi_sessions_dir: Path) -> None:
    session = str(pi_sessions_dir / V1_LARGE)
    first = ds4("plan", "--session", session, "--json", "theme").json()["manifestId"]
    second = ds4("plan", "--session", session, "--json", EARLY_REQUEST).json()["manifestId"]

    latest = ds4("manifest", "--latest", "--session", session, "--json")
    assert latest.code == 0 and latest.json()["id"] == second

    summary = ds4("manifest", first, "--json").json()
    assert summary["id"] == first and "itemCounts" in summary and "included" not in summary
    full = ds4("manifest", first, "--view", "full", "--json").json()
    assert full["included"] and full["excluded"]
    assert full["planning"]["counts"]["included"] == summary["itemCounts"]["included"]
    included = ds4("manifest", first, "--view", "included", "--json").json()
    assert "included" in included and "excluded" not in included
    excluded = ds4("manifest", first, "--view", "excluded", "--json").json()
    assert "excluded" in excluded and "included" not in excluded

    text = ds4("manifest", second, "--view", "full")
    assert text.code == 0
    assert text.out.startswith(f"manifest {second}")
    assert re.search(r"^included \(\d+\)$", text.out, re.MULTILINE)
    assert re.search(r"^excluded \(\d+\)$", text.out, re.MULTILINE)


def test_manifest_unknown_id_is_a_usage_error_saying_what_to_do(ds4: Callable[..., Run]) -> None:
    result = ds4("manifest", "m-000000000000aaaaaaaaaaaaaaaa")
    assert result.code == 2
    assert "no manifest with id 'm-000000000000aaaaaaaaaaaaaaaa'" in result.err
    assert "--latest --session FILE" in result.err  # what to do instead
    assert "--db" in result.err  # and which database was searched


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["manifest"], "give a manifest ID"),
        (["manifest", "--latest"], "--latest needs --session FILE"),
        (["manifest", "m-1", "--view", "everything"], "invalid choice: 'everything'"),
    ],
)
def test_manifest_usage_errors(ds4: Callable[..., Run], argv: list[str], message: str) -> None:
    result = ds4(*argv)
    assert result.code == 2
    assert message in result.err


def test_manifest_latest_of_a_session_without_plans(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    result = ds4("manifest", "--latest", "--session", str(pi_sessions_dir / V3))
    assert result.code == 2
    assert "--session" in result.err and "plan" in result.err


# ----------------------------------------------------------------------------------------- index


def test_index_counts_every_fixture(ds4: Callable[..., Run], pi_sessions_dir: Path) -> None:
    files = [str(pi_sessions_dir / name) for name in FIXTURE_ENTRIES]
    result = ds4("index", "--json", *files)

    assert result.code == 0, result.err
    counts = {Path(r["sessionFile"]).name: r["entriesTotal"] for r in result.json()}
    assert counts == FIXTURE_ENTRIES
    health = ds4("health", "--json").json()
    assert health["sessions"] == 4 and health["entries"] == sum(FIXTURE_ENTRIES.values())

    table = ds4("index", *files)
    assert table.code == 0
    assert re.search(r"d703a1a9-1b7b-4fb1-b512-c9738b1fe617\s+noop\s+1,018\s", table.out)
    assert re.search(r"^\s+-\s+skipped \(empty session file\)\s+0\s", table.out, re.MULTILINE)


def test_index_reports_a_non_session_file_and_indexes_the_others(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a session\n")
    files = [str(pi_sessions_dir / V3), str(notes), str(pi_sessions_dir / SINGLE)]

    result = ds4("index", "--json", *files)

    assert result.code == 3
    assert str(notes) in result.err and "is this a Pi session file?" in result.err
    assert "1 of 3 file(s) could not be indexed (see above); the other 2 were" in result.err
    printed = result.json()  # one object per FILE, in order; the failure in its place
    assert [r.get("entriesTotal") for r in printed] == [8, None, 5]
    assert printed[1] == {"sessionFile": str(notes.resolve()), "error": printed[1]["error"]}
    assert "is this a Pi session file?" in printed[1]["error"]
    assert ds4("health", "--json").json()["sessions"] == 2


def test_index_a_missing_file(ds4: Callable[..., Run], tmp_path: Path) -> None:
    result = ds4("index", str(tmp_path / "missing.jsonl"))
    assert result.code == 3
    assert "does not exist" in result.err


def test_index_where_every_file_fails(ds4: Callable[..., Run], tmp_path: Path) -> None:
    """No table header and no "the others were" when there are no others; with --json the
    failures are on stdout."""
    notes, missing = tmp_path / "notes.txt", tmp_path / "missing.jsonl"
    notes.write_text("not a session\n")

    text = ds4("index", str(notes), str(missing))
    assert text.code == 3
    assert text.out == ""
    assert "none of the 2 file(s) could be indexed (see above)" in text.err
    assert "the other" not in text.err

    printed = ds4("index", "--json", str(notes), str(missing))
    assert printed.code == 3
    assert [f["sessionFile"] for f in printed.json()] == [str(notes), str(missing)]
    assert all(f.keys() == {"sessionFile", "error"} for f in printed.json())
    assert "does not exist" in printed.json()[1]["error"]


def test_index_a_directory_indexes_its_jsonl_files_by_name(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """`ds4 index DIR`: the `.jsonl` files directly in DIR, sorted by name; other files and
    subdirectories are left alone; a `.jsonl` that is not a Pi session fails (exit 3) in its
    place, like a FILE argument would."""
    folder = tmp_path / "sessions"
    (folder / "deeper").mkdir(parents=True)
    shutil.copyfile(pi_sessions_dir / V3, folder / "b-v3.jsonl")
    shutil.copyfile(pi_sessions_dir / SINGLE, folder / "a-single.jsonl")
    shutil.copyfile(pi_sessions_dir / REPLAY, folder / "deeper" / "replay.jsonl")
    (folder / "c-notes.jsonl").write_text('{"hello": "world"}\n')
    (folder / "README.txt").write_text("not indexed\n")

    result = ds4("index", "--json", str(folder))

    assert result.code == cli.EXIT_PARTIAL, result.err
    printed = result.json()
    assert [Path(r["sessionFile"]).name for r in printed] == [
        "a-single.jsonl",
        "b-v3.jsonl",
        "c-notes.jsonl",
    ]
    assert [r.get("entriesTotal") for r in printed] == [5, 8, None]
    assert printed[2].keys() == {"sessionFile", "error"}
    assert "is this a Pi session file?" in printed[2]["error"]
    assert "1 of 3 file(s) could not be indexed (see above); the other 2 were" in result.err
    assert ds4("health", "--json").json()["sessions"] == 2  # deeper/ was not searched

    both = ds4("index", str(folder / "deeper"), str(pi_sessions_dir / EMPTY))
    assert both.code == cli.EXIT_OK, both.err
    assert "replay.jsonl" in both.out and EMPTY in both.out


def test_index_a_directory_without_sessions_fails_in_its_place(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "nothing-here"
    empty.mkdir()
    result = ds4("index", "--json", str(empty), str(pi_sessions_dir / V3))
    assert result.code == cli.EXIT_PARTIAL
    printed = result.json()
    assert printed[0] == {"sessionFile": str(empty), "error": printed[0]["error"]}
    assert "holds no .jsonl file" in printed[0]["error"]
    assert printed[1]["entriesTotal"] == 8


@contextlib.contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Another connection holds `db`'s write lock (BEGIN IMMEDIATE) while the block runs."""
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


def test_index_under_a_database_lock_reports_each_file_and_exits_3(
    ds4: Callable[..., Run], db: Path, pi_sessions_dir: Path
) -> None:
    """A write lock held past storage.busyTimeoutMs is not corruption: the file is listed as
    failed (`{sessionFile, error}`, exit 3, as for any file not indexed) with a hint that fits
    the cause (wait, or a longer busy timeout), never "run ds4 rebuild"."""
    assert ds4("index", str(pi_sessions_dir / V3)).code == 0  # the database exists
    files = [str(pi_sessions_dir / SINGLE), str(pi_sessions_dir / V3)]

    with write_locked(db):
        result = ds4("--set", "storage.busyTimeoutMs=50", "index", "--json", *files)

    assert result.code == cli.EXIT_PARTIAL, result.err
    printed = result.json()
    assert printed[0].keys() == {"sessionFile", "error"}
    assert printed[0]["sessionFile"] == files[0]
    assert (
        "is locked" in printed[0]["error"]
        and "storage.busyTimeoutMs (50 ms)" in printed[0]["error"]
    )
    assert printed[1]["outcome"] == "noop"  # unchanged: no write needed, so it still answers
    assert "rebuild" not in result.err and "internal error" not in result.err
    assert "1 of 2 file(s) could not be indexed" in result.err
    assert ds4("index", "--json", files[0]).json()[0]["entriesTotal"] == 5  # after the lock


def test_other_commands_under_a_database_lock_say_so(
    ds4: Callable[..., Run], db: Path, pi_sessions_dir: Path
) -> None:
    """`plan` (which syncs the session first) and opening a database that still needs its
    schema both name the lock and the busy timeout, exit 2, and do not suggest a rebuild or
    another database location."""
    db.parent.mkdir(parents=True)
    sqlite3.connect(db).close()  # an empty file: opening it must create the schema
    with write_locked(db):
        opening = ds4("--set", "storage.busyTimeoutMs=50", "health")
    assert opening.code == cli.EXIT_USAGE
    assert "is locked" in opening.err and "writable location" not in opening.err

    assert ds4("health").code == 0
    with write_locked(db):
        planned = ds4(
            "--set", "storage.busyTimeoutMs=50", "plan", "--session", str(pi_sessions_dir / V3), "x"
        )
    assert planned.code == cli.EXIT_USAGE
    assert "is locked" in planned.err and "storage.busyTimeoutMs (50 ms)" in planned.err
    assert "rebuild" not in planned.err and "internal error" not in planned.err


# ---------------------------------------------------------------------------- health, rebuild


def test_health(ds4: Callable[..., Run], db: Path, pi_sessions_dir: Path) -> None:
    ds4("plan", "--session", str(pi_sessions_dir / V3), "x")
    health = ds4("health", "--json")
    assert health.code == 0
    found = health.json()
    assert found["databasePath"] == str(db)
    assert found["status"] == "ok" and found["fts5"] is True
    assert (found["sessions"], found["entries"], found["manifests"]) == (1, 8, 1)
    text = ds4("health")
    assert re.search(r"^\s+manifests\s+1$", text.out, re.MULTILINE)


def test_rebuild_lists_a_deleted_session_as_failed(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    kept, deleted = pi_session_copy(V3), pi_session_copy(SINGLE)
    assert ds4("index", str(kept), str(deleted)).code == 0
    assert ds4("rebuild").code == 0
    deleted.unlink()

    text = ds4("rebuild")
    assert text.code == 3
    assert "rebuilt 1 session(s), 8 entries" in text.out
    assert f"failed: {deleted}: the session file no longer exists" in text.out
    as_json = ds4("rebuild", "--json")
    assert as_json.code == 3
    assert [f["sessionFile"] for f in as_json.json()["failed"]] == [str(deleted)]


# ------------------------------------------------------------------------ database, env, usage


def test_ds4_db_environment_variable_and_db_option(
    ds4: Callable[..., Run],
    pi_sessions_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from_env = tmp_path / "env" / "context.db"
    monkeypatch.setenv("DS4_DB", str(from_env))
    assert ds4("index", str(pi_sessions_dir / V3), db_path=None).code == 0
    health = ds4("health", "--json", db_path=None).json()
    assert health["databasePath"] == str(from_env) and health["sessions"] == 1

    explicit = tmp_path / "explicit.db"
    overriding = ds4("health", "--json", db_path=explicit).json()
    assert overriding["databasePath"] == str(explicit) and overriding["sessions"] == 0


def test_a_database_that_cannot_be_created(ds4: Callable[..., Run], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = ds4("health", db_path=blocker / "context.db")
    assert result.code == 2
    assert str(blocker) in result.err
    assert "--db" in result.err and "ds4: ds4:" not in result.err


def test_argument_errors_and_help_return_codes_instead_of_exiting(
    ds4: Callable[..., Run],
) -> None:
    missing = ds4("plan")
    assert missing.code == 2
    assert "the following arguments are required: --session" in missing.err
    assert missing.out == ""
    helped = ds4("--help")
    assert helped.code == 0 and "plan" in helped.out and "manifest" in helped.out
    no_command = ds4()
    assert no_command.code == 2


def test_help_lists_exit_codes_and_the_default_database(ds4: Callable[..., Run]) -> None:
    helped = ds4("--help")
    assert helped.code == 0
    flat = " ".join(helped.out.split())
    for code, meaning in [
        (0, "success"),
        (1, "unexpected internal error"),
        (2, "bad usage or input"),
        (3, "some session files could not be indexed or rebuilt"),
        (130, "interrupted"),
    ]:
        assert f"{code} {meaning}" in flat
    assert "$DS4_DB" in flat and "$XDG_DATA_HOME/ds4-lsp/context.db" in flat
    assert "~/.local/share/ds4-lsp/context.db" in flat


def test_an_unexpected_error_is_exit_1_with_a_hint(
    ds4: Callable[..., Run], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ContextEngine) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr(ContextEngine, "health", broken)
    result = ds4("health")
    assert result.code == 1
    assert "internal error (RuntimeError: kaput)" in result.err and "-v" in result.err


def test_verbose_logs_counts_not_request_text(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    marker = "zqxclimarkerq"
    handlers_before = list(logging.getLogger("ds4_core").handlers)
    result = ds4("-v", "plan", "--session", str(pi_sessions_dir / V1_LARGE), f"theme {marker}")

    assert result.code == 0
    assert "plan: session=d703a1a9" in result.err
    assert marker not in result.err
    assert logging.getLogger("ds4_core").handlers == handlers_before
    quiet = ds4("plan", "--session", str(pi_sessions_dir / V3), "x")
    assert quiet.err == ""  # without -v: no log lines


# ------------------------------------------------------------------------------------- progress


def test_progress_bar_only_on_a_terminal_and_only_after_a_moment(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = str(pi_session_copy(V1_LARGE))
    shutil.copyfile(session, session + ".2.jsonl")
    second = session + ".2.jsonl"

    # instant work on a terminal: no bar
    terminal = Terminal()
    monkeypatch.setattr(cli.terminal, "_clock_s", lambda: 100.0)
    assert ds4("index", "--force", session, err=terminal).code == 0
    assert terminal.getvalue() == ""

    # slow work (the clock jumps a second per reading) on a terminal: a bar, erased at the end
    clock = itertools.count(0.0, 1.0)
    monkeypatch.setattr(cli.terminal, "_clock_s", lambda: next(clock))
    terminal = Terminal()
    assert ds4("index", "--force", session, err=terminal).code == 0
    drawn = terminal.getvalue()
    assert "\r[##############################] 100.0%" in drawn
    *bars, erase, after = drawn.split("\r")[1:]
    assert bars and after == ""  # the cursor ends at the start of the line
    assert erase.strip() == "" and len(erase) >= max(len(bar) for bar in bars)  # fully erased

    # slow work, not a terminal: nothing
    piped = io.StringIO()
    assert ds4("index", second, err=piped).code == 0
    assert "\r" not in piped.getvalue() and "%" not in piped.getvalue()  # (a shared-id warning)


# -------------------------------------------------------------------------------------- settings


def test_set_and_settings_file_reach_the_engine(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """`--settings-file` then `--set` (later wins): an override window and observer mode."""
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"context": {"mode": "observer"}}))
    result = ds4(
        "--settings-file",
        str(settings),
        "--set",
        'modelAwareness.overrides={"anthropic/*": {"contextWindow": 50000}}',
        "plan",
        "--session",
        str(pi_sessions_dir / V1_LARGE),
        "--json",
        EARLY_REQUEST,
    )
    assert result.code == 0, result.err
    plan = result.json()
    assert plan["mode"] == "observer"
    assert plan["model"]["contextWindow"] == 50_000 and plan["model"]["source"] == "override"

    later_wins = ds4(
        "--settings-file", str(settings), "--set", "context.mode=managed",
        "plan", "--session", str(pi_sessions_dir / V1_LARGE), "--json", EARLY_REQUEST,
    )  # fmt: skip
    assert later_wins.json()["mode"] == "managed"


def test_bad_settings_are_reported_not_fatal_and_bad_syntax_is_a_usage_error(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    ignored = ds4("--set", "retrieval.maxResults=500", "health", "--json")
    assert ignored.code == 0
    assert "retrieval.maxResults" in ignored.err and "ignored" in ignored.err
    assert ds4("--set", "no-equals-sign", "health").code == cli.EXIT_USAGE
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    failed = ds4("--settings-file", str(broken), "health")
    assert failed.code == cli.EXIT_USAGE and "not valid JSON" in failed.err


def test_ignored_settings_show_their_values_as_json(ds4: Callable[..., Run]) -> None:
    result = ds4(
        "--set", "enabled=yes",
        "--set", "retrieval.semantic=true",
        "--set", 'modelAwareness.overrides={"anthropic/*": 5}',
        "health",
    )  # fmt: skip
    assert result.code == 0
    assert "setting 'enabled' = \"yes\" was ignored" in result.err
    assert "setting 'retrieval.semantic' = true was ignored" in result.err
    assert "setting 'modelAwareness.overrides' = {\"anthropic/*\": 5} was ignored" in result.err
    assert "True" not in result.err and "{'" not in result.err


def test_a_session_file_given_as_db_is_refused_and_untouched(
    ds4: Callable[..., Run], pi_session_copy: Callable[[str], Path]
) -> None:
    session = pi_session_copy(V3)
    before = session.read_bytes()
    result = ds4("plan", "--session", str(session), "hello", db_path=session)
    assert result.code == cli.EXIT_USAGE
    assert "not an SQLite database" in result.err and "--db" in result.err
    assert session.read_bytes() == before
    assert sorted(p.name for p in session.parent.iterdir()) == [session.name]


# -------------------------------------------------------------------------------- output encoding

LONE_SURROGATE_SESSION = "\n".join(
    [
        '{"type":"session","version":3,"id":"5e55-cut-emoji","timestamp":"2026-04-08T03:00:05Z",'
        '"cwd":"/tmp"}',
        # `\ud83c`: the first half of 🚀, as an older Pi wrote a cut emoji (the JSON escape).
        '{"type":"message","id":"e1","parentId":null,"timestamp":"2026-04-08T03:00:06Z",'
        '"message":{"role":"user","content":[{"type":"text","text":"launch the rocket \\ud83c"}]}}',
        '{"type":"message","id":"e2","parentId":"e1","timestamp":"2026-04-08T03:00:07Z",'
        '"message":{"role":"assistant","content":[{"type":"text","text":"rocket \\ud83c \\u00b7 ok"}],'
        '"provider":"anthropic","model":"claude-sonnet-4-5"}}',
        "",
    ]
)


def run_ds4_process(
    *argv: str, encoding: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`python -m ds4_core.cli ARGV` in a C locale with stdout encoded as `encoding`
    (PYTHONIOENCODING), as a pipe or a terminal of another encoding would see it."""
    environ = {
        **os.environ,
        "LC_ALL": "C",
        "LANG": "C",
        "PYTHONIOENCODING": encoding,
        **(env or {}),
    }
    environ.pop("DS4_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "ds4_core.cli", *argv],
        input=stdin,
        capture_output=True,
        env=environ,
        check=False,
    )


@pytest.mark.parametrize("encoding", ["utf-8", "ascii", "latin-1"])
def test_json_output_is_valid_and_complete_with_a_lone_surrogate(
    tmp_path: Path, encoding: str
) -> None:
    """A message holding a lone surrogate used to stop `plan --json` with UnicodeEncodeError
    halfway through the JSON. Every `--json` now prints one whole, valid (ASCII) document,
    the surrogate as its `\\ud83c` escape, whatever the output encoding."""
    session = tmp_path / "cut-emoji.jsonl"
    session.write_text(LONE_SURROGATE_SESSION, encoding="ascii")
    db = str(tmp_path / "context.db")

    for argv in (
        ["index", "--json", str(session)],
        ["plan", "--session", str(session), "--json", "rocket"],
        ["retrieve", "--session", str(session), "--json", "rocket"],
        ["manifest", "--latest", "--session", str(session), "--view", "full", "--json"],
    ):
        done = run_ds4_process("--db", db, *argv, encoding=encoding)
        assert done.returncode == 0, (argv, done.stderr.decode(errors="replace"))
        assert done.stdout.isascii()
        json.loads(done.stdout.decode("ascii"))  # whole and valid
    plan = json.loads(
        run_ds4_process(
            "--db", db, "plan", "--session", str(session), "--json", "rocket", encoding=encoding
        ).stdout
    )
    texts = [part["text"] for message in plan["messages"] for part in message["content"]]
    assert "launch the rocket \ud83c" in texts  # the same string the session holds


def test_text_reports_escape_what_the_output_encoding_cannot_show(tmp_path: Path) -> None:
    """Under an ASCII stdout the report's `·` and a lone surrogate become backslash escapes
    instead of an internal error (exit 1) after half the report."""
    session = tmp_path / "cut-emoji.jsonl"
    session.write_text(LONE_SURROGATE_SESSION, encoding="ascii")
    done = run_ds4_process(
        "--db", str(tmp_path / "context.db"), "plan", "--session", str(session), "rocket",
        encoding="ascii",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    report = done.stdout.decode("ascii")
    assert report.startswith("ds4 plan\n") and "\\xb7" in report and "Manifest  m-" in report


def test_a_session_file_name_that_is_not_utf8_fails_in_its_place(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """A `.jsonl` whose name is not valid UTF-8 (here byte 0xFF) cannot be stored as a path
    (SQLite text is UTF-8): it fails in its place asking for a rename, the files after it are
    still indexed (exit 3); `plan --session` on it is bad input (exit 2), not a crash."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copyfile(pi_sessions_dir / SINGLE, folder / "a.jsonl")
    odd = os.fsdecode(bytes(folder) + b"/b\xff.jsonl")
    shutil.copyfile(pi_sessions_dir / V3, odd)
    shutil.copyfile(pi_sessions_dir / REPLAY, folder / "c.jsonl")

    result = ds4("index", "--json", str(folder))

    assert result.code == cli.EXIT_PARTIAL, result.err
    printed = result.json()
    assert [r.get("entriesTotal") for r in printed] == [5, None, 6]
    assert printed[1].keys() == {"sessionFile", "error"}
    assert "the file name is not valid UTF-8; rename it" in printed[1]["error"]
    assert "1 of 3 file(s) could not be indexed" in result.err

    plan = ds4("plan", "--session", odd, "--json", "hello")
    assert plan.code == cli.EXIT_USAGE, plan.err
    assert plan.out == ""
    assert "--session: " in plan.err and "the file name is not valid UTF-8; rename it" in plan.err


def test_a_text_argument_that_is_not_utf8_is_refused_like_standard_input(
    ds4: Callable[..., Run], pi_sessions_dir: Path
) -> None:
    """Bytes that are not UTF-8 in a REQUEST, QUERY or other text argument reach Python as
    lone surrogates (`os.fsdecode`); they are refused (exit 2) as the same bytes on standard
    input are, never sent to the model as U+DCFF."""
    session = str(pi_sessions_dir / V3)
    request = os.fsdecode(b"bad \xff\xfe byte")
    cases = [
        (("plan", "--session", session, "--json", request), "REQUEST: "),
        (("retrieve", "--session", session, "--json", request), "QUERY: "),
        (("plan", "--session", session, "--leaf", request, "hello"), "--leaf: "),
        (("manifest", "--json", request), "ID: "),
    ]
    for argv, name in cases:
        result = ds4(*argv)
        assert result.code == cli.EXIT_USAGE, (argv, result)
        assert result.out == ""
        assert f"ds4: {name}the argument is not UTF-8 text (byte 4 of 11)" in result.err

    piped = ds4("plan", "--session", session, "-", stdin=Bytes(b"bad \xff\xfe byte"))
    assert piped.code == cli.EXIT_USAGE
    assert "REQUEST (-): standard input is not UTF-8 text (byte 4 of 11)" in piped.err


class Bytes(io.TextIOWrapper):
    """Standard input holding `raw` bytes."""

    def __init__(self, raw: bytes) -> None:
        super().__init__(io.BytesIO(raw), encoding="utf-8")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")
def test_index_a_directory_reports_jsonl_entries_that_are_not_regular_files(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """A FIFO, a directory or a broken link named `*.jsonl` in DIR is a file that could not
    be indexed (exit 3), named for what it is, in its place by name; the FIFO is never opened
    (opening it would block this test)."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    shutil.copyfile(pi_sessions_dir / SINGLE, folder / "a.jsonl")
    os.mkfifo(folder / "b.jsonl")
    (folder / "c.jsonl").mkdir()
    shutil.copyfile(pi_sessions_dir / V3, folder / "d.jsonl")
    (folder / "e.jsonl").symlink_to(folder / "gone.jsonl")

    result = ds4("index", "--json", str(folder))

    assert result.code == cli.EXIT_PARTIAL, result.err
    printed = result.json()
    assert [Path(r["sessionFile"]).name for r in printed] == [
        "a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "e.jsonl"
    ]  # fmt: skip
    assert [r.get("entriesTotal") for r in printed] == [5, None, None, 8, None]
    errors = {Path(r["sessionFile"]).name: r.get("error", "") for r in printed}
    assert "is a FIFO (named pipe" in errors["b.jsonl"]
    assert "is a directory" in errors["c.jsonl"]
    assert all("not a session file" in errors[name] for name in ("b.jsonl", "c.jsonl", "e.jsonl"))
    assert "is a broken link" in errors["e.jsonl"] and "gone.jsonl" in errors["e.jsonl"]
    assert "3 of 5 file(s) could not be indexed" in result.err

    only_odd = tmp_path / "odd"
    only_odd.mkdir()
    os.mkfifo(only_odd / "pipe.jsonl")
    alone = ds4("index", str(only_odd))
    assert alone.code == cli.EXIT_PARTIAL
    assert "is a FIFO" in alone.err and "holds no .jsonl file" not in alone.err
    named = ds4("index", str(only_odd / "pipe.jsonl"))  # a FIFO named directly: the same
    assert named.code == cli.EXIT_PARTIAL and "is a FIFO" in named.err


def test_plan_and_retrieve_warn_when_another_file_carries_the_session_id(
    ds4: Callable[..., Run], pi_sessions_dir: Path, tmp_path: Path
) -> None:
    """Two copies of one session share one index: `plan --json` and `retrieve --json` list the
    warning `ds4 index` and `ds4 health` give, naming the other file."""
    original, copy = tmp_path / "a" / V3, tmp_path / "b" / V3
    for path in (original, copy):
        path.parent.mkdir()
        shutil.copyfile(pi_sessions_dir / V3, path)
    assert ds4("index", str(copy)).code == 0
    indexed = ds4("index", str(original))  # the table has no room for it: on stderr
    assert indexed.code == 0 and "ds4: warning: session id 'fixture-session'" in indexed.err
    assert str(copy) in indexed.err

    for argv in (("plan", "--json", "theme?"), ("retrieve", "--json", "theme")):
        result = ds4(argv[0], "--session", str(original), *argv[1:])
        assert result.code == 0, result.err
        warnings = [w for w in result.json()["warnings"] if "is also the id of" in w]
        assert len(warnings) == 1 and str(copy) in warnings[0], (argv, result.json()["warnings"])


def test_every_report_line_fits_the_terminal_width_unless_it_is_one_unbreakable_word(
    ds4: Callable[..., Run],
    pi_sessions_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At COLUMNS=40, 60 and 100 the plan, retrieve, manifest, index and health reports keep
    every line within the width: headers wrap, and table columns that do not fit move under
    their row as `header: value`. The only exceptions are lines that cannot break: a path, an
    id or hash after its label, and the `ds4 ... manifest` command, printed whole to be copied
    (the session line is checked elsewhere)."""
    session = str(pi_sessions_dir / V1_LARGE)
    copy = tmp_path / "copy" / V3  # a shared-id warning in the plan report
    copy.parent.mkdir()
    shutil.copyfile(pi_sessions_dir / V3, copy)

    def unbreakable(line: str) -> bool:
        words = line.split()
        return (
            line.lstrip().startswith(("ds4 --db ", "/", "session ", "sessionId ", "promptHash "))
            or len(words) <= 2  # a label and one long word (e.g. `source: <session id>:v1-4`)
        )

    for columns in (40, 60, 100):
        monkeypatch.setenv("COLUMNS", str(columns))
        plan = ds4("plan", "--session", session, "--model", "acme/unknown", EARLY_REQUEST)
        manifest_id = MANIFEST_ID.findall(plan.out)[0]
        reports = {
            "plan": plan,
            "observer": ds4("--set", "mode=observer", "plan", "--session", session, "x"),
            "copies": ds4("plan", "--session", str(pi_sessions_dir / V3), "x"),
            "retrieve": ds4("retrieve", "--session", session, EARLY_REQUEST),
            "manifest": ds4("manifest", manifest_id, "--view", "full"),
            "index": ds4("index", str(copy), session),
            "health": ds4("health"),
        }
        for name, report in reports.items():
            assert report.code == 0, (name, report.err)
            too_wide = [
                line
                for line in report.out.splitlines()
                if len(line) > columns and not unbreakable(line)
            ]
            assert not too_wide, (columns, name, too_wide)
    assert "warning: session id" in reports["copies"].out  # (the warning was wrapped too)


def test_index_a_json_file_that_is_not_a_session_says_its_first_line_is_no_header(
    ds4: Callable[..., Run], tmp_path: Path
) -> None:
    """`{"foo":1}` is valid JSON: the message names the missing Pi session header, not
    "malformed lines"."""
    other = tmp_path / "other.jsonl"
    other.write_text('{"foo":1}\n')
    result = ds4("index", str(other))
    assert result.code == cli.EXIT_PARTIAL
    assert (
        f"cannot read session file '{other}': first line is not a Pi session header "
        '(expected {"type":"session", ...}); is this a Pi session file?'
    ) in result.err
    assert "malformed" not in result.err


def test_a_workspace_file_named_in_bytes_that_are_not_utf8_is_skipped_not_fatal(
    ds4: Callable[..., Run], tmp_path: Path
) -> None:
    """`--workspace --trust` on a folder holding a file whose name is not UTF-8: retrieve
    exits 0, finds the other file and warns about that one name (escaped)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "a.py").write_text('def good():\n    return "ocelot_good"\n')
    (project / os.fsdecode(b"b\xff.py")).write_bytes(b"x = 1\n")
    found = ds4(
        "retrieve",
        "--scope",
        "project",
        "--workspace",
        str(project),
        "--trust",
        "--json",
        "ocelot_good",
    )
    assert found.code == 0, found.err
    assert [hit["path"] for hit in found.json()["project"]] == ["a.py"]
    assert "not valid UTF-8" in found.err and "b\\xff.py" in found.err
    assert "internal error" not in found.err and "rebuild" not in found.err


# ------------------------------------------------------------------------ terminal-safe reports

HOSTILE_NAMES = [
    "quux4\x1b]0;PWNTITLE\x07\x1b[31mname.py",  # OSC title change, then red text
    "quux5\nfake.py:1-2 forged.py",  # a line break forging a row
    "quux6\u2028sep\u202eyp.exe.py",  # a line separator; a right-to-left override
    "quux7\x9b31mcsi\x7f.py",  # a C1 CSI and DEL
]


def test_text_reports_escape_hostile_workspace_file_names(tmp_path: Path) -> None:
    """A trusted workspace file named with ESC sequences, a line break, U+2028 or U+202E used
    to reach the terminal raw through `ds4 retrieve` and `ds4 plan` (a title change, colours,
    a forged line, reversed text). Every workspace and session value in a text report now goes
    through `terminal_text`: the names are shown with `\\x1b`, `\\x0a`, `\\u2028`, `\\u202e`."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    for index, name in enumerate(HOSTILE_NAMES):
        (workspace / name).write_text(f"def quuxfunc4():\n    return {index} + quuxfunc4\n")
    session = tmp_path / "s.jsonl"
    session.write_text(LONE_SURROGATE_SESSION.replace(" \\ud83c", ""), encoding="ascii")
    db = str(tmp_path / "context.db")
    common = ["--workspace", str(workspace), "--trust"]
    for argv in (
        ["retrieve", *common, "--scope", "project", "how does quuxfunc4 work"],
        ["plan", "--session", str(session), *common, "how does quuxfunc4 work"],
    ):
        done = run_ds4_process("--db", db, *argv, encoding="utf-8")
        assert done.returncode == 0, (argv, done.stderr.decode(errors="replace"))
        report = done.stdout.decode("utf-8")
        unsafe = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
        assert not unsafe.search(report), (argv, report)
        assert "quux4\\x1b]0;PWNTITLE\\x07\\x1b[31mname.py" in report, report
        assert "quux5\\x0afake.py:1-2 forged.py" in report
        assert "quux6\\u2028sep\\u202eyp.exe.py" in report
        assert "quux7\\x9b31mcsi\\x7f.py" in report
        assert not any(line.startswith("fake.py") for line in report.split("\n"))
