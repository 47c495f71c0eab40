"""Where the server's log lines go: INFO and DEBUG to the client as `window/logMessage`,
stderr only for WARNING and above (clients treat stderr as errors: Neovim writes every stderr
line to lsp.log as `[ERROR]`). Lines logged on engine worker threads arrive too."""

from __future__ import annotations

import asyncio
import io
import logging
import re
import threading
from pathlib import Path

import pytest
from lsp_helpers import Servers, plan_params, request, request_error
from lsprotocol import types

from ds4_lsp.logs import ClientLogHandler

LOG_LINE = re.compile(r"^\S+ \S+ (DEBUG|INFO|WARNING|ERROR|CRITICAL) (\S+): ", re.MULTILINE)
"""A stderr log line: `asctime` (date and time), level, logger name."""


async def test_info_lines_go_to_the_client_and_stderr_keeps_warnings(
    servers: Servers, session_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    client = await servers.start()
    await request(client, "ds4/plan", plan_params(session_file))
    await request_error(client, "ds4/plan", {"request": 5})  # malformed params: a WARNING
    logged = [(m.type, m.message) for m in client.log_messages]
    exit_code = await servers.stop(client)
    stderr = capfd.readouterr().err

    assert exit_code == 0
    levels = {level for level, _ in LOG_LINE.findall(stderr)}
    assert levels == {"WARNING"}, stderr  # the rejected params, and no INFO line
    assert "rejected malformed params" in stderr
    # The request line (type Log, sent whatever the log level), once.
    assert [kind for kind, text in logged if text.startswith("ds4/plan: ")] == [
        types.MessageType.Log
    ]
    # Logged by ds4_core on an engine worker thread, sent from the event loop.
    assert any(
        kind == types.MessageType.Info and text.startswith("sync: ") for kind, text in logged
    )
    assert not any("rejected malformed params" in text for _, text in logged)


async def test_debug_lines_go_to_the_client_as_log_messages(
    servers: Servers, session_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    client = await servers.start(args=["--log-level", "debug"])
    await request(client, "ds4/plan", plan_params(session_file))
    kinds = {m.type for m in client.log_messages}
    await servers.stop(client)
    stderr = capfd.readouterr().err

    assert types.MessageType.Log in kinds and types.MessageType.Info in kinds
    # Before `initialize` (here asyncio's "Using selector") lines can only go to stderr.
    ours = {level for level, name in LOG_LINE.findall(stderr) if name.startswith("ds4")}
    assert not {"DEBUG", "INFO"} & ours, stderr


async def test_records_from_threads_and_from_inside_a_send_are_never_lost_or_recursive() -> None:
    """The client handler on its own: a record logged on a worker thread is sent from the
    event loop; one logged while a record is being sent (which would recurse) and a WARNING
    go to the stderr handler instead."""
    stream = io.StringIO()
    stderr = logging.StreamHandler(stream)
    client = ClientLogHandler(fallback=stderr)
    stderr.addFilter(lambda record: not client.takes(record))
    logger = logging.getLogger("ds4_lsp.tests.logging")
    logger.propagate, logger.level = False, logging.DEBUG
    logger.handlers = [stderr, client]
    sent: list[tuple[str, int]] = []

    def send(params: types.LogMessageParams) -> None:
        sent.append((params.message, threading.get_ident()))
        logger.info("while sending %d", len(sent))

    logger.info("before attach")
    client.attach(send, asyncio.get_running_loop())
    logger.info("on the loop")
    await asyncio.to_thread(logger.debug, "on a worker thread")  # its callback runs first
    logger.warning("a warning")
    client.detach()
    logger.info("after detach")

    loop_thread = threading.get_ident()
    assert sent == [("on the loop", loop_thread), ("on a worker thread", loop_thread)]
    assert stream.getvalue().splitlines() == [
        "before attach",
        "while sending 1",
        "while sending 2",
        "a warning",
        "after detach",
    ]
