"""Memory and pin mutations: the Pi custom entries `ds4-context-memory-v1` and
`ds4-context-pin-v1`, parsed and validated (docs/memory.md; docs/reference.md §3.16).

Pure: no store, no I/O. A mutation is one immutable event; the current items are what
`memory.replay` makes of all of them. The wire shape of `data` (the DS4 reference's, so
entries written by DS4's Pi extension read here unchanged):

    {"schemaVersion": 1, "mutationId": "...", "createdAt": <ms since epoch>,
     "operation": "add", "item": {...}}
    {"schemaVersion": 1, ..., "operation": "supersede", "previousId": "...", "item": {...}}
    {"schemaVersion": 1, ..., "operation": "status", "memoryId": "...",
     "status": "invalid" | "expired", "reason"?: "..."}            (memory)
    {"schemaVersion": 1, ..., "operation": "status", "pinId": "...",
     "status": "deleted", "reason"?: "..."}                        (pins)

Memory item: `{id, scope: session|project, projectPath?, key?, classification?, claim,
createdAt, sourceEntryIds: [string]}`. Pin item: `{id, scope: session|branch|project,
projectPath?, branchLeafId?, classification?, content, createdAt, sourceEntryId?,
sourceFile?}`. `classification` is a privacy level (`privacy.levels`). Unknown keys are
ignored (a later writer may add some). Times are integers or finite numbers of milliseconds
since the Unix epoch, within `json_bounds.MAX_SAFE_INTEGER`.

Hostile input: every check names the field (`item.claim`, `operation`, ...) in a
`MutationError`; `mutation_from_entry` raises only that, so a caller reading a session can
skip and count a bad entry like any other malformed line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ds4_core.json_bounds import MAX_SAFE_INTEGER, describe_type, echo
from ds4_core.privacy.levels import RANK, Level

MEMORY_CUSTOM_TYPE = "ds4-context-memory-v1"
"""`customType` of a memory mutation entry (docs/reference.md §3.16)."""

PIN_CUSTOM_TYPE = "ds4-context-pin-v1"
"""`customType` of a pin mutation entry (docs/reference.md §3.16)."""

SCHEMA_VERSION = 1
"""The only `schemaVersion` these entries have."""

MAX_ID_CHARS = 256
"""Longest item id, mutation id, previous id or entry id accepted."""

MAX_TEXT_CHARS = 32_000
"""Longest claim or pin content accepted (a pin is a selection, not a file)."""

MAX_REASON_CHARS = 2_000
"""Longest status reason accepted."""

MAX_SOURCE_ENTRY_IDS = 256
"""Most `sourceEntryIds` on one memory item."""

Kind = Literal["memory", "pin"]
Operation = Literal["add", "supersede", "status"]
MemoryScope = Literal["session", "project"]
PinScope = Literal["session", "branch", "project"]

MEMORY_SCOPES: tuple[MemoryScope, ...] = ("session", "project")
PIN_SCOPES: tuple[PinScope, ...] = ("session", "branch", "project")
MEMORY_STATUSES = ("invalid", "expired")
"""The statuses a memory `status` operation may set."""
PIN_STATUSES = ("deleted",)
"""The statuses a pin `status` operation may set."""


class MutationError(ValueError):
    """A mutation entry that cannot be used; `field` names the offending field (a dotted path
    inside `data`, e.g. `item.sourceEntryIds[2]`)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """A memory item as a mutation writes it (the claim and its origin; no status).

    Attributes:
        item_id: `id`, unique among memory items.
        scope: `session` (this session only) or `project` (every session of `project_path`).
        claim: the remembered statement, as written.
        created_at_ms: `createdAt`, ms since the epoch.
        source_entry_ids: the session entries the claim was taken from (may be empty).
        project_path: `projectPath`, or None.
        key: the explicit `key`, or None (the replay then derives one from the claim).
        classification: the privacy level, or None (`normal`).
    """

    item_id: str
    scope: MemoryScope
    claim: str
    created_at_ms: int
    source_entry_ids: tuple[str, ...] = ()
    project_path: str | None = None
    key: str | None = None
    classification: Level | None = None


@dataclass(frozen=True, slots=True)
class PinItem:
    """A pin as a mutation writes it.

    Attributes:
        item_id: `id`, unique among pins.
        scope: `session`, `branch` (only on the branch through `branch_leaf_id`) or `project`.
        content: the pinned text, as written.
        created_at_ms: `createdAt`, ms since the epoch.
        project_path, branch_leaf_id, source_entry_id, source_file: the optional origin fields.
        classification: the privacy level, or None (`normal`).
    """

    item_id: str
    scope: PinScope
    content: str
    created_at_ms: int
    project_path: str | None = None
    branch_leaf_id: str | None = None
    source_entry_id: str | None = None
    source_file: str | None = None
    classification: Level | None = None


@dataclass(frozen=True, slots=True)
class Mutation:
    """One validated mutation with where it was read.

    Attributes:
        kind: `memory` or `pin` (from the entry's `customType`).
        mutation_id: `mutationId`.
        created_at_ms: `createdAt`, ms since the epoch (the replay's first order key).
        operation: `add`, `supersede` or `status`.
        item: the new item (`add`, `supersede`), else None.
        previous_id: the superseded item's id (`supersede`), else None.
        target_id: the item whose status changes (`memoryId` / `pinId`), else None.
        status: the new status (`status`), else None.
        reason: the optional status reason.
        session_id: the session whose file holds the entry.
        entry_id: the custom entry's id.
        entry_order: the entry's 0-based position among the file's entries (`seq`).
    """

    kind: Kind
    mutation_id: str
    created_at_ms: int
    operation: Operation
    item: MemoryItem | PinItem | None
    previous_id: str | None
    target_id: str | None
    status: str | None
    reason: str | None
    session_id: str
    entry_id: str
    entry_order: int

    @property
    def mutation_key(self) -> str:
        """`session_id:entry_id`, unique across sessions (docs/reference.md §3.11)."""
        return f"{self.session_id}:{self.entry_id}"

    @property
    def item_id(self) -> str:
        """The id this mutation creates or changes."""
        if self.item is not None:
            return self.item.item_id
        assert self.target_id is not None
        return self.target_id


def kind_of(custom_type: Any) -> Kind | None:
    """`memory` or `pin` for our two custom types, None for any other value."""
    if custom_type == MEMORY_CUSTOM_TYPE:
        return "memory"
    if custom_type == PIN_CUSTOM_TYPE:
        return "pin"
    return None


# --------------------------------------------------------------------------------------------
# Field checks


def _fail(field: str, problem: str) -> MutationError:
    return MutationError(field, problem)


def _text(
    obj: Mapping[str, Any], name: str, path: str, limit: int, *, required: bool
) -> str | None:
    value = obj.get(name)
    field = f"{path}{name}"
    if value is None:
        if required:
            raise _fail(field, "is required")
        return None
    if not isinstance(value, str):
        raise _fail(field, f"must be a string, got {describe_type(value)}")
    if required and not value.strip():
        raise _fail(field, "must not be empty")
    if len(value) > limit:
        raise _fail(field, f"is longer than {limit} characters")
    if not value.isascii() and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise _fail(field, "holds a lone UTF-16 surrogate")
    return value


def _required_text(obj: Mapping[str, Any], name: str, path: str, limit: int) -> str:
    value = _text(obj, name, path, limit, required=True)
    assert value is not None
    return value


def _time_ms(obj: Mapping[str, Any], name: str, path: str) -> int:
    value = obj.get(name)
    field = f"{path}{name}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(field, f"must be a number of ms since the epoch, got {describe_type(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(field, "must be finite")
    if not 0 <= value <= MAX_SAFE_INTEGER:
        raise _fail(field, f"must be from 0 to {MAX_SAFE_INTEGER} ms")
    return int(value)


def _choice(obj: Mapping[str, Any], name: str, path: str, allowed: tuple[str, ...]) -> str:
    value = obj.get(name)
    if value not in allowed or not isinstance(value, str):
        raise _fail(f"{path}{name}", f"must be one of {', '.join(allowed)}, got {echo(value)}")
    return value


def _classification(obj: Mapping[str, Any], path: str) -> Level | None:
    value = obj.get("classification")
    if value is None:
        return None
    if not isinstance(value, str) or value not in RANK:
        raise _fail(
            f"{path}classification",
            f"must be one of normal, internal, sensitive, local-only, got {echo(value)}",
        )
    return value  # type: ignore[return-value]


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(field, f"must be an object, got {describe_type(value)}")
    return value


def _memory_item(value: Any) -> MemoryItem:
    obj = _object(value, "item")
    item_id = _required_text(obj, "id", "item.", MAX_ID_CHARS)
    scope = _choice(obj, "scope", "item.", MEMORY_SCOPES)
    claim = _required_text(obj, "claim", "item.", MAX_TEXT_CHARS)
    created_at_ms = _time_ms(obj, "createdAt", "item.")
    sources = obj.get("sourceEntryIds")
    if not isinstance(sources, list):
        raise _fail("item.sourceEntryIds", f"must be an array, got {describe_type(sources)}")
    if len(sources) > MAX_SOURCE_ENTRY_IDS:
        raise _fail("item.sourceEntryIds", f"holds more than {MAX_SOURCE_ENTRY_IDS} ids")
    wrapped = {f"sourceEntryIds[{i}]": source for i, source in enumerate(sources)}
    ids = tuple(_required_text(wrapped, name, "item.", MAX_ID_CHARS) for name in wrapped)
    return MemoryItem(
        item_id=item_id,
        scope=scope,  # type: ignore[arg-type]
        claim=claim,
        created_at_ms=created_at_ms,
        source_entry_ids=ids,
        project_path=_text(obj, "projectPath", "item.", MAX_TEXT_CHARS, required=False),
        key=_text(obj, "key", "item.", MAX_ID_CHARS, required=False),
        classification=_classification(obj, "item."),
    )


def _pin_item(value: Any) -> PinItem:
    obj = _object(value, "item")
    return PinItem(
        item_id=_required_text(obj, "id", "item.", MAX_ID_CHARS),
        scope=_choice(obj, "scope", "item.", PIN_SCOPES),  # type: ignore[arg-type]
        content=_required_text(obj, "content", "item.", MAX_TEXT_CHARS),
        created_at_ms=_time_ms(obj, "createdAt", "item."),
        project_path=_text(obj, "projectPath", "item.", MAX_TEXT_CHARS, required=False),
        branch_leaf_id=_text(obj, "branchLeafId", "item.", MAX_ID_CHARS, required=False),
        source_entry_id=_text(obj, "sourceEntryId", "item.", MAX_ID_CHARS, required=False),
        source_file=_text(obj, "sourceFile", "item.", MAX_TEXT_CHARS, required=False),
        classification=_classification(obj, "item."),
    )


def parse_mutation(
    kind: Kind, data: Any, *, session_id: str, entry_id: str, entry_order: int
) -> Mutation:
    """The validated mutation of one custom entry's `data` (module docstring for the shape).

    Args:
        kind: `memory` or `pin` (`kind_of(entry.customType)`).
        data: the entry's `data` as decoded JSON.
        session_id, entry_id, entry_order: where the entry was read (provenance and order).

    Raises:
        MutationError: a field is missing, of the wrong type, out of range or unknown; its
            `field` names it (`schemaVersion`, `operation`, `item.claim`, `memoryId`, ...).
    """
    obj = _object(data, "data")
    version = obj.get("schemaVersion")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise _fail("schemaVersion", f"must be {SCHEMA_VERSION}, got {echo(version)}")
    mutation_id = _required_text(obj, "mutationId", "", MAX_ID_CHARS)
    created_at_ms = _time_ms(obj, "createdAt", "")
    operation = _choice(obj, "operation", "", ("add", "supersede", "status"))
    item: MemoryItem | PinItem | None = None
    previous_id = target_id = status = reason = None
    if operation in ("add", "supersede"):
        item = _memory_item(obj.get("item")) if kind == "memory" else _pin_item(obj.get("item"))
        if operation == "supersede":
            previous_id = _required_text(obj, "previousId", "", MAX_ID_CHARS)
            if previous_id == item.item_id:
                raise _fail(
                    "previousId", "must differ from item.id (an item cannot replace itself)"
                )
    else:
        target_name = "memoryId" if kind == "memory" else "pinId"
        target_id = _required_text(obj, target_name, "", MAX_ID_CHARS)
        status = _choice(obj, "status", "", MEMORY_STATUSES if kind == "memory" else PIN_STATUSES)
        reason = _text(obj, "reason", "", MAX_REASON_CHARS, required=False)
    return Mutation(
        kind=kind,
        mutation_id=mutation_id,
        created_at_ms=created_at_ms,
        operation=operation,  # type: ignore[arg-type]
        item=item,
        previous_id=previous_id,
        target_id=target_id,
        status=status,
        reason=reason,
        session_id=session_id,
        entry_id=entry_id,
        entry_order=entry_order,
    )


def mutation_from_entry(session_id: str, entry: Any) -> Mutation | None:
    """The mutation a session entry carries, or None when it is not one of our custom entries.

    `entry` is a `sessions.reader.SessionEntry` (anything with `entry_type`, `entry_id`, `seq`
    and `data`).

    Raises:
        MutationError: it is one of ours but invalid (`field` names what is wrong).
    """
    if entry.entry_type != "custom":
        return None
    kind = kind_of(entry.data.get("customType"))
    if kind is None:
        return None
    return parse_mutation(
        kind,
        entry.data.get("data"),
        session_id=session_id,
        entry_id=entry.entry_id,
        entry_order=entry.seq,
    )


def mutation_data(mutation: Mutation) -> dict[str, Any]:
    """The entry `data` that `parse_mutation` reads back as `mutation` (a round trip; optional
    fields that are None are left out, as JavaScript's JSON.stringify leaves out undefined)."""
    data: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "mutationId": mutation.mutation_id,
        "createdAt": mutation.created_at_ms,
        "operation": mutation.operation,
    }
    if mutation.item is not None:
        data["item"] = item_data(mutation.item)
    if mutation.previous_id is not None:
        data["previousId"] = mutation.previous_id
    if mutation.target_id is not None:
        data["memoryId" if mutation.kind == "memory" else "pinId"] = mutation.target_id
        data["status"] = mutation.status
        if mutation.reason is not None:
            data["reason"] = mutation.reason
    return data


def item_data(item: MemoryItem | PinItem) -> dict[str, Any]:
    """An item in its wire shape (camelCase; None fields left out)."""
    if isinstance(item, MemoryItem):
        fields: dict[str, Any] = {
            "id": item.item_id,
            "scope": item.scope,
            "projectPath": item.project_path,
            "key": item.key,
            "classification": item.classification,
            "claim": item.claim,
            "createdAt": item.created_at_ms,
            "sourceEntryIds": list(item.source_entry_ids),
        }
    else:
        fields = {
            "id": item.item_id,
            "scope": item.scope,
            "projectPath": item.project_path,
            "branchLeafId": item.branch_leaf_id,
            "classification": item.classification,
            "content": item.content,
            "createdAt": item.created_at_ms,
            "sourceEntryId": item.source_entry_id,
            "sourceFile": item.source_file,
        }
    return {name: value for name, value in fields.items() if value is not None}
