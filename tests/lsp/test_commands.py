"""`ds4.health` and `ds4.rebuildIndex`: JSON results and `$/progress` work-done reports."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from lsp_helpers import TIMEOUT_S, execute, plan_params, request
from lsprotocol import types
from pytest_lsp import LanguageClient

ENCODINGS = {"visual-studio-code": "utf-16", "neovim": "utf-8"}


def reports_titled(client: LanguageClient, title: str) -> list[list[Any]]:
    """Every progress sequence (begin ... end) whose begin has `title`."""
    return [
        reports
        for reports in client.progress_reports.values()
        if reports
        and isinstance(reports[0], types.WorkDoneProgressBegin)
        and reports[0].title == title
    ]


def assert_complete(reports: list[Any]) -> None:
    """begin, then reports with non-decreasing percentages, then exactly one end."""
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    middle = reports[1:-1]
    assert all(isinstance(r, types.WorkDoneProgressReport) for r in middle)
    percentages = [r.percentage for r in middle]
    assert percentages == sorted(percentages)
    assert all(0 <= p <= 100 for p in percentages)


async def test_health_reports_the_index_and_progress_on_a_server_created_token(
    client: LanguageClient, client_name: str, database_path: Path
) -> None:
    """Without a client token the server creates one (window/workDoneProgress/create) and
    reports begin/end on it; the result describes the database and the LSP session."""
    result = await execute(client, "ds4.health")

    assert result["status"] == "ok"
    assert Path(result["databasePath"]) == database_path  # DS4_DB was honoured
    assert result["sessions"] == 0 and result["configWarnings"] == []
    assert result["server"]["positionEncoding"] == ENCODINGS[client_name]
    assert result["server"]["trusted"] is False
    (reports,) = reports_titled(client, "ds4: checking health")
    assert_complete(reports)
    assert reports[-1].message == "status ok"


async def test_health_uses_the_clients_work_done_token(client: LanguageClient) -> None:
    """A `workDoneToken` in the request is used as is, with no create request."""
    token = "client-token-1"
    client.progress_reports[token] = []  # the client owns this token
    await execute(client, "ds4.health", token=token)
    assert_complete(client.progress_reports[token])
    assert [t for t in client.progress_reports if t != token] == []


async def test_rebuild_reports_progress_to_completion(
    client: LanguageClient, indexed_sessions: list[Path]
) -> None:
    """A rebuild re-reads every known session and reports rising percentages up to 100."""
    result = await execute(client, "ds4.rebuildIndex")

    assert result["sessions"] == len(indexed_sessions) and result["failed"] == []
    assert result["entries"] == 1018 * len(indexed_sessions)
    assert {r["outcome"] for r in result["results"]} == {"rebuild"}
    (reports,) = reports_titled(client, "ds4: rebuilding the index")
    assert_complete(reports)
    percentages = [r.percentage for r in reports[1:-1]]
    assert len(percentages) > 2 and percentages[-1] == 100
    assert reports[-1].message == f"20 session(s), {result['entries']} entries, 0 failed"


async def test_a_plan_sent_while_the_index_rebuilds_is_answered_before_it_ends(
    client: LanguageClient, indexed_sessions: list[Path]
) -> None:
    """ds4/plan is served while ds4.rebuildIndex runs: engine work is off the event loop and
    planning an unchanged session does not wait for the rebuild's writes."""
    token = "rebuild-token"
    client.progress_reports[token] = []  # the client owns this token

    begin = client.protocol.wait_for_notification_async(types.PROGRESS)  # registered now
    rebuild = asyncio.create_task(execute(client, "ds4.rebuildIndex", token=token))
    await asyncio.wait_for(begin, TIMEOUT_S)
    planned = await request(client, "ds4/plan", plan_params(indexed_sessions[3], "still there?"))
    progress_when_planned = list(client.progress_reports[token])
    rebuilt = await asyncio.wait_for(rebuild, TIMEOUT_S)

    assert planned["mode"] == "managed" and planned["manifestId"]
    assert not any(isinstance(r, types.WorkDoneProgressEnd) for r in progress_when_planned)
    assert rebuilt["sessions"] == len(indexed_sessions)
    assert_complete(client.progress_reports[token])


async def test_health_warns_when_two_files_carry_one_session_id(
    client: LanguageClient, session_file: Path, tmp_path: Path
) -> None:
    """Two copies of one session (same session id) share one index and summary graph: the
    health report says so, naming both files."""
    copy = tmp_path / "elsewhere" / session_file.name
    copy.parent.mkdir()
    copy.write_bytes(session_file.read_bytes())
    for path in (session_file, copy):
        await request(client, "ds4/retrieve", {"session": {"file": str(path)}, "query": "theme"})
    result = await execute(client, "ds4.health")
    assert result["status"] == "warning"
    (warning,) = [w for w in result["warnings"] if "session id" in w]
    assert str(copy) in warning and str(session_file) in warning
