"""Token estimation (`chars-v1`) and the stable JSON / hashing helpers used across the core.

Rules from ds4-reference.md 3.3: text costs ceil(len / 4) tokens where len is the JavaScript
(UTF-16 code unit) length; a message costs 8 + tokens(role) + its content + the `summary`,
`command`, `output` and `toolName` string fields; each content block adds 4; an image block is a
flat 1024; a toolCall counts its name plus the JSON of its arguments.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

ESTIMATOR_VERSION = "chars-v1"

MESSAGE_OVERHEAD_TOKENS = 8
BLOCK_OVERHEAD_TOKENS = 4
IMAGE_BLOCK_TOKENS = 1024
_EXTRA_STRING_FIELDS = ("summary", "command", "output", "toolName")


def utf16_length(text: str) -> int:
    """Length of `text` in UTF-16 code units (what JavaScript's `String.length` returns)."""
    # Code points above U+FFFF take two code units; everything else one. surrogatepass keeps
    # lone surrogates (legal in JSON strings) countable as one unit each.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def estimate_text_tokens(text: str) -> int:
    """Estimated tokens of `text`: ceil(UTF-16 code units / 4) (ds4-reference.md 3.3)."""
    if not text:
        return 0
    return math.ceil(utf16_length(text) / 4)


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
