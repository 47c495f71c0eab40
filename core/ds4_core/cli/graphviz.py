"""`ds4 summaries --format svg|png`: the DOT graph drawn by Graphviz's `dot` program.

`dot` is found on PATH and run with an argument list (never a shell), the DOT text on its
stdin, for at most `DOT_TIMEOUT_SECONDS`, in a process group of its own (so a timeout stops a
wrapper script's children too). Its output must be the format asked for; its warnings reach
ds4's stderr. Every failure is a `RequestError` naming the `format` option, so the CLI prints
it as a usage error and exits 2.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from typing import NamedTuple, TextIO

from ..quoting import terminal_text
from ..requests import RequestError
from .terminal import write_output

FORMATS: tuple[str, ...] = ("svg", "png")
DOT_TIMEOUT_SECONDS = 60.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
"""The first eight bytes of every PNG file (PNG specification, 5.2 "PNG signature")."""


class Drawing(NamedTuple):
    """What `dot` produced: the image bytes and its stderr lines (warnings, on success)."""

    image: bytes
    warnings: tuple[str, ...]


def require_output(image_format: str | None, path: str | None) -> None:
    """Refuse `--format png` without `--output` (binary is never printed); call it before any
    slow work.

    Raises:
        RequestError (field `output`): PNG without a path.
    """
    if image_format == "png" and path is None:
        raise RequestError(
            "output: --format png writes a binary image; give --output PATH", "output"
        )


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """Kill `process` and every process of its group (it leads one: `start_new_session`);
    where there are no process groups (Windows), the process alone."""
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is not None:
            killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except OSError:  # already gone
        pass
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.communicate(timeout=5.0)  # reap it; a child that left the group keeps a pipe


def _check_image(image: bytes, image_format: str) -> None:
    if image_format == "png":
        ok, expected = image.startswith(PNG_SIGNATURE), "a PNG (no PNG signature)"
    else:
        ok, expected = b"<svg" in image, "SVG (no <svg element)"
    if not ok:
        start = terminal_text(image[:40].decode("utf-8", errors="replace"))
        raise RequestError(
            f"--format {image_format}: `dot -T{image_format}` exited 0 but its output is not "
            f"{expected}; it began '{start}'. Is the `dot` on PATH Graphviz's?",
            "format",
        )


def render_with_graphviz(
    dot_text: str, image_format: str, *, timeout: float = DOT_TIMEOUT_SECONDS
) -> Drawing:
    """`dot_text` (a DOT graph) drawn as `image_format` (one of `FORMATS`) by `dot -T<format>`.

    Returns the image bytes (SVG is UTF-8 text), checked to be that format (the PNG
    signature, an `<svg` element), and dot's stderr lines. `timeout` is in seconds; when it
    is exceeded `dot` and its process group are killed.

    Raises:
        RequestError (field `format`): an unknown format, `dot` not on PATH (the message says
            to install Graphviz or use `--dot`), `dot` cannot be started, runs past `timeout`,
            exits non-zero (its first stderr line is quoted) or writes something else than
            the format asked for.
    """
    if image_format not in FORMATS:
        raise RequestError(
            f"--format: expected one of {', '.join(FORMATS)}, got {image_format!r}", "format"
        )
    program = shutil.which("dot")
    if program is None:
        raise RequestError(
            f"--format {image_format}: Graphviz's `dot` program is not on PATH; install "
            "Graphviz (e.g. `apt-get install graphviz`, `brew install graphviz`) or print DOT "
            "with --dot and draw it elsewhere",
            "format",
        )
    try:
        process = subprocess.Popen(  # a list argv, never a shell
            [program, f"-T{image_format}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, killed whole on a timeout
        )
    except OSError as exc:
        raise RequestError(
            f"--format {image_format}: cannot run '{program}': {exc.strerror or exc}", "format"
        ) from exc
    try:
        stdout, stderr = process.communicate(
            dot_text.encode("utf-8", errors="backslashreplace"), timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        _stop_group(process)
        raise RequestError(
            f"--format {image_format}: Graphviz's `dot` did not finish within {timeout:g} s; "
            "print DOT with --dot and draw it elsewhere",
            "format",
        ) from exc
    except BaseException:  # Ctrl-C, a broken pipe: leave nothing running
        _stop_group(process)
        raise
    lines = [line for line in stderr.decode("utf-8", errors="replace").splitlines() if line]
    if process.returncode != 0:
        detail = f": {lines[0]}" if lines else ""
        raise RequestError(
            f"--format {image_format}: `dot -T{image_format}` failed with exit code "
            f"{process.returncode}{detail}",
            "format",
        )
    _check_image(stdout, image_format)
    return Drawing(stdout, tuple(lines))


def draw(dot_text: str, image_format: str, path: str | None, out: TextIO, err: TextIO) -> None:
    """`ds4 summaries --format`: `dot_text` drawn (`render_with_graphviz`) and written to
    `path` or, without one, printed (SVG; call `require_output` first). Each of dot's warnings
    goes to `err` as `ds4: dot: <line>` (without dot's own `dot: `); when dot scaled a PNG down to fit its size limit, a
    note says to use `--format svg`.

    Raises:
        RequestError: from `render_with_graphviz`, or the file cannot be written (`output`).
    """
    drawing = render_with_graphviz(dot_text, image_format)
    for line in drawing.warnings:  # Graphviz starts some with "dot: " itself
        err.write(f"ds4: dot: {terminal_text(line.removeprefix('dot: '))}\n")
    if image_format == "png" and any("scaling" in line.lower() for line in drawing.warnings):
        err.write("ds4: dot scaled the PNG down to fit; --format svg draws it full size\n")
    write_output(drawing.image, path, out, err, f"the {image_format.upper()} graph")


__all__ = [
    "DOT_TIMEOUT_SECONDS",
    "FORMATS",
    "PNG_SIGNATURE",
    "Drawing",
    "draw",
    "render_with_graphviz",
    "require_output",
]
