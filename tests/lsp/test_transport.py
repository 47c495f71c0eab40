"""The server survives any byte stream on stdin: a real `python -m ds4_lsp` is fed hostile
frames, after each of which a valid request must still be answered and the process live."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from raw_stdio import RawServer, frame, request
from session_files import SessionWriter

from ds4_lsp.transport import Frame, FrameReader, OversizedFrame

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    """An initialized server fed by raw bytes; stopped afterwards."""
    started = RawServer(tmp_path / "db" / "ds4.db")
    started.initialize()
    yield started
    started.close()


def nested_array(depth: int) -> str:
    return "[" * depth + "]" * depth


def nested_object(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def assert_error(answer: dict, code: int) -> dict:
    assert "error" in answer, answer
    error = answer["error"]
    assert error["code"] == code, error
    assert "traceback" not in json.dumps(error), error
    assert len(error["message"]) < 400, error
    return error


# Hostile input that can be told from a frame, so the server skips it and answers the next one.
DESYNCING: list[tuple[str, bytes]] = [
    ("Content-Length 10^12", b"Content-Length: 1000000000000\r\n\r\n"),
    ("Content-Length 2^63", b"Content-Length: 9223372036854775808\r\n\r\n"),
    ("Content-Length of 40 digits", b"Content-Length: " + b"9" * 40 + b"\r\n\r\n"),
    ("no Content-Length", b"Content-Type: application/json\r\n\r\n" + b'{"jsonrpc":"2.0"}'),
    ("non-numeric Content-Length", b"Content-Length: twelve\r\n\r\n{}"),
    ("negative Content-Length", b"Content-Length: -5\r\n\r\n{}"),
    ("empty Content-Length", b"Content-Length:\r\n\r\n{}"),
    ("a header line of 100 kB", b"X" * 100_000),
    ("a header line of 100 kB ending in LF", b"Y" * 100_000 + b"\n"),
    ("bare body without header", b'{"jsonrpc":"2.0","id":1,"method":"shutdown"}'),
    ("binary noise", bytes(range(256)) * 4),
]


def test_hostile_bytes_are_skipped_and_the_next_request_answered(server: RawServer) -> None:
    for name, hostile in DESYNCING:
        server.send(hostile)
        assert server.probe()["status"] in {"ok", "warning"}, name
        assert server.alive, name


def test_a_short_content_length_gives_a_parse_error_and_resynchronises(server: RawServer) -> None:
    body = json.dumps(request(7, "workspace/executeCommand", {"command": "ds4.health"})).encode()
    server.send(b"Content-Length: %d\r\n\r\n" % (len(body) - 10) + body)
    assert_error(server.answer(None), PARSE_ERROR)
    server.probe()
    assert server.alive


def test_lf_only_headers_are_accepted(server: RawServer) -> None:
    message = request(8, "workspace/executeCommand", {"command": "ds4.health"})
    server.send(frame(message, lf_only=True))
    assert server.answer(8)["result"]["status"] in {"ok", "warning"}


def test_an_oversized_request_is_answered_by_id_and_skipped(tmp_path: Path) -> None:
    """A body over `--max-message-bytes` is skipped while it streams; its id is answered."""
    server = RawServer(tmp_path / "ds4.db", ["--max-message-bytes", "4096"])
    try:
        server.initialize()
        big = request(9, "ds4/retrieve", {"query": "x" * 200_000})
        server.send(frame(big))
        error = assert_error(server.answer(9), INVALID_REQUEST)
        assert "4096" in error["message"]
        server.probe()
        assert server.alive
    finally:
        server.close()


def test_a_frame_limit_below_4096_bytes_is_a_usage_error(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    for args, env in [
        (["--max-message-bytes", "100"], {}),
        ([], {"DS4_MAX_MESSAGE_BYTES": "lots"}),
    ]:
        done = subprocess.run(
            [sys.executable, "-m", "ds4_lsp", *args],
            input=b"",
            capture_output=True,
            env={**os.environ, "DS4_DB": str(tmp_path / "ds4.db"), **env},
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert b"max-message-bytes" in done.stderr or b"DS4_MAX_MESSAGE_BYTES" in done.stderr


def test_the_setting_server_max_message_bytes_sets_the_frame_limit(tmp_path: Path) -> None:
    server = RawServer(tmp_path / "ds4.db")
    try:
        server.initialize({"settings": {"server": {"maxMessageBytes": 4096}}})
        server.send(frame(request(10, "ds4/retrieve", {"query": "y" * 10_000})))
        assert "4096" in assert_error(server.answer(10), INVALID_REQUEST)["message"]
        server.probe()
    finally:
        server.close()


def test_each_desynchronisation_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """One warning per run of skipped bytes, saying how many; none for clean frames."""
    body = json.dumps(request(1, "shutdown")).encode()
    stream = frame(body) + b"Content-Length: -5\r\n\r\n{}" + b"noise" * 3000 + frame(body)
    typed = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" + frame(body)
    reader = FrameReader(io.BytesIO(typed + stream + frame(body)))
    with caplog.at_level("WARNING", logger="ds4_lsp.transport"):
        assert reader.next_frame() == Frame(body)
        assert reader.next_frame() == Frame(body)
        assert not caplog.records
        assert reader.next_frame() == Frame(body)
        assert reader.next_frame() == Frame(body)
        assert reader.next_frame() is None
    (record,) = caplog.records
    assert "skipped 15024 byte(s)" in record.getMessage()


ENVELOPES: list[tuple[str, bytes, int, int | str | None]] = [
    # name, frame body, expected code, expected id of the error
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"shutdown"}]', INVALID_REQUEST, None),
    ("empty batch", b"[]", INVALID_REQUEST, None),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":11,"method":"shutdown"}', INVALID_REQUEST, 11),
    ("no jsonrpc", b'{"id":12,"method":"shutdown"}', INVALID_REQUEST, 12),
    ("not an object", b'"shutdown"', INVALID_REQUEST, None),
    ("not UTF-8", b'{"jsonrpc":"2.0","id":13,"method":"\xff\xfe"}', PARSE_ERROR, None),
    ("not JSON", b'{"jsonrpc":"2.0","id":14,', PARSE_ERROR, None),
    ("empty body", b"", PARSE_ERROR, None),
    ("method integer", b'{"jsonrpc":"2.0","id":15,"method":7}', INVALID_REQUEST, 15),
    ("method null", b'{"jsonrpc":"2.0","id":16,"method":null}', INVALID_REQUEST, 16),
    ("id object", b'{"jsonrpc":"2.0","id":{"a":1},"method":"shutdown"}', INVALID_REQUEST, None),
    (
        "id beyond 2^53",
        b'{"jsonrpc":"2.0","id":9007199254740993,"method":"x"}',
        INVALID_REQUEST,
        None,
    ),
    (
        "params nested 1000 deep",
        b'{"jsonrpc":"2.0","id":17,"method":"ds4/retrieve","params":{"query":'
        + nested_array(1000).encode()
        + b"}}",
        INVALID_REQUEST,
        17,
    ),
    (
        "messages nested 321 deep",
        b'{"jsonrpc":"2.0","id":18,"method":"ds4/plan","params":{"messages":[{"role":"user",'
        b'"content":' + nested_object(321).encode() + b"}]}}",
        INVALID_PARAMS,
        18,
    ),
]


def test_invalid_envelopes_get_the_json_rpc_error(server: RawServer) -> None:
    for name, body, code, msg_id in ENVELOPES:
        server.send(frame(body))
        error = assert_error(server.answer(msg_id), code)
        if code == INVALID_PARAMS:
            assert error["data"]["fields"][0].startswith("params.messages[0].content"), error
            assert error["message"].startswith("ds4/plan: params.messages[0].content"), error
        server.probe()
        assert server.alive, name


def test_a_malformed_answer_to_summarize_fails_it_at_once(tmp_path: Path) -> None:
    """A `ds4/summarize` answer with `jsonrpc: "1.0"` is not a valid response: the compaction
    waiting for it falls back to the offline summary at once, not after its (1 h) timeout."""
    writer = SessionWriter(tmp_path / "session.jsonl")
    for n in (1, 2, 3):
        writer.turn(n)
    server = RawServer(tmp_path / "ds4.db")
    try:
        server.initialize(
            {"settings": {"compaction": {"keepRecentTokens": 200, "summarizeTimeoutMs": 3600000}}},
            {"experimental": {"ds4": {"summarize": True}}},
        )
        params = {"session": {"file": str(writer.path), "leafId": writer.leaf}}
        server.send(frame(request(20, "ds4/compact", params)))
        asked = server.server_request("ds4/summarize")
        server.send(frame({"jsonrpc": "1.0", "id": asked["id"], "result": {"summary": "x"}}))
        result = server.answer(20)["result"]
        assert result["summarizer"] == "offline", result
        assert "Invalid request" in result["fallbackReason"], result["fallbackReason"]
    finally:
        server.close()


def test_a_plan_nested_within_the_bound_is_answered(server: RawServer, tmp_path: Path) -> None:
    """A message nested 120 levels (in a request of 124, under the 128 bound) is planned
    and written back."""
    content = json.loads(nested_object(120))
    answer = server.call(
        "ds4/plan",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}], "x": content}
            ],
            "model": {"contextWindow": 200000},
        },
    )
    assert "result" in answer, answer


garbage = st.binary(max_size=300) | st.lists(
    st.sampled_from(
        [b"\r\n", b"\n", b"\r", b":", b" ", b"Content-Type: x", b"{", b"}", b"9", b"-", b"\xff"]
    ),
    max_size=30,
).map(b"".join)


def without_content_length(data: bytes) -> bool:
    """Garbage that does not itself announce a frame (which would rightly swallow the next
    bytes as its body)."""
    return b"content-length" not in data.lower()


@settings(max_examples=300, deadline=None)
@given(noise=garbage, msg_id=st.integers(0, 1_000_000))
def test_frame_reader_finds_a_frame_after_any_garbage(noise: bytes, msg_id: int) -> None:
    assume(without_content_length(noise))
    body = json.dumps(request(msg_id, "shutdown")).encode()
    reader = FrameReader(io.BytesIO(noise + frame(body)), max_message_bytes=4096)
    frames = []
    while (found := reader.next_frame()) is not None:
        frames.append(found)
    assert frames and frames[-1] == Frame(body)


@settings(max_examples=200, deadline=None)
@given(size=st.integers(4097, 100_000), msg_id=st.integers(0, 1000) | st.text(max_size=20))
def test_frame_reader_skips_oversized_frames_and_recovers_their_id(
    size: int, msg_id: int | str
) -> None:
    message = json.dumps(request(msg_id, "x", {"pad": ""}))
    padded = message[:-2] + "x" * (size - len(message)) + message[-2:]
    follow = json.dumps(request(1, "shutdown")).encode()
    reader = FrameReader(io.BytesIO(frame(padded) + frame(follow)), max_message_bytes=4096)
    first = reader.next_frame()
    assert isinstance(first, OversizedFrame) and first.msg_id == msg_id
    assert reader.next_frame() == Frame(follow)
    assert reader.next_frame() is None


def test_any_garbage_then_a_request_is_answered_end_to_end(server: RawServer) -> None:
    """Random bytes followed by a valid framed request: the request is always answered."""
    ids = iter(range(1, 10_000))

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(noise=garbage)
    def check(noise: bytes) -> None:
        assume(without_content_length(noise))
        msg_id = next(ids)
        server.send(
            noise + frame(request(msg_id, "workspace/executeCommand", {"command": "ds4.health"}))
        )
        assert "result" in server.answer(msg_id)

    check()
    assert server.alive


class Sink:
    """A writer that keeps what the server writes."""

    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def close(self) -> None:
        pass

    def messages(self) -> list[dict]:
        found, rest = [], self.data
        while rest:
            header, _, rest = rest.partition(b"\r\n\r\n")
            length = int(header.split(b"Content-Length: ")[1].split(b"\r\n")[0])
            found.append(json.loads(rest[:length]))
            rest = rest[length:]
        return found


def test_a_result_too_deep_to_encode_is_still_answered() -> None:
    """In process: a response `json.dumps` cannot encode becomes an InternalError answer to
    the same id; pygls's traceback never reaches `error.data`."""
    import sys

    from pygls.exceptions import JsonRpcInternalError

    from ds4_lsp.app import create_server

    server = create_server()
    sink = Sink()
    server.protocol.set_writer(sink)
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    server.protocol._send_response(5, result=deep)
    try:
        raise ZeroDivisionError("secret text")
    except ZeroDivisionError:
        error = JsonRpcInternalError.of(sys.exc_info()).to_response_error()
    server.protocol._send_response(6, error=error)
    first, second = sink.messages()
    assert first["id"] == 5 and first["error"]["code"] == -32603
    assert second["id"] == 6 and "traceback" not in json.dumps(second)
    assert "secret text" not in json.dumps(second)


def test_an_id_nested_past_pythons_parse_limit_never_stops_the_server(tmp_path: Path) -> None:
    """An `id` nested 3,000 levels deep, in a normal frame and in one over the frame limit
    (whose id the server looks for to answer it), is an invalid request; the server answers
    the next request and is still running."""
    server = RawServer(tmp_path / "ds4.db", ["--max-message-bytes", "8192"])
    try:
        server.initialize()
        deep_id = '{"jsonrpc":"2.0","id":' + nested_array(3000) + ',"method":"ds4/retrieve"}'
        server.send(frame(deep_id))
        assert_error(server.answer(None), INVALID_REQUEST)
        server.probe()
        server.send(b"Content-Length: 99999999\r\n\r\n" + deep_id.encode())
        server.probe()
        assert server.alive
    finally:
        server.close()


def test_exit_without_shutdown_ends_the_process_with_code_1(tmp_path: Path) -> None:
    """LSP 3.17 `exit`: "The server should exit with success code 0 if the shutdown request
    has been received before; otherwise with error code 1"."""
    server = RawServer(tmp_path / "ds4.db")
    server.initialize()
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.process.wait(60) == 1


def test_shutdown_sent_with_initialize_waits_for_the_database_to_open(tmp_path: Path) -> None:
    """A client that writes `initialize`, `initialized` and `shutdown` at once: the shutdown
    waits for `initialize` to finish opening the database instead of closing it under it;
    both requests succeed, and `exit` then ends the process with 0."""
    for attempt in range(3):
        server = RawServer(tmp_path / f"ds4-{attempt}.db")
        params = {"processId": None, "rootUri": None, "capabilities": {}}
        server.send(
            frame(request(1, "initialize", params))
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame(request(2, "shutdown"))
        )
        assert "result" in server.answer(1), server.stderr_lines
        assert server.answer(2) == {"jsonrpc": "2.0", "id": 2, "result": None}
        server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        assert server.process.wait(60) == 0, server.stderr_lines


def test_a_result_holding_nan_is_answered_with_an_internal_error() -> None:
    """In process: `NaN` / `Infinity` in a result are not JSON (RFC 8259 section 6, refused by
    JavaScript's JSON.parse): the answer to the same id is an InternalError instead."""
    from ds4_lsp.app import create_server

    server = create_server()
    sink = Sink()
    server.protocol.set_writer(sink)
    server.protocol._send_response(7, result={"timestamp": float("inf")})
    server.protocol._send_response(8, result={"score": float("nan")})
    server.protocol.send_raw({"jsonrpc": "2.0", "id": 9, "result": [float("-inf")]})
    answers = sink.messages()
    assert [a["id"] for a in answers] == [7, 8, 9]
    assert all(a["error"]["code"] == -32603 for a in answers), answers


def test_an_input_that_fails_to_read_ends_the_reading_instead_of_spinning() -> None:
    """A stream whose reads fail (a hung-up terminal: EIO) is the end of input, not a frame
    to skip: the reader stops at once."""
    from ds4_lsp.transport import FrameReader, _next_frame

    class HungUp(io.RawIOBase):
        reads = 0

        def readinto(self, buffer: Any) -> int:
            HungUp.reads += 1
            raise OSError(5, "Input/output error")

    assert _next_frame(FrameReader(HungUp())) is None  # type: ignore[arg-type]
    assert HungUp.reads == 1


def test_shutdown_and_exit_in_one_write_answer_the_shutdown_then_exit_zero(
    tmp_path: Path,
) -> None:
    """A client that writes `shutdown` and `exit` at once (without waiting for the answer):
    the shutdown is answered, then the process exits with 0 (the shutdown was received,
    LSP 3.17 `exit`), and nothing is cancelled mid-way (no traceback on stderr)."""
    server = RawServer(tmp_path / "ds4.db")
    server.initialize()
    server.send(frame(request(2, "shutdown")) + frame({"jsonrpc": "2.0", "method": "exit"}))
    server.process.wait(60)
    code = server.close()  # the process has ended: its exit code, and all of stderr read
    assert server.answer(2) == {"jsonrpc": "2.0", "id": 2, "result": None}, server.stderr_lines
    assert code == 0, server.stderr_lines
    assert not any("Traceback" in line for line in server.stderr_lines), server.stderr_lines


def test_requests_after_shutdown_are_invalid_requests(tmp_path: Path) -> None:
    """LSP 3.17 `shutdown`: "If a server receives requests after a shutdown request those
    requests should error with InvalidRequest", whether sent with the shutdown (still
    running) or after its answer, well formed or not; `exit` then ends with 0."""
    server = RawServer(tmp_path / "ds4.db")
    server.initialize()
    health = {"command": "ds4.health"}
    server.send(
        frame(request(2, "shutdown"))
        + frame(request(3, "workspace/executeCommand", health))
        + frame(request(4, "ds4/plan", {"model": "not an object"}))
    )
    assert server.answer(2) == {"jsonrpc": "2.0", "id": 2, "result": None}
    for msg_id in (3, 4):
        error = assert_error(server.answer(msg_id), INVALID_REQUEST)
        assert "shutdown" in error["message"], error
    assert_error(server.call("workspace/executeCommand", health), INVALID_REQUEST)
    assert_error(server.call("initialize", {"capabilities": {}}), INVALID_REQUEST)
    server.send(frame({"jsonrpc": "2.0", "method": "exit"}))
    assert server.process.wait(60) == 0, server.stderr_lines
