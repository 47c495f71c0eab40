"""Logs carry counts, ids and timings only: request text never reaches stderr or the client
log, even at `--log-level debug` and on error paths."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from lsp_helpers import Servers, execute, plan_params, request, request_error


async def test_request_text_never_reaches_any_log(
    servers: Servers, session_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A unique marker sent in plans, queries and malformed params shows up in the plan's
    messages (so the server did see it) but in no window/logMessage, showMessage or stderr
    line."""
    marker = f"privmark{uuid.uuid4().hex[:10]}"
    client = await servers.start(args=["--log-level", "debug"])

    planned = await request(
        client, "ds4/plan", plan_params(session_file, f"please fix the {marker} bug")
    )
    assert marker in json.dumps(planned["messages"])
    await request(client, "ds4/retrieve", {"session": {"file": str(session_file)}, "query": marker})
    await request_error(client, "ds4/plan", {"request": marker, "fixedTokens": marker})
    await request_error(client, "ds4/retrieve", {"query": marker, "scopes": [marker]})
    await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    await execute(client, "ds4.rebuildIndex")

    client_logs = [m.message for m in client.log_messages] + [m.message for m in client.messages]
    assert any(line.startswith("ds4/plan:") for line in client_logs)
    exit_code = await servers.stop(client)
    stderr = capfd.readouterr().err

    assert exit_code == 0
    assert "ds4/plan" in stderr  # the server did log (the rejected params are warnings)
    assert marker not in stderr
    assert all(marker not in line for line in client_logs)
