"""Memory and pin writes (`memory/writes.py`): the entry a write returns parses back to the same
mutation, and the check refuses exactly what the replay would reject."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4_core.memory.events import MEMORY_CUSTOM_TYPE, mutation_data, parse_mutation
from ds4_core.memory.writes import WriteRefused, add_write, check_write, status_write

texts = (
    st.text(min_size=1, max_size=200)
    .filter(str.strip)
    .filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))
)
ids = st.text(alphabet="abcdef0123456789-", min_size=1, max_size=20)
levels = st.none() | st.sampled_from(["normal", "internal", "sensitive", "local-only"])
times = st.integers(min_value=0, max_value=2**53 - 1)


@given(
    claim=texts,
    scope=st.sampled_from(["session", "project"]),
    key=st.none() | ids,
    classification=levels,
    sources=st.lists(ids, max_size=5),
    project=st.none() | texts,
    supersedes=st.none() | ids,
    at=times,
)
def test_a_remember_entry_parses_back_to_the_same_item(
    claim, scope, key, classification, sources, project, supersedes, at
) -> None:
    item = {
        "scope": scope,
        "projectPath": project,
        "key": key,
        "classification": classification,
        "claim": claim,
        "sourceEntryIds": sources,
    }
    write = add_write("memory", item, at, supersedes)
    parsed = parse_mutation("memory", write.data, session_id="s", entry_id="e", entry_order=0)
    assert mutation_data(parsed) == write.data
    assert parsed.item is not None and parsed.item.item_id == write.item_id
    assert (parsed.item.claim, parsed.item.key, parsed.item.scope) == (claim, key, scope)
    assert parsed.previous_id == supersedes and parsed.created_at_ms == at
    assert write.entry()["customType"] == MEMORY_CUSTOM_TYPE
    assert re.fullmatch(r"mem-[0-9a-f]{16}", write.item_id)
    assert re.fullmatch(r"mu-[0-9a-f]{16}", write.data["mutationId"])


@given(
    content=texts,
    scope=st.sampled_from(["session", "branch", "project"]),
    leaf=st.none() | ids,
    source_entry=st.none() | ids,
    source_file=st.none() | texts,
    classification=levels,
    at=times,
)
def test_a_pin_entry_parses_back_to_the_same_item(
    content, scope, leaf, source_entry, source_file, classification, at
) -> None:
    item = {
        "scope": scope,
        "branchLeafId": leaf,
        "classification": classification,
        "content": content,
        "sourceEntryId": source_entry,
        "sourceFile": source_file,
    }
    write = add_write("pin", item, at)
    parsed = parse_mutation("pin", write.data, session_id="s", entry_id="e", entry_order=0)
    assert mutation_data(parsed) == write.data
    assert parsed.item is not None and parsed.item.content == content
    assert parsed.item.branch_leaf_id == leaf and parsed.item.source_file == source_file


@given(target=ids, status=st.sampled_from(["invalid", "expired"]), reason=st.none() | texts)
def test_a_forget_entry_parses_back(target, status, reason) -> None:
    write = status_write("memory", target, status, 5, reason)
    parsed = parse_mutation("memory", write.data, session_id="s", entry_id="e", entry_order=0)
    assert mutation_data(parsed) == write.data
    assert (parsed.target_id, parsed.status, parsed.reason) == (target, status, reason)


def _stored(*writes):
    return [
        parse_mutation(w.kind, w.data, session_id="s", entry_id=f"e{i}", entry_order=i)
        for i, w in enumerate(writes)
    ]


def claim(text: str, at: int = 1, supersedes: str | None = None):
    return add_write(
        "memory", {"scope": "project", "claim": text, "sourceEntryIds": []}, at, supersedes
    )


def test_a_conflicting_claim_is_refused_naming_the_item_and_the_fix() -> None:
    first = claim("retries defaults to 3")
    with pytest.raises(WriteRefused) as refused:
        check_write(claim("retries defaults to 5", 2), _stored(first), "s")
    assert refused.value.conflicts_with == first.item_id
    assert str(refused.value) == (
        f"conflicts with active memory '{first.item_id}' (same key 'retries' with another "
        f'value); pass params.supersedes: "{first.item_id}" to replace it'
    )
    check_write(claim("retries defaults to 5", 2, first.item_id), _stored(first), "s")


def test_status_writes_need_an_active_item() -> None:
    first = claim("telemetry is enabled")
    gone = status_write("memory", first.item_id, "invalid", 2)
    with pytest.raises(WriteRefused, match=r"is invalid, not active \(params.memoryId\)"):
        check_write(status_write("memory", first.item_id, "expired", 3), _stored(first, gone), "s")
    with pytest.raises(WriteRefused, match=r"unknown memory 'mem-x' \(params.memoryId\)"):
        check_write(status_write("memory", "mem-x", "expired", 3), _stored(first), "s")
    with pytest.raises(WriteRefused, match=r"unknown memory 'mem-x' \(params.supersedes\)"):
        check_write(claim("b is c", 3, "mem-x"), _stored(first), "s")


def test_a_superseded_item_points_to_the_end_of_its_chain() -> None:
    first = claim("retries defaults to 3")
    second = claim("retries defaults to 4", 2, first.item_id)
    third = claim("retries defaults to 5", 3, second.item_id)
    stored = _stored(first, second, third)
    with pytest.raises(WriteRefused) as refused:
        check_write(status_write("memory", first.item_id, "invalid", 4), stored, "s")
    assert str(refused.value) == (
        f"memory '{first.item_id}' is superseded by '{second.item_id}', not active "
        f"(params.memoryId); use '{third.item_id}'"
    )
    forgotten = status_write("memory", third.item_id, "invalid", 4)
    stored = _stored(first, second, third, forgotten)
    with pytest.raises(WriteRefused, match=rf"its chain ends at '{third.item_id}', which is inv"):
        check_write(claim("retries is 6", 5, first.item_id), stored, "s")


def test_a_session_item_of_another_session_is_refused() -> None:
    item = {"scope": "session", "claim": "alpha is one", "sourceEntryIds": []}
    mine = add_write("memory", item, 1)
    with pytest.raises(WriteRefused, match=r"does not apply to this session \(params.memoryId\)"):
        check_write(status_write("memory", mine.item_id, "invalid", 2), _stored(mine), "other")
    with pytest.raises(WriteRefused) as refused:
        check_write(claim("alpha is two", 2, mine.item_id), _stored(mine), "other")
    assert refused.value.kind == "elsewhere" and "(params.supersedes)" in str(refused.value)
    check_write(status_write("memory", mine.item_id, "invalid", 2), _stored(mine), "s")
