"""The ds4 language server: state (`Ds4Server`), typed messages (`Ds4Protocol`), and the one
table that maps LSP methods and commands to handlers (`create_server()`).

Everything blocking (SQLite, session files) runs on `Ds4Server`'s engine thread pool through
`run_engine`, never on the event loop, so the server answers requests while a rebuild runs.
An engine call that needs the client (the `ds4/summarize` summarizer of `ds4/compact`) sends
its request back through the loop with `request_client_from_thread` and blocks only its own
worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import json
import logging
import traceback
import uuid
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from cattrs.errors import BaseValidationError
from lsprotocol import types
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcMethodNotFound,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    LanguageServerProtocol,
    lsp_method,
)

from ds4_core.config import flatten_settings
from ds4_core.engine import ContextEngine
from ds4_core.json_bounds import bounded_text, echo
from ds4_core.requests import DatabaseUnavailableError, RequestError, RequestFailedError

from . import __version__
from .documents import LspWorkspace
from .handlers.diagnostics import StaleSnippet
from .logs import apply_log_level_setting, client_attached
from .project_sync import ProjectSync
from .protocol import (
    DS4_COMPACT,
    DS4_COMPACT_COMMITTED,
    DS4_COMPACT_FAILED,
    DS4_MANIFEST,
    DS4_PLAN,
    DS4_RETRIEVE,
    DS4_TOOL_EXECUTED,
    HEALTH,
    MESSAGE_TYPES,
    PROJECT_STATUS,
    REBUILD_INDEX,
    SUMMARIES,
    InitializationOptions,
    describe_structure_error,
    server_converter,
    settings_section,
)
from .transport import (
    INVALID_REQUEST,
    EnvelopeError,
    FrameReader,
    decode_message,
    error_response,
)

log = logging.getLogger("ds4_lsp")

T = TypeVar("T")

ENGINE_THREADS = 4
COMPACTION_THREADS = 2
"""Threads for `ds4/compact` apart from ENGINE_THREADS: a compaction may wait up to
`compaction.summarizeTimeoutMs` for the client's `ds4/summarize`, and must not starve plans."""
"""Engine calls that may run at once (a rebuild does not block plans or retrievals)."""

MAX_MESSAGE_BYTES_SETTING = "server.maxMessageBytes"
"""The setting that replaces the frame limit of the command line once `initialize` (or a
later `workspace/didChangeConfiguration`) gives it (bytes; `transport.FrameReader`)."""

SHUTDOWN_GRACE_S = 5.0
"""How long `shutdown` waits for engine calls in flight before closing the database (s)."""

EXIT_GRACE_S = 2 * SHUTDOWN_GRACE_S + 1.0
"""How long an `exit` that arrives while `shutdown` is still running waits for it (s): the
two waits of `Ds4Server.close_engine` (the database opening, the engine calls in flight) and
a second for closing the database."""

CLIENT_REQUEST_GRACE_S = 5.0
"""Extra time a worker thread waits for the event loop beyond a client request's own timeout
(s); only reached when the loop itself is stuck."""

_WORK_DONE_TOKEN: contextvars.ContextVar[types.ProgressToken | None] = contextvars.ContextVar(
    "ds4_work_done_token", default=None
)


class MalformedMessage:
    """A message whose params failed to structure: answered with InvalidParams (requests) or
    dropped (notifications) by `Ds4Protocol.handle_message`, instead of pygls's behaviour of
    logging the whole body and never answering."""

    def __init__(self, method: str, msg_id: Any, message: str, fields: list[str]) -> None:
        self.method = method
        self.id = msg_id
        self.message = message
        self.fields = fields


class ClientRequestFailed(RuntimeError):
    """A request to the client got no answer because the server stopped waiting for it
    (shutdown). A timeout raises `TimeoutError`; an error answer raises `JsonRpcException`."""


class Ds4Protocol(LanguageServerProtocol):
    """LSP protocol with typed ds4/* messages (`protocol.MESSAGE_TYPES`).

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
            log.warning("%s: rejected malformed params (%d field error(s))", method, len(fields))
            return MalformedMessage(method, data.get("id") if is_request else None, message, fields)
        try:
            return self._converter.structure(data, self.get_message_type(method) or fallback)
        except BaseValidationError as exc:
            message, fields = describe_structure_error(method, exc)
        except Exception as exc:  # a shape cattrs could not even walk
            message = f"{method}: params could not be read ({type(exc).__name__})"
            fields = ["params"]
        log.warning("%s: rejected malformed params (%d field error(s))", method, len(fields))
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
        except (RecursionError, ValueError, TypeError) as exc:
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
        with LSP line semantics, `ds4_lsp.documents`) before the handler or any didOpen."""
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


class Ds4Server(LanguageServer):
    """The ds4 language server: one `ContextEngine` plus the LSP session around it.

    The engine is created in `initialize` (see `open_engine`); `engine` raises a JSON-RPC
    error before that. `options` holds the parsed `initializationOptions`; `project` schedules
    project syncs (`ds4_lsp.project_sync`); `stale_snippets` holds the stale-snippet
    diagnostics last published per document URI (unquoted), for hovers.
    """

    protocol: Ds4Protocol

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.options = InitializationOptions()
        self._engine: ContextEngine | None = None
        self._engine_problem = "send `initialize` first"
        self._executor = ThreadPoolExecutor(ENGINE_THREADS, thread_name_prefix="ds4-engine")
        self._compaction_executor = ThreadPoolExecutor(
            COMPACTION_THREADS, thread_name_prefix="ds4-compact"
        )
        # Engine calls still running on a worker thread. Tracked as concurrent futures: an
        # awaiting task may be cancelled (shutdown stops background syncs), but its thread
        # keeps using SQLite until the call returns, and the database must outlive it.
        self._in_flight: set[concurrent.futures.Future[Any]] = set()
        self._opening = False  # open_engine has started
        self._opened = asyncio.Event()  # ... and has finished (whatever the outcome)
        self.project = ProjectSync(self)
        self.stale_snippets: dict[str, list[StaleSnippet]] = {}
        # The stdio frame reader (`transport.serve_stdio`); None when served otherwise.
        self.frame_reader: FrameReader | None = None
        # Requests to the client being awaited (`request_client`); cancelled at shutdown so
        # that engine calls waiting on them (ds4/compact) finish instead of timing out.
        self._client_requests: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ engine

    @property
    def engine(self) -> ContextEngine:
        """The context engine. Raises JsonRpcInternalError saying why when there is none."""
        if self._engine is None:
            raise JsonRpcInternalError(
                f"ds4: the context engine is not running: {self._engine_problem}"
            )
        return self._engine

    @property
    def has_engine(self) -> bool:
        """Whether the engine is running (false before `initialize` or when it failed)."""
        return self._engine is not None

    async def open_engine(self, options: InitializationOptions) -> list[str]:
        """Create the engine (off the loop) from `initializationOptions` and open its database.

        Returns what the user should be told: settings that were ignored and database notices
        (e.g. a corrupt file moved aside). Never raises: a database that cannot be opened is
        reported and every later ds4 request answers with the reason.
        """
        self._opening = True
        try:
            return await self._open_engine(options)
        finally:
            self._opened.set()

    async def _open_engine(self, options: InitializationOptions) -> list[str]:
        self.options = options
        settings = settings_section(options.settings)
        try:
            self._engine = await self.run_engine(
                lambda: ContextEngine(database_path=options.database_path, settings=settings),
                method="initialize",
            )
        except JsonRpcException as exc:
            self._engine_problem = exc.message
            return [f"ds4: cannot start the context engine: {exc.message}"]
        messages = list(self._engine.config_warnings)
        if settings and "diagnostics.logLevel" in flatten_settings(settings):
            apply_log_level_setting(self._engine.config["diagnostics.logLevel"])
        self.apply_frame_limit(settings)
        try:
            running = self._executor.submit(self._engine.health)
            self._in_flight.add(running)
            running.add_done_callback(self._in_flight.discard)
            health = await asyncio.wrap_future(running)
        except DatabaseUnavailableError as exc:  # names the file and what to do
            log.error("cannot open the database")
            return [*messages, f"ds4: {exc}"]
        except Exception as exc:
            log.error("cannot open the database: %s", type(exc).__name__)
            return [*messages, f"ds4: cannot open the database ({type(exc).__name__})"]
        try:
            # Batches still prepared were left by an earlier server: nobody will report them.
            leftover = self._executor.submit(self._engine.fail_leftover_compactions)
            self._in_flight.add(leftover)
            leftover.add_done_callback(self._in_flight.discard)
            await asyncio.wrap_future(leftover)
        except Exception as exc:  # e.g. a locked database: the server still serves
            log.warning("leftover compactions not marked failed: %s", type(exc).__name__)
        return [*messages, *health.to_wire().get("notices", [])]

    def apply_frame_limit(self, settings: Mapping[str, Any] | None) -> None:
        """Apply `server.maxMessageBytes` (bytes) to the frame reader when `settings` give it
        and the engine accepted it; otherwise the limit of the command line stays."""
        if not settings or self.frame_reader is None or self._engine is None:
            return
        given = flatten_settings(settings).get(MAX_MESSAGE_BYTES_SETTING)
        accepted = self._engine.config[MAX_MESSAGE_BYTES_SETTING]
        if given is not None and given == accepted:
            self.frame_reader.max_message_bytes = accepted
            log.info("frame limit: %d bytes", accepted)

    async def run_engine(
        self,
        fn: Callable[..., T],
        *args: Any,
        method: str | None = None,
        field_root: str = "params",
        compaction: bool = False,
    ) -> T:
        """Run the blocking call `fn(*args)` on the engine thread pool (`compaction`: on the
        compaction threads, see `COMPACTION_THREADS`) and await its result.

        `method` (e.g. `ds4/plan`) prefixes error messages. Raises `JsonRpcInvalidParams` when
        the engine rejects the input (`RequestError`; the message names the field under
        `field_root`: `params` for requests, e.g. `params.arguments[0]` for a command) and
        `JsonRpcInternalError` with a generic message for any other failure, which is logged
        with its type and stack frames only (never its message: it may quote session text).
        """
        label = method or "ds4"
        executor = self._compaction_executor if compaction else self._executor
        running = executor.submit(fn, *args)
        self._in_flight.add(running)
        running.add_done_callback(self._in_flight.discard)
        try:
            return await asyncio.wrap_future(running)
        except RequestFailedError as exc:
            log.info("%s: request failed (state, not input)", label)
            raise JsonRpcRequestFailed(message=request_error_message(label, exc)) from None
        except RequestError as exc:
            log.info("%s: rejected input (field %s)", label, exc.field)
            raise JsonRpcInvalidParams(
                message=request_error_message(label, exc, field_root),
                data={"fields": [f"{field_root}.{exc.field}"] if exc.field else []},
            ) from None
        except JsonRpcException:
            raise
        except DatabaseUnavailableError as exc:  # actionable, not a bug: no stack trace
            log.error("%s: database unavailable", label)
            raise JsonRpcInternalError(f"{label}: {exc}") from None
        except Exception as exc:
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log.error("%s failed: %s\n%s", label, type(exc).__name__, frames)
            raise JsonRpcInternalError(
                f"{label}: internal error ({type(exc).__name__}); the server keeps serving, "
                "and its log (stderr) has the stack trace"
            ) from None

    async def close_engine(self) -> None:
        """Stop waiting for the client's answers and stop background project work, wait up to
        `SHUTDOWN_GRACE_S` for engine calls in flight, then close the database. A `shutdown`
        that arrives while `initialize` is still opening the database first waits (as long)
        for the opening to finish, so that nothing is submitted to a closed engine."""
        if self._opening and not self._opened.is_set():
            try:
                await asyncio.wait_for(self._opened.wait(), timeout=SHUTDOWN_GRACE_S)
            except TimeoutError:
                log.warning("shutdown: the database is still being opened")
        for waiting in list(self._client_requests):
            waiting.cancel()  # a compaction waiting for ds4/summarize falls back and finishes
        await self.project.stop()
        pending = [asyncio.wrap_future(f) for f in self._in_flight if not f.done()]
        if pending:
            log.info("shutdown: waiting for %d engine call(s)", len(pending))
            _done, still_running = await asyncio.wait(pending, timeout=SHUTDOWN_GRACE_S)
            if still_running:
                # Closing SQLite under a running call could crash the process: leave the
                # database open; the worker finishes before the interpreter exits.
                log.warning("shutdown: %d engine call(s) still running", len(still_running))
                self._executor.shutdown(wait=False)
                self._compaction_executor.shutdown(wait=False)
                return
        if self._engine is not None:
            try:
                await self.run_engine(self._engine.close, method="shutdown")
            except JsonRpcException:  # already logged; shutdown itself must still succeed
                pass
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._compaction_executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ requests to the client

    @property
    def client_offers_summarize(self) -> bool:
        """Whether the client declared `capabilities.experimental.ds4.summarize: true` at
        `initialize`, i.e. it answers `ds4/summarize` (docs/protocol.md)."""
        capabilities = getattr(self.protocol, "client_capabilities", None)  # None before initialize
        experimental = capabilities.experimental if capabilities else None
        ds4 = experimental.get("ds4") if isinstance(experimental, dict) else None
        return isinstance(ds4, dict) and ds4.get("summarize") is True

    async def request_client(self, method: str, params: Any, timeout_s: float) -> Any:
        """Send the request `method` to the client and return its raw JSON result.

        Waits at most `timeout_s` seconds; then the request is abandoned (`$/cancelRequest`,
        `Ds4Protocol.abandon_request`) and `TimeoutError` raised. An error answer raises
        pygls's `JsonRpcException` (with the client's `code` and `message`); shutdown raises
        `ClientRequestFailed`. Runs on the event loop.
        """
        if self.protocol.shutting_down:
            raise ClientRequestFailed("the server is shutting down")
        waiting = asyncio.current_task()
        assert waiting is not None  # a coroutine on the loop always runs in a task
        msg_id = f"ds4-{uuid.uuid4()}"
        answer = asyncio.wrap_future(self.protocol.send_request(method, params, msg_id=msg_id))
        self._client_requests.add(waiting)
        try:
            done, _ = await asyncio.wait({answer}, timeout=timeout_s)
        except asyncio.CancelledError:  # close_engine: shutdown
            self.protocol.abandon_request(msg_id)
            answer.cancel()
            raise ClientRequestFailed("the server is shutting down") from None
        finally:
            self._client_requests.discard(waiting)
        if not done:
            self.protocol.abandon_request(msg_id)
            answer.cancel()  # unregistered above: no answer can reach it any more
            raise TimeoutError(f"{method}: no answer within {timeout_s * 1000:.0f} ms")
        return answer.result()

    def request_client_from_thread(
        self, loop: asyncio.AbstractEventLoop, method: str, params: Any, timeout_s: float
    ) -> Any:
        """`request_client` for a worker thread (an engine callback): the request is sent and
        awaited on `loop`, the server's event loop, while this thread blocks.

        Never call it on the event loop itself (it would wait for itself). Raises what
        `request_client` raises; `TimeoutError` also when the loop does not come back within
        `CLIENT_REQUEST_GRACE_S` after the timeout.
        """
        running = asyncio.run_coroutine_threadsafe(
            self.request_client(method, params, timeout_s), loop
        )
        try:
            return running.result(timeout_s + CLIENT_REQUEST_GRACE_S)
        except concurrent.futures.TimeoutError:
            running.cancel()
            raise TimeoutError(f"{method}: no answer within {timeout_s * 1000:.0f} ms") from None
        except concurrent.futures.CancelledError:
            raise ClientRequestFailed("the server is shutting down") from None

    # ------------------------------------------------------------------ client messages

    def show_message(self, text: str, kind: types.MessageType = types.MessageType.Warning) -> None:
        """`window/showMessage`: a message the user should see (settings, database notices)."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def log_request(self, method: str, summary: str) -> None:
        """Send one line about a served request to the client as `window/logMessage` (type
        Log), whatever `diagnostics.logLevel` says: the client's output shows every request.
        Written to the log as an INFO record only while records do not reach the client
        (`ds4_lsp.logs`), so that the line is never sent twice.

        `summary` must hold counts, ids and timings only (privacy rule).
        """
        line = f"{method}: {summary}"
        self.window_log_message(types.LogMessageParams(type=types.MessageType.Log, message=line))
        if not client_attached():
            log.info("%s", line)

    @property
    def supports_work_done_progress(self) -> bool:
        """Whether the client accepts `window/workDoneProgress/create`."""
        capabilities = getattr(self.protocol, "client_capabilities", None)  # None before initialize
        window = capabilities.window if capabilities else None
        return bool(window and window.work_done_progress)

    @property
    def supports_configuration(self) -> bool:
        """Whether the client answers `workspace/configuration`."""
        capabilities = getattr(self.protocol, "client_capabilities", None)  # None before initialize
        workspace = capabilities.workspace if capabilities else None
        return bool(workspace and workspace.configuration)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log out-of-band errors by type only; requests already carry their own error.

        pygls's default shows `str(error)` in a popup, which may quote message content.
        """
        if source is FeatureRequestError:
            return
        log.error(
            "server error (%s): %s", getattr(source, "__name__", source), type(error).__name__
        )


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


class JsonRpcRequestFailed(JsonRpcException):
    """RequestFailed (-32803, LSP 3.17 "ErrorCodes"): the request was well formed but could not
    be served (pygls 2.1.1 has no class for this code)."""

    CODE = -32803
    MESSAGE = "RequestFailed"


def request_error_message(method: str, exc: RequestError, field_root: str = "params") -> str:
    """`ds4/retrieve: params.maxResults: expected ...` from a core `RequestError`.

    The field is always named, in wire spelling under `field_root.`, right after the method.
    """
    text = str(exc)
    if not exc.field:
        return f"{method}: {text}"
    text = text.removeprefix(f"{exc.field}:").removeprefix(f"{method} ").strip()
    return f"{method}: {field_root}.{exc.field}: {text}"


def create_server() -> Ds4Server:
    """A new server with every LSP method and command registered (the whole protocol surface).

    A factory rather than a module-global server, so each test gets a fresh one.
    """
    # Imported here: the handler modules import `Ds4Server` from this module at run time
    # (pygls resolves command annotations with typing.get_type_hints).
    from .handlers import (
        commands,
        compaction,
        documents,
        hover,
        lifecycle,
        manifest,
        plan,
        project,
        retrieve,
        settings,
    )

    server = Ds4Server(
        "ds4-lsp", __version__, protocol_cls=Ds4Protocol, converter_factory=server_converter
    )
    # lifecycle
    server.feature(types.INITIALIZE)(lifecycle.initialize)
    server.feature(types.INITIALIZED)(project.initialized)
    server.feature(types.SHUTDOWN)(lifecycle.shutdown)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(settings.did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(
        project.did_change_workspace_folders
    )
    # documents: an open buffer is the live text of its file
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(documents.did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(documents.did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(
        documents.did_save
    )
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(documents.did_close)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(documents.did_change_watched_files)
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover.hover)
    # custom requests and notifications
    server.feature(DS4_PLAN)(plan.plan)
    server.feature(DS4_RETRIEVE)(retrieve.retrieve)
    server.feature(DS4_MANIFEST)(manifest.manifest)
    server.feature(DS4_TOOL_EXECUTED)(project.tool_executed)
    # compaction; the server asks the client with ds4/summarize (handlers.compaction)
    server.feature(DS4_COMPACT)(compaction.compact)
    server.feature(DS4_COMPACT_COMMITTED)(compaction.compact_committed)
    server.feature(DS4_COMPACT_FAILED)(compaction.compact_failed)
    # workspace/executeCommand
    server.command(REBUILD_INDEX)(commands.rebuild_index)
    server.command(HEALTH)(commands.health)
    server.command(PROJECT_STATUS)(commands.project_status)
    server.command(SUMMARIES)(commands.summaries)
    return server
