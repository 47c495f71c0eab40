"""What `ds4` writes and where: the report width, the progress bar on stderr, JSON text, output
to a file (`--output`), and streams that escape what their encoding cannot show."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
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


def check_output_path(path: str | None, session: str | None, database: str | None) -> None:
    """Refuse an `--output` `path` that would overwrite what ds4 reads: the `session` file
    itself or the `database` (the same file by `os.path.samefile`, so through a link too), or
    any path ending in `.jsonl` (a Pi session file's suffix; ds4 never writes one). No `path`
    passes.

    Raises:
        RequestError (field `output`): the path is refused; the message says why.
    """
    if path is None:
        return
    target = Path(path).expanduser()
    for kept, what in ((session, "the session file --session reads"), (database, "ds4's database")):
        if kept is None:
            continue
        with contextlib.suppress(OSError):  # a missing file is not the same file
            if os.path.samefile(target, Path(kept).expanduser()):
                raise RequestError(
                    f"output: '{path}' is {what}; ds4 never overwrites it, choose another path",
                    "output",
                )
    if target.suffix.lower() == ".jsonl":
        raise RequestError(
            f"output: '{path}' ends in .jsonl like a Pi session file, which ds4 never writes; "
            "choose another path (e.g. graph.svg)",
            "output",
        )


def _replace_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` whole or not at all: into a new file beside it, then
    `os.replace` (so a failure leaves no partial file and an existing file untouched; the new
    file keeps an existing file's permission bits, else the umask's). A link is followed (its
    target is replaced). A `path` that exists and is not a regular file (a device such as
    `/dev/stdout`, a FIFO) is written in place. Raises OSError."""
    target = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = target.stat()
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        with open(target, "wb") as handle:  # a directory fails here: IsADirectoryError
            handle.write(data)
        return
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    descriptor = os.open(temporary, flags, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        if info is not None:
            os.chmod(temporary, stat.S_IMODE(info.st_mode))
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_output(data: str | bytes, path: str | None, out: TextIO, err: TextIO, what: str) -> None:
    """`data` to `path` (`--output`; text as UTF-8) or, without one, to `out` (bytes decoded
    as UTF-8); a note naming `what` (e.g. "the DOT graph") on `err` when a file was written.
    The file is written whole or not at all (`_replace_file`); call `check_output_path` first.

    Raises:
        RequestError: the file cannot be written (field `output`).
    """
    if path is None:
        out.write(data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data)
        return
    if isinstance(data, str):
        data = data.encode("utf-8", errors="backslashreplace")
    try:
        _replace_file(Path(path).expanduser(), data)
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
