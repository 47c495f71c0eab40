"""Privacy-safe logging of failures.

Our logs carry counts, ids and timings only (docs/architecture.md "Privacy of what we keep"). An
exception's message can quote request text, message text or evidence (a `KeyError` of a
user-supplied key, a `ValueError` echoing input), so failures are logged by type and code
location, never by message.
"""

from __future__ import annotations

import logging
import traceback


def describe_failure(exc: BaseException) -> str:
    """`ExcType at module.py:123 (function)` for the innermost frame; no exception message."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return type(exc).__name__
    last = frames[-1]
    filename = last.filename.replace("\\", "/").rsplit("/", 1)[-1]
    return f"{type(exc).__name__} at {filename}:{last.lineno} ({last.name})"


def log_failure(log: logging.Logger, what: str, exc: BaseException) -> None:
    """Log `what` at WARNING with `describe_failure(exc)`; the traceback's code locations (never
    its messages or local values) are added at DEBUG."""
    log.warning("%s: %s", what, describe_failure(exc))
    if log.isEnabledFor(logging.DEBUG):
        frames = traceback.extract_tb(exc.__traceback__)
        locations = " <- ".join(
            f"{f.filename.replace(chr(92), '/').rsplit('/', 1)[-1]}:{f.lineno}"
            for f in reversed(frames)
        )
        log.debug("%s: call path %s", what, locations)
