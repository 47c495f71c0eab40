"""Pins and memory as supplements of a managed session plan (docs/memory.md "Planning").

`memory_supplements` reads the active pins and memory items, keeps those that apply to the
session (its session items, its branch pins whose `branchLeafId` is on the active branch, the
project items of its working directory), selects the memory items for the request
(`memory.selection`) and renders every item as its quoted block. Pins go in as `pin`
supplements (mandatory, within `context.maxPinnedTokens`: over it the planner falls back and
says why), memory as `memory` supplements (within `context.maxMemoryTokens`).

Privacy: each item's least level (`floors`) is its `classification`, raised to `local-only`
when the destination redacts secrets and the item's text holds one: such an item is withheld
whole from a remote provider rather than sent with holes (docs/privacy.md). The planner then
screens the blocks like every other supplement (`sanitizing.screen_supplements`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..config import Config
from ..memory.selection import (
    MemoryIndex,
    PlannedItem,
    memory_text,
    pin_text,
)
from ..planner import Supplement
from ..planner.planner import PRIORITIES
from ..privacy.levels import highest
from ..privacy.policy import Destination
from ..privacy.sanitizer import Sanitizer
from ..retrieval.evidence import evidence_message
from ..store import Store
from ..store import memory as memory_repo
from ..store import sessions as session_repo
from ..tokens import estimate_message_tokens
from .memories import applies_to
from .preparing import Prepared


@dataclass
class MemorySupplements:
    """The pin and memory supplements of one plan and each one's least privacy level."""

    supplements: list[Supplement] = field(default_factory=list)
    floors: dict[str, str] = field(default_factory=dict)


def _screened(item: PlannedItem, target: Destination | None) -> tuple[PlannedItem, str]:
    """The item with its text as `target` may see it quoted, and its least level: its
    classification, `local-only` when `target` redacts secrets and the text holds one (what
    redaction would change). The text is redacted before it is JSON-quoted into its block,
    whose escapes would hide a secret's shape (`sanitizing.QuotedRedaction`); an item that
    held one is withheld anyway unless the destination allows `local-only`."""
    level = item.classification or "normal"
    if target is not None and target.enabled and target.redact:
        redacted = Sanitizer(target).redacted_text(item.text)
        if redacted != item.text:
            return replace(item, text=redacted), highest((level,), "local-only")
    return item, level


_last_index: tuple[tuple[Any, ...], MemoryIndex] | None = None
"""The last `MemoryIndex` built, with what it was built from (rows, session, project path)."""


def _memory_index(
    rows: list[tuple[Any, ...]], session_id: str, project_path: str | None
) -> MemoryIndex:
    """The `MemoryIndex` of the memory rows that apply to the session: the previous plan's
    when the rows and the session are the same (compared in full: a cheap equality), else
    built anew."""
    global _last_index
    basis = (session_id, project_path, rows)
    last = _last_index
    if last is not None and last[0] == basis:
        return last[1]
    index = MemoryIndex(
        [
            PlannedItem(memory_id, claim, scope, created, updated, key, level)
            for (memory_id, scope, origin, project, key, level, claim, created, updated) in rows
            if applies_to(scope, origin, project, session_id, project_path)
        ]
    )
    _last_index = (basis, index)
    return index


def memory_supplements(
    store: Store,
    prepared: Prepared,
    request: str,
    config: Config,
    target: Destination | None,
) -> MemorySupplements:
    """The pins and selected memory items of a session plan as supplements (see the module
    docstring); empty for an ephemeral plan, with `memory.enabled` off, or without items.
    `request` is the current request as its destination may see it."""
    found = MemorySupplements()
    session_id = prepared.session_id
    if session_id is None or not config.memory.enabled:
        return found
    pin_rows, memory_rows = memory_repo.active_for_planning(store)
    if not pin_rows and not memory_rows:
        return found
    header = session_repo.session_header(store, session_id) or {}
    cwd = header.get("cwd")
    project_path = cwd if isinstance(cwd, str) and cwd else None

    branch = prepared.branch_entry_ids
    pins = [
        PlannedItem(pin_id, content, scope, created, updated, None, level, source_file)
        for (
            pin_id,
            scope,
            origin,
            project,
            leaf,
            level,
            content,
            source_file,
            created,
            updated,
        ) in pin_rows
        if applies_to(scope, origin, project, session_id, project_path)
        and (scope != "branch" or leaf in branch)
    ]
    memory = _memory_index(memory_rows, session_id, project_path)
    for planned in pins:
        pin, found.floors[planned.item_id] = _screened(planned, target)
        message = evidence_message(pin_text(pin))
        found.supplements.append(
            Supplement(
                kind="pin",
                source_id=pin.item_id,
                message=message,
                tokens=estimate_message_tokens(message),
                score=PRIORITIES["pin"],
            )
        )
    for selected in memory.select(request, config.memory.max_results):
        item, found.floors[selected.item.item_id] = _screened(selected.item, target)
        message = evidence_message(memory_text(replace(selected, item=item)))
        found.supplements.append(
            Supplement(
                kind="memory",
                source_id=selected.item.item_id,
                message=message,
                tokens=estimate_message_tokens(message),
                score=selected.score,
            )
        )
    return found
