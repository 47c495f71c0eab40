"""Token estimation (`chars-v2`) and the stable JSON / hashing helpers used across the core.

Message rules from docs/reference.md §3.3: a message costs 8 + tokens(role) + its content + the
`summary`, `command`, `output` and `toolName` string fields; each content block adds 4; an image
block is a flat 1024; a toolCall counts its name plus the JSON of its arguments.

Text rule `chars-v2` (this module's; it replaces the reference's `chars-v1`, ceil(UTF-16
length / 4), which counts a 399-character Chinese snippet as 100 tokens where real tokenizers
count about 400). Each UTF-16 code unit has a weight in quarter tokens and a text costs
ceil(sum of weights / 4). The weight depends on the unit's block of 256 code points
(`BLOCK_WEIGHTS`), except that ASCII weighs 1 (1/4 token, as `chars-v1`) and Armenian 9:

| tokens per code point | code points                                                        |
|-----------------------|--------------------------------------------------------------------|
| 1/4                   | ASCII                                                              |
| 3/4                   | Cyrillic (U+0400-04FF)                                             |
| 1                     | Arabic (U+0600-06FF)                                               |
| 5/4                   | Latin-1, Latin extended, Greek, Hebrew, Syriac, Thaana, Thai, Lao  |
| 3/2                   | anything else: CJK, kana, Hangul, Devanagari, Bengali, punctuation, lone surrogates |
| 2                     | Oriya, Tamil, Telugu, Kannada; symbols, arrows, maths, box drawing, dingbats (U+2100-2BFF) |
| 9/4                   | Armenian (U+0531-058F)                                             |
| 3                     | Malayalam, Sinhala, Tibetan, Myanmar, Georgian, Ethiopic, Cherokee, Canadian syllabics, Khmer, and the rest of `BLOCK_WEIGHTS` at 12; U+10000 and up (emoji, rare CJK: 3/2 per surrogate) |

The weights are upper bounds of what byte-level BPE tokenizers use on natural text of each
script (measured with the public `cl100k_base` encoding of OpenAI's tiktoken;
`tests/core/test_tokens.py` keeps the counts), with a margin for the ASCII spaces and
punctuation between the words, which split more often than 1/4 token each in non-Latin text.

Properties the tests check: every code point weighs at least as much as under `chars-v1`, so
an estimate is never below ceil(UTF-16 length / 4); weights add up, so estimate(a + b) >=
estimate(a) and estimate(a + b) >= estimate(a) + estimate(b) - 1; each CJK ideograph, kana or
Hangul syllable costs more than one token. ASCII text takes a fast path with the `chars-v1`
result; other text costs a few passes in C over its UTF-16 encoding.

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

DEFAULT_BLOCK_QUARTERS = 6
"""Quarter tokens per UTF-16 unit of a block `BLOCK_WEIGHTS` does not list."""

BLOCK_WEIGHTS: tuple[tuple[int, int, int, str], ...] = (
    (0x00, 0x03, 5, "Latin-1 (ASCII: 1), Latin extended, IPA, combining marks, Greek"),
    (0x04, 0x04, 3, "Cyrillic"),
    (0x05, 0x05, 5, "Cyrillic supplement, Armenian (9, see ARMENIAN), Hebrew"),
    (0x06, 0x06, 4, "Arabic"),
    (0x07, 0x07, 5, "Syriac, Arabic supplement, Thaana, NKo"),
    (0x0B, 0x0C, 8, "Oriya, Tamil, Telugu, Kannada"),
    (0x0D, 0x0D, 12, "Malayalam, Sinhala"),
    (0x0E, 0x0E, 5, "Thai, Lao"),
    (0x0F, 0x10, 12, "Tibetan, Myanmar, Georgian"),
    (0x12, 0x17, 12, "Ethiopic, Cherokee, Canadian syllabics, Ogham, Runic, Khmer"),
    (0x1C, 0x1C, 12, "Georgian Mtavruli, Ol Chiki, Lepcha, Cyrillic extended-C"),
    (0x21, 0x2B, 8, "letterlike symbols, arrows, maths, technical, box drawing, dingbats"),
    (0x2D, 0x2D, 12, "Georgian supplement, Tifinagh, Ethiopic extended"),
    (0xAB, 0xAB, 12, "Ethiopic extended-A, Cherokee supplement, Meetei Mayek"),
    (0xD8, 0xDF, 6, "surrogates: a code point above U+FFFF (two units) weighs 12"),
)
"""(first block, last block, quarter tokens per UTF-16 unit, what the blocks hold): a block
is the high byte of a UTF-16 code unit, 256 code points (U+0400-04FF is block 0x04)."""

ARMENIAN = re.compile("[\u0531-\u058f]+")
ARMENIAN_QUARTERS = 9
"""Armenian shares block 0x05 with Hebrew but splits about byte by byte."""


def _block_table() -> bytes:
    table = bytearray([DEFAULT_BLOCK_QUARTERS]) * 256
    for first, last, quarters, _ in BLOCK_WEIGHTS:
        table[first : last + 1] = bytes([quarters]) * (last - first + 1)
    return bytes(table)


_BLOCK_QUARTERS = _block_table()
_DEFAULT_BLOCKS = bytes(b for b in range(256) if _BLOCK_QUARTERS[b] == DEFAULT_BLOCK_QUARTERS)
_WEIGHTS = tuple(sorted(set(_BLOCK_QUARTERS) - {DEFAULT_BLOCK_QUARTERS}))


def utf16_length(text: str) -> int:
    """Length of `text` in UTF-16 code units (what JavaScript's `String.length` returns)."""
    # Code points above U+FFFF take two code units; everything else one. surrogatepass keeps
    # lone surrogates (legal in JSON strings) countable as one unit each.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _quarter_tokens(text: str) -> int:
    """Sum of the `chars-v2` weights of `text`, in quarter tokens (module docstring).

    Passes in C: the UTF-16 encoding's high bytes (one per unit: its block) are mapped to
    their weights, units of the default weight dropped and the others counted by weight.
    ASCII (in block 0, weighed as Latin-1 there) is counted by an ASCII encoding that drops
    the rest. Armenian is only scanned for when block 0x05 occurs.
    """
    blocks = text.encode("utf-16-le", "surrogatepass")[1::2]
    others = blocks.translate(_BLOCK_QUARTERS, _DEFAULT_BLOCKS)  # units of listed blocks
    quarters = DEFAULT_BLOCK_QUARTERS * (len(blocks) - len(others))
    if others:
        quarters += sum(weight * others.count(weight) for weight in _WEIGHTS)
    quarters -= (_BLOCK_QUARTERS[0] - 1) * len(text.encode("ascii", "ignore"))
    if b"\x05" in blocks:
        armenian = sum(map(len, ARMENIAN.findall(text)))
        quarters += (ARMENIAN_QUARTERS - _BLOCK_QUARTERS[5]) * armenian
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
    weights / 4). ASCII text gives ceil(len / 4), as `chars-v1` (docs/reference.md §3.3) did;
    never less than that for any text. Never raises (a lone surrogate weighs 6 quarters)."""
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
    """Estimated tokens of one Pi `AgentMessage` dict (docs/reference.md §3.3)."""
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
