"""The ds4 language server's state: `Ds4Server`, one `ContextEngine` plus the LSP session
around it. `ds4_lsp.app.create_server` builds it with every handler registered.

Everything blocking (SQLite, session files) runs on `Ds4Server`'s engine thread pool through
`run_engine`, never on the event loop, so the server answers requests while a rebuild runs.
`run_engine` is also the one place where the engine's typed errors become JSON-RPC errors
(`RequestError` -> InvalidParams -32602, `RequestFailedError` -> RequestFailed -32803). An
engine call that needs the client (the `ds4/summarize` summarizer of `ds4/compact`) sends its
request back through the loop with `request_client_from_thread` and blocks only its own worker
thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import traceback
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import (
    FeatureRequestError,
    JsonRpcException,
    JsonRpcInternalError,
    JsonRpcInvalidParams,
)
from pygls.lsp.server import LanguageServer

from ds4_core.config import flatten_settings
from ds4_core.engine import ContextEngine
from ds4_core.requests import DatabaseUnavailableError, RequestError, RequestFailedError
from ds4_core.wire import JsonObject, WireResult
from ds4_lsp.logs import apply_log_level_setting, client_attached
from ds4_lsp.params import InitializationOptions, settings_section
from ds4_lsp.rpc import SHUTDOWN_GRACE_S, Ds4Protocol
from ds4_lsp.services.diagnostics import StaleSnippet
from ds4_lsp.services.project_sync import ProjectSync
from ds4_lsp.transport import FrameReader

log = logging.getLogger("ds4_lsp")

T = TypeVar("T")
W = TypeVar("W", bound=WireResult)

ENGINE_THREADS = 4
"""Engine calls that may run at once (a rebuild does not block plans or retrievals)."""

COMPACTION_THREADS = 2
"""Threads for `ds4/compact` apart from ENGINE_THREADS: a compaction may wait up to
`compaction.summarizeTimeoutMs` for the client's `ds4/summarize`, and must not starve plans."""

MAX_MESSAGE_BYTES_SETTING = "server.maxMessageBytes"
"""The setting that replaces the frame limit of the command line once `initialize` (or a
later `workspace/didChangeConfiguration`) gives it (bytes; `transport.FrameReader`)."""

CLIENT_REQUEST_GRACE_S = 5.0
"""Extra time a worker thread waits for the event loop beyond a client request's own timeout
(s); only reached when the loop itself is stuck."""


class ClientRequestFailed(RuntimeError):
    """A request to the client got no answer because the server stopped waiting for it
    (shutdown). A timeout raises `TimeoutError`; an error answer raises `JsonRpcException`."""


class Ds4Server(LanguageServer):
    """The ds4 language server: one `ContextEngine` plus the LSP session around it.

    The engine is created in `initialize` (see `open_engine`); `engine` raises a JSON-RPC
    error before that. `options` holds the parsed `initializationOptions`; `project` schedules
    project syncs (`ds4_lsp.services.project_sync`); `stale_snippets` holds the stale-snippet
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
            apply_log_level_setting(self._engine.config.diagnostics.log_level)
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
        return [*messages, *health.notices]

    def apply_frame_limit(self, settings: Mapping[str, Any] | None) -> None:
        """Apply `server.maxMessageBytes` (bytes) to the frame reader when `settings` give it
        and the engine accepted it; otherwise the limit of the command line stays."""
        if not settings or self.frame_reader is None or self._engine is None:
            return
        given = flatten_settings(settings).get(MAX_MESSAGE_BYTES_SETTING)
        accepted = self._engine.config.server.max_message_bytes
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
            raise JsonRpcRequestFailed(
                message=request_error_message(label, exc), data=exc.data
            ) from None
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


def with_wire(result: W) -> tuple[W, JsonObject]:
    """`result` and its wire JSON (`to_wire()`, the answer sent): call it inside `run_engine`,
    so that the conversion of a large result (a plan's messages) runs off the event loop too."""
    return result, result.to_wire()
