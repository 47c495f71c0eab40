"""What the server reads and writes on the wire, end to end over stdio: only finite numbers in
either direction, short echoes of the client's values, the JSON-RPC code each client mistake
deserves (MethodNotFound, InvalidRequest for `id: null`, InvalidParams for a malformed cancel
or command arguments), and client mistakes never logged as server errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from raw_stdio import RawServer, frame, request
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


# --------------------------------------------------------------------------- echoes

HUGE = "A" * 10_000_000  # 10 MB


def test_unknown_methods_and_commands_are_quoted_briefly(server: RawServer) -> None:
    server.send(frame(request(10, "no/such" + HUGE, {"a": 1})))
    error = error_of(server.answer(10), METHOD_NOT_FOUND)
    assert error["message"].startswith("Method Not Found: 'no/suchAAA"), error
    assert error["message"].endswith("...' (10000007 characters)"), error
    answer = server.call("workspace/executeCommand", {"command": "ds4." + HUGE})
    error = error_of(answer, INVALID_PARAMS)
    assert error["message"].startswith("workspace/executeCommand: params.command: unknown"), error
    assert "(10000004 characters)" in error["message"], error
    assert error["data"]["fields"] == ["params.command"]
    server.probe()


def test_a_change_to_an_unopened_huge_uri_is_logged_briefly(server: RawServer) -> None:
    uri = "file:///" + "B" * 3_000_000
    server.send(
        frame(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didChange",
                "params": {
                    "textDocument": {"uri": uri, "version": 2},
                    "contentChanges": [{"text": "x"}],
                },
            }
        )
    )
    server.probe()
    server.close()
    logged = [
        n["params"]["message"]
        for n in server.notifications
        if n["method"] == "window/logMessage" and "is not open" in n["params"]["message"]
    ]
    assert len(logged) == 1 and len(logged[0]) < 200, [len(m) for m in logged]
    assert "(3000008 characters)" in logged[0]
    warned = [line for line in server.stderr_lines if "is not open" in line]
    assert len(warned) == 1 and len(warned[0]) < 300, [len(line) for line in warned]


# --------------------------------------------------------------------------- codes


def test_an_unknown_method_without_params_is_method_not_found(server: RawServer) -> None:
    server.send(frame({"jsonrpc": "2.0", "id": 1, "method": "no/such"}))
    assert error_of(server.answer(1), METHOD_NOT_FOUND)["message"] == "Method Not Found: 'no/such'"
    server.send(frame({"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": None}))
    error_of(server.answer(2), METHOD_NOT_FOUND)
    server.send(frame({"jsonrpc": "2.0", "method": "no/such"}))  # a notification: ignored
    server.probe()


def test_a_request_with_a_null_id_gets_invalid_request_with_a_null_id(server: RawServer) -> None:
    server.send(frame({"jsonrpc": "2.0", "id": None, "method": "ds4/retrieve"}))
    answer = server.answer(None)
    assert answer["id"] is None
    assert "null" in error_of(answer, INVALID_REQUEST)["message"]
    server.probe()


COMMANDS = ("ds4.rebuildIndex", "ds4.health", "ds4.projectStatus", "ds4.summaries")


@pytest.mark.parametrize("arguments", [{"a": 1}, {"session": {"file": "x"}}, "abc", 5, True])
def test_command_arguments_that_are_not_an_array_are_named(
    server: RawServer, arguments: object
) -> None:
    for command in COMMANDS:
        answer = server.call(
            "workspace/executeCommand", {"command": command, "arguments": arguments}
        )
        error = error_of(answer, INVALID_PARAMS)
        assert error["message"] == f"{command}: params.arguments: expected an array", error
        assert error["data"]["fields"] == ["params.arguments"]
    server.probe()


def test_command_argument_paths_start_at_params(server: RawServer) -> None:
    for command in COMMANDS[:3]:
        answer = server.call("workspace/executeCommand", {"command": command, "arguments": [5]})
        error = error_of(answer, INVALID_PARAMS)
        assert error["data"]["fields"] == ["params.arguments[0]"], error
        assert error["message"].startswith(f"{command}: params.arguments[0]: "), error
    answer = server.call(
        "workspace/executeCommand", {"command": "ds4.summaries", "arguments": [{"format": "dot"}]}
    )
    error = error_of(answer, INVALID_PARAMS)
    assert error["data"]["fields"] == ["params.arguments[0].session"], error
    answer = server.call("workspace/executeCommand", {"command": "ds4.summaries", "arguments": []})
    assert error_of(answer, INVALID_PARAMS)["data"]["fields"] == ["params.arguments"]


# --------------------------------------------------------------------------- logs


def test_client_mistakes_are_answered_and_logged_as_warnings_only(server: RawServer) -> None:
    """A malformed `$/cancelRequest` is InvalidParams (request) or a warning (notification);
    no client error puts an ERROR line on stderr (Neovim shows those as errors)."""
    answer = server.call("$/cancelRequest", {"id": {"a": 1}})
    error = error_of(answer, INVALID_PARAMS)
    assert error["data"]["fields"] == ["params.id"], error
    server.send(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": {"a": 1}}}))
    server.send(frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 99}}))
    error_of(
        server.call("workspace/executeCommand", {"command": "ds4.health", "arguments": [5]}),
        INVALID_PARAMS,
    )
    error_of(server.call("ds4/retrieve", {"maxResults": "x"}), INVALID_PARAMS)
    error_of(server.call("no/such", {}), METHOD_NOT_FOUND)
    server.send(frame(b"{not json"))
    server.probe()
    assert server.close() == 0
    errors = [line for line in server.stderr_lines if " ERROR " in line or "CRITICAL" in line]
    assert errors == [], errors
    assert any("$/cancelRequest" in line and " WARNING " in line for line in server.stderr_lines)


def test_setting_keys_from_the_client_are_quoted_briefly(tmp_path: Path) -> None:
    """A 3 MB override key, override field or setting name is named in a short warning."""
    big = "K" * 3_000_000
    server = RawServer(tmp_path / "ds4.db")
    try:
        server.initialize(
            {
                "settings": {
                    "modelAwareness": {"overrides": {big: {}}},
                    "context": {big: 1},
                }
            }
        )
        server.probe()
        server.send(
            frame(
                {
                    "jsonrpc": "2.0",
                    "method": "workspace/didChangeConfiguration",
                    "params": {"settings": {"modelAwareness": {"overrides": {"a/b": {big: 1}}}}},
                }
            )
        )
        server.probe()
    finally:
        server.close()
    shown = [
        n["params"]["message"]
        for n in server.notifications
        if n["method"] in ("window/showMessage", "window/logMessage")
    ]
    warnings = [m for m in shown if "was ignored" in m]
    assert len(warnings) == 3, [m[:100] for m in shown]
    assert max(len(m) for m in warnings) < 600, [len(m) for m in warnings]
    assert all(len(line) < 1000 for line in server.stderr_lines)


def test_a_notification_sent_as_a_request_is_handled_and_answered(server: RawServer) -> None:
    """`$/cancelRequest` or `textDocument/didOpen` with an `id`: the notification takes
    effect, and the request still gets an answer (InvalidRequest saying so)."""
    server.send(frame(request(30, "$/cancelRequest", {"id": 99})))
    assert "notification" in error_of(server.answer(30), INVALID_REQUEST)["message"]
    item = {"uri": "file:///tmp/as-request.py", "languageId": "python", "version": 1, "text": ""}
    server.send(frame(request(31, "textDocument/didOpen", {"textDocument": item})))
    error_of(server.answer(31), INVALID_REQUEST)
    assert server.probe()["server"]["openDocuments"] == 1
