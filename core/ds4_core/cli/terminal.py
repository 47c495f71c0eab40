"""What `ds4` writes and where: the report width, the progress bar on stderr, JSON text, output
to a file (`--output`), and streams that escape what their encoding cannot show."""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..requests import RequestError

_clock_s = time.monotonic
"""Seconds on a monotonic clock (a module attribute so tests can stand in for slow work)."""


class Progress:
    """A one-line progress bar on stderr, shown only when work lasts over 0.3 s on a terminal.

    Call it as the engine's progress callback `(done, total, message)`; `close()` erases it.
    """

    def __init__(self, stream: TextIO = sys.stderr, delay_s: float = 0.3) -> None:
        self.stream = stream
        self.delay_s = delay_s
        self.started = _clock_s()
        self.width = 0
        try:
            self.enabled = stream.isatty()
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            self.enabled = False

    def __call__(self, done: int, total: int, message: str) -> None:
        if not self.enabled or _clock_s() - self.started < self.delay_s:
            return
        size = 30
        fraction = max(0.0, min(1.0, done / total)) if total else 0.0
        filled = int(size * fraction)
        line = f"[{'#' * filled}{'-' * (size - filled)}] {fraction * 100:5.1f}%  {message[:40]}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = max(self.width, len(line))

    @property
    def shown(self) -> bool:
        """Whether the bar was drawn (and `close` must erase it)."""
        return self.width > 0

    def close(self) -> None:
        """Erase the bar, leaving the cursor at the start of an empty line."""
        if self.shown:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


REPORT_WIDTH = 100
"""Width (characters) of the text reports when stdout is not a terminal and `COLUMNS` is unset
(see `report_width`)."""

MIN_REPORT_WIDTH = 40
"""The narrowest width (characters) a report is laid out for, however narrow the terminal."""


def report_width() -> int:
    """Width (characters) the text reports wrap reasons at and fit excerpts into: `COLUMNS`
    when set, else the width of the terminal on stdout, else `REPORT_WIDTH`
    (`shutil.get_terminal_size`); never below `MIN_REPORT_WIDTH`."""
    return max(MIN_REPORT_WIDTH, shutil.get_terminal_size((REPORT_WIDTH, 24)).columns)


def json_text(value: Any, *, one_line: bool = False) -> str:
    """`value` as the JSON text the CLI prints: indented (or `one_line`, compact), ending in a
    newline, and pure ASCII. Every non-ASCII character is a `\\uXXXX` escape (RFC 8259
    section 7), so the text is valid whatever the output encoding (a C locale, a pipe, a
    Windows console), and a lone UTF-16 surrogate that older Pi versions wrote for a cut emoji
    (`"\\ud83c"` in the session file) comes back out as that same escape instead of failing
    to encode halfway through the output.
    """
    if one_line:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n"
    return json.dumps(value, ensure_ascii=True, indent=2) + "\n"


def emit_json(value: Any, out: TextIO) -> None:
    """Write `value` as JSON (`json_text`) in one piece: the whole text is built before the
    first character is written, so an error never leaves half a JSON document on stdout."""
    out.write(json_text(value))


def write_output(text: str, path: str | None, out: TextIO, err: TextIO, what: str) -> None:
    """`text` to `path` (`--output`, UTF-8) or, without one, to `out`; a note naming `what`
    (e.g. "the DOT graph") on `err` when a file was written.

    Raises:
        RequestError: the file cannot be written (field `output`).
    """
    if path is None:
        out.write(text)
        return
    try:
        Path(path).expanduser().write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise RequestError(
            f"output: cannot write '{path}': {exc.strerror or exc}; choose a writable path",
            "output",
        ) from exc
    err.write(f"ds4: wrote {what} to '{path}'\n")


def replace_unencodable(*streams: TextIO) -> None:
    """Make `streams` write a character their encoding lacks (a lone surrogate from a session
    file, `·` under an ASCII locale) as a backslash escape instead of raising
    UnicodeEncodeError in the middle of a report. JSON output never needs it (`json_text`
    is ASCII)."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # e.g. a closed stream
                reconfigure(errors="backslashreplace")
