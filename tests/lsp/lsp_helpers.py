"""Helpers for the end-to-end tests: requests, commands and their results as plain JSON."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import JsonRPCResponseMessage
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

LARGE_SESSION = "pi-mono-v1-large-session.jsonl"
"""The real pi-mono v1 session (tests/fixtures/pi-sessions)."""

SESSION_ID = "d703a1a9-1b7b-4fb1-b512-c9738b1fe617"
"""The Pi session id in the header of `LARGE_SESSION`."""

TIMEOUT_S = 60.0
"""Upper bound for any single wait (indexing the large session takes a few seconds)."""

INVALID_PARAMS = -32602
REQUEST_FAILED = -32803  # LSP 3.17 ErrorCodes.RequestFailed


class Servers:
    """Starts initialized `ds4-lsp` processes for one test and stops them afterwards."""

    def __init__(self, client_name: str, workspace: Path, database_path: Path) -> None:
        self.client_name = client_name
        self.workspace = workspace
        self.database_path = database_path
        self._running: list[LanguageClient] = []

    async def start(
        self,
        *,
        initialization_options: Any = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        client_features: Mapping[str, Callable[..., Any]] | None = None,
        experimental: Any = None,
        workspace_folders: Sequence[types.WorkspaceFolder] | None = None,
    ) -> LanguageClient:
        """Spawn `python -m ds4_lsp *args` and run `initialize` / `initialized`.

        `client_features` (method -> handler) are registered on the client before
        `initialize`, so they see everything the server sends from the start. Like a real
        editor, the client accepts `client/registerCapability` unless told otherwise.
        `experimental` becomes `capabilities.experimental` (e.g. `{"ds4": {"summarize":
        true}}`); the editor's captured capabilities are used otherwise unchanged.
        `workspace_folders` replaces the one folder `self.workspace` (named `ws`).
        """
        config = ClientServerConfig(
            server_command=[sys.executable, "-m", "ds4_lsp", *args],
            server_env={**os.environ, "DS4_DB": str(self.database_path), **(env or {})},
        )
        client = await config.start()
        assert isinstance(client, LanguageClient)
        keep_results_as_json(client)
        features = {
            types.CLIENT_REGISTER_CAPABILITY: accept_registration,
            **(client_features or {}),
        }
        for method, handler in features.items():
            client.feature(method)(handler)
        self._running.append(client)
        capabilities = client_capabilities(self.client_name)
        if experimental is not None:
            capabilities = attrs.evolve(capabilities, experimental=experimental)
        await asyncio.wait_for(
            client.initialize_session(
                types.InitializeParams(
                    capabilities=capabilities,
                    workspace_folders=list(workspace_folders)
                    if workspace_folders is not None
                    else [types.WorkspaceFolder(uri=self.workspace.as_uri(), name="ws")],
                    initialization_options=initialization_options,
                )
            ),
            TIMEOUT_S,
        )
        return client

    async def stop(self, client: LanguageClient) -> int | None:
        """`shutdown` + `exit`, wait for the process and for all of its stderr to be
        forwarded to this process's stderr; returns the exit code."""
        self._running.remove(client)
        if not client.stopped:  # pytest-lsp stops the client itself when the server dies
            await asyncio.wait_for(client.shutdown_session(), TIMEOUT_S)
        # pytest-lsp forwards the server's stderr in a task; let it drain to EOF so that
        # capfd sees every line (private attribute: pytest-lsp has no public hook for it).
        if client._stderr_forwarder is not None:
            await asyncio.wait_for(client._stderr_forwarder, TIMEOUT_S)
        sys.stderr.flush()
        code = client._server.returncode if client._server else None
        if not client.stopped:
            await client.stop()
        return code

    async def stop_all(self) -> None:
        """Stop every server still running."""
        for client in list(self._running):
            await self.stop(client)


def keep_results_as_json(client: LanguageClient) -> None:
    """Hand custom results to the test as the JSON objects the server sent, as an editor's JSON
    parser would: pygls turns them into namedtuples, whose field names lose every key that is
    not a Python identifier (`local-only`, `OpenAI key`, `class` become `_0`, `_1`)."""
    converter = client.protocol._converter  # pygls has no public hook for the result shape

    def structure(obj: Any, cls: type) -> Any:
        return cls(**obj)

    converter.register_structure_hook(JsonRPCResponseMessage, structure)


def accept_registration(params: types.RegistrationParams) -> None:
    """Answer `client/registerCapability` with success (pytest-lsp has no handler for it)."""


def plain(value: Any) -> Any:
    """Custom results as plain JSON (`keep_results_as_json` already keeps them so; a namedtuple
    from another path, such as a server-to-client request's params, becomes a dict)."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


async def request(client: LanguageClient, method: str, params: Any) -> dict[str, Any]:
    """Send a custom request and return its result as plain JSON."""
    result = await asyncio.wait_for(client.protocol.send_request_async(method, params), TIMEOUT_S)
    return plain(result)


async def request_error(client: LanguageClient, method: str, params: Any) -> JsonRpcException:
    """Send a request that must fail and return the JSON-RPC error."""
    with pytest.raises(JsonRpcException) as caught:
        await request(client, method, params)
    return caught.value


async def execute(
    client: LanguageClient,
    command: str,
    arguments: list[Any] | None = None,
    token: str | None = None,
) -> dict[str, Any]:
    """Run a workspace command and return its JSON result."""
    params = types.ExecuteCommandParams(command=command, arguments=arguments, work_done_token=token)
    result = await asyncio.wait_for(client.workspace_execute_command_async(params), TIMEOUT_S)
    return plain(result)


def plan_params(session_file: Path, text: str = "what did we change in the theme?") -> dict:
    """`ds4/plan` params for the fixture session with a known model window."""
    return {
        "session": {"file": str(session_file)},
        "request": text,
        "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "contextWindow": 200000},
    }


async def notify_and_wait(client: LanguageClient, method: str, params: dict[str, Any]) -> str:
    """Send a notification and wait for the server's `window/logMessage` line saying it was
    handled (notifications have no response); returns that line."""
    seen = len(client.log_messages)
    waiting = client.protocol.wait_for_notification_async(types.WINDOW_LOG_MESSAGE)
    client.protocol.notify(method, params)
    while True:
        await asyncio.wait_for(waiting, TIMEOUT_S)
        for message in client.log_messages[seen:]:
            if message.message.startswith(f"{method}:"):
                return message.message
        waiting = client.protocol.wait_for_notification_async(types.WINDOW_LOG_MESSAGE)
        for message in client.log_messages[seen:]:  # logged before the new waiter existed
            if message.message.startswith(f"{method}:"):
                return message.message
