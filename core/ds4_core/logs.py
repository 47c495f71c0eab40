"""Privacy-safe logging of failures.

Our logs carry counts, ids and timings only (docs/architecture.md "Privacy of what we keep"). An
exception's message can quote request text, message text or evidence (a `KeyError` of a
user-supplied key, a `ValueError` echoing input), so failures are logged by type and code
location, never by message; an `OSError` met while reading a user's files is named by its
errno code (`errno_name`), never by its message (which quotes the path).
"""

from __future__ import annotations

import errno
import logging
import traceback


def errno_name(error: OSError) -> str:
    """The symbolic errno code of `error` (`ENOENT`, `EACCES`, ...), for warnings and skip reasons.

    The number itself (as text) when the platform has no name for it; the exception's type name
    (`FileNotFoundError`, ...) when it carries no errno at all. Never the message or the path.
    """
    if error.errno is None:
        return type(error).__name__
    return errno.errorcode.get(error.errno, str(error.errno))


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
