"""Text layout of the `ds4` reports: numbers, wrapped lines, headings and tables that fit
`report_width()` (long lines wrap; table columns that do not fit move under their row as
`header: value`)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any, TextIO

from ..quoting import terminal_text
from .terminal import report_width


def fmt(n: int | float | None) -> str:
    """A count as `12,345`, a float as `1,234.500`, None as `-`."""
    if n is None:
        return "-"
    return f"{n:,}" if isinstance(n, int) else f"{n:,.3f}"


def yes_no(value: Any) -> str:
    """`yes` for a true value, else `no`."""
    return "yes" if value else "no"


def wrap(text: str, first: str, rest: str) -> str:
    """`text` on lines of at most `report_width()` characters, the first starting with `first`
    and the others with `rest` (whitespace runs collapsed; long words are never split)."""
    return textwrap.fill(
        " ".join(text.split()),
        width=max(report_width(), len(first) + 20, len(rest) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def write_wrapped(out: TextIO, text: str, first: str, rest: str) -> None:
    """Write `text` as `wrap` lays it out (at `report_width()`), ending with a line break."""
    out.write(wrap(text, first, rest) + "\n")


def heading(out: TextIO, text: str) -> None:
    """A section heading of a report: an empty line, then `text` wrapped at `report_width()`."""
    out.write("\n")
    write_wrapped(out, text, "", "  ")


def table(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    out: TextIO,
    reasons: Sequence[str | None] | None = None,
) -> None:
    """An aligned table that fits `report_width()`: when the rows are wider, their last
    columns move, one `header: value` line each (wrapped), under the row, until the columns
    left fit (the first column always stays). `reasons[i]`, when given, is printed in full
    under row i as `why: ...`. Lines under a row are indented to the second column (4 spaces
    when that leaves under 20 characters), and wrapped at `report_width()`."""
    width = report_width()
    cells = [[terminal_text(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    inline = len(headers)
    while inline > 1 and 2 + sum(w + 2 for w in widths[:inline]) - 2 > width:
        inline -= 1
    out.write(
        "  "
        + "  ".join(h.ljust(w) for h, w in zip(headers[:inline], widths, strict=False)).rstrip()
        + "\n"
    )
    for index, row in enumerate(cells):
        out.write(
            "  "
            + "  ".join(c.ljust(w) for c, w in zip(row[:inline], widths, strict=False)).rstrip()
            + "\n"
        )
        for header, cell in zip(headers[inline:], row[inline:], strict=False):
            if cell:
                label = f"{header}: "
                indent = _under_indent(widths[0], label)
                out.write(wrap(cell, indent + label, indent + " " * len(label)) + "\n")
        reason = reasons[index] if reasons is not None and index < len(reasons) else None
        if reason:
            indent = _under_indent(widths[0], "why: ")
            out.write(wrap(terminal_text(reason), indent + "why: ", indent + "     ") + "\n")


def _under_indent(first_width: int, label: str) -> str:
    """Indent of a `label` line under a `table` row: to the second column, or 4 spaces when
    that would leave under 20 characters of `report_width()` for the text."""
    indent = 2 + first_width + 2
    return " " * (indent if indent + len(label) + 20 <= report_width() else 4)


def one_line(text: str, limit: int) -> str:
    """`text` with whitespace runs collapsed, cut to `limit` characters (ending in `…`)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def room_left(*columns: Sequence[str]) -> int:
    """Characters left in a `report_width()` table row for a last column after `columns`
    (each the header and cells of one column). When under 30 are left, `table` moves the
    last column under the row as `excerpt: ...`: then the room there (at least 20)."""
    width = report_width()
    taken = 2 + sum(max((len(c) for c in column), default=0) + 2 for column in columns)
    if width - taken >= 30:
        return width - taken
    first_width = max((len(c) for c in columns[0]), default=0) if columns else 0
    label = "excerpt: "  # the last column of the tables that ask
    return max(20, width - len(_under_indent(first_width, label)) - len(label))


def write_warnings(out: TextIO, warnings: Sequence[str]) -> None:
    """Each of `warnings` as a wrapped `warning: ...` line (the end of a report)."""
    for warning in warnings:
        write_wrapped(out, terminal_text(warning), "warning: ", " " * 9)
