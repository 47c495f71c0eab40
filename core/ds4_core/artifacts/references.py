"""Artifact references: which artifact a session entry's large tool result maps to
(docs/artifacts.md "References"). Pure: the id is the SHA-256 of the tool result's text, so it
is computed from the session file alone, with or without a stored object.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .condense import tool_result_chars, tool_result_text


@dataclass(frozen=True, slots=True)
class ArtifactReference:
    """One large tool result of a session and the artifact that holds its text."""

    entry_id: str
    """The session entry (a `message` entry whose message is a toolResult)."""
    entry_order: int
    """The entry's 0-based position among the file's entries."""
    artifact_id: str
    """SHA-256 hex of the text's UTF-8 bytes (lone surrogates as 3 bytes), the object name."""
    original_chars: int
    """Characters (code points) of the text."""
    size_bytes: int
    """UTF-8 bytes of the text."""


def reference_of(
    entry: Any, *, max_inline_chars: int, max_artifact_bytes: int
) -> ArtifactReference | None:
    """The reference of a session entry (`sessions.reader.SessionEntry`): a `message` entry
    whose toolResult text (`condense.tool_result_text`) is longer than `max_inline_chars`
    characters and at most `max_artifact_bytes` UTF-8 bytes, the rule offloading stores by
    (`offload.offload_tool_result`); None for any other entry."""
    if entry.entry_type != "message":
        return None
    message = entry.data.get("message")
    if not isinstance(message, Mapping) or message.get("role") != "toolResult":
        return None
    if tool_result_chars(message) <= max_inline_chars:
        return None
    text = tool_result_text(message)
    data = text.encode("utf-8", "surrogatepass")
    if len(data) > max_artifact_bytes:
        return None
    return ArtifactReference(
        entry.entry_id, entry.seq, hashlib.sha256(data).hexdigest(), len(text), len(data)
    )
