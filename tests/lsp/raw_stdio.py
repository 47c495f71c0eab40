"""A raw stdio client for transport tests: writes arbitrary bytes to `python -m ds4_lsp` and
reads the frames it answers with, so that tests can send what no well-behaved client would.

Waits are bounded (`TIMEOUT_S`); nothing sleeps.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT_S = float(os.environ.get("DS4_TEST_RAW_TIMEOUT_S", "60"))
"""Upper bound for any single wait for an answer (seconds)."""


def frame(body: bytes | str | Any, *, lf_only: bool = False) -> bytes:
    """One LSP frame of `body` (bytes as is, str as UTF-8, anything else as JSON)."""
    if isinstance(body, str):
        data = body.encode("utf-8")
    elif isinstance(body, bytes):
        data = body
    else:
        data = json.dumps(body).encode("utf-8")
    newline = b"\n" if lf_only else b"\r\n"
    return b"Content-Length: " + str(len(data)).encode() + newline + newline + data


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{literal} is beyond a double")
    return value


def strict_json(body: bytes | str) -> Any:
    """`json.loads` as strict as JavaScript's `JSON.parse`: no NaN, Infinity or numbers that
    overflow a double. Raises ValueError."""
    return json.loads(body, parse_constant=_refuse_constant, parse_float=_finite_float)


def request(msg_id: int | str, method: str, params: Any = None) -> dict[str, Any]:
    """A JSON-RPC request object."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


class RawServer:
    """One `python -m ds4_lsp` process with its stdin under the test's control.

    Frames the server writes are parsed by a reader thread; `answer(id)` returns the response
    to `id` (`id: None`: the next response with `id: null`).
    """

    def __init__(self, database_path: Path, args: Sequence[str] = ()) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ds4_lsp", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "DS4_DB": str(database_path)},
        )
        self._responses: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.requests: queue.Queue[dict[str, Any]] = queue.Queue()
        """Requests the server sent to the client, in order."""
        self._pending: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        self.notifications: list[dict[str, Any]] = []
        """Notifications the server sent, in order."""
        self.invalid_frames: list[bytes] = []
        """Bodies the server wrote that are not strict JSON (RFC 8259: no NaN, Infinity)."""
        self._ids = itertools.count(1000)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    def _read_stdout(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = None
            while True:
                line = stream.readline()
                if not line:
                    self._responses.put(None)
                    return
                if not line.strip():
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            assert length is not None, "the server wrote a frame without Content-Length"
            body = stream.read(length)
            try:
                message = strict_json(body)
            except ValueError:  # e.g. `Infinity`, which JavaScript's JSON.parse refuses
                self.invalid_frames.append(body)
                message = json.loads(body)
            if "method" not in message:
                self._responses.put(message)
            elif "id" in message:  # a request from the server
                self.requests.put(message)
            else:
                self.notifications.append(message)

    def _read_stderr(self) -> None:
        stream = self.process.stderr
        assert stream is not None
        for line in stream:
            self.stderr_lines.append(line.decode("utf-8", "replace"))

    def send(self, data: bytes) -> None:
        """Write raw bytes to the server's stdin."""
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(data)
        stdin.flush()

    def answer(self, msg_id: int | str | None) -> dict[str, Any]:
        """The response to `msg_id`, waiting at most TIMEOUT_S for it."""
        while True:
            for index, message in enumerate(self._pending):
                if message.get("id") == msg_id and ("id" in message or msg_id is None):
                    return self._pending.pop(index)
            try:
                message = self._responses.get(timeout=TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no answer to id {msg_id!r} within {TIMEOUT_S} s") from None
            assert message is not None, f"the server closed stdout before answering {msg_id!r}"
            self._pending.append(message)

    def server_request(self, method: str) -> dict[str, Any]:
        """The next request the server sent with `method`, waiting at most TIMEOUT_S."""
        while True:
            try:
                message = self.requests.get(timeout=TIMEOUT_S)
            except queue.Empty:
                raise AssertionError(f"no {method} request within {TIMEOUT_S} s") from None
            if message["method"] == method:
                return message

    def call(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a well-formed request and return its response."""
        msg_id = next(self._ids)
        self.send(frame(request(msg_id, method, params)))
        return self.answer(msg_id)

    def initialize(self, options: Any = None, capabilities: Any = None) -> None:
        """`initialize` (with `initializationOptions` `options`) + `initialized`, with
        `capabilities` (default: none)."""
        params = {"processId": None, "rootUri": None, "capabilities": capabilities or {}}
        if options is not None:
            params["initializationOptions"] = options
        answer = self.call("initialize", params)
        assert "result" in answer, answer
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def probe(self) -> dict[str, Any]:
        """A valid request that must succeed: `ds4.health`."""
        answer = self.call("workspace/executeCommand", {"command": "ds4.health"})
        assert "result" in answer, answer
        return answer["result"]

    @property
    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.process.poll() is None

    def close(self) -> int:
        """`shutdown` + `exit` if still running (else kill); returns the exit code. Once it
        returns, `stderr_lines` holds all the process wrote."""
        if self.alive:
            try:
                self.call("shutdown")
                self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
                code = self.process.wait(TIMEOUT_S)
                self._stderr_reader.join(TIMEOUT_S)
                return code
            except (AssertionError, OSError, subprocess.TimeoutExpired):
                self.process.kill()
        code = self.process.wait(TIMEOUT_S)
        self._stderr_reader.join(TIMEOUT_S)
        return code
