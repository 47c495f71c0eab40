"""Inline classification markers: `[ds4:LEVEL]...[/ds4:LEVEL]` (docs/reference.md §3.8).

Rules (the DS4 reference's, made precise here):

- A marker is `[ds4:LEVEL]` (open) or `[/ds4:LEVEL]` (close), LEVEL one of the four levels,
  matched case-insensitively (`[DS4:Local-Only]`). A backslash right before the `[` escapes it:
  `\\[ds4:internal]` is plain text and stays as written.
- A close ends the nearest open of the same level ("same level closes"; like a non-greedy match
  with a backreference). Text inside a block has the highest level of the blocks around it and
  of the default classification: a marker only ever raises, never lowers.
- A leading open (nothing but white space before it) that is never closed classifies the rest
  of the string (a prefix marker).
- Anything else is a broken structure: a close without its open, an open that is not leading
  and never closed, blocks that cross (`[a]..[b]..[/a]..[/b]`), or a block split across two
  strings of one message. It raises the whole message to the highest level the broken markers
  name (the "structure floor", `Parsed.floor`), so a half-marked secret is never sent.

`parse` splits one string into classified segments; `render` writes a string for a destination
that may see `allowed` levels: allowed segments without their markers, every run of disallowed
segments as one `[DS4 <level> content excluded by privacy policy]` placeholder.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import NamedTuple

from .levels import LEVELS, RANK, Level, highest

_MARKER = re.compile(
    r"\[(/?)ds4:(normal|internal|sensitive|local-only)\]", re.IGNORECASE | re.ASCII
)
"""A marker: ASCII letters only, in any case (`re.ASCII`: no Unicode case folding, so a
dotless `ı` or a long `ſ` never makes a marker whose level would not parse)."""


def placeholder(level: str) -> str:
    """The text that stands for withheld content of `level` (docs/reference.md §3.8)."""
    return f"[DS4 {level} content excluded by privacy policy]"


class Segment(NamedTuple):
    """A run of `text` (markers removed) whose classification is `level`; `start` is its
    offset in the parsed string."""

    text: str
    level: Level
    start: int = 0


class Parsed(NamedTuple):
    """One string split by its markers.

    `segments` hold the text in order, without markers (escaped markers stay as written);
    `floor` is the structure floor the string imposes on its whole message (`normal` when its
    markers are well formed); `marked` is True when the string holds at least one marker.
    """

    segments: tuple[Segment, ...]
    floor: Level
    marked: bool

    @property
    def level(self) -> Level:
        """The highest level of any segment and of the floor."""
        return highest((segment.level for segment in self.segments), self.floor)


def has_marker(text: str) -> bool:
    """Whether `text` holds a marker (escaped ones included); a fast check before `parse`."""
    return _MARKER.search(text) is not None


def parse(text: str, default: Level = "normal") -> Parsed:
    """Split `text` into segments classified by its markers; unmarked text is `default`.

    Never raises on any string (lone surrogates, NUL, unbalanced markers included); linear in
    the length of `text`.
    """
    if not has_marker(text):
        return Parsed((Segment(text, default),) if text else (), "normal", False)
    base = RANK[default]
    segments: list[Segment] = []
    stack: list[int] = []  # ranks of the open blocks, outermost first
    highest_open: list[int] = []  # highest_open[d]: the highest rank of stack[: d + 1]
    depths: list[list[int]] = [[] for _ in LEVELS]  # rank -> depths of its open blocks
    floor = 0
    marked = False
    position = 0
    prefix_open = False  # stack[0] is a leading open not closed (yet)
    for match in _MARKER.finditer(text):
        start = match.start()
        if start > 0 and text[start - 1] == "\\":
            continue  # escaped: plain text
        marked = True
        here = LEVELS[max(base, highest_open[-1])] if stack else default
        if start > position:
            segments.append(Segment(text[position:start], here, position))
        rank = RANK[match.group(2).lower()]
        if not match.group(1):  # an open
            if not stack and not segments and (start == 0 or not text[:start].strip()):
                prefix_open = True
            depths[rank].append(len(stack))
            highest_open.append(max(rank, highest_open[-1]) if stack else rank)
            stack.append(rank)
        elif depths[rank]:
            depth = depths[rank][-1]
            if depth != len(stack) - 1:  # crossing blocks: the inner ones never closed
                floor = max(floor, *stack[depth:])
            if depth == 0:
                prefix_open = False  # the leading open was a closed block after all
            for closed in reversed(stack[depth:]):  # each block is closed once: linear
                depths[closed].pop()
            del stack[depth:], highest_open[depth:]
        else:
            floor = max(floor, rank)  # a close without its open
        position = match.end()
    if position < len(text):
        here = LEVELS[max(base, highest_open[-1])] if stack else default
        segments.append(Segment(text[position:], here, position))
    unclosed = stack[1:] if prefix_open else stack  # opens never closed
    floor = max(floor, *unclosed) if unclosed else floor
    return Parsed(tuple(segments), LEVELS[floor], marked)


class Rendered(NamedTuple):
    """A string written for one destination.

    `text` is what may be sent; `withheld` counts placeholders by level; `level` is the
    string's classification (with the floor); `changed` is True when `text` differs from the
    input.
    """

    text: str
    withheld: Mapping[str, int]
    level: Level
    changed: bool


def render(
    text: str,
    allowed: Collection[str],
    *,
    default: Level = "normal",
    floor: Level = "normal",
    parsed: Parsed | None = None,
) -> Rendered:
    """`text` for a destination that may see the levels in `allowed`.

    Every segment is raised to at least `floor` (the message's structure floor, see
    `message_floor`). Allowed segments are kept without their markers; each run of adjacent
    disallowed segments becomes one `placeholder` of the run's highest level. `parsed` may pass
    `parse(text, default)` when the caller already has it.
    """
    parsed = parsed if parsed is not None else parse(text, default)
    if not parsed.marked and RANK[floor] <= RANK[default]:
        level = default
        if level in allowed:
            return Rendered(text, {}, level, False)
        return (
            Rendered(placeholder(level), {level: 1}, level, True)
            if text
            else Rendered(text, {}, level, False)
        )
    pieces: list[str] = []
    withheld: dict[str, int] = {}
    run: str | None = None  # highest level of the current run of disallowed segments
    for segment in parsed.segments:
        level = highest((segment.level,), floor)
        if level in allowed:
            if run is not None:
                pieces.append(placeholder(run))
                withheld[run] = withheld.get(run, 0) + 1
                run = None
            pieces.append(segment.text)
        else:
            run = level if run is None else highest((run, level))
    if run is not None:
        pieces.append(placeholder(run))
        withheld[run] = withheld.get(run, 0) + 1
    out = "".join(pieces)
    return Rendered(out, withheld, highest((parsed.level,), floor), out != text)


def wrap_classified(text: str, level: str) -> str:
    """`text` inside one outer `[ds4:LEVEL]` block on lines of their own: how a summary of
    classified text carries the highest level of its sources (docs/reference.md §3.13)."""
    return f"[ds4:{level}]\n{text}\n[/ds4:{level}]"


def unwrap_classified(text: str) -> str:
    """`text` without the outer block `wrap_classified` put around it (unchanged when it has
    none): a summary's content for merging, re-wrapped afterwards."""
    match = _OUTER.fullmatch(text)
    if match is None or match.group(1).lower() != match.group(3).lower():
        return text
    return match.group(2)


_OUTER = re.compile(
    r"\[ds4:(normal|internal|sensitive|local-only)\]\n(.*)\n\[/ds4:(normal|internal|sensitive|local-only)\]",
    re.IGNORECASE | re.DOTALL,
)


def line_span_level(text: str, first_line: int, last_line: int, default: Level = "normal") -> Level:
    """The level of lines `first_line`..`last_line` (1-based, inclusive; lines end at `\n`,
    `\r\n` or `\r`) of `text`, judged on the WHOLE text: the highest level of the segments
    that overlap those lines and of the text's structure floor. A project snippet is classified
    so: a block that starts above the snippet, or a leading marker at the top of the file,
    still classifies it."""
    parsed = parse(text, default)
    if not parsed.marked:
        return default
    starts = [0] + [match.end() for match in _LINE_BREAK.finditer(text)]
    begin = starts[min(max(first_line, 1), len(starts)) - 1]
    end = starts[last_line] if last_line < len(starts) else len(text)
    levels = [
        segment.level
        for segment in parsed.segments
        if segment.start < end and segment.start + len(segment.text) > begin
    ]
    return highest(levels, highest((parsed.floor,), default))


_LINE_BREAK = re.compile(r"\r\n|\r|\n")
