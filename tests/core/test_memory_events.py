"""Memory and pin mutation entries: parsing, hostile input named by field, round trip."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.memory.events import (
    MEMORY_CUSTOM_TYPE,
    PIN_CUSTOM_TYPE,
    Kind,
    MutationError,
    mutation_data,
    mutation_from_entry,
    parse_mutation,
)


def memory_add(**item: Any) -> dict[str, Any]:
    base = {
        "id": "m1",
        "scope": "project",
        "projectPath": "/p",
        "claim": "retries defaults to 3",
        "createdAt": 1000,
        "sourceEntryIds": ["a1"],
    }
    base.update(item)
    return {
        "schemaVersion": 1,
        "mutationId": "mut-1",
        "createdAt": 1000,
        "operation": "add",
        "item": base,
    }


def entry(custom_type: str, data: Any, entry_id: str = "e1", seq: int = 3) -> Any:
    return SimpleNamespace(
        entry_type="custom",
        entry_id=entry_id,
        seq=seq,
        data={"type": "custom", "customType": custom_type, "data": data, "id": entry_id},
    )


def test_a_memory_add_entry_reads_with_its_provenance() -> None:
    mutation = mutation_from_entry("s1", entry(MEMORY_CUSTOM_TYPE, memory_add()))
    assert mutation is not None
    assert mutation.kind == "memory" and mutation.operation == "add"
    assert mutation.item is not None and mutation.item.item_id == "m1"
    assert mutation.mutation_key == "s1:e1" and mutation.entry_order == 3


def test_other_entries_are_not_mutations() -> None:
    assert mutation_from_entry("s1", entry("my-extension", {"count": 1})) is None
    message = SimpleNamespace(entry_type="message", entry_id="x", seq=0, data={})
    assert mutation_from_entry("s1", message) is None


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schemaVersion": 2}, "schemaVersion"),
        ({"schemaVersion": True}, "schemaVersion"),
        ({"mutationId": ""}, "mutationId"),
        ({"mutationId": 7}, "mutationId"),
        ({"createdAt": "2026-01-01"}, "createdAt"),
        ({"createdAt": -1}, "createdAt"),
        ({"createdAt": 2**60}, "createdAt"),
        ({"operation": "delete"}, "operation"),
        ({"operation": ["add"]}, "operation"),
        ({"item": None}, "item"),
        ({"item": [1]}, "item"),
    ],
)
def test_a_bad_envelope_field_is_named(change: dict[str, Any], field: str) -> None:
    data = {**memory_add(), **change}
    with pytest.raises(MutationError) as caught:
        mutation_from_entry("s1", entry(MEMORY_CUSTOM_TYPE, data))
    assert caught.value.field == field


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"scope": "branch"}, "item.scope"),
        ({"claim": "   "}, "item.claim"),
        ({"claim": "x" * 40_000}, "item.claim"),
        ({"claim": "bad \ud800 text"}, "item.claim"),
        ({"sourceEntryIds": "a1"}, "item.sourceEntryIds"),
        ({"sourceEntryIds": ["a1", 5]}, "item.sourceEntryIds[1]"),
        ({"classification": "secret"}, "item.classification"),
        ({"key": {"k": 1}}, "item.key"),
        ({"createdAt": float("nan")}, "item.createdAt"),
    ],
)
def test_a_bad_memory_item_field_is_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(MutationError) as caught:
        parse_mutation("memory", memory_add(**change), session_id="s", entry_id="e", entry_order=0)
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


@pytest.mark.parametrize(("kind", "field"), [("memory", "memoryId"), ("pin", "status")])
def test_status_needs_the_kind_s_target_and_status(kind: Kind, field: str) -> None:
    """A memory status names `memoryId`; a pin status may only be `deleted`."""
    data = {
        "schemaVersion": 1,
        "mutationId": "m",
        "createdAt": 5,
        "operation": "status",
        "pinId": "p",
        "status": "invalid",
    }
    with pytest.raises(MutationError) as caught:
        parse_mutation(kind, data, session_id="s", entry_id="e", entry_order=0)
    assert caught.value.field == field


def test_supersede_cannot_replace_itself() -> None:
    data = {**memory_add(), "operation": "supersede", "previousId": "m1"}
    with pytest.raises(MutationError) as caught:
        parse_mutation("memory", data, session_id="s", entry_id="e", entry_order=0)
    assert caught.value.field == "previousId"


_text = st.text(min_size=1, max_size=20).filter(lambda t: t.strip())
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(data=_json, kind=st.sampled_from([MEMORY_CUSTOM_TYPE, PIN_CUSTOM_TYPE]))
def test_hostile_data_raises_only_mutation_error(data: Any, kind: str) -> None:
    """Whatever `data` holds, reading the entry gives a mutation or a MutationError."""
    try:
        mutation_from_entry("s", entry(kind, data))
    except MutationError as exc:
        assert exc.field


@settings(max_examples=100, deadline=None)
@given(
    item_id=_text,
    claim=_text,
    created=st.integers(min_value=0, max_value=2**53 - 1),
    sources=st.lists(_text, max_size=3),
)
def test_memory_mutations_round_trip(
    item_id: str, claim: str, created: int, sources: list[str]
) -> None:
    data = memory_add(id=item_id, claim=claim, createdAt=created, sourceEntryIds=sources)
    first = parse_mutation("memory", data, session_id="s", entry_id="e", entry_order=1)
    again = parse_mutation(
        "memory", mutation_data(first), session_id="s", entry_id="e", entry_order=1
    )
    assert again == first


def test_pin_status_round_trips() -> None:
    data = {
        "schemaVersion": 1,
        "mutationId": "x",
        "createdAt": 9,
        "operation": "status",
        "pinId": "p1",
        "status": "deleted",
        "reason": "done",
    }
    mutation = parse_mutation("pin", data, session_id="s", entry_id="e", entry_order=0)
    assert mutation_data(mutation) == data
