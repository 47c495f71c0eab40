"""The shapes of the Pi messages a client may append to an owned session (docs/sessions.md).

Pi's `AgentMessage` roles `user`, `assistant` and `toolResult` (docs/reference.md §P5), checked
field by field so that what is appended reads back, through Pi and through our reader, as the
message that was sent. A bad field raises `MessageShapeError` naming its path
(`messages[3].content[1].arguments`). Keys not named here are kept as they are (Pi adds
fields without a version bump). Fields a client may leave out get Pi's values:

* `timestamp` (Unix ms): the time of the append;
* assistant `api`, `provider`, `model`: `"unknown"`; `usage`: each missing count and cost 0,
  except a missing `totalTokens` (cost `total`), which is the sum of the other counts (costs);
  `stopReason`: `"toolUse"` when the content holds a tool call, else `"stop"`;
* toolResult `isError`: false.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ds4_core.json_bounds import (
    MAX_RECORD_DEPTH,
    MAX_SAFE_INTEGER,
    describe_type,
    json_path,
    too_deep,
)

ROLES = ("user", "assistant", "toolResult")
"""The roles an owned session accepts from a client."""

STOP_REASONS = ("stop", "length", "toolUse", "error", "aborted")
"""Pi's persisted assistant stop reasons (docs/reference.md §P5; `deferred` is Pi's own)."""

MESSAGE_DEPTH = MAX_RECORD_DEPTH - 1
"""Nesting levels a message may have: its entry line adds one and our reader keeps 100."""

_USER_BLOCKS = ("text", "image")
_ASSISTANT_BLOCKS = ("text", "thinking", "toolCall")
_USAGE_COUNTS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_COSTS = ("input", "output", "cacheRead", "cacheWrite", "total")


class MessageShapeError(ValueError):
    """A message is not one of Pi's shapes; `field` is the wire path of the bad part."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def checked_message(message: Any, field: str, now_ms: int | None = None) -> dict[str, Any]:
    """A copy of the Pi message `message`, checked, with the fields Pi needs filled in.

    Args:
        message: the decoded JSON message.
        field: its wire path, for errors (`messages[3]`).
        now_ms: the `timestamp` given to a message without one (default: now, Unix ms).

    Raises:
        MessageShapeError: the first bad field, named under `field`.
    """
    if not isinstance(message, Mapping):
        raise MessageShapeError(f"expected an object, got {describe_type(message)}", field)
    deep = too_deep(message, MESSAGE_DEPTH)
    if deep is not None:
        raise MessageShapeError(
            f"nested deeper than {MESSAGE_DEPTH} levels", json_path(field, deep[:-1])
        )
    checked = dict(message)
    role = checked.get("role")
    if role not in ROLES:
        raise MessageShapeError(
            "expected one of " + ", ".join(f"'{r}'" for r in ROLES), f"{field}.role"
        )
    timestamp = checked.get("timestamp")
    if timestamp is None:
        checked["timestamp"] = now_ms if now_ms is not None else time.time_ns() // 1_000_000
    elif not _is_count(timestamp):
        raise MessageShapeError(
            "expected a Unix time in milliseconds (an integer)", f"{field}.timestamp"
        )
    if role == "user":
        content = checked.get("content")
        if not isinstance(content, str):
            _check_blocks(
                content, _USER_BLOCKS, f"{field}.content", "a string or an array of blocks"
            )
    elif role == "assistant":
        _check_assistant(checked, field)
    else:
        _check_tool_result(checked, field)
    return checked


def _check_assistant(message: dict[str, Any], field: str) -> None:
    content = _check_blocks(
        message.get("content"), _ASSISTANT_BLOCKS, f"{field}.content", "an array of blocks"
    )
    for key in ("api", "provider", "model"):
        value = message.setdefault(key, "unknown")
        if not isinstance(value, str):
            raise MessageShapeError("expected a string", f"{field}.{key}")
    has_call = any(block["type"] == "toolCall" for block in content)
    stop = message.setdefault("stopReason", "toolUse" if has_call else "stop")
    if stop not in STOP_REASONS:
        raise MessageShapeError(
            "expected one of " + ", ".join(f"'{r}'" for r in STOP_REASONS), f"{field}.stopReason"
        )
    usage = message.get("usage")
    if usage is None:
        usage = {}
    elif not isinstance(usage, Mapping):
        raise MessageShapeError(f"expected an object, got {describe_type(usage)}", f"{field}.usage")
    for key in _USAGE_COUNTS:
        if key in usage and not _is_count(usage[key]):
            raise MessageShapeError(
                "expected a token count (an integer >= 0)", f"{field}.usage.{key}"
            )
    cost = usage.get("cost")
    if cost is None:
        cost = {}
    elif not isinstance(cost, Mapping):
        raise MessageShapeError(
            f"expected an object, got {describe_type(cost)}", f"{field}.usage.cost"
        )
    for key in _COSTS:
        value = cost.get(key)
        if key in cost and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise MessageShapeError("expected a number", f"{field}.usage.cost.{key}")
    message["usage"] = {**_filled(usage, _USAGE_COUNTS), "cost": _filled(cost, _COSTS)}


def _filled(values: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """A copy of `values` with each of `keys` it lacks: the total (the last key) as the sum of
    the others, the others 0 (Pi adds the parts up the same way)."""
    filled = {key: values.get(key, 0) for key in keys[:-1]}
    filled[keys[-1]] = values.get(keys[-1], sum(filled.values()))
    return {**filled, **values}


def _check_tool_result(message: dict[str, Any], field: str) -> None:
    for key in ("toolCallId", "toolName"):
        value = message.get(key)
        if not isinstance(value, str) or not value:
            raise MessageShapeError("expected a non-empty string", f"{field}.{key}")
    _check_blocks(message.get("content"), _USER_BLOCKS, f"{field}.content", "an array of blocks")
    if not isinstance(message.setdefault("isError", False), bool):
        raise MessageShapeError("expected true or false", f"{field}.isError")


def _check_blocks(content: Any, kinds: tuple[str, ...], field: str, expected: str) -> list[Any]:
    """`content`, checked as content blocks (docs/reference.md §P5) of the kinds allowed for
    the role; `expected` says what `content` may be, for the error."""
    if not isinstance(content, list):
        raise MessageShapeError(f"expected {expected}, got {describe_type(content)}", field)
    for index, block in enumerate(content):
        where = f"{field}[{index}]"
        if not isinstance(block, Mapping):
            raise MessageShapeError(f"expected an object, got {describe_type(block)}", where)
        kind = block.get("type")
        if kind not in kinds:
            raise MessageShapeError(
                "expected one of " + ", ".join(f"'{k}'" for k in kinds), f"{where}.type"
            )
        for key in _BLOCK_STRINGS[kind]:
            if not isinstance(block.get(key), str):
                raise MessageShapeError("expected a string", f"{where}.{key}")
        if kind == "toolCall":
            for key in ("id", "name"):
                if not block[key]:
                    raise MessageShapeError("expected a non-empty string", f"{where}.{key}")
            if not isinstance(block.get("arguments"), Mapping):
                raise MessageShapeError(
                    f"expected an object, got {describe_type(block.get('arguments'))}",
                    f"{where}.arguments",
                )
    return content


_BLOCK_STRINGS = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "thinking": ("thinking",),
    "toolCall": ("id", "name"),
}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_SAFE_INTEGER
