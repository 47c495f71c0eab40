"""The four privacy levels, ordered `normal < internal < sensitive < local-only`
(docs/reference.md §3.8).

A level is written in lower case on the wire, in settings and in markers (`[ds4:local-only]`);
markers are matched case-insensitively (`markers.py`), so `parse_level` folds case.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Level = Literal["normal", "internal", "sensitive", "local-only"]

LEVELS: tuple[Level, ...] = ("normal", "internal", "sensitive", "local-only")
"""Every level, lowest first."""

RANK: dict[str, int] = {level: rank for rank, level in enumerate(LEVELS)}
"""Level -> its rank (0 for `normal`, 3 for `local-only`)."""


def parse_level(text: str) -> Level | None:
    """The level named by `text` (any case, surrounding spaces ignored), or None.

    >>> parse_level("Local-Only")
    'local-only'
    """
    folded = text.strip().lower()
    return LEVELS[RANK[folded]] if folded in RANK else None


def highest(levels: Iterable[str], floor: str = "normal") -> Level:
    """The highest of `levels` and `floor` (levels outside `LEVELS` are ignored)."""
    best = RANK.get(floor, 0)
    for level in levels:
        best = max(best, RANK.get(level, 0))
    return LEVELS[best]


def raise_to(level: str, floor: str) -> Level:
    """`level` raised to at least `floor`: a classification only ever goes up."""
    return highest((level, floor))
