"""What the server reads and writes on the wire, end to end over stdio: only finite numbers in
either direction, short echoes of the client's values, the JSON-RPC code each client mistake
deserves (MethodNotFound, InvalidRequest for `id: null`, InvalidParams for a malformed cancel
or command arguments), and client mistakes never logged as server errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_stdio import RawServer, frame
from session_files import SessionWriter

INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    """An initialized server fed by raw bytes; stopped afterwards. Every frame it wrote must
    be strict JSON."""
    started = RawServer(tmp_path / "db" / "ds4.db")
    started.initialize()
    yield started
    started.close()
    assert started.invalid_frames == [], started.invalid_frames[:1]


def error_of(answer: dict, code: int) -> dict:
    assert "error" in answer, str(answer)[:300]
    error = answer["error"]
    assert error["code"] == code, error
    assert len(json.dumps(error)) < 400, len(json.dumps(error))
    return error


# --------------------------------------------------------------------------- item: numbers


@pytest.mark.parametrize("literal", ["1e999", "-1E+400", "NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_in_params_are_invalid_params_naming_the_field(
    server: RawServer, literal: str
) -> None:
    body = (
        '{"jsonrpc":"2.0","id":3,"method":"ds4/plan","params":{"messages":'
        '[{"role":"user","content":"hi","timestamp":' + literal + "}]}}"
    )
    server.send(frame(body))
    error = error_of(server.answer(3), INVALID_PARAMS)
    assert error["message"].startswith("ds4/plan: params.messages[0].timestamp: "), error
    assert error["data"]["fields"] == ["params.messages[0].timestamp"]
    # A notification holding one is dropped; an id that is not a number is InvalidRequest.
    server.send(
        frame('{"jsonrpc":"2.0","method":"ds4/toolExecuted","params":{"x":' + literal + "}}")
    )
    server.send(frame('{"jsonrpc":"2.0","id":4,"method":"ds4/plan","x":' + literal + "}"))
    assert "params" not in error_of(server.answer(4), INVALID_REQUEST)["message"]
    server.probe()


def test_a_session_line_with_a_huge_number_never_puts_infinity_on_the_wire(
    server: RawServer, tmp_path: Path
) -> None:
    """`1e999` in a session file overflows to infinity in Python: the line is malformed
    (like `Infinity`), and every answer stays strict JSON (checked by the fixture)."""
    writer = SessionWriter(tmp_path / "session.jsonl")
    writer.user("first question")
    writer.append("message", message={"role": "user", "content": "huge", "timestamp": 1})
    writer.path.write_text(
        writer.path.read_text().replace('"timestamp": 1}}\n', '"timestamp": 1e999}}\n'),
        encoding="utf-8",
    )
    assert "1e999" in writer.path.read_text()
    answer = server.call(
        "ds4/plan",
        {"session": {"file": str(writer.path)}, "request": "x", "model": {"contextWindow": 200000}},
    )
    assert "result" in answer, answer
    assert "1e999" not in json.dumps(answer) and "Infinity" not in json.dumps(answer)
