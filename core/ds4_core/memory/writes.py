"""Memory and pin writes (`ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget`; docs/memory.md
"Writes"): the entry `data` one write makes, and its check against the current items.

Pure: no store, no I/O. A write never changes anything itself: it makes the `data` of one
custom entry (`ds4-context-pin-v1` / `ds4-context-memory-v1`) for the session's writer to
append. Before that, `check_write` replays the stored mutations with the new one in its
place (the replay order of `memory.replay`: the new entry goes last in its session, at its
`createdAt`), so a write is refused by exactly the rules that would reject its entry later:
a repeat or a conflict, an unknown or inactive `pinId` / `memoryId` / `supersedes`.

Ids: items `pin-` / `mem-` + 16 lower-case hex, mutations `mu-` + 16 hex (random, 64 bits).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..json_bounds import MAX_SAFE_INTEGER, echo
from .events import (
    MEMORY_CUSTOM_TYPE,
    PIN_CUSTOM_TYPE,
    SCHEMA_VERSION,
    Kind,
    Mutation,
    parse_mutation,
)
from .replay import CurrentItem, Rejection, Replay, applies_in, replay

PENDING_ENTRY_ID = "pending"
"""The entry id a write is checked under (its real id is known once it is appended)."""

_PREFIX: dict[Kind, str] = {"pin": "pin-", "memory": "mem-"}
_TARGET: dict[Kind, str] = {"pin": "pinId", "memory": "memoryId"}


def new_id(prefix: str) -> str:
    """`prefix` followed by 16 random lower-case hex digits (`pin-`, `mem-`, `mu-`)."""
    return prefix + secrets.token_hex(8)


def custom_type(kind: Kind) -> str:
    """The `customType` of a `kind` mutation entry."""
    return PIN_CUSTOM_TYPE if kind == "pin" else MEMORY_CUSTOM_TYPE


class WriteRefused(ValueError):
    """A write the current items refuse. The message names the item and says what to do;
    `kind` says why: `conflict` (a claim contradicting an active item), `repeat` (the same
    text as an active item of the same place), `unknown` (no such item), `elsewhere` (an item
    of another session or project, `replay.applies_in`), `inactive` (the item is no longer
    active) or `refused` (another replay rejection); `conflicts_with` is the
    active item a new one contradicts or repeats (else None)."""

    def __init__(self, message: str, kind: str, conflicts_with: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.conflicts_with = conflicts_with

    def data(self) -> dict[str, str]:
        """The refusal's `data` on the wire: `{kind}`, with `conflictsWith` when it applies."""
        if self.conflicts_with is None:
            return {"kind": self.kind}
        return {"conflictsWith": self.conflicts_with, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class Write:
    """One write: the entry to append and the item it creates or changes.

    Attributes:
        kind: `pin` or `memory`.
        data: the entry's `data` (`memory.events` reads it back as the same mutation).
        item_id: the new item's id (add, supersede) or the changed one's (status).
    """

    kind: Kind
    data: dict[str, Any]
    item_id: str

    @property
    def custom_type(self) -> str:
        """`ds4-context-pin-v1` or `ds4-context-memory-v1`."""
        return custom_type(self.kind)

    def entry(self) -> dict[str, Any]:
        """The Pi entry body: `{type: "custom", customType, data}` (Pi's `appendEntry` and
        `owned.append_entries` add `id`, `parentId` and `timestamp`)."""
        return {"type": "custom", "customType": self.custom_type, "data": self.data}

    def entry_line(self, entry_id: str, parent_id: str | None, timestamp: str) -> dict[str, Any]:
        """The complete session line of this entry, for a client that appends raw lines:
        `{type: "custom", id, parentId, timestamp, customType, data}` (Pi's custom entry,
        docs/reference.md §P4)."""
        return {
            "type": "custom",
            "id": entry_id,
            "parentId": parent_id,
            "timestamp": timestamp,
            "customType": self.custom_type,
            "data": self.data,
        }


def created_at(stored: Iterable[Mutation], now_ms: int) -> int:
    """The `createdAt` of a new write: `now_ms`, or 1 ms after the newest stored mutation of
    its kind when that one is dated later (another machine's clock ahead of ours), so the
    write sorts after everything it was checked against (the replay orders by `createdAt`
    first); at most `MAX_SAFE_INTEGER`."""
    newest = max((mutation.created_at_ms for mutation in stored), default=-1)
    return min(max(now_ms, newest + 1), MAX_SAFE_INTEGER)


def add_write(
    kind: Kind, item: Mapping[str, Any], created_at_ms: int, supersedes: str | None = None
) -> Write:
    """An `add` (or, with `supersedes`, a `supersede` of that item) of a new item.

    `item` holds the item's fields in wire spelling without `id` and `createdAt` (a memory
    item: `scope`, `claim`, `sourceEntryIds`, optional `projectPath`, `key`,
    `classification`; a pin: `scope`, `content`, optional ...); None values are left out.
    """
    item_id = new_id(_PREFIX[kind])
    fields = {"id": item_id, **{k: v for k, v in item.items() if v is not None}}
    fields["createdAt"] = created_at_ms
    data: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "mutationId": new_id("mu-"),
        "createdAt": created_at_ms,
        "operation": "supersede" if supersedes is not None else "add",
    }
    if supersedes is not None:
        data["previousId"] = supersedes
    data["item"] = fields
    return Write(kind, data, item_id)


def status_write(
    kind: Kind, target_id: str, status: str, created_at_ms: int, reason: str | None = None
) -> Write:
    """A `status` change of `target_id`: `deleted` for a pin, `invalid` / `expired` for memory."""
    data: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "mutationId": new_id("mu-"),
        "createdAt": created_at_ms,
        "operation": "status",
        _TARGET[kind]: target_id,
        "status": status,
    }
    if reason is not None:
        data["reason"] = reason
    return Write(kind, data, target_id)


def as_mutation(write: Write, session_id: str, entry_order: int = MAX_SAFE_INTEGER) -> Mutation:
    """The mutation `write` becomes once appended to `session_id` (checked as its last entry).

    Raises:
        MutationError: the data is invalid (`field` names it in the entry's spelling,
            `item.claim`, ...).
    """
    return parse_mutation(
        write.kind,
        write.data,
        session_id=session_id,
        entry_id=PENDING_ENTRY_ID,
        entry_order=entry_order,
    )


def check_write(write: Write, stored: Iterable[Mutation], session_id: str) -> Replay:
    """Replay `stored` (the mutations of `write.kind`) with `write` appended to `session_id`,
    and return the replay when the write applies.

    Raises:
        MutationError: the write's data is invalid.
        WriteRefused: the replay rejects it (message in `refusal`'s words).
    """
    mutation = as_mutation(write, session_id)
    state = replay([*stored, mutation])
    for rejection in state.rejected:
        if rejection.mutation.mutation_key == mutation.mutation_key:
            raise refusal(rejection, state)
    return state


def refusal(rejection: Rejection, state: Replay) -> WriteRefused:
    """The `WriteRefused` of a write the replay rejected: the item named (quoted as
    `json_bounds.echo` quotes a client's value), the param to change and what to do
    (`conflicts with active memory 'm1' (same key 'retries' with another value); pass
    params.supersedes: "m1" to replace it`)."""
    mutation = rejection.mutation
    noun = mutation.kind
    other = rejection.conflicts_with
    if other is not None:
        replaced = mutation.previous_id
        if rejection.reason.startswith("duplicate"):
            return WriteRefused(
                f"repeats active {noun} {echo(other)} (the same text); nothing to add",
                "repeat",
                other,
            )
        detail = rejection.reason.removeprefix(f"conflicts with active item '{other}' (")
        detail = detail.removesuffix("); supersede it")
        if replaced is None:
            advice = f"pass params.supersedes: {json.dumps(other)} to replace it"
        else:
            advice = (
                f"forget {echo(other)} first (ds4/forget), or supersede it instead of "
                f"{echo(replaced)}"
            )
        return WriteRefused(
            f"conflicts with active {noun} {echo(other)} ({detail}); {advice}", "conflict", other
        )
    if mutation.operation == "status":
        field = f"params.{_TARGET[noun]}"
        name = mutation.item_id
    else:
        field = "params.supersedes"
        name = mutation.previous_id or ""
    target = state.items.get(name)
    if target is None or target.kind != noun:
        return WriteRefused(
            f"unknown {noun} {echo(name)} ({field}); ds4/memory lists the current items and "
            "their ids",
            "unknown",
        )
    if not applies_in(target, mutation.session_id):
        return WriteRefused(
            f"{noun} {echo(name)} does not apply to this session ({field}): it is a "
            f"{target.item.scope} item of another session; ds4/memory lists the items of this "
            "session",
            "elsewhere",
        )
    if target.status != "active":
        successor = target.superseded_by
        now = f"superseded by {echo(successor)}" if successor is not None else target.status
        advice = _chain_advice(target, state) if successor is not None else "nothing to change"
        return WriteRefused(
            f"{noun} {echo(name)} is {now}, not active ({field}); {advice}", "inactive"
        )
    return WriteRefused(f"{noun} write refused ({field}): {rejection.reason}", "refused")


def _chain_advice(item: CurrentItem, state: Replay) -> str:
    """What to use instead of the superseded `item`: the end of its chain of successors
    (`m1` -> `m2` -> `m3`: `use 'm3'`), or, when that one is no longer active either (forgotten
    or deleted), that there is nothing to change."""
    seen = {item.item_id}
    last = item
    while last.superseded_by is not None and last.superseded_by not in seen:
        following = state.items.get(last.superseded_by)
        if following is None:
            break
        seen.add(following.item_id)
        last = following
    if last.status == "active":
        return f"use {echo(last.item_id)}"
    return f"nothing to change (its chain ends at {echo(last.item_id)}, which is {last.status})"
