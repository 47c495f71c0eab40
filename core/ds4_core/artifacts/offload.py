"""Offloading: a large tool result stored as an artifact and replaced by its condensed block
(docs/artifacts.md). The caller decides when offloading applies (managed session plans only;
never observer mode or ephemeral plans) and gives the messages of the provider-facing copy:
the messages given are never changed, new ones are returned in their place.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import ArtifactSettings
from ..logs import describe_failure
from .condense import condense_tool_result, tool_result_text
from .store import ArtifactStore

log = logging.getLogger("ds4_core.artifacts")


@dataclass(frozen=True, slots=True)
class Offloaded:
    """One tool result replaced by its condensed block."""

    position: int
    """Index of the message in the list given to `offload_messages`."""
    message: dict[str, Any]
    """The condensed copy (`condense.Condensed.message`)."""
    artifact_id: str | None
    """The stored object's id; None when it was not stored (larger than
    `max_artifact_bytes`, no store, or the write failed: `not_stored` says which)."""
    original_chars: int
    """Characters of the tool result's text."""
    size_bytes: int
    """UTF-8 bytes of the tool result's text (lone surrogates as 3 bytes each)."""
    not_stored: str | None
    """Why no object was stored: `too-large`, `no-store` or `write-failed`; None when stored."""


def offload_tool_result(
    message: Mapping[str, Any],
    store: ArtifactStore | None,
    settings: ArtifactSettings,
    position: int = 0,
) -> Offloaded | None:
    """`message` stored and condensed when it is a toolResult longer than
    `settings.max_inline_tool_result_chars` and `settings.enabled`; else None.

    The object holds the text exactly (UTF-8; a lone surrogate as its 3-byte form). When the
    text is larger than `settings.max_artifact_bytes`, or the store cannot be written (disk
    full, permissions: logged, never raised), the block is still sent, saying it was not stored:
    the provider never receives the whole output.
    """
    if not settings.enabled or not isinstance(message, Mapping):
        return None
    if message.get("role") != "toolResult":
        return None
    text = tool_result_text(message)
    if len(text) <= settings.max_inline_tool_result_chars:
        return None
    data = text.encode("utf-8", "surrogatepass")
    artifact_id: str | None = None
    not_stored: str | None = None
    if store is None:
        not_stored = "no-store"
    elif len(data) > settings.max_artifact_bytes:
        not_stored = "too-large"
    else:
        try:
            artifact_id = store.put(data).artifact_id
        except OSError as exc:
            log.warning("artifact write failed: error=%s", describe_failure(exc))
            not_stored = "write-failed"
    condensed = condense_tool_result(
        message, artifact_id=artifact_id, excerpt_chars=settings.excerpt_chars, text=text
    )
    return Offloaded(position, condensed.message, artifact_id, len(text), len(data), not_stored)


def offload_messages(
    messages: Sequence[Mapping[str, Any]],
    store: ArtifactStore | None,
    settings: ArtifactSettings,
) -> tuple[list[Any], list[Offloaded]]:
    """`messages` with every large tool result replaced by its condensed copy (the same
    objects elsewhere), and what was offloaded, in order. See `offload_tool_result`."""
    out: list[Any] = list(messages)
    done: list[Offloaded] = []
    for position, message in enumerate(messages):
        offloaded = offload_tool_result(message, store, settings, position)
        if offloaded is not None:
            out[position] = offloaded.message
            done.append(offloaded)
    return out, done
