"""Literal search inside one stored artifact (docs/artifacts.md "Search"; docs/reference.md
§3.14): case-insensitive, the object re-hashed before it is read, at most `max_matches`
excerpts, each bounded and redacted. `engine/artifact_requests.py` scopes it to one artifact or
to the artifacts of a session's active branch (`ds4/artifactSearch`).

What the whole object says is applied to every excerpt (`privacy.excerpts`): its PEM private
key blocks and its classified text not in `allowed` are found over the whole text once; a
match inside them (or inside a marker) is not reported at all (a query could otherwise probe
withheld text one guess at a time), and where an excerpt reaches into them it shows
`[DS4 REDACTED PRIVATE KEY]` or `[DS4 <level> content excluded by privacy policy]` instead.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from ..privacy import excerpts, markers
from ..privacy.levels import Level
from ..privacy.redaction import redact_secrets
from .store import ArtifactError, ArtifactStore

MAX_QUERY_CHARS = 1000
"""Longest query accepted."""
EXCERPT_CHARS = 240
"""Characters of the line shown around each match (before redaction markers)."""
_REDACTION_MARGIN = 256
"""Characters redacted beyond each side of an excerpt, so a secret crossing its edge is seen."""
SHOWN_LEVELS = ("normal", "internal")
"""Levels an excerpt shows by default (`privacy.remoteDefaultAllowed`'s default): the
excerpts go to the editor and, through its API, to other extensions that may send them to a
remote model."""


class ArtifactTooLargeError(ArtifactError):
    """The object is larger than the search limit (`artifacts.maxSearchBytes`)."""


@dataclass(frozen=True, slots=True)
class ArtifactMatch:
    """One match: where it is and the redacted text around it."""

    line: int
    """1-based line of the match (lines end at "\\n")."""
    column: int
    """1-based column of the match in its line, in UTF-16 code units (an LSP position's
    default unit: a character beyond U+FFFF counts 2)."""
    excerpt: str
    """At most `EXCERPT_CHARS` characters of the line around the match, redacted (plus the
    length of any redaction marker); `...` marks a cut line."""


@dataclass(frozen=True, slots=True)
class ArtifactSearch:
    """The result of `search_artifact`."""

    artifact_id: str
    matches: tuple[ArtifactMatch, ...]
    truncated: bool
    """More matches exist than `max_matches`."""
    redactions: int
    """Secrets replaced in the excerpts."""


def search_artifact(
    store: ArtifactStore,
    artifact_id: str,
    query: str,
    *,
    max_matches: int,
    max_search_bytes: int,
    allowed: Collection[str] = SHOWN_LEVELS,
    default: Level = "normal",
) -> ArtifactSearch:
    """The first `max_matches` case-insensitive literal matches of `query` in the artifact,
    outside its private keys and outside its text classified at a level not in `allowed`
    (unmarked text is `default`; see the module docstring).

    Raises:
        ValueError: `query` is empty, longer than `MAX_QUERY_CHARS`, or not a string;
            `artifact_id` is not 64 hex digits; `max_matches < 1`.
        ArtifactTooLargeError: the object is larger than `max_search_bytes` (not read).
        ArtifactMissingError, ArtifactCorruptError: from `ArtifactStore.read` (re-hashed).
    """
    if not isinstance(query, str) or not query or len(query) > MAX_QUERY_CHARS:
        raise ValueError(
            f"query: expected a non-empty string of at most {MAX_QUERY_CHARS} characters"
        )
    if max_matches < 1:
        raise ValueError(f"max_matches must be >= 1, got {max_matches}")
    path = store.path_for(artifact_id)
    try:
        size = path.lstat().st_size  # a symbolic link is never followed: `read` refuses it
    except FileNotFoundError:
        size = 0  # `read` raises the missing-artifact error
    if size > max_search_bytes:
        raise ArtifactTooLargeError(
            f"artifact {artifact_id} holds {size} bytes, more than artifacts.maxSearchBytes "
            f"({max_search_bytes}); raise the setting to search it"
        )
    text = store.read(artifact_id).decode("utf-8", "surrogatepass")
    matches: list[ArtifactMatch] = []
    redactions = 0
    line, scanned = 1, 0
    units_line, units_at, units = -1, 0, 0  # UTF-16 units of the current line up to units_at
    truncated = False
    hidden: list[excerpts.Hidden] | None = None  # found at the first match
    for at, end in _occurrences(text, query):
        if hidden is None:
            hidden = _hidden(text, allowed, default)
        if excerpts.overlapping(hidden, at, end):
            continue
        if len(matches) == max_matches:
            truncated = True
            break
        line += text.count("\n", scanned, at)
        scanned = at
        line_start = text.rfind("\n", 0, at) + 1
        line_end = text.find("\n", at)
        line_end = len(text) if line_end < 0 else line_end
        if units_line != line_start:  # counted on from the previous match of the same line
            units_line, units_at, units = line_start, line_start, 0
        units += _utf16_units(text[units_at:at])
        units_at = at
        excerpt, count = _excerpt(text, line_start, line_end, at, end, hidden)
        redactions += count
        matches.append(ArtifactMatch(line, units + 1, excerpt))
    return ArtifactSearch(artifact_id, tuple(matches), truncated, redactions)


def _hidden(text: str, allowed: Collection[str], default: Level) -> list[excerpts.Hidden]:
    """What no excerpt of `text` shows: private key blocks, markers, withheld levels."""
    parsed = markers.parse(text, default)
    withheld = (
        excerpts.marker_spans(parsed, len(text), allowed)
        if parsed.marked or default not in allowed
        else []
    )
    return excerpts.merged(excerpts.private_key_spans(text), withheld)


def _occurrences(text: str, query: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each non-overlapping match of `query` in `text`, literally and
    ignoring case, in order. ASCII text and query: `str.lower` and `str.find` (lowering keeps
    every offset, and is several times faster than a regex); otherwise `re.IGNORECASE` over
    `re.escape(query)` (per-character case folding, offsets of `text` itself)."""
    if text.isascii() and query.isascii():
        haystack, needle = text.lower(), query.lower()
        at = haystack.find(needle)
        while at >= 0:
            yield at, at + len(needle)
            at = haystack.find(needle, at + len(needle))
        return
    for found in re.finditer(re.escape(query), text, re.IGNORECASE):
        yield found.start(), found.end()


def _utf16_units(text: str) -> int:
    """Length of `text` in UTF-16 code units (a lone surrogate counts 1)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _excerpt(
    text: str, line_start: int, line_end: int, start: int, end: int, hidden: list[excerpts.Hidden]
) -> tuple[str, int]:
    """The part of the line [line_start, line_end) around [start, end), masked against
    `hidden` and redacted."""
    half = max(0, (EXCERPT_CHARS - (end - start)) // 2)
    left = max(line_start, start - half)
    right = min(line_end, max(end, left + EXCERPT_CHARS))
    window_left = max(line_start, left - _REDACTION_MARGIN)
    window_right = min(line_end, right + _REDACTION_MARGIN)
    before = excerpts.masked(text, window_left, left, hidden)
    shown = excerpts.masked(text, left, right, hidden)
    after = excerpts.masked(text, right, window_right, hidden)
    redacted = redact_secrets(before + shown + after)
    if redacted.count:  # cut the redacted window at the same distances from its edges
        shown = redacted.text[len(before) : len(redacted.text) - len(after)]
    prefix = "..." if left > line_start else ""
    suffix = "..." if right < line_end else ""
    return prefix + shown + suffix, redacted.count
