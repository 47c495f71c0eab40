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
from ..tokens import estimate_message_tokens
from .memories import applies_to, session_project
from .preparing import Prepared


@dataclass
class MemorySupplements:
    """The pin and memory supplements of one plan and each one's least privacy level."""

    supplements: list[Supplement] = field(default_factory=list)
    floors: dict[str, str] = field(default_factory=dict)


def _screened(item: PlannedItem, target: Destination | None) -> tuple[PlannedItem, str]:
    """The item with its text, key and source file as `target` may see them quoted, and its
    least level: its classification, `local-only` when `target` redacts secrets and any of
    those holds one (what redaction would change). They are redacted before they are
    JSON-quoted into the block, whose escapes would hide a secret's shape
    (`sanitizing.QuotedRedaction`); an item that held one is withheld anyway unless the
    destination allows `local-only`."""
    level = item.classification or "normal"
    if target is not None and target.enabled and target.redact:
        sanitizer = Sanitizer(target)
        text = sanitizer.redacted_text(item.text)
        key = None if item.key is None else sanitizer.redacted_text(item.key)
        source = None if item.source_file is None else sanitizer.redacted_text(item.source_file)
        if (text, key, source) != (item.text, item.key, item.source_file):
            screened = replace(item, text=text, key=key, source_file=source)
            return screened, highest((level,), "local-only")
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
            for (
                memory_id,
                scope,
                origin,
                project,
                key,
                level,
                claim,
                created,
                updated,
                copies,
            ) in (rows)
            if applies_to(scope, origin, project, session_id, project_path, copies)
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
    project_path = session_project(store, session_id)

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
            copies,
        ) in pin_rows
        if applies_to(scope, origin, project, session_id, project_path, copies)
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
