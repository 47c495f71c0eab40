"""Excerpts cut from a long text (a large tool output, a stored artifact) that keep what the
WHOLE text says about them (docs/privacy.md "Excerpts of long texts").

Redacting only the excerpt and a margin around it misses what needs context from far away:
a private key's body lines are only recognisable with the `-----BEGIN ... PRIVATE KEY-----`
line above them (4 KiB above for an RSA-4096 key), and text inside a
`[ds4:local-only]...[/ds4:local-only]` block looks like any other text once the markers are
cut off. So the caller finds those spans over the whole text once (`private_key_spans`,
`marker_spans`: linear, anchored scans), and every excerpt is first `masked` against them
(each hidden span's part inside the excerpt replaced by its replacement text), then redacted
as usual (`redaction.redact_secrets`), then cut.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Iterable
from typing import NamedTuple

from .levels import LEVELS, RANK, Level, highest
from .markers import Parsed, placeholder
from .redaction import PRIVATE_KEY_MARKER
from .secrets import AnchorText, private_key_blocks


class Hidden(NamedTuple):
    """`[start, end)` of the whole text never shown: an excerpt shows `replacement` (once)
    instead of any part of it."""

    start: int
    end: int
    replacement: str


def private_key_spans(text: str) -> list[Hidden]:
    """Every PEM private key block of `text` (its `BEGIN` line through its `END` line; without
    an `END` line: to the end of the text, or to the first `"` after it, which ends the JSON
    string it is in: redaction's step 1), replaced by `[DS4 REDACTED PRIVATE KEY]`. Sorted,
    not overlapping; linear in `len(text)` (only the key marker lines are matched)."""
    spans: list[Hidden] = []
    if "PRIVATE KEY" not in text:  # every key marker line holds it: a plain scan is cheapest
        return spans
    for block in private_key_blocks(text, AnchorText(text)):
        end = block.end
        if end == len(text) and not text.endswith("-----"):
            quote = text.find('"', block.start, end)
            end = quote if quote >= 0 else end
        spans.append(Hidden(block.start, end, PRIVATE_KEY_MARKER))
    return spans


def marker_spans(
    parsed: Parsed, length: int, allowed: Collection[str] | None = None
) -> list[Hidden]:
    """The spans of a parsed text of `length` characters an excerpt never shows as written:
    each marker (`[ds4:...]`, `[/ds4:...]`) -> nothing; with `allowed`, each run of segments
    whose level (raised to the structure floor) is not in `allowed`, with the markers inside
    and around it, -> one `markers.placeholder` of the run's highest level. Sorted, not
    overlapping. `parsed` is `markers.parse(text, default)`."""
    spans: list[Hidden] = []
    position = 0
    run: list[int] = []  # [start, end, rank] of the run of withheld segments being gathered
    for segment in [*parsed.segments, None]:
        start = length if segment is None else segment.start
        if start > position and not run:  # the markers before this segment
            spans.append(Hidden(position, start, ""))
        if segment is None:
            break
        end = segment.start + len(segment.text)
        level = highest((segment.level,), parsed.floor)
        if allowed is not None and level not in allowed:
            run = [run[0] if run else start, end, max(run[2] if run else 0, RANK[level])]
        elif run:  # the markers between the run and this segment go with the run
            spans.append(Hidden(run[0], start, placeholder(LEVELS[run[2]])))
            run = []
        position = end
    if run:
        spans.append(Hidden(run[0], length, placeholder(LEVELS[run[2]])))
    return [span for span in spans if span.end > span.start]


def merged(*groups: Iterable[Hidden]) -> list[Hidden]:
    """The hidden spans of all `groups` in order; where spans overlap they become one, showing
    the distinct replacements of both (a key inside a withheld block shows the block's
    placeholder and the key marker)."""
    out: list[Hidden] = []
    for span in sorted((span for group in groups for span in group), key=lambda s: s.start):
        if out and span.start < out[-1].end:
            last = out[-1]
            text = last.replacement
            if span.replacement and span.replacement not in text:
                text += span.replacement
            out[-1] = Hidden(last.start, max(last.end, span.end), text)
        else:
            out.append(span)
    return out


def overlapping(hidden: list[Hidden], start: int, end: int) -> list[Hidden]:
    """The spans of sorted, non-overlapping `hidden` that share a character with
    `[start, end)`; O(log n) plus the spans found."""
    at = max(0, bisect_right(hidden, start, key=lambda span: span.start) - 1)
    found = []
    while at < len(hidden) and hidden[at].start < end:
        if hidden[at].end > start:
            found.append(hidden[at])
        at += 1
    return found


def masked(text: str, start: int, end: int, hidden: list[Hidden]) -> str:
    """`text[start:end]` with the part of every span of `hidden` (sorted, not overlapping)
    inside it replaced by the span's replacement."""
    pieces: list[str] = []
    position = start
    for span in overlapping(hidden, start, end):
        if span.start > position:
            pieces.append(text[position : span.start])
        pieces.append(span.replacement)
        position = min(end, span.end)
    pieces.append(text[position:end])
    return "".join(pieces)


def level_between(parsed: Parsed, start: int, end: int) -> Level:
    """The highest level of the segments of `parsed` that share a character with
    `[start, end)`, and of its structure floor (an unmarked text: its one segment's level)."""
    if not parsed.marked:
        return parsed.segments[0].level if parsed.segments else "normal"
    return highest(
        (
            segment.level
            for segment in parsed.segments
            if segment.start < end and segment.start + len(segment.text) > start
        ),
        parsed.floor,
    )
