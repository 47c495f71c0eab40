"""The LSP base protocol on stdio: frames in, JSON-RPC envelopes checked, errors answered.

pygls 2.1.1's stdio loop (`pygls.io_.run_async`) trusts the byte stream: it reads a header
line of any length, allocates whatever `Content-Length` says (1e12 bytes: MemoryError), only
accepts `Content-Length: N\\r\\n` exactly, and a frame it cannot read desynchronises it for
good. It also never answers a batch, a wrong `jsonrpc`, or a body that is not JSON. This module
replaces that loop (`serve_stdio`):

* `FrameReader` reads frames (LSP 3.17 "Base Protocol": header lines, an empty line, then
  `Content-Length` bytes of UTF-8 JSON). Header names are case-insensitive and lines may end
  in LF alone. A frame larger than `max_message_bytes` is discarded as it streams by (never
  buffered). Anything that is not a well-formed header block (no, negative, non-numeric or
  oversized length, stray bytes) is skipped up to the next `Content-Length: N` line, and one
  log line says how many bytes were skipped and why. A raw line break cannot occur inside a
  JSON string and `Content-Length:` cannot occur outside one, so this rescan never finds a
  header inside a valid JSON body.
* `decode_message` checks the JSON-RPC 2.0 envelope ("Request object", "Error object"):
  invalid UTF-8 or JSON is ParseError (-32700, id null); a batch, a `jsonrpc` other than
  "2.0", a `method` that is not a string or an id that is neither a number nor a string (a
  request with `id: null` included) is InvalidRequest (-32600); a value nested deeper than
  `json_bounds.MAX_JSON_DEPTH` is InvalidRequest (or InvalidParams naming the field of a
  request whose id is known), and so is a number JSON has no value for (`NaN`, `Infinity`, `-Infinity`, which Python's `json`
  accepts, or a literal such as `1e999` that overflows to infinity; RFC 8259 section 6).
  Error messages never quote the body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from ds4_core.json_bounds import (
    MAX_JSON_DEPTH,
    MAX_SAFE_INTEGER,
    bounded_text,
    json_path,
    may_be_too_deep,
    too_deep,
)

if TYPE_CHECKING:
    from .server import Ds4Server

log = logging.getLogger("ds4_lsp.transport")

DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024
"""Largest message body accepted (bytes): `--max-message-bytes`, `DS4_MAX_MESSAGE_BYTES`,
setting `server.maxMessageBytes`."""

MIN_MAX_MESSAGE_BYTES = 4096
"""The frame limit can be lowered no further than this (bytes): `initialize` must fit."""

MAX_HEADER_LINE = 8192
"""A header line longer than this (bytes) is not a header: it is skipped as it streams by."""

READ_CHUNK = 65536
"""Bytes asked of the stream per read."""

ID_SCAN_BYTES = 4096
"""How much of an oversized body is examined for its request id (bytes)."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_CONTENT_LENGTH = re.compile(rb"content-length[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?$", re.IGNORECASE)
_HEADER = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*:[^\r\n]*\r?")


@dataclass(frozen=True)
class Frame:
    """One message body (bytes) as framed by its header, within the size limit."""

    body: bytes


@dataclass(frozen=True)
class OversizedFrame:
    """A frame whose `Content-Length` exceeds the limit; its body was not read (it is skipped
    as garbage). `declared` is the stated size in bytes (None when it does not even fit in
    an integer of 18 digits); `msg_id` the request id found at the start of the body, if any."""

    declared: int | None
    msg_id: int | str | None


class FrameReader:
    """Reads LSP frames from a blocking binary stream (stdin's buffer, `io.BytesIO`).

    `next_frame()` blocks until a frame is complete and returns a `Frame` or `OversizedFrame`,
    or None at end of stream. Memory is bounded by `max_message_bytes` plus one read chunk.
    """

    def __init__(self, stream: BinaryIO, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES):
        self._stream = stream
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray()
        self._eof = False
        self._skipped = 0  # bytes skipped since the last good frame
        self._skip_reason: str | None = None

    def drop_buffered(self) -> None:
        """Forget the bytes read but not yet framed (after a failure while framing them);
        the next frame is found by the usual rescan for a `Content-Length` header."""
        self._note_skipped(len(self._buffer), "a frame that could not be read")
        self._buffer.clear()

    # ----------------------------------------------------------------- reading

    def _fill(self) -> bool:
        """Append what the stream has (at least one byte); False at end of stream."""
        if self._eof:
            return False
        read = getattr(self._stream, "read1", None) or self._stream.read
        data = read(READ_CHUNK)
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    def _read_line(self) -> bytes | None:
        """The next line without its LF (a CR stays), or None at end of stream. A line longer
        than `MAX_HEADER_LINE` is garbage: its bytes are dropped as they arrive, except the
        tail that may start a `Content-Length` header (returned as a line of its own)."""
        searched = 0
        while True:
            end = self._buffer.find(b"\n", searched)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return line
            searched = len(self._buffer)
            if len(self._buffer) > MAX_HEADER_LINE:
                start = self._buffer.lower().rfind(b"content-length")
                keep = len(self._buffer) - start if start >= 0 else 32
                keep = min(keep, MAX_HEADER_LINE // 2)
                self._note_skipped(len(self._buffer) - keep, "a line too long to be a header")
                del self._buffer[: len(self._buffer) - keep]
                searched = 0
            if not self._fill():
                if self._buffer:
                    self._note_skipped(len(self._buffer), "an unterminated line at the end")
                    self._buffer.clear()
                return None

    def _read_exactly(self, count: int) -> bytes | None:
        """`count` bytes, or None when the stream ends first."""
        while len(self._buffer) < count:
            if not self._fill():
                return None
        body = bytes(self._buffer[:count])
        del self._buffer[:count]
        return body

    def _note_skipped(self, count: int, reason: str) -> None:
        if count <= 0:
            return
        self._skipped += count
        if self._skip_reason is None:
            self._skip_reason = reason

    def _report_skipped(self) -> None:
        if self._skipped:
            log.warning(
                "transport: skipped %d byte(s) of input that is not an LSP frame (%s); "
                "resynchronised on the next Content-Length header",
                self._skipped,
                self._skip_reason or "malformed header",
            )
        self._skipped = 0
        self._skip_reason = None

    # ----------------------------------------------------------------- frames

    def next_frame(self) -> Frame | OversizedFrame | None:
        """The next frame, skipping anything that is not one; None at end of stream."""
        length: int | None = None
        oversized = False
        declared: int | None = None
        header_bytes = 0  # bytes of the header block being read
        while True:
            line = self._read_line()
            if line is None:
                self._note_skipped(header_bytes, "a header block cut off by the end")
                self._report_skipped()
                return None
            size = len(line) + 1
            text = line.removesuffix(b"\r")
            if not text:
                if length is None and not oversized:
                    self._note_skipped(header_bytes + size, "a header without Content-Length")
                    header_bytes = 0
                    continue
                self._report_skipped()
                if oversized:
                    return self._skip_oversized(declared)
                assert length is not None
                body = self._read_exactly(length)
                if body is None:
                    log.warning("transport: the stream ended inside a message body")
                    return None
                return Frame(body)
            start = text.lower().rfind(b"content-length")
            if start >= 0:
                match = _CONTENT_LENGTH.fullmatch(text, start)
                value = match.group(1) if match else b""
                if value.isdigit():
                    if start:
                        self._note_skipped(start, "stray bytes before a header")
                    if length is not None or oversized or start:
                        # A second Content-Length: the block before it never ended.
                        self._note_skipped(header_bytes, "a header block without its end")
                        header_bytes = 0
                    header_bytes += size - start
                    oversized = len(value) > 18 or int(value) > self.max_message_bytes
                    declared = int(value) if len(value) <= 18 else None
                    length = None if oversized else int(value)
                    continue
                # `Content-Length: -5`, `: abc`, `: ` or a Content-Length inside garbage.
                self._note_skipped(header_bytes + size, "a Content-Length that is not a size")
                header_bytes, length, oversized = 0, None, False
                continue
            if _HEADER.fullmatch(text):
                header_bytes += size  # another header of this block (Content-Type)
                continue
            self._note_skipped(header_bytes + size, "stray bytes between messages")
            header_bytes, length, oversized = 0, None, False

    def _skip_oversized(self, declared: int | None) -> OversizedFrame:
        """Log the oversized frame and look for its request id in what is already buffered.
        Its bytes are then skipped by the header scan of the following `next_frame` calls, as
        they arrive: a lying `Content-Length` costs the bytes up to the next real header."""
        if not self._buffer:
            self._fill()
        msg_id = recover_request_id(bytes(self._buffer[:ID_SCAN_BYTES]))
        log.warning(
            "transport: a message of %s bytes exceeds the limit of %d bytes "
            "(server.maxMessageBytes); its body is skipped",
            declared if declared is not None else "more than 10^18",
            self.max_message_bytes,
        )
        return OversizedFrame(declared, msg_id)


def recover_request_id(head: bytes) -> int | str | None:
    """The `id` member of the top-level JSON object that `head` starts (a body's first bytes),
    if it appears complete in `head`; else None. Only an integer or a string of at most 256
    characters is taken, so that an oversized request can still be answered by id."""
    text = head.decode("utf-8", "replace")
    index = len(text) - len(text.lstrip())
    if not text.startswith("{", index):
        return None
    depth = 0
    decoder = json.JSONDecoder()
    expect_key = False
    while index < len(text):
        char = text[index]
        if char == '"':
            try:
                value, end = decoder.raw_decode(text, index)
            except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
                return None
            if depth == 1 and expect_key and value == "id":
                colon = text[end:].lstrip()
                if not colon.startswith(":"):
                    return None
                rest = colon[1:].lstrip()
                try:
                    found, _ = decoder.raw_decode(rest)
                except (ValueError, RecursionError):  # e.g. an id nested 3,000 levels deep
                    return None
                if isinstance(found, bool) or not isinstance(found, int | str):
                    return None
                if isinstance(found, str) and len(found) > 256:
                    return None
                if isinstance(found, int) and abs(found) > MAX_SAFE_INTEGER:
                    return None
                return found
            expect_key = False
            index = end
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = True
        index += 1
    return None


# --------------------------------------------------------------------------- envelopes


@dataclass(frozen=True)
class EnvelopeError:
    """A message that cannot be dispatched: answer `code` / `message` (and `fields`, for
    InvalidParams) to `msg_id` (None: JSON `null`), unless `answer` is False (a malformed
    response from the client, which JSON-RPC never answers)."""

    code: int
    message: str
    msg_id: int | str | None = None
    fields: tuple[str, ...] = ()
    answer: bool = True


class _NonFinite:
    """Stands, in a decoded message, for a number JSON cannot represent (`NaN`, `Infinity`,
    `1e999`): found by `_non_finite_path` and refused by `decode_message`."""


_NON_FINITE = _NonFinite()


def _decode_json(text: str) -> tuple[Any, bool]:
    """`json.loads(text)`, and whether it held a non-finite number (each one decoded as
    `_NON_FINITE`)."""
    found = False

    def parse_float(literal: str) -> float | _NonFinite:
        nonlocal found
        value = float(literal)
        if math.isfinite(value):
            return value
        found = True
        return _NON_FINITE

    def parse_constant(_name: str) -> _NonFinite:
        nonlocal found
        found = True
        return _NON_FINITE

    decoder = json.JSONDecoder(parse_float=parse_float, parse_constant=parse_constant)
    return decoder.decode(text), found


def _non_finite_path(value: Any) -> list[str | int] | None:
    """The path (keys and indexes) of the first `_NON_FINITE` in the decoded `value`, or None.
    Iterative; `value` is already known to be within MAX_JSON_DEPTH."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if item is _NON_FINITE:
            return list(path)
        if isinstance(item, dict):
            stack.extend((child, (*path, key)) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(
                (child, (*path, index)) for index, child in reversed(list(enumerate(item)))
            )
    return None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def decode_message(body: bytes) -> dict[str, Any] | EnvelopeError:
    """The JSON-RPC 2.0 message object of one frame body, or why it cannot be dispatched.

    The checks follow JSON-RPC 2.0 sections 4, 5.1 and 6 (LSP does not use batches): the
    returned dict has `jsonrpc: "2.0"`, a string `method` when it has one, an integer or
    string `id` when it has one (null only in a response), no array or object nested deeper
    than `MAX_JSON_DEPTH` levels, and only finite numbers.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return EnvelopeError(PARSE_ERROR, f"Parse error: the body is not UTF-8 (byte {exc.start})")
    try:
        data, non_finite = _decode_json(text)
    except RecursionError:
        return EnvelopeError(
            INVALID_REQUEST,
            f"Invalid request: nested deeper than {MAX_JSON_DEPTH} levels",
            recover_request_id(body[:ID_SCAN_BYTES]),
        )
    except ValueError as exc:
        where = f" at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        return EnvelopeError(PARSE_ERROR, f"Parse error: the body is not JSON{where}")
    if isinstance(data, list):
        return EnvelopeError(
            INVALID_REQUEST, "Invalid request: batches (arrays of messages) are not supported"
        )
    if not isinstance(data, dict):
        return EnvelopeError(INVALID_REQUEST, "Invalid request: expected a JSON object")
    raw_id = data.get("id")
    msg_id = raw_id if _valid_id(raw_id) else None
    is_response = "method" not in data and ("result" in data or "error" in data)
    if data.get("jsonrpc") != "2.0":
        return EnvelopeError(
            INVALID_REQUEST,
            'Invalid request: `jsonrpc` must be "2.0"',
            msg_id,
            answer=not is_response,
        )
    if "id" in data and raw_id is None and "method" in data:
        # JSON-RPC 2.0 section 4 discourages a null id, and LSP's RequestMessage has
        # `id: integer | string`: neither a request that can be answered nor a notification.
        return EnvelopeError(
            INVALID_REQUEST, "Invalid request: `id` must be an integer or a string, not null", None
        )
    if "id" in data and raw_id is not None and not _valid_id(raw_id):
        return EnvelopeError(
            INVALID_REQUEST, "Invalid request: `id` must be an integer or a string", None
        )
    if isinstance(raw_id, int) and not isinstance(raw_id, bool) and abs(raw_id) > MAX_SAFE_INTEGER:
        return EnvelopeError(
            INVALID_REQUEST, f"Invalid request: `id` must be within +-{MAX_SAFE_INTEGER}", None
        )
    if "method" in data and not isinstance(data["method"], str):
        return EnvelopeError(INVALID_REQUEST, "Invalid request: `method` must be a string", msg_id)
    if "method" not in data and not is_response:
        return EnvelopeError(
            INVALID_REQUEST, "Invalid request: no `method` (and not a response)", msg_id
        )
    deep = too_deep(data) if may_be_too_deep(text) else None
    if deep is not None:
        field = json_path(str(deep[0]), deep[1:]) if deep else "message"
        if "method" in data and "id" in data and deep[:1] == ["params"]:
            return EnvelopeError(
                INVALID_PARAMS,
                f"{bounded_text(data['method'])}: {field}: nested deeper than "
                f"{MAX_JSON_DEPTH} levels",
                msg_id,
                (field,),
            )
        # A notification is never answered (JSON-RPC 2.0 section 4.1), nor a response.
        return EnvelopeError(
            INVALID_REQUEST,
            f"Invalid request: {field}: nested deeper than {MAX_JSON_DEPTH} levels",
            msg_id,
            answer="id" in data and not is_response,
        )
    bad = _non_finite_path(data) if non_finite else None
    if bad is not None:
        field = json_path(str(bad[0]), bad[1:]) if bad else "message"
        problem = "a number JSON cannot represent (NaN, Infinity or beyond +-1.8e308)"
        if "method" in data and "id" in data and bad[:1] == ["params"]:
            return EnvelopeError(
                INVALID_PARAMS,
                f"{bounded_text(data['method'])}: {field}: {problem}",
                msg_id,
                (field,),
            )
        return EnvelopeError(
            INVALID_REQUEST,
            f"Invalid request: {field}: {problem}",
            msg_id,
            answer="id" in data and not is_response,
        )
    return data


# --------------------------------------------------------------------------- the loop


def error_response(
    msg_id: int | str | None, code: int, message: str, fields: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A JSON-RPC error response object (`id: null` when the id is unknown)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if fields:
        error["data"] = {"fields": list(fields)}
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


async def read_messages(server: Ds4Server, reader: FrameReader, stop: threading.Event) -> None:
    """Read frames until end of stream or `stop`, and dispatch each to `server.protocol`;
    answer every envelope error. Reading runs on the server's thread pool. An `exit` that
    came while `shutdown` still runs is served here once the shutdown is answered
    (`Ds4Protocol.exit_after_shutdown`), before the next read."""
    loop = asyncio.get_running_loop()
    protocol = server.protocol
    while not stop.is_set():
        frame = await loop.run_in_executor(server.thread_pool, _next_frame, reader)
        if frame is None:
            break
        try:
            if isinstance(frame, OversizedFrame):
                if frame.msg_id is not None:
                    protocol.send_raw(
                        error_response(
                            frame.msg_id,
                            INVALID_REQUEST,
                            "Invalid request: the message is larger than "
                            f"{reader.max_message_bytes} bytes (server.maxMessageBytes)",
                        )
                    )
                continue
            protocol.receive(frame.body)
            await protocol.exit_after_shutdown()  # an `exit` that came before its shutdown ended
        except Exception as exc:  # noqa: BLE001 - one message never stops the server
            log.error("transport: a message could not be handled (%s)", type(exc).__name__)


MAX_FRAME_FAILURES = 100
"""Consecutive frames that fail to be read before the input is taken as gone."""


def _next_frame(reader: FrameReader) -> Frame | OversizedFrame | None:
    """`reader.next_frame()`, where a failure to frame bytes costs that frame, never the
    stream: the error is logged by type and reading goes on with fresh bytes. None at end of
    stream, when the input itself fails (`OSError`, e.g. a hung-up terminal: nothing more
    will come), or after `MAX_FRAME_FAILURES` failures in a row."""
    for _ in range(MAX_FRAME_FAILURES):
        try:
            return reader.next_frame()
        except OSError as exc:
            log.error("transport: the input cannot be read (%s); stopping", type(exc).__name__)
            return None
        except Exception as exc:  # noqa: BLE001 - the server must survive any byte stream
            log.error("transport: a frame could not be read (%s)", type(exc).__name__)
            reader.drop_buffered()  # progress: the next try starts on fresh bytes
    log.error("transport: %d frames in a row could not be read; stopping", MAX_FRAME_FAILURES)
    return None


def serve_stdio(
    server: Ds4Server,
    stdin: BinaryIO,
    stdout: BinaryIO,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> None:
    """Serve LSP on `stdin` / `stdout` until end of input or `exit` (pygls's `start_io`, with
    `FrameReader` and `decode_message` instead of pygls's reader)."""
    from pygls.io_ import StdoutWriter

    stop = threading.Event()
    server._stop_event = stop  # pygls's `exit` handler and shutdown() set it
    server.protocol.set_writer(StdoutWriter(stdout))
    server.frame_reader = FrameReader(stdin, max_message_bytes)
    exit_code: int | str | None = None
    try:
        asyncio.run(read_messages(server, server.frame_reader, stop))
    except BrokenPipeError:
        log.error("the client closed the connection; stopping")
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # pygls's `exit` handler: 0 after `shutdown`, else 1
        exit_code = exc.code
    finally:
        server.shutdown()
    if exit_code:
        raise SystemExit(exit_code)
