"""A span's messages as text, and the files its tool calls touched (docs/reference.md §3.13).

`conversation_text` is what the summarizer prompt embeds as `<conversation-source>` and what
`contract.validate_summary` checks backticked values against; `file_operations` gives the
known read / modified inventories. Both take Pi `AgentMessage` dicts
(docs/reference.md §P5) and tolerate anything: missing or `None` content, blocks that are
not dicts, unknown roles.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..retrieval.descriptor import text_of_message
from .contract import is_clean_path

MAX_TOOL_TEXT_CHARS = 4000
"""Most characters of one toolResult text or bashExecution output kept in the transcript; the
middle of a longer text is replaced by "[… N characters omitted]"."""

READ_TOOLS = frozenset({"read"})
"""Tool names whose `path` argument is a file read."""
MODIFY_TOOLS = frozenset({"write", "edit", "multi_edit", "apply_patch"})
"""Tool names whose `path` argument is a file modified."""
_PATH_KEYS = ("path", "file_path")


def _capped(text: str, limit: int = MAX_TOOL_TEXT_CHARS) -> str:
    """`text` whole when it has at most `limit` characters, else its first and last
    `limit // 2` characters around "[… N characters omitted]"."""
    if len(text) <= limit:
        return text
    if limit <= 0:
        return f"[… {len(text)} characters omitted]"
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[… {omitted} characters omitted]\n{text[-half:]}"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False, default=str)


def _block(header: str, body: str) -> str:
    return f"[{header}]\n{body}" if body else f"[{header}]"


def _assistant_parts(message: Mapping[str, Any]) -> Iterable[str]:
    content = message.get("content")
    texts: list[str] = []

    def flush() -> Iterable[str]:
        if texts:
            yield _block("assistant", "\n".join(texts))
            texts.clear()

    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, Mapping):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
            elif kind == "toolCall":
                yield from flush()
                name = block.get("name")
                name = name if isinstance(name, str) else "tool"
                arguments = block.get("arguments")
                body = _json(arguments if arguments is not None else {})
                if isinstance(arguments, Mapping) and isinstance(arguments.get("command"), str):
                    body += "\n" + arguments["command"]
                yield _block(f"assistant → {name}", body)
    yield from flush()
    error = message.get("errorMessage")
    if isinstance(error, str) and error:
        stop = message.get("stopReason")
        yield _block(f"assistant {stop}" if isinstance(stop, str) else "assistant error", error)


def _message_parts(message: Mapping[str, Any], limit: int) -> Iterable[str]:
    role = message.get("role")
    if role == "user":
        yield _block("user", text_of_message(message))
    elif role == "assistant":
        yield from _assistant_parts(message)
    elif role == "toolResult":
        name = message.get("toolName")
        header = "toolResult " + (name if isinstance(name, str) and name else "tool")
        if message.get("isError") is True:
            header += " error"
        yield _block(header, _capped(text_of_message(message), limit))
    elif role == "bashExecution":
        if message.get("excludeFromContext") is True:
            return
        command = message.get("command")
        output = message.get("output")
        exit_code = message.get("exitCode")
        header = "bashExecution"
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            header += f" exit {exit_code}"
        if message.get("cancelled") is True:
            header += " cancelled"
        if message.get("truncated") is True:
            header += " truncated"
        lines = [command if isinstance(command, str) else ""]
        if isinstance(output, str) and output:
            lines += ["[output]", _capped(output, limit)]
        yield _block(header, "\n".join(lines).strip("\n"))
    elif role == "custom":
        kind = message.get("customType")
        header = "custom " + kind if isinstance(kind, str) and kind else "custom"
        yield _block(header, text_of_message(message))
    elif role in ("compactionSummary", "branchSummary"):
        summary = message.get("summary")
        yield _block(str(role), summary if isinstance(summary, str) else "")
    else:
        label = role if isinstance(role, str) and role else "message"
        yield _block(label, text_of_message(message))


def conversation_text(
    messages: Sequence[Mapping[str, Any]], *, tool_text_chars: int = MAX_TOOL_TEXT_CHARS
) -> str:
    """A stable, readable serialization of Pi `AgentMessage`s.

    Each message becomes one or more blocks separated by a blank line: a `[header]` line,
    then the body. `[user]` (text blocks), `[assistant]` (text blocks), `[assistant → name]`
    (a tool call: its arguments as JSON, `ensure_ascii=False`; a string `command` argument
    also raw on its own line, so commands are literal evidence), `[assistant <stopReason>]`
    (an `errorMessage`), `[toolResult name]` / `[toolResult name error]`,
    `[bashExecution exit N]` (command, then `[output]` and the output),
    `[custom type]`, `[compactionSummary]` / `[branchSummary]` (the summary), and for other
    roles `[role]` with the string or text content. Thinking blocks, images and
    `excludeFromContext` bash executions are left out; toolResult text and bashExecution
    output keep at most `tool_text_chars` characters each (`MAX_TOOL_TEXT_CHARS` by default;
    0 keeps only "[… N characters omitted]"). Items that are not mappings are skipped.
    Deterministic: equal input, equal text.
    """
    parts: list[str] = []
    for message in messages:
        if isinstance(message, Mapping):
            parts.extend(_message_parts(message, tool_text_chars))
    return "\n\n".join(parts)


def _call_path(arguments: Any) -> str | None:
    if not isinstance(arguments, Mapping):
        return None
    for key in _PATH_KEYS:
        value = arguments.get(key)
        if isinstance(value, str):
            path = value.strip()
            return path if is_clean_path(path) else None
    return None


def file_operations(messages: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """The files the span's assistant tool calls read and modified.

    A `read` call's path is read; `write`, `edit`, `multi_edit` and `apply_patch` calls with a
    path are modified. The path is the `path` argument, else `file_path`, stripped; empty
    paths, paths with line breaks or control characters, and paths over 1,024 characters are
    dropped.

    Returns:
        (read_files, modified_files), each deduplicated in first-seen order; a file both read
        and modified is listed as modified only.
    """
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, Mapping) or block.get("type") != "toolCall":
                continue
            name = block.get("name")
            if not isinstance(name, str) or (name not in READ_TOOLS and name not in MODIFY_TOOLS):
                continue
            path = _call_path(block.get("arguments"))
            if path is None:
                continue
            (read if name in READ_TOOLS else modified)[path] = None
    return [p for p in read if p not in modified], list(modified)
