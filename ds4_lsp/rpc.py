"""`Ds4Protocol`: pygls's LSP protocol with ds4's message handling.

* typed ds4/* messages (`envelopes.MESSAGE_TYPES`), structured strictly
  (`converter.describe_structure_error`): a request whose params fail to structure is answered
  with InvalidParams naming each field, a notification is dropped, and the server keeps serving;
* envelope errors of the frame (`transport.decode_message`) answered as JSON-RPC says;
* `shutdown` / `exit` per LSP 3.17 (requests after `shutdown` are InvalidRequest; an `exit`
  that arrives while `shutdown` runs waits for its answer);
* a message is always encodable: a response that cannot be written becomes an InternalError
  answer, and pygls's tracebacks never reach `error.data`;
* `$/cancelRequest` for the server's own requests (`abandon_request`), the open documents as an
  `LspWorkspace` (`services.documents`), and the `workDoneToken` of `workspace/executeCommand`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import json
import logging
from collections.abc import Generator, Sequence
from typing import Any

from cattrs.errors import BaseValidationError
from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams, JsonRpcMethodNotFound
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    lsp_method,
)

from ds4_core.json_bounds import bounded_text, echo
from ds4_lsp.converter import describe_structure_error
from ds4_lsp.envelopes import MESSAGE_TYPES
from ds4_lsp.services.documents import LspWorkspace
from ds4_lsp.transport import INVALID_REQUEST, EnvelopeError, decode_message, error_response

log = logging.getLogger("ds4_lsp")

SHUTDOWN_GRACE_S = 5.0
"""How long `shutdown` waits for engine calls in flight before closing the database (s;
`Ds4Server.close_engine`)."""

EXIT_GRACE_S = 2 * SHUTDOWN_GRACE_S + 1.0
"""How long an `exit` that arrives while `shutdown` is still running waits for it (s): the
two waits of `Ds4Server.close_engine` (the database opening, the engine calls in flight) and
a second for closing the database."""

_WORK_DONE_TOKEN: contextvars.ContextVar[types.ProgressToken | None] = contextvars.ContextVar(
    "ds4_work_done_token", default=None
)


LOGGED_FIELDS = 8
"""Bad fields a log line names at most (the rest are counted)."""


def named_fields(fields: Sequence[str]) -> str:
    """The wire paths of bad fields for a log line (`params.usage.input`), each bounded by
    `echo` (a path may hold a key the client chose), at most `LOGGED_FIELDS` of them; never a
    value. A notification has no answer, so this line is where its sender learns what was
    wrong."""
    named = ", ".join(echo(path) for path in fields[:LOGGED_FIELDS])
    more = len(fields) - LOGGED_FIELDS
    return f"{named} and {more} more" if more > 0 else named


class MalformedMessage:
    """A message whose params failed to structure: answered with InvalidParams (requests) or
    dropped (notifications) by `Ds4Protocol.handle_message`, instead of pygls's behaviour of
    logging the whole body and never answering."""

    def __init__(self, method: str, msg_id: Any, message: str, fields: list[str]) -> None:
        self.method = method
        self.id = msg_id
        self.message = message
        self.fields = fields


class Ds4Protocol(LanguageServerProtocol):
    """LSP protocol with typed ds4/* messages (`envelopes.MESSAGE_TYPES`).

    Params that fail to structure (wrong JSON type, missing required field, unknown enum value)
    are answered with JSON-RPC InvalidParams (-32602) whose message names each field, e.g.
    `ds4/plan: params.model.contextWindow: expected an integer`; the server keeps serving.
    This applies to standard LSP requests too.

    Once `shutdown` is received, every later request but `exit` is answered with
    InvalidRequest (LSP 3.17 `shutdown`), and an `exit` that arrives while the shutdown still
    runs waits for it (`exit_after_shutdown`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # The `shutdown` request being served (pygls's future for its answer), from its
        # receipt; pygls's own flag `_shutdown` is set only once our handler has returned.
        self._shutdown_answer: concurrent.futures.Future[Any] | None = None
        self._shutdown_received = False
        self.deferred_exit: Any = None
        """An `exit` received while `shutdown` still runs, for `exit_after_shutdown`."""
        super().__init__(*args, **kwargs)  # reads every property (pygls's feature scan)

    # pygls wraps the base method in @lru_cache, which typeshed types as a non-method object.
    def get_message_type(self, method: str) -> type | None:  # type: ignore[override]
        """The request type of a ds4/* method, else lsprotocol's type for `method`."""
        if method in MESSAGE_TYPES:
            return MESSAGE_TYPES[method][0]
        return super().get_message_type(method)

    # pygls wraps the base method in @lru_cache, which typeshed types as a non-method object.
    def get_result_type(self, method: str) -> type | None:  # type: ignore[override]
        """The response type of a ds4/* method, else lsprotocol's type for `method`."""
        if method in MESSAGE_TYPES:
            return MESSAGE_TYPES[method][1]
        return super().get_result_type(method)

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Structure one incoming JSON object (the `json.loads` object hook).

        Requests and notifications that fail to structure become `MalformedMessage`. Unlike
        pygls's own handler, nothing of the message body reaches the log.
        """
        if not ("jsonrpc" in data and "method" in data):
            return super().structure_message(data)
        method = data["method"]
        is_request = "id" in data
        fallback = JsonRPCRequestMessage if is_request else JsonRPCNotification
        if not self.serves(method):
            # Unknown: whatever its params, pygls answers MethodNotFound (or ignores it).
            message_id = {"id": data["id"]} if is_request else {}
            return fallback(
                **message_id, method=method, jsonrpc=data["jsonrpc"], params=data.get("params")
            )
        problem = envelope_params_problem(method, data.get("params"))
        if problem is not None:
            message, fields = problem
            log.warning("%s: rejected malformed params: %s", method, named_fields(fields))
            return MalformedMessage(method, data.get("id") if is_request else None, message, fields)
        try:
            return self._converter.structure(data, self.get_message_type(method) or fallback)
        except BaseValidationError as exc:
            message, fields = describe_structure_error(method, exc)
        except Exception as exc:  # a shape cattrs could not even walk
            message = f"{method}: params could not be read ({type(exc).__name__})"
            fields = ["params"]
        log.warning("%s: rejected malformed params: %s", method, named_fields(fields))
        return MalformedMessage(method, data.get("id") if is_request else None, message, fields)

    def serves(self, method: str) -> bool:
        """Whether a request or notification `method` from the client has a handler (pygls's
        built-in features, ours, or `$/cancelRequest`, which pygls handles itself)."""
        return (
            method == types.CANCEL_REQUEST
            or method in self.fm.builtin_features
            or method in self.fm.features
        )

    def _get_handler(self, feature_name: str) -> Any:
        """pygls's handler lookup; an unknown method's MethodNotFound (-32601) quotes its name
        through `echo` (80 characters at most, then its length), not whole."""
        try:
            return super()._get_handler(feature_name)
        except JsonRpcMethodNotFound:
            raise JsonRpcMethodNotFound(
                message=f"{JsonRpcMethodNotFound.MESSAGE}: {echo(feature_name)}"
            ) from None

    def receive(self, body: bytes) -> None:
        """Handle one frame body from the client (`transport.read_messages`).

        Envelope errors (not JSON, a batch, a wrong `jsonrpc`, too deep, ...) are answered
        as `transport.decode_message` says; a message that fails in dispatch is answered with
        InternalError naming only the exception type, and the server keeps reading.
        """
        data = decode_message(body)
        if isinstance(data, EnvelopeError):
            log.warning("rejected a message: JSON-RPC error %d", data.code)
            if data.answer:
                self.send_raw(error_response(data.msg_id, data.code, data.message, data.fields))
            elif data.msg_id is not None and data.msg_id in self._request_futures:
                # A malformed answer to our own request (ds4/summarize): fail that request
                # now rather than let it wait for its timeout.
                error = types.ResponseError(code=data.code, message=data.message)
                self._handle_response(data.msg_id, None, error)
            return
        if self._shutdown_received and "method" in data and "id" in data:
            if data["method"] != types.EXIT:
                log.warning("rejected a request after shutdown")
                self.send_raw(
                    error_response(
                        data["id"],
                        INVALID_REQUEST,
                        f"Invalid request: {bounded_text(data['method'])}: the server is "
                        "shutting down (`shutdown` was received); only `exit` is served",
                    )
                )
                return
        try:
            message = self.structure_message(data)
            self.handle_message(message)
            if "method" in data and "id" in data and not hasattr(message, "id"):
                # A notification method sent as a request: handled (nothing is lost), and
                # answered, since every request is (JSON-RPC 2.0 section 4.1).
                if not self._shutdown:
                    self.send_raw(
                        error_response(
                            data["id"],
                            INVALID_REQUEST,
                            f"Invalid request: {data['method']} is a notification: it was "
                            "handled; send it without `id`",
                        )
                    )
        except Exception as exc:
            log.error("message not handled: %s", type(exc).__name__)
            msg_id = data.get("id")
            if "method" in data and msg_id is not None and not self._shutdown:
                self.send_raw(
                    error_response(
                        msg_id,
                        JsonRpcInternalError.CODE,
                        f"{bounded_text(data['method'])}: internal error "
                        f"({type(exc).__name__}); the server keeps serving",
                    )
                )

    def send_raw(self, message: dict[str, Any]) -> None:
        """Write one JSON-RPC message given as plain JSON (e.g. an error with `id: null`,
        which lsprotocol's converter would omit)."""
        self._send_data(message)

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: types.ResponseError | None = None
    ) -> None:
        """Send a response; a `dict` result is written as it is.

        The ds4 handlers answer the `to_wire()` JSON of a typed result (`ds4_core.wire`), which
        is plain JSON already: pygls would walk it again through cattrs (about 10 ms for a
        plan's 230 KiB answer) to produce the same object. Other results (lsprotocol types,
        None) and errors take pygls's path."""
        if error is None and type(result) is dict:
            self._result_types.pop(msg_id, None)
            self._send_data({"jsonrpc": JsonRPCProtocol.VERSION, "id": msg_id, "result": result})
            return
        super()._send_response(msg_id, result, error)

    def _send_data(self, data: Any) -> None:
        """Write one message (pygls's writer, made total).

        A message that cannot be encoded (nested deeper than `json.dumps` can go, a value JSON
        has no form for, a NaN or infinite float: `allow_nan=False`, RFC 8259 section 6)
        becomes, when it is a response, an InternalError answer to its id, so a request always
        gets a response. pygls's tracebacks never go into `error.data`. The
        body is ASCII (`json.dumps` escapes the rest, lone surrogates included), so its length
        in characters is its `Content-Length` in bytes.
        """
        if not data:
            return
        if self.writer is None:
            log.error("no transport to send a message on")
            return
        if isinstance(data, types.ResponseErrorMessage):
            data = without_traceback(data)
        try:
            body = json.dumps(data, default=self._serialize_message, allow_nan=False)
        except (RecursionError, ValueError, TypeError, AttributeError) as exc:
            log.error("a message could not be encoded: %s", type(exc).__name__)
            if isinstance(data, dict):
                msg_id = data.get("id")
                is_response = "result" in data or "error" in data
            else:
                msg_id = getattr(data, "id", None)
                is_response = hasattr(data, "result") or hasattr(data, "error")
            if msg_id is None or not is_response:
                return  # not a response of ours: nothing is owed
            body = json.dumps(
                error_response(
                    msg_id,
                    JsonRpcInternalError.CODE,
                    f"the result could not be encoded as JSON ({type(exc).__name__}); "
                    "the server keeps serving",
                )
            )
        if self._include_headers:
            header = (
                f"Content-Length: {len(body)}\r\n"
                f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n"
            )
            body = header + body
        try:
            written = self.writer.write(body.encode("ascii"))
            if inspect.isawaitable(written):
                asyncio.ensure_future(written)
        except BrokenPipeError:
            raise  # the client is gone: the read loop ends
        except Exception as exc:
            log.error("a message could not be written: %s", type(exc).__name__)

    def handle_message(self, message: Any) -> None:
        """Answer malformed requests with InvalidParams; hand everything else to pygls."""
        if isinstance(message, MalformedMessage):
            if message.id is not None and not self._shutdown:
                error = types.ResponseError(
                    code=JsonRpcInvalidParams.CODE,
                    message=message.message,
                    data={"fields": message.fields},
                )
                self._send_response(message.id, error=error)
            return
        method = getattr(message, "method", None)
        if method == types.EXIT and self.shutdown_running:
            self.deferred_exit = message  # served by exit_after_shutdown
            return
        super().handle_message(message)
        if method == types.SHUTDOWN and not self._shutdown_received:
            self._shutdown_received = True
            self._shutdown_answer = self._request_futures.get(message.id)

    @property
    def shutdown_running(self) -> bool:
        """Whether `shutdown` was received and is not yet answered."""
        answer = self._shutdown_answer
        return answer is not None and not answer.done()

    async def exit_after_shutdown(self) -> None:
        """Serve the `exit` held back in `deferred_exit` once the `shutdown` it followed has
        been answered, waiting at most `EXIT_GRACE_S` for it; then pygls ends the process
        (`SystemExit`): with 0 when the shutdown succeeded, else 1 (LSP 3.17 `exit`).

        pygls runs `exit` at once and takes a shutdown still running as none: the process
        would end with 1, its answer unsent and its handler cancelled. The frame loop
        (`transport.read_messages`) calls this before it reads on, so nothing is read while
        waiting. Does nothing when no `exit` is held back.
        """
        message, self.deferred_exit = self.deferred_exit, None
        if message is None:
            return
        answer = self._shutdown_answer
        if answer is not None and not answer.done():
            # pygls's answer callback was added first: concurrent futures run callbacks in
            # order, so the answer is written before this wait ends.
            _done, running = await asyncio.wait({asyncio.wrap_future(answer)}, timeout=EXIT_GRACE_S)
            if running:
                log.warning("exit: shutdown still running after %.0f s", EXIT_GRACE_S)
        super().handle_message(message)

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls 2.1.1's shutdown (the handler, then every other unfinished request cancelled,
        then `_shutdown` set), cancelling over a snapshot of the requests: cancelling a
        request run on a thread runs its callback at once, which removes it from
        `_request_futures`, so pygls's loop over the live dict raised RuntimeError and the
        shutdown failed (answered InternalError, `exit` then ending with 1)."""
        if (user_handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, Any]:
        """pygls's initialize, with its workspace replaced by an `LspWorkspace` (documents
        with LSP line semantics, `ds4_lsp.services.documents`) before the handler or any didOpen."""
        steps = super().lsp_initialize(params)
        try:
            step = next(steps)  # pygls has created the workspace and yields the handler
        except StopIteration as done:
            self._workspace = LspWorkspace.replacing(self.workspace)
            return done.value
        self._workspace = LspWorkspace.replacing(self.workspace)
        while True:
            reply = yield step
            try:
                step = steps.send(reply)
            except StopIteration as done:
                return done.value

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    def lsp_workspace__execute_command(
        self, params: types.ExecuteCommandParams
    ) -> Generator[Any, Any, Any]:
        """pygls's executeCommand, remembering the request's `workDoneToken` for the handler.
        An unknown command is InvalidParams naming `params.command`, its name quoted through
        `echo` (pygls quoted it whole)."""
        if params.command not in self.fm.commands:
            known = ", ".join(sorted(self.fm.commands))
            raise JsonRpcInvalidParams(
                message=f"{types.WORKSPACE_EXECUTE_COMMAND}: params.command: unknown command "
                f"{echo(params.command)} (known: {known})",
                data={"fields": ["params.command"]},
            )
        _WORK_DONE_TOKEN.set(params.work_done_token)
        return (yield from super().lsp_workspace__execute_command(params))

    @property
    def work_done_token(self) -> types.ProgressToken | None:
        """The `workDoneToken` of the command being handled, if the client sent one."""
        return _WORK_DONE_TOKEN.get()

    @property
    def shutting_down(self) -> bool:
        """Whether `shutdown` was received (no new requests go to the client then)."""
        return self._shutdown

    def abandon_request(self, msg_id: str) -> None:
        """Stop waiting for the answer to our request `msg_id` and tell the client with
        `$/cancelRequest` (LSP 3.17 "Cancellation Support"). Call on the event loop.

        pygls 2.1.1 has no API for this: cancelling the future `send_request` returned neither
        sends `$/cancelRequest` nor unregisters it, and the answer the client still owes
        (LSP: a cancelled request is answered, usually with RequestCancelled) would then be
        set on a cancelled future (InvalidStateError). So the id is re-registered with a
        future nobody awaits, which takes that late answer quietly.
        """
        if self._request_futures.pop(msg_id, None) is None:
            return  # answered meanwhile
        if self._shutdown:  # pygls drops every incoming message after shutdown
            self._result_types.pop(msg_id, None)
        else:
            self._request_futures[msg_id] = concurrent.futures.Future()
        self.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))


def envelope_params_problem(method: str, params: Any) -> tuple[str, list[str]] | None:
    """What is wrong with `params` of `method` where lsprotocol's types would not say it, as
    (message, field paths), or None.

    * `$/cancelRequest`: `params.id` must be an integer or a string (lsprotocol accepts any
      value, and pygls then fails with TypeError looking up an object id).
    * `workspace/executeCommand`: `params.arguments`, when present and not null, must be an
      array (the converter turns an object into its keys and a string into its characters).
    """
    if method == types.CANCEL_REQUEST:
        if not isinstance(params, dict):
            return f"{method}: params: expected an object", ["params"]
        msg_id = params.get("id")
        if isinstance(msg_id, bool) or not isinstance(msg_id, int | str):
            return f"{method}: params.id: expected an integer or a string", ["params.id"]
    elif method == types.WORKSPACE_EXECUTE_COMMAND and isinstance(params, dict):
        arguments = params.get("arguments")
        if arguments is not None and not isinstance(arguments, list):
            command = params.get("command")
            label = bounded_text(command) if isinstance(command, str) else method
            return f"{label}: params.arguments: expected an array", ["params.arguments"]
    return None


def without_traceback(message: types.ResponseErrorMessage) -> types.ResponseErrorMessage:
    """`message` without the `data.traceback` pygls adds to InternalError answers
    (`JsonRpcInternalError.of`): stack frames name install paths and may quote input. The
    message keeps only the exception's type."""
    error = message.error
    if error is None or not (isinstance(error.data, dict) and "traceback" in error.data):
        return message
    kind = error.message.split(":", 1)[0] if error.message else "error"
    rest = {key: value for key, value in error.data.items() if key != "traceback"}
    return types.ResponseErrorMessage(
        id=message.id,
        error=types.ResponseError(
            code=error.code,
            message=f"internal error ({bounded_text(kind, 80)}); the server keeps serving",
            data=rest or None,
        ),
    )
