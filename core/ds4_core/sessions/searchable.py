"""Searchable text and role of a session entry (docs/reference.md §3.12, "Searchable text").

What goes into the full-text index, per entry type:

* `message`: text blocks (or string content); a toolCall as its name and JSON arguments; a
  toolResult's `toolName` and text; a bashExecution as `Command: <command>` and its output.
  Thinking, images and other opaque blocks are excluded. System-role messages (prompt and tool
  state, docs/reference.md §P5.2) are excluded too: they are not conversation history.
* `custom_message`: its content. `compaction`: summary. `branch_summary`: fromId and summary.
  `model_change`: provider and modelId. `thinking_level_change`: the level. `label`: targetId
  and label. `session_info`: name.
* `custom` (private extension state), `usage`, `context_edit` and unknown types: nothing.

Parts are joined with `"\\n"`; parts that are missing, not strings or empty are left out.
"""

from __future__ import annotations

from typing import Any

from ds4_core.sessions.reader import SessionEntry
from ds4_core.tokens import compact_json

_EXCLUDED_ROLES = frozenset({"system"})


def _content_texts(content: Any, parts: list[str]) -> None:
    """Append the searchable strings of a message `content` (string or block list) to `parts`."""
    if isinstance(content, str):
        if content:
            parts.append(content)
        return
    if not isinstance(content, list):
        return
    for block in content:
        if type(block) is not dict:
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                parts.append(text)
        elif kind == "toolCall":
            name = block.get("name")
            name = name if isinstance(name, str) else ""
            arguments = block.get("arguments")
            args_json = compact_json(arguments) if arguments is not None else ""
            call = f"{name} {args_json}".strip()
            if call:
                parts.append(call)


def _message_text(message: Any) -> list[str]:
    if type(message) is not dict:
        return []
    role = message.get("role")
    if role in _EXCLUDED_ROLES:
        return []
    parts: list[str] = []
    if role == "bashExecution":
        command = message.get("command")
        if isinstance(command, str) and command:
            parts.append(f"Command: {command}")
        output = message.get("output")
        if isinstance(output, str) and output:
            parts.append(output)
        return parts
    if role == "toolResult":
        tool_name = message.get("toolName")
        if isinstance(tool_name, str) and tool_name:
            parts.append(tool_name)
    _content_texts(message.get("content"), parts)
    return parts


def _string_fields(data: dict[str, Any], *keys: str) -> list[str]:
    return [value for key in keys if isinstance(value := data.get(key), str) and value]


def searchable_text(entry: SessionEntry) -> str:
    """The text of `entry` that goes into the full-text index (docs/reference.md §3.12).

    Returns `""` for entries that are not indexed (`custom`, `usage`, `context_edit`, unknown
    types, system messages, messages with only thinking/image blocks). Never raises on odd
    shapes: non-string fields are ignored.
    """
    data = entry.data
    kind = entry.entry_type
    if kind == "message":
        parts = _message_text(data.get("message"))
    elif kind == "custom_message":
        parts = []
        _content_texts(data.get("content"), parts)
    elif kind == "compaction":
        parts = _string_fields(data, "summary")
    elif kind == "branch_summary":
        parts = _string_fields(data, "fromId", "summary")
    elif kind == "model_change":
        parts = _string_fields(data, "provider", "modelId")
    elif kind == "thinking_level_change":
        parts = _string_fields(data, "thinkingLevel")
    elif kind == "label":
        parts = _string_fields(data, "targetId", "label")
    elif kind == "session_info":
        parts = _string_fields(data, "name")
    else:
        return ""
    return _storable("\n".join(parts))


def _storable(text: str) -> str:
    """`text` with lone UTF-16 surrogates (legal in JSON as `\\ud800`, not encodable as UTF-8)
    replaced by U+FFFD, so SQLite can store it; valid text is returned as is."""
    if text.isascii():  # O(1) in CPython; no surrogate is ASCII
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text


def entry_role(entry: SessionEntry) -> str | None:
    """The message role of `entry`: `message.role` for `message` entries (after the v2 rename
    `hookMessage` -> `custom`), `"custom"` for `custom_message`, `None` for everything else or
    when the role is not a string (docs/reference.md §P4, §P5.2)."""
    kind = entry.entry_type
    if kind == "message":
        message = entry.data.get("message")
        if type(message) is dict:
            role = message.get("role")
            if isinstance(role, str):
                return role
        return None
    if kind == "custom_message":
        return "custom"
    return None
