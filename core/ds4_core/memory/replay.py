"""Replay of memory and pin mutations into the current items (docs/memory.md "Replay";
docs/reference.md §3.16).

Pure and deterministic: the same mutations, in any input order, give the same items. Order
(the reference's): `createdAt`, then the source session id, the entry's position in its file,
`mutationId`, and the mutation key (`session:entry`). Rules:

* `add`: a new item, `active`. Rejected when its id exists already, when an active item of
  the same kind, scope and place (session, or project path) says the same thing (duplicate),
  or, for memory, when it contradicts one (`claims.conflict_reason`): a contradiction needs an
  explicit `supersede`.
* `supersede`: the active item `previousId` becomes `superseded` (its `superseded_by` the new
  id) and the new item is `active`. Rejected when `previousId` is unknown or not active, when
  the new id exists, or when the new memory claim contradicts an active item other than the
  one it replaces.
* `status`: an active item becomes `invalid` / `expired` (memory) or `deleted` (pin), with the
  reason. Rejected when the item is unknown or not active.

A `status` or `supersede` of a session item or a branch pin must be read from a session the
item applies to (`applies_in`: the session that created it, or one holding a copy of it);
from any other session it is rejected (`does not apply to session ...`), so no session retires
another's items, whoever wrote the entry. Project items apply across sessions; the replay does
not know a session's working directory, so the write check (`engine/memory_writes.py`) is what
keeps a project item of another directory out of reach.

A rejected mutation changes nothing and is listed with its reason (a writer that raced another
one, or a hand-edited file, is visible, never silently applied).

A copy is one event: Pi's `/fork` writes the root-to-leaf path, our entries included, into a
new session file, so the same mutation (same `mutationId`, same content) appears in another
session. The copy is not applied again; it is recorded on the item (`mutation_keys`,
`copy_sessions`), and session and branch items apply to every session holding it. A copy of a
rejected mutation is rejected with the same reason.

Places: a session item's place is its session, a branch pin's its session and `branchLeafId`
(the same text may be pinned on two branches), a project item's its project path without
trailing separators.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from .claims import ClaimShape, conflict_reason, shape_claim
from .events import Kind, MemoryItem, Mutation, PinItem

Status = str
"""`active`, `superseded`, `invalid`, `expired` (memory) or `deleted` (pins)."""


def replay_order(mutation: Mutation) -> tuple[int, str, int, str, str]:
    """The sort key of the replay (docs/reference.md §3.16)."""
    return (
        mutation.created_at_ms,
        mutation.session_id,
        mutation.entry_order,
        mutation.mutation_id,
        mutation.mutation_key,
    )


@dataclass(frozen=True, slots=True)
class CurrentItem:
    """One item after replay, with its provenance.

    Attributes:
        kind: `memory` or `pin`.
        item: the item as its creating mutation wrote it.
        status: see `Status`.
        origin_session_id: the session whose file holds the creating mutation.
        origin_mutation_key: `session:entry` of the creating mutation.
        updated_at_ms: `createdAt` of the last mutation that changed it.
        superseded_by: the id that replaced it, or None.
        status_reason: the reason of its `status` mutation, or None.
        mutation_keys: every mutation that touched it, in replay order (copies included).
        key: the memory key (explicit, or automatic from the claim), or None.
        copy_sessions: the other sessions whose files hold a copy of the creating mutation
            (a Pi `/fork`), in replay order; session and branch items apply there too.
    """

    kind: Kind
    item: MemoryItem | PinItem
    status: Status
    origin_session_id: str
    origin_mutation_key: str
    updated_at_ms: int
    superseded_by: str | None = None
    status_reason: str | None = None
    mutation_keys: tuple[str, ...] = ()
    key: str | None = None
    copy_sessions: tuple[str, ...] = ()

    @property
    def item_id(self) -> str:
        """The item's id."""
        return self.item.item_id


@dataclass(frozen=True, slots=True)
class Rejection:
    """A mutation the replay did not apply, and why; `conflicts_with` is the active item it
    repeats or contradicts (None for other reasons)."""

    mutation: Mutation
    reason: str
    conflicts_with: str | None = None


@dataclass(slots=True)
class Replay:
    """The result of `replay`: items by id in creation order, and the rejected mutations."""

    items: dict[str, CurrentItem] = field(default_factory=dict)
    rejected: list[Rejection] = field(default_factory=list)
    _shapes: dict[str, ClaimShape] = field(default_factory=dict)
    _order: dict[str, int] = field(default_factory=dict)
    _places: dict[tuple[str | None, ...], _Place] = field(default_factory=dict)

    def active(self) -> list[CurrentItem]:
        """The active items, in creation order."""
        return [item for item in self.items.values() if item.status == "active"]


@dataclass(slots=True)
class _Place:
    """The active items of one place, indexed by what a clash can share with them (normalised
    text, key, polarity subject), so a clash check costs O(items sharing one), not O(items)."""

    by_text: dict[str, set[str]] = field(default_factory=dict)
    by_key: dict[str, set[str]] = field(default_factory=dict)
    by_subject: dict[str, set[str]] = field(default_factory=dict)

    def _slots(self, shape: ClaimShape) -> list[tuple[dict[str, set[str]], str]]:
        slots = [(self.by_text, shape.text)]
        slots += [(self.by_key, key) for key in shape.keys]  # every clause's key
        if shape.polarity is not None:
            slots.append((self.by_subject, shape.subject))
        return slots

    def add(self, item_id: str, shape: ClaimShape) -> None:
        for index, value in self._slots(shape):
            index.setdefault(value, set()).add(item_id)

    def remove(self, item_id: str, shape: ClaimShape) -> None:
        for index, value in self._slots(shape):
            index.get(value, set()).discard(item_id)

    def candidates(self, shape: ClaimShape) -> set[str]:
        """The active items that may clash with `shape`."""
        found: set[str] = set()
        for index, value in self._slots(shape):
            found |= index.get(value, set())
        return found


def _place(item: MemoryItem | PinItem, session_id: str) -> tuple[str | None, ...]:
    """Where an item applies: its session (and a branch pin's `branchLeafId`), or its project
    path without trailing separators."""
    if item.scope == "project":
        path = item.project_path
        return ("project", (path.rstrip("/") or path) if path else path)
    if isinstance(item, PinItem) and item.scope == "branch":
        return ("branch", session_id, item.branch_leaf_id)
    return (item.scope, session_id)


def _clash(
    state: Replay, mutation: Mutation, item: MemoryItem | PinItem, ignore: str | None
) -> tuple[str, str] | None:
    """(why, the other item's id) when `item` cannot become active next to the active items
    of its place, or None."""
    place = state._places.get(_place(item, mutation.session_id))
    if place is None:
        return None
    new_shape = _shape(item)
    for other_id in sorted(place.candidates(new_shape) - {ignore}, key=state._order.__getitem__):
        other = state.items[other_id]
        old_shape = state._shapes[other_id]
        if new_shape.text == old_shape.text:
            return f"duplicate of active item '{other.item_id}'", other.item_id
        if mutation.kind == "memory":
            reason = conflict_reason(new_shape, old_shape)
            if reason is not None:
                return (
                    f"conflicts with active item '{other.item_id}' ({reason}); supersede it",
                    other.item_id,
                )
    return None


def _shape(item: MemoryItem | PinItem) -> ClaimShape:
    if isinstance(item, MemoryItem):
        return shape_claim(item.claim, item.key)
    return shape_claim(item.content)


def applies_in(current: CurrentItem, session_id: str) -> bool:
    """Whether a `status` or `supersede` read from `session_id` may change `current`: always
    for a project item, else when `session_id` created it or holds a copy of it (a Pi
    `/fork`)."""
    if current.item.scope == "project":
        return True
    return session_id == current.origin_session_id or session_id in current.copy_sessions


def _elsewhere(current: CurrentItem, mutation: Mutation) -> str:
    """The rejection reason of a change of `current` read from a session it does not apply to."""
    return (
        f"{current.kind} '{current.item_id}' does not apply to session '{mutation.session_id}' "
        f"(a {current.item.scope} item of session '{current.origin_session_id}')"
    )


def _deactivate(state: Replay, current: CurrentItem) -> None:
    """Take an item that stops being active out of its place's index."""
    place = state._places[_place(current.item, current.origin_session_id)]
    place.remove(current.item_id, state._shapes[current.item_id])


def _active_target(
    state: Replay, mutation: Mutation, item_id: str | None, unknown_suffix: str
) -> CurrentItem | str:
    """The active item of the mutation's kind that a `status` or `supersede` changes, or the
    rejection reason: unknown (`unknown_suffix` after the id), not applying to the mutation's
    session, or no longer active."""
    target = state.items.get(item_id or "")
    if target is None or target.kind != mutation.kind:
        return f"unknown {mutation.kind} '{item_id}'{unknown_suffix}"
    if not applies_in(target, mutation.session_id):
        return _elsewhere(target, mutation)
    if target.status != "active":
        return f"{mutation.kind} '{target.item_id}' is {target.status}, not active"
    return target


def _apply(state: Replay, mutation: Mutation) -> str | tuple[str, str] | None:
    """Apply one mutation to `state`; the rejection reason (with the clashing item's id for a
    repeat or a conflict), or None when applied."""
    items = state.items
    key = mutation.mutation_key
    if mutation.operation == "status":
        target = _active_target(state, mutation, mutation.item_id, "")
        if isinstance(target, str):
            return target
        _deactivate(state, target)
        items[target.item_id] = replace(
            target,
            status=mutation.status or "",
            status_reason=mutation.reason,
            updated_at_ms=mutation.created_at_ms,
            mutation_keys=(*target.mutation_keys, key),
        )
        return None
    item = mutation.item
    assert item is not None
    if item.item_id in items:
        return f"{mutation.kind} id '{item.item_id}' exists already"
    previous = None
    if mutation.operation == "supersede":
        found = _active_target(state, mutation, mutation.previous_id, " to supersede")
        if isinstance(found, str):
            return found
        previous = found
    clash = _clash(state, mutation, item, previous.item_id if previous else None)
    if clash is not None:
        return clash
    if previous is not None:
        _deactivate(state, previous)
        items[previous.item_id] = replace(
            previous,
            status="superseded",
            superseded_by=item.item_id,
            updated_at_ms=mutation.created_at_ms,
            mutation_keys=(*previous.mutation_keys, key),
        )
    shape = _shape(item)
    state._shapes[item.item_id] = shape
    state._order[item.item_id] = len(state._order)
    state._places.setdefault(_place(item, mutation.session_id), _Place()).add(item.item_id, shape)
    items[item.item_id] = CurrentItem(
        kind=mutation.kind,
        item=item,
        status="active",
        origin_session_id=mutation.session_id,
        origin_mutation_key=key,
        updated_at_ms=mutation.created_at_ms,
        mutation_keys=(key,),
        key=shape.key if mutation.kind == "memory" else None,
    )
    return None


def replay(mutations: Iterable[Mutation]) -> Replay:
    """The current items of one kind's mutations (memory and pins have separate id spaces, so
    each kind is replayed on its own).

    Mutations are sorted by `replay_order` first, so the input order does not matter. Two
    mutations with the same mutation key (the same entry read twice) count once.

    Raises:
        ValueError: the mutations are of both kinds.
    """
    ordered = sorted(mutations, key=replay_order)
    if len({mutation.kind for mutation in ordered}) > 1:
        raise ValueError("replay memory and pin mutations separately (their ids are separate)")
    state = Replay()
    seen: set[str] = set()
    first: dict[str, tuple[Mutation, Rejection | None]] = {}  # by mutation id
    for mutation in ordered:
        if mutation.mutation_key in seen:
            continue
        seen.add(mutation.mutation_key)
        original = first.get(mutation.mutation_id)
        if original is not None and _is_copy(original[0], mutation):
            _record_copy(state, mutation, *original)
            continue
        refused = _apply(state, mutation)
        rejection = None
        if isinstance(refused, tuple):
            rejection = Rejection(mutation, *refused)
        elif refused is not None:
            rejection = Rejection(mutation, refused)
        if rejection is not None:
            state.rejected.append(rejection)
        first.setdefault(mutation.mutation_id, (mutation, rejection))
    return state


def _is_copy(original: Mutation, mutation: Mutation) -> bool:
    """Whether `mutation` is `original` copied into another session's file (a Pi `/fork`):
    the same mutation id and content, read elsewhere."""
    return mutation.session_id != original.session_id and _content(mutation) == _content(original)


def _content(mutation: Mutation) -> tuple[object, ...]:
    """What a mutation says, without where it was read."""
    m = mutation
    return (m.kind, m.mutation_id, m.created_at_ms, m.operation, m.item, m.previous_id,
            m.target_id, m.status, m.reason)  # fmt: skip


def _record_copy(
    state: Replay, copy: Mutation, original: Mutation, rejection: Rejection | None
) -> None:
    """Record `copy` of `original` on the item it created or changed (or reject it as the
    original was)."""
    if rejection is not None:
        state.rejected.append(replace(rejection, mutation=copy))
        return
    current = state.items.get(original.item_id)
    if current is None:
        return
    sessions = current.copy_sessions
    if original.operation != "status" and copy.session_id not in sessions:
        sessions = (*sessions, copy.session_id)
    state.items[current.item_id] = replace(
        current,
        copy_sessions=sessions,
        mutation_keys=(*current.mutation_keys, copy.mutation_key),
    )
