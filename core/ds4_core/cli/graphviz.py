"""`ds4 summaries --format svg|png`: the DOT graph drawn by Graphviz's `dot` program.

`dot` is found on PATH and run with an argument list (never a shell), the DOT text on its
stdin, for at most `DOT_TIMEOUT_SECONDS`. Every failure is a `RequestError` naming the
`format` option, so the CLI prints it as a usage error and exits 2.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..requests import RequestError

FORMATS: tuple[str, ...] = ("svg", "png")
DOT_TIMEOUT_SECONDS = 60.0


def render_with_graphviz(
    dot_text: str, image_format: str, *, timeout: float = DOT_TIMEOUT_SECONDS
) -> bytes:
    """`dot_text` (a DOT graph) drawn as `image_format` (one of `FORMATS`) by `dot -T<format>`.

    Returns the image bytes (SVG is UTF-8 text). `timeout` is in seconds; `dot` is killed
    when it is exceeded.

    Raises:
        RequestError (field `format`): an unknown format, `dot` not on PATH (the message says
            to install Graphviz or use `--dot`), `dot` cannot be started, runs past `timeout`
            or exits non-zero (its first stderr line is quoted).
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
        finished = subprocess.run(  # a list argv, never a shell
            [program, f"-T{image_format}"],
            input=dot_text.encode("utf-8", errors="backslashreplace"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise RequestError(
            f"--format {image_format}: Graphviz's `dot` did not finish within {timeout:g} s; "
            "print DOT with --dot and draw it elsewhere",
            "format",
        ) from exc
    except OSError as exc:
        raise RequestError(
            f"--format {image_format}: cannot run '{program}': {exc.strerror or exc}", "format"
        ) from exc
    if finished.returncode != 0:
        lines = finished.stderr.decode("utf-8", errors="replace").strip().splitlines()
        detail = f": {lines[0]}" if lines else ""
        raise RequestError(
            f"--format {image_format}: `dot -T{image_format}` failed with exit code "
            f"{finished.returncode}{detail}",
            "format",
        )
    return finished.stdout


def write_image(image: bytes, image_format: str, path: str | None) -> str | None:
    """`image` written to `path` (`--output`); returns the SVG text to print instead when
    there is no `path`.

    Raises:
        RequestError: PNG without `--output` (field `output`: binary is not printed), or the
            file cannot be written (field `output`).
    """
    if path is None:
        if image_format == "svg":
            return image.decode("utf-8", errors="replace")
        raise RequestError(
            f"--output: --format {image_format} writes a binary image; give --output PATH",
            "output",
        )
    try:
        Path(path).expanduser().write_bytes(image)
    except OSError as exc:
        raise RequestError(
            f"output: cannot write '{path}': {exc.strerror or exc}; choose a writable path",
            "output",
        ) from exc
    return None


__all__ = ["DOT_TIMEOUT_SECONDS", "FORMATS", "render_with_graphviz", "write_image"]
