"""Process lifecycle: command line, database notices at startup, clean shutdown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lsp_helpers import Servers, execute
from lsprotocol import types


def test_version_flag_prints_both_versions() -> None:
    """`python -m ds4_lsp --version` names the server and the core it runs on."""
    done = subprocess.run(
        [sys.executable, "-m", "ds4_lsp", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.startswith("ds4-lsp ") and "ds4-context-core" in done.stdout


async def test_a_corrupt_database_is_moved_aside_and_the_user_is_told(
    servers: Servers, database_path: Path
) -> None:
    """A damaged database of ours is replaced at startup and a showMessage says where it went;
    the server then works on the fresh database."""
    from ds4_core.store import open_store

    open_store(database_path).close()
    database_path.write_bytes(database_path.read_bytes()[:100] + b"\xff" * 8000)

    client = await servers.start()

    shown = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert any("moved aside" in text and str(database_path) in text for text in shown), shown
    health = await execute(client, "ds4.health")
    assert health["notices"] and health["schemaVersion"] >= 1


async def test_an_unusable_database_location_is_reported_and_requests_fail_cleanly(
    servers: Servers, tmp_path: Path
) -> None:
    """If the database cannot be created the user is told at startup, ds4 requests answer
    with an error instead of hanging, and the server stays up."""
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("x")
    client = await servers.start(initialization_options={"databasePath": str(blocker / "ds4.db")})

    assert any("cannot open the database" in m.message for m in client.messages)
    for _ in range(2):
        try:
            await execute(client, "ds4.health")
        except Exception as error:  # noqa: BLE001 - any JSON-RPC error is the expected outcome
            assert "ds4.health" in str(error)
        else:
            raise AssertionError("ds4.health succeeded without a database")


async def test_shutdown_closes_the_engine_and_exits_zero(servers: Servers) -> None:
    """`shutdown` then `exit` ends the process with status 0."""
    client = await servers.start()
    await execute(client, "ds4.health")
    assert await servers.stop(client) == 0


def test_shutdown_cancels_requests_still_running_on_threads_and_completes() -> None:
    """A command (or `initialize`) still running when `shutdown` is handled has a thread
    future whose cancellation removes it from the pending requests at once; the shutdown
    still completes (`_shutdown` set, so `exit` ends with 0) and the request is cancelled."""
    import concurrent.futures
    import functools

    from ds4_lsp.app import create_server

    class Sink:
        def __init__(self) -> None:
            self.out: list[str] = []

        def write(self, data: str) -> None:
            self.out.append(data)

        def close(self) -> None:
            pass

    protocol = create_server().protocol
    protocol.set_writer(Sink())
    running: concurrent.futures.Future[None] = concurrent.futures.Future()
    protocol._request_futures[1] = running
    running.add_done_callback(functools.partial(protocol._send_handler_result, msg_id=1))
    protocol._request_futures[2] = concurrent.futures.Future()
    steps = protocol.lsp_shutdown(None)
    next(steps)  # our shutdown handler; pretend it finished
    try:
        steps.send(None)
    except StopIteration:
        pass
    assert protocol._shutdown
    assert running.cancelled() and 1 not in protocol._request_futures
