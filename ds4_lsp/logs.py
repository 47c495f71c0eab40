"""Logging for the server process: stderr only, and nothing of what users send.

Privacy rule (DESIGN.md): logs carry counts, ids and timings only, never request terms,
message text, evidence or source text. Our own log calls follow it. pygls does not: it logs
every message body at INFO and, on errors, the params of the failed message and tracebacks
whose text may quote them. So the `pygls` logger is held at WARNING or above, and
`RedactPyglsFilter` strips the arguments and exception text of whatever pygls still logs.
"""

from __future__ import annotations

import logging
import sys

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


def configure_logging(level: str = "info") -> None:
    """Send all logging to stderr at `level` (one of `LEVELS`); pygls stays at WARNING+.

    stdout is the LSP transport and must never receive a log line.
    """
    numeric = getattr(logging, level.upper())
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(numeric)
    handler.addFilter(RedactPyglsFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    logging.getLogger("pygls").setLevel(max(numeric, logging.WARNING))


SETTING_LEVELS = {
    "error": logging.ERROR,
    "warn": logging.WARNING,
    "info": logging.INFO,
    "debug": logging.DEBUG,
    "trace": logging.DEBUG,
}
"""`diagnostics.logLevel` values (ds4-reference.md 2) to Python levels; `trace` is DEBUG."""


def apply_log_level_setting(level: str) -> None:
    """Set the stderr log level from the `diagnostics.logLevel` setting.

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
