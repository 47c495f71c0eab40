"""Claim keys and polarity: when two memory claims contradict each other (docs/memory.md
"Conflicts"; docs/reference.md §3.16).

Pure. A claim shaped "X defaults to Y", "X = Y" or "X is Y" (tried in that order, the first
occurrence of the separator, case-insensitive) has the key X and the value Y, both
normalised: case folded, backticks and quotes around them dropped, runs of white space made
one space, a final full stop dropped (backticks anywhere). Two claims with the same key and different values
conflict. So do two claims that say the same thing with opposite polarity ("X is enabled" /
"X is disabled", "enable X" / "disable X"): the claim with its polarity word removed is the
same, and one word is of the enabled family, the other of the disabled family.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_KEY_CHARS = 120
"""A left-hand side longer than this is prose, not a key: such a claim gets no key."""

_SEPARATORS = (
    re.compile(r"\s+defaults\s+to\s+", re.IGNORECASE),
    re.compile(r"\s*=\s*"),
    re.compile(r"\s+is\s+", re.IGNORECASE),
)
_SPACE = re.compile(r"\s+")
_QUOTES = "`'\"“”‘’"
_ENABLED = frozenset({"enabled", "enable", "on", "true"})
_DISABLED = frozenset({"disabled", "disable", "off", "false"})
_WORD = re.compile(r"[\w.-]+")


def normalize(text: str) -> str:
    """`text` case-folded, backticks dropped, spaces collapsed, surrounding quotes and a final
    full stop dropped (the form keys and values are compared in)."""
    folded = _SPACE.sub(" ", text.casefold().replace("`", "")).strip()
    folded = folded.rstrip(".").strip()
    return folded.strip(_QUOTES).strip()


@dataclass(frozen=True, slots=True)
class ClaimShape:
    """What a claim says, for conflict checks.

    Attributes:
        key: the normalised X of "X defaults to / = / is Y", or None.
        value: the normalised Y, or None without a key.
        polarity: `enabled`, `disabled` or None (no polarity word, or both families).
        subject: the normalised claim without its polarity words (compared across claims of
            opposite polarity).
        text: the whole claim normalised (identical claims are duplicates, not conflicts).
    """

    key: str | None
    value: str | None
    polarity: str | None
    subject: str
    text: str


def claim_key(claim: str) -> tuple[str, str] | None:
    """`(key, value)` of a claim shaped "X defaults to Y", "X = Y" or "X is Y", else None.

    >>> claim_key("`retries` defaults to 3.")
    ('retries', '3')
    """
    for separator in _SEPARATORS:
        match = separator.search(claim)
        if match is None:
            continue
        key = normalize(claim[: match.start()])
        value = normalize(claim[match.end() :])
        if key and value and len(key) <= MAX_KEY_CHARS:
            return key, value
        return None
    return None


SHAPES_KEPT = 8192
"""Claim shapes kept between replays (`shape_claim`): every sync that meets a mutation entry,
and every memory write, replays all stored claims again."""

CACHED_CLAIM_CHARS = 2000
"""Longest claim whose shape is kept (the default `memory.maxClaimChars`): the cache holds at
most `SHAPES_KEPT` x this many characters."""


def shape_claim(claim: str, explicit_key: str | None = None) -> ClaimShape:
    """The `ClaimShape` of `claim`; `explicit_key` (an item's `key`) replaces the automatic
    key, the value then being the automatic value or else the whole normalised claim. Pure;
    the shapes of claims up to `CACHED_CLAIM_CHARS` are kept (`SHAPES_KEPT` of them)."""
    if len(claim) <= CACHED_CLAIM_CHARS:
        return _kept_shape(claim, explicit_key)
    return _shape_claim(claim, explicit_key)


@lru_cache(maxsize=SHAPES_KEPT)
def _kept_shape(claim: str, explicit_key: str | None) -> ClaimShape:
    return _shape_claim(claim, explicit_key)


def _shape_claim(claim: str, explicit_key: str | None) -> ClaimShape:
    text = normalize(claim)
    parsed = claim_key(claim)
    key, value = parsed if parsed else (None, None)
    if explicit_key is not None and normalize(explicit_key):
        key = normalize(explicit_key)
        value = value if value is not None else text
    words = _WORD.findall(text)
    enabled = any(word in _ENABLED for word in words)
    disabled = any(word in _DISABLED for word in words)
    polarity = (
        "enabled" if enabled and not disabled else "disabled" if disabled and not enabled else None
    )
    subject = " ".join(w for w in words if w not in _ENABLED and w not in _DISABLED)
    return ClaimShape(key, value, polarity, subject, text)


def conflict_reason(new: ClaimShape, old: ClaimShape) -> str | None:
    """Why `new` contradicts `old` (`same key` or `opposite polarity`), or None when it does
    not (identical claims do not conflict: they are duplicates)."""
    if new.text == old.text:
        return None
    if new.key is not None and new.key == old.key and new.value != old.value:
        return f"same key '{new.key}' with another value"
    if (
        new.polarity is not None
        and old.polarity is not None
        and new.polarity != old.polarity
        and new.subject == old.subject
    ):
        return "opposite polarity (enabled/disabled)"
    return None
