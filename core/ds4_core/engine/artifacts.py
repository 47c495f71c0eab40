"""Artifacts in plans: the large tool results of a managed session plan stored and condensed
before the planner sizes them (docs/artifacts.md).

Only the provider-facing copy changes: `Prepared.messages` gets new message objects in the
offloaded positions, the session's cached messages and the file stay as they are. Observer
mode, ephemeral plans (no session) and `artifacts.enabled` false never offload; the caller
(`planning.Planner.plan`) checks the first two. The condensed copy of a session message is
kept per process (`KEPT` of them, by message object), so the next plan of the same session
neither hashes the output again nor re-reads the object.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..artifacts.condense import tool_result_chars
from ..artifacts.offload import Offloaded, offload_tool_result
from ..artifacts.store import ArtifactStore, artifact_root
from ..config import ArtifactSettings, Config
from ..logs import describe_failure
from ..planner import ContextPlan
from ..tokens import estimate_message_tokens
from .context import EngineContext
from .preparing import Prepared

log = logging.getLogger("ds4_core.engine")

KEPT = 64
"""Condensed copies kept per process (least recently used dropped first)."""


class ArtifactOffloads:
    """The offloading of one engine's plans (see the module docstring). Thread-safe."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._kept: OrderedDict[int, tuple[Mapping[str, Any], ArtifactSettings, Offloaded]] = (
            OrderedDict()
        )

    def apply(self, prepared: Prepared, config: Config) -> tuple[Prepared, list[Offloaded]]:
        """`prepared` with its large tool results replaced by their condensed copies (their
        tokens estimated again; the kept planner structure dropped, as its sizes changed),
        and what was offloaded in message order. `prepared` itself is not changed."""
        settings = config.artifacts
        if not settings.enabled:
            return prepared, []
        large = [
            i
            for i, message in enumerate(prepared.messages)
            if message.get("role") == "toolResult"
            and tool_result_chars(message) > settings.max_inline_tool_result_chars
        ]
        if not large:
            return prepared, []
        store = self._store()
        messages = list(prepared.messages)
        tokens = list(prepared.message_tokens)
        done: list[Offloaded] = []
        for position in large:
            offloaded = self._offload(messages[position], position, store, settings)
            if offloaded is None:
                continue
            messages[position] = offloaded.message
            tokens[position] = estimate_message_tokens(offloaded.message)
            done.append(offloaded)
        return (
            replace(
                prepared, messages=messages, message_tokens=tokens, structure=None, verbatim=None
            ),
            done,
        )

    def _store(self) -> ArtifactStore | None:
        """The store beside the database; None when the database cannot be opened (the
        blocks then say the output was not stored)."""
        try:
            return ArtifactStore(artifact_root(self._context.store().path))
        except Exception as exc:  # fail open: condensed without an artifact
            log.warning("artifact store unavailable: error=%s", describe_failure(exc))
            return None

    def _offload(
        self,
        message: Mapping[str, Any],
        position: int,
        store: ArtifactStore | None,
        settings: ArtifactSettings,
    ) -> Offloaded | None:
        with self._lock:
            kept = self._kept.get(id(message))
            if kept is not None and kept[0] is message and kept[1] == settings:
                self._kept.move_to_end(id(message))
                return replace(kept[2], position=position)
        offloaded = offload_tool_result(message, store, settings, position)
        if offloaded is not None and offloaded.not_stored in (None, "too-large"):
            with self._lock:
                self._kept[id(message)] = (message, settings, offloaded)
                while len(self._kept) > KEPT:
                    self._kept.popitem(last=False)
        return offloaded


def manifest_artifacts(
    offloaded: Sequence[Offloaded], source_ids: Sequence[str | None], plan: ContextPlan
) -> list[dict[str, Any]]:
    """The manifest's `artifacts`: one entry per offloaded tool result the plan sends (ids and
    sizes, never text): `artifactId` (None: not stored), `sourceId` (the session entry),
    `originalChars`, `sizeBytes`, `notStored` (None, `too-large`, `no-store`,
    `write-failed`)."""
    if plan.mode != "managed":  # observer and fallback plans send the messages as they were
        return []
    sent = {item.source_id for item in plan.included}
    out = []
    for item in offloaded:
        source_id = source_ids[item.position] or f"message:{item.position}"
        if source_id not in sent:
            continue
        out.append(
            {
                "artifactId": item.artifact_id,
                "sourceId": source_id,
                "originalChars": item.original_chars,
                "sizeBytes": item.size_bytes,
                "notStored": item.not_stored,
            }
        )
    return out
