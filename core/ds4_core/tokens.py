"""Token estimation (`chars-v2`) and the stable JSON / hashing helpers used across the core.

Message rules from ds4-reference.md 3.3: a message costs 8 + tokens(role) + its content + the
`summary`, `command`, `output` and `toolName` string fields; each content block adds 4; an image
block is a flat 1024; a toolCall counts its name plus the JSON of its arguments.

Text rule `chars-v2` (this module's; it replaces the reference's `chars-v1`, ceil(UTF-16
length / 4), which counts a 399-character Chinese snippet as 100 tokens where real tokenizers
count about 400). Each code point has a weight in quarter tokens and a text costs
ceil(sum of weights / 4). The default weight depends on the code point's UTF-8 length:

| UTF-8 length | code points                                                | tokens per code point |
|--------------|------------------------------------------------------------|-----------------------|
| 1 byte       | ASCII                                                      | 1/4 (as `chars-v1`)   |
| 2 bytes      | U+0080-07FF: Latin accents, Greek, Hebrew, ...             | 5/4                   |
| 3 bytes      | U+0800-FFFF: CJK, kana, Hangul, Devanagari, ...; lone surrogates | 3/2             |
| 4 bytes      | U+10000 and up: emoji, rare CJK                            | 3                     |

and `SCRIPT_WEIGHTS` sets other weights for the scripts real tokenizers treat differently
(Cyrillic 3/4, Arabic 1, Thai 5/4, Armenian 9/4, South Indian scripts and symbols 2, Georgian,
Ethiopic and other scripts split byte by byte 3). The weights are upper bounds of what
byte-level BPE tokenizers use on natural text of each script (measured with the public
`cl100k_base` encoding of OpenAI's tiktoken; `tests/core/test_tokens.py` keeps the counts),
with a margin for the ASCII spaces and punctuation around the words, which split more often
than 1/4 token each in non-Latin text.

Properties the tests check: every code point weighs at least as much as under `chars-v1`, so
an estimate is never below ceil(UTF-16 length / 4); weights add up, so estimate(a + b) >=
estimate(a) and estimate(a + b) >= estimate(a) + estimate(b) - 1; each CJK ideograph, kana or
Hangul syllable costs more than one token. ASCII text takes a fast path with the `chars-v1`
result.

Estimates of different estimator versions must not be mixed: a manifest records
`estimatorVersion` beside its `estimatedTokens`, and `ds4/plan` returns it with its estimate.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

ESTIMATOR_VERSION = "chars-v2"
"""Name of the text rule of `estimate_text_tokens`; recorded wherever an estimate is kept."""

MESSAGE_OVERHEAD_TOKENS = 8
BLOCK_OVERHEAD_TOKENS = 4
IMAGE_BLOCK_TOKENS = 1024
_EXTRA_STRING_FIELDS = ("summary", "command", "output", "toolName")

# Default weights in quarter tokens per code point, by UTF-8 length (index = bytes).
_QUARTERS_BY_UTF8_LENGTH = (0, 1, 5, 6, 12)

SCRIPT_WEIGHTS: tuple[tuple[str, str, int], ...] = (
    ("Cyrillic", "\u0400-\u052f", 3),
    ("Armenian", "\u0530-\u058f", 9),
    ("Arabic", "\u0600-\u06ff", 4),
    ("Thai", "\u0e00-\u0e7f", 5),
    ("Tamil, Telugu, Kannada, Malayalam", "\u0b80-\u0d7f", 8),
    (
        "symbols: letterlike, arrows, maths, technical, box drawing, shapes, dingbats",
        "\u2100-\u2bff",
        8,
    ),
    (
        "Sinhala, Tibetan, Myanmar, Georgian, Ethiopic, Cherokee, Canadian syllabics, Khmer",
        "\u0d80-\u0dff\u0f00-\u0fff\u1000-\u109f\u10a0-\u10ff\u1200-\u139f"
        "\u13a0-\u13ff\u1400-\u167f\u1780-\u17ff\u1c90-\u1cbf\u2d00-\u2d2f"
        "\u2d80-\u2ddf\uab00-\uab2f",
        12,
    ),
)
"""(scripts, regex character ranges, quarter tokens per code point) that differ from their
UTF-8 length's default. Every range lies within one UTF-8 length."""


def _script_adjustments(length: int) -> tuple[tuple[re.Pattern[str], int], ...]:
    """(pattern matching runs of the scripts, quarter tokens to add per code point) for the
    `SCRIPT_WEIGHTS` of one UTF-8 length, scripts with equal weights sharing one pattern."""
    ranges: dict[int, str] = {}
    for _, characters, quarters in SCRIPT_WEIGHTS:
        if len(characters[0].encode("utf-8")) == length:
            ranges[quarters] = ranges.get(quarters, "") + characters
    return tuple(
        (re.compile(f"[{characters}]+"), quarters - _QUARTERS_BY_UTF8_LENGTH[length])
        for quarters, characters in ranges.items()
    )


_TWO_BYTE_ADJUSTMENTS = _script_adjustments(2)
_THREE_BYTE_ADJUSTMENTS = _script_adjustments(3)


def utf16_length(text: str) -> int:
    """Length of `text` in UTF-16 code units (what JavaScript's `String.length` returns)."""
    # Code points above U+FFFF take two code units; everything else one. surrogatepass keeps
    # lone surrogates (legal in JSON strings) countable as one unit each.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _matched_length(pattern: re.Pattern[str], text: str) -> int:
    """Code points of `text` matched by `pattern` (a character class with `+`)."""
    return sum(map(len, pattern.findall(text)))


def _quarter_tokens(text: str) -> int:
    """Sum of the `chars-v2` weights of `text`, in quarter tokens (see the module docstring).

    The counts per UTF-8 length come from three encodings (all in C): code points, UTF-16
    units (a 4-byte code point is two) and UTF-8 bytes, so only the scripts that differ from
    their length's default are scanned, and only when the text has code points of that length.
    """
    points = len(text)
    ascii_points = len(text.encode("ascii", "ignore"))
    four = utf16_length(text) - points
    two_or_three = points - ascii_points - four
    two_or_three_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_points - 4 * four
    three = two_or_three_bytes - 2 * two_or_three
    two = two_or_three - three
    weight = _QUARTERS_BY_UTF8_LENGTH
    quarters = ascii_points * weight[1] + two * weight[2] + three * weight[3] + four * weight[4]
    if two:
        for pattern, delta in _TWO_BYTE_ADJUSTMENTS:
            quarters += delta * _matched_length(pattern, text)
    if three:
        for pattern, delta in _THREE_BYTE_ADJUSTMENTS:
            quarters += delta * _matched_length(pattern, text)
    return quarters


def estimate_text_quarters(text: str) -> int:
    """The `chars-v2` weight of `text` in quarter tokens: the sum of its code points' weights
    (module docstring), so weights of concatenated texts add up, and an ASCII text weighs its
    length. `estimate_text_tokens(text)` is ceil(this / 4); code that fills a token budget
    piece by piece (compaction summaries) sums these instead of character counts. Never
    raises."""
    if text.isascii():
        return len(text)
    return _quarter_tokens(text)


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of `text` under `chars-v2` (module docstring): ceil(quarter-token
    weights / 4). ASCII text gives ceil(len / 4), as `chars-v1` (ds4-reference.md 3.3) did;
    never less than that for any text. Never raises (lone surrogates count as 3-byte)."""
    if not text:
        return 0
    return math.ceil(estimate_text_quarters(text) / 4)


def stable_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace; non-ASCII kept as is.

    Used for prompt hashes and source hashes so that equal values always hash equally.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def compact_json(value: Any) -> str:
    """JSON as JavaScript's `JSON.stringify` writes it (insertion order, no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(data: bytes | str) -> str:
    """Lower-case hex SHA-256 of `data` (strings are encoded as UTF-8; lone surrogates as
    their 3-byte WTF-8 form, so any Python string hashes)."""
    if isinstance(data, str):
        # surrogatepass: a lone UTF-16 surrogate (legal in JSON) hashes instead of raising.
        data = data.encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def _block_tokens(block: Any) -> int:
    if not isinstance(block, dict):
        return BLOCK_OVERHEAD_TOKENS + estimate_text_tokens(compact_json(block))
    kind = block.get("type")
    if kind == "text":
        body = estimate_text_tokens(str(block.get("text") or ""))
    elif kind == "thinking":
        body = estimate_text_tokens(str(block.get("thinking") or ""))
    elif kind == "toolCall":
        body = estimate_text_tokens(str(block.get("name") or "")) + estimate_text_tokens(
            compact_json(block.get("arguments", {}))
        )
    elif kind == "image":
        body = IMAGE_BLOCK_TOKENS
    else:
        body = estimate_text_tokens(compact_json(block))
    return BLOCK_OVERHEAD_TOKENS + body


def estimate_content_tokens(content: Any) -> int:
    """Tokens of a message `content` value: a string, a list of blocks, or anything else as JSON."""
    if content is None:
        return 0
    if isinstance(content, str):
        return estimate_text_tokens(content)
    if isinstance(content, list):
        return sum(_block_tokens(block) for block in content)
    return estimate_text_tokens(compact_json(content))


def estimate_message_tokens(message: dict[str, Any]) -> int:
    """Estimated tokens of one Pi `AgentMessage` dict (ds4-reference.md 3.3)."""
    total = MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(str(message.get("role") or ""))
    total += estimate_content_tokens(message.get("content"))
    for field in _EXTRA_STRING_FIELDS:
        value = message.get(field)
        if isinstance(value, str):
            total += estimate_text_tokens(value)
    return total


def estimate_messages_tokens(messages: list[dict[str, Any]]) -> int:
    """Sum of `estimate_message_tokens` over `messages`."""
    return sum(estimate_message_tokens(m) for m in messages)
