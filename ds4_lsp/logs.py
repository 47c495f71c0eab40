"""Logging for the server process, and nothing of what users send.

Where lines go. Before `initialize`, every record goes to stderr. From `initialize` on
(`send_to_client`), records below WARNING (INFO, DEBUG) go to the client as
`window/logMessage` (INFO as type Info, DEBUG as Log; LSP 3.17 allows the notification while
`initialize` is being handled), and stderr keeps WARNING and above. Clients treat a server's
stderr as errors: Neovim writes each stderr line to lsp.log as `[ERROR]`, so an INFO line
there would read as a failure. A record that cannot reach the client (the event loop has
stopped, sending failed, or it was logged while another record was being sent) goes to stderr.
Records logged on worker threads (engine calls) are sent from the event loop
(`loop.call_soon_threadsafe`), never from the thread itself.

Privacy rule (docs/architecture.md "Privacy of what we keep"): logs carry counts, ids and
timings only, never request terms, message text, evidence or source text. Our own log calls
follow it. pygls does not: it logs every message body at INFO and, on errors, the params of
the failed message and tracebacks whose text may quote them. So the `pygls` logger is held at
WARNING or above, and `RedactPyglsFilter` strips the arguments and exception text of whatever
pygls still logs (on both destinations).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable

from lsprotocol import types

LEVELS = ("critical", "error", "warning", "info", "debug")

_SAFE_ARG_TYPES = (int, float, bool, type(None))
"""pygls log arguments that can only be counts, ids or codes, and are kept."""


class RedactPyglsFilter(logging.Filter):
    """Rewrite records from `pygls.*` loggers to their message template.

    Numeric arguments (message ids, counts) are kept, every other argument becomes
    `<redacted>`, and an attached exception is reduced to its type name.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "pygls" and not record.name.startswith("pygls."):
            return True
        message = str(record.msg)
        if record.args:
            args = record.args if isinstance(record.args, tuple) else (record.args,)
            safe = tuple(a if isinstance(a, _SAFE_ARG_TYPES) else "<redacted>" for a in args)
            try:
                message = message % safe
            except (TypeError, ValueError, KeyError):
                message = f"{message} <arguments redacted>"
        if record.exc_info and record.exc_info[0] is not None:
            message = f"{message} [{record.exc_info[0].__name__}]"
        record.msg, record.args = message, None
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


CLIENT_ERROR_CODES = frozenset({-32700, -32600, -32601, -32602, -32800})
"""JSON-RPC codes of the client's mistakes (ParseError, InvalidRequest, MethodNotFound,
InvalidParams) and of RequestCancelled: answered to the client, never a server error."""


class ClientErrorLevelFilter(logging.Filter):
    """Lower pygls's ERROR records about a client's mistake to WARNING.

    pygls logs every JSON-RPC error a handler raises with `logger.exception` (ERROR), so each
    InvalidParams answer also put `ERROR pygls.protocol.json_rpc: Exception occurred ...` on
    stderr, which Neovim shows as an error. Installed on pygls's `json_rpc` logger, before
    handlers check their levels; records whose exception has a code in `CLIENT_ERROR_CODES`
    become WARNING records (they are still redacted by `RedactPyglsFilter`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        code = getattr(error, "code", None)
        if record.levelno > logging.WARNING and code in CLIENT_ERROR_CODES:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            # pygls's logger sits at WARNING or above: the record stays within its level.
        return True


PYGLS_JSON_RPC_LOGGER = "pygls.protocol.json_rpc"
"""The pygls logger that reports exceptions raised by handlers."""


CLIENT_BELOW = logging.WARNING
"""Records below this level go to the client once it is connected; the others to stderr."""

SendLogMessage = Callable[[types.LogMessageParams], None]
"""Sends one `window/logMessage` (e.g. pygls's `LanguageServer.window_log_message`); called on
the event loop only."""


class ClientLogHandler(logging.Handler):
    """Sends records below `CLIENT_BELOW` to the client as `window/logMessage`, once `attach`ed.

    `takes(record)` says whether a record is this handler's; the stderr handler passes exactly
    the others (`configure_logging` wires both). `fallback` writes what cannot be sent.
    """

    def __init__(self, fallback: logging.Handler) -> None:
        super().__init__()
        self.fallback = fallback
        self._send: SendLogMessage | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._sending = threading.local()
        self.addFilter(self.takes)

    def attach(self, send: SendLogMessage, loop: asyncio.AbstractEventLoop) -> None:
        """From now on send INFO/DEBUG records with `send`, on `loop`; call on `loop`'s thread."""
        self._loop, self._loop_thread = loop, threading.get_ident()
        self._send = send

    def detach(self) -> None:
        """Back to stderr for every record (e.g. the connection is gone)."""
        self._send = None

    def takes(self, record: logging.LogRecord) -> bool:
        """Whether `record` goes to the client: below WARNING, a client attached, and not
        logged while this thread is sending another record (which would recurse)."""
        return (
            record.levelno < CLIENT_BELOW
            and self._send is not None
            and not getattr(self._sending, "active", False)
        )

    def emit(self, record: logging.LogRecord) -> None:
        try:
            params = types.LogMessageParams(
                type=types.MessageType.Info
                if record.levelno >= logging.INFO
                else types.MessageType.Log,
                message=self.format(record),
            )
        except Exception:  # noqa: BLE001 - a bad record must not break the caller
            self.handleError(record)
            return
        loop = self._loop
        if threading.get_ident() == self._loop_thread:
            self._deliver(params, record)
        elif loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._deliver, params, record)
            except RuntimeError:  # the loop closed meanwhile
                self.fallback.emit(record)
        else:
            self.fallback.emit(record)

    def _deliver(self, params: types.LogMessageParams, record: logging.LogRecord) -> None:
        """Send `params` (on the event loop); on failure write `record` to stderr instead."""
        send = self._send
        if send is None:
            self.fallback.emit(record)
            return
        self._sending.active = True
        try:
            send(params)
        except Exception:  # noqa: BLE001 - e.g. the transport is closed: keep the line
            self.fallback.emit(record)
        finally:
            self._sending.active = False


_client_handler: ClientLogHandler | None = None
"""The handler `configure_logging` installed (None before, or in a process that never
configured server logging, e.g. the tests' own)."""


def configure_logging(level: str = "info") -> None:
    """Log at `level` (one of `LEVELS`): everything to stderr until `send_to_client`, then
    INFO/DEBUG to the client and WARNING+ to stderr (module docstring). pygls stays at
    WARNING+.

    stdout is the LSP transport and must never receive a log line.
    """
    global _client_handler
    numeric = getattr(logging, level.upper())
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    client = ClientLogHandler(fallback=stderr)
    client.setFormatter(logging.Formatter("%(message)s"))  # the client stamps time and level
    stderr.addFilter(lambda record: not client.takes(record))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    for handler in (stderr, client):
        handler.setLevel(numeric)
        handler.addFilter(RedactPyglsFilter())
        root.addHandler(handler)
    root.setLevel(numeric)
    logging.getLogger("pygls").setLevel(max(numeric, logging.WARNING))
    json_rpc = logging.getLogger(PYGLS_JSON_RPC_LOGGER)
    if not any(isinstance(f, ClientErrorLevelFilter) for f in json_rpc.filters):
        json_rpc.addFilter(ClientErrorLevelFilter())
    _client_handler = client


def send_to_client(send: SendLogMessage) -> None:
    """Send INFO and DEBUG records to the client with `send` from now on (call on the event
    loop, when `initialize` arrives). Does nothing unless `configure_logging` ran."""
    if _client_handler is not None:
        _client_handler.attach(send, asyncio.get_running_loop())


def client_attached() -> bool:
    """Whether INFO/DEBUG records currently go to the client (`send_to_client` was called and
    the connection has not been detached)."""
    return _client_handler is not None and _client_handler.takes(
        logging.LogRecord("ds4", logging.INFO, "", 0, "", None, None)
    )


SETTING_LEVELS = {
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}
"""`diagnostics.logLevel` values (docs/reference.md §2) to Python levels; `trace` is DEBUG."""


def apply_log_level_setting(level: str) -> None:
    """Set the log level (stderr and client) from the `diagnostics.logLevel` setting.

    Changes the root logger and its handlers; pygls stays at WARNING or above whatever the
    level, because it would log whole message bodies (session text) at INFO.
    """
    numeric = SETTING_LEVELS.get(level)
    if numeric is None:
        return
    root = logging.getLogger()
    root.setLevel(numeric)
    for handler in root.handlers:
        handler.setLevel(numeric)
    logging.getLogger("pygls").setLevel(max(numeric, logging.WARNING))
