"""Small SQL-building helpers shared by the store and the search code.

* LIKE patterns: `escape_like` / `like_literal` make a user-supplied term match itself
  literally under `LIKE ? ESCAPE '\\'` (`LIKE_ESCAPE`), whatever `%`, `_` or `\\` it holds.
* Parameter lists: `chunked` cuts a list of values into groups of at most `MAX_IN_VALUES`, and
  `placeholders` writes the `?, ?, ...` of one group, for `IN (...)` lookups that stay well
  under SQLite's bound-variable limit (`SQLITE_MAX_VARIABLE_NUMBER`: 999 before SQLite 3.32,
  32766 since).

Every value still reaches SQLite as a bound parameter; these helpers only write `?` marks and
escape characters, never user text into SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import TypeVar

T = TypeVar("T")

LIKE_ESCAPE = "ESCAPE '\\'"
"""The ESCAPE clause that goes with `escape_like`: `... LIKE ? ESCAPE '\\'`."""

MAX_IN_VALUES = 500
"""Most values bound in one `IN (...)` list: with a few other parameters of the statement it
stays under 999, the smallest bound-variable limit SQLite has ever had."""


def escape_like(text: str) -> str:
    """`text` with `\\`, `%` and `_` escaped by a backslash, for `LIKE ? ESCAPE '\\'`.

    The result, used as a whole LIKE pattern, matches exactly the strings equal to `text` up to
    SQLite's LIKE case rule (ASCII letters compare case-insensitively, every other character
    exactly). `text` must not hold NUL: SQLite reads a LIKE pattern only up to its first NUL
    (use `like_literal` for terms that may hold one).
    """
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_literal(term: str) -> str | None:
    """The escaped longest NUL-free piece of `term` (`escape_like`), or None if there is none.

    SQLite reads LIKE patterns only up to the first NUL, so a term holding NULs is represented
    by its longest NUL-free piece (the first of equal length); wrapped in `%...%` the pattern
    then selects a superset of the texts containing the whole term, and the caller re-checks
    each. (SQLite also reads the text being matched only up to its first NUL, so a text holding
    a NUL before the term is not selected.) None for an empty or all-NUL term.
    """
    piece = max(term.split("\x00"), key=len)
    return escape_like(piece) if piece else None


def chunked(values: Iterable[T], size: int = MAX_IN_VALUES) -> Iterator[list[T]]:
    """`values` in order, in lists of `size` (the last one shorter); nothing for no values.

    Raises:
        ValueError: if `size < 1`.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    iterator = iter(values)
    while chunk := list(islice(iterator, size)):
        yield chunk


def placeholders(count: int) -> str:
    """`count` bound-parameter marks separated by commas: `placeholders(3) == "?, ?, ?"`."""
    return ", ".join("?" * count)


__all__ = [
    "LIKE_ESCAPE",
    "MAX_IN_VALUES",
    "chunked",
    "escape_like",
    "like_literal",
    "placeholders",
]
