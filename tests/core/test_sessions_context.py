"""The active branch and the messages Pi would send (docs/reference.md §P6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ds4_core.sessions import (
    LAST_ENTRY,
    SessionEntry,
    SessionFormatError,
    UnknownLeafError,
    active_path,
    build_session_context,
    current_model,
    read_all,
)

_seq = iter(range(1_000_000))


def _e(
    entry_id: str, parent_id: str | None, entry_type: str = "message", **data: Any
) -> SessionEntry:
    body = {
        "type": entry_type,
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": "2026-01-01T00:00:05.000Z",
        **data,
    }
    return SessionEntry(
        entry_id, parent_id, entry_type, body["timestamp"], body, "", 1, 0, next(_seq)
    )


def _user(entry_id: str, parent_id: str | None, text: str = "hi") -> SessionEntry:
    return _e(entry_id, parent_id, message={"role": "user", "content": text, "timestamp": 1})


def _assistant(
    entry_id: str, parent_id: str | None, text: str = "ok", **extra: Any
) -> SessionEntry:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "acme",
        "model": "m1",
        "timestamp": 2,
        **extra,
    }
    return _e(entry_id, parent_id, message=message)


def _system(entry_id: str, parent_id: str | None) -> SessionEntry:
    return _e(entry_id, parent_id, message={"role": "system", "content": "prompt", "timestamp": 0})


@pytest.fixture
def branching(pi_sessions_dir: Path) -> list[SessionEntry]:
    return read_all(pi_sessions_dir / "v3-branching-compaction.jsonl").entries


# ------------------------------------------------------------------------------------------
# Real fixture


def test_default_leaf_is_the_last_entry_in_file_order(branching: list[SessionEntry]) -> None:
    # e8 (an unknown entry type) sits on the e7 branch, which forks from e2.
    context = build_session_context(branching)
    assert context.leaf_id == "e8"
    assert context.path_entry_ids == ["e1", "e2", "e7", "e8"]
    assert [m["role"] for m in context.messages] == ["user", "assistant"]
    assert context.message_entry_ids == ["e1", "e7"]
    assert context.model == ("acme", "alpha")
    assert context.thinking_level == "off"


def test_a_leaf_after_a_compaction_gets_the_summary_and_the_kept_entries(
    branching: list[SessionEntry],
) -> None:
    context = build_session_context(branching, "e6")
    assert context.path_entry_ids == ["e1", "e2", "e3", "e4", "e5", "e6"]
    assert context.message_entry_ids == ["e5", "e3", "e4", "e6"]
    summary = context.messages[0]
    assert summary == {
        "role": "compactionSummary",
        "summary": "sanitized",
        "tokensBefore": 100,
        "timestamp": 1767225605000,
    }
    assert [m["role"] for m in context.messages[1:]] == ["assistant", "toolResult", "assistant"]


def test_a_leaf_before_the_compaction_sees_the_plain_path(branching: list[SessionEntry]) -> None:
    context = build_session_context(branching, "e4")
    assert context.message_entry_ids == ["e1", "e3", "e4"]


def test_explicit_none_leaf_is_the_empty_context(branching: list[SessionEntry]) -> None:
    context = build_session_context(branching, None)
    assert (context.messages, context.leaf_id, context.model, context.thinking_level) == (
        [],
        None,
        None,
        "off",
    )


def test_an_unknown_leaf_is_reported_by_name(branching: list[SessionEntry]) -> None:
    with pytest.raises(UnknownLeafError) as caught:
        build_session_context(branching, "nope")
    assert isinstance(caught.value, SessionFormatError)
    assert caught.value.leaf_id == "nope"
    assert "'nope'" in str(caught.value)


def test_building_context_does_not_mutate_entries(branching: list[SessionEntry]) -> None:
    before = [dict(e.data) for e in branching]
    context = build_session_context(branching, "e6")
    for message in context.messages:
        message["content"] = "changed"
    assert [dict(e.data) for e in branching] == before


def test_large_v1_session_context_is_every_message(pi_sessions_dir: Path) -> None:
    entries = read_all(pi_sessions_dir / "pi-mono-v1-large-session.jsonl").entries
    context = build_session_context(entries)
    assert len(context.path_entry_ids) == 1018
    assert len(context.messages) == 914
    levels = [e.data["thinkingLevel"] for e in entries if e.entry_type == "thinking_level_change"]
    assert context.thinking_level == levels[-1]


# ------------------------------------------------------------------------------------------
# Tree walking


def test_cycles_do_not_hang_and_end_the_path() -> None:
    entries = [_user("a", "c"), _user("b", "a"), _user("c", "b")]
    assert [e.entry_id for e in active_path(entries)] == ["a", "b", "c"]
    assert [e.entry_id for e in active_path(entries, "a")] == ["b", "c", "a"]
    assert len(build_session_context(entries).messages) == 3


def test_orphans_and_self_parents_are_roots() -> None:
    entries = [_user("a", None), _user("b", "missing"), _user("c", "c"), _user("d", "c")]
    assert [e.entry_id for e in active_path(entries, "b")] == ["b"]
    assert [e.entry_id for e in active_path(entries)] == ["c", "d"]


def test_duplicate_ids_resolve_to_the_last_entry() -> None:
    entries = [
        _user("a", None, "first"),
        _user("b", "a"),
        _user("a", None, "second"),
        _user("c", "b"),
    ]
    context = build_session_context(entries)
    assert context.path_entry_ids == ["a", "b", "c"]
    assert context.messages[0]["content"] == "second"


def test_empty_session_has_an_empty_path() -> None:
    assert active_path([]) == []
    assert active_path([], LAST_ENTRY) == []
    with pytest.raises(UnknownLeafError):
        active_path([], "x")


# ------------------------------------------------------------------------------------------
# Compaction variants


def test_system_messages_in_the_kept_range_yield_to_the_compaction_system_message() -> None:
    system_message = {"role": "system", "content": "new prompt", "timestamp": 9}
    entries = [
        _system("s1", None),
        _user("u1", "s1"),
        _system("s2", "u1"),
        _assistant("a1", "s2"),
        _e(
            "c1",
            "a1",
            "compaction",
            summary="sum",
            firstKeptEntryId="u1",
            tokensBefore=50,
            systemMessage=system_message,
        ),
        _system("s3", "c1"),
        _user("u2", "s3"),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["c1", "c1", "u1", "a1", "s3", "u2"]
    assert context.messages[0] == system_message
    assert context.messages[1]["role"] == "compactionSummary"


def test_kept_system_messages_are_dropped_without_a_compaction_system_message() -> None:
    """Pi 1.6 keeps only the non-system entries from the first kept entry, whether or not
    the compaction carries a `systemMessage`; system messages after C stay."""
    entries = [
        _user("u1", None),
        _system("s2", "u1"),
        _assistant("a1", "s2"),
        _e("c1", "a1", "compaction", summary="s", firstKeptEntryId="u1", tokensBefore=1),
        _system("s3", "c1"),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["c1", "u1", "a1", "s3"]
    assert [m["role"] for m in context.messages] == [
        "compactionSummary",
        "user",
        "assistant",
        "system",
    ]


def test_a_custom_message_without_content_or_display_is_shaped_as_pi_does() -> None:
    entries = [_user("u1", None), _e("m1", "u1", "custom_message", customType="ext")]
    message = build_session_context(entries).messages[1]
    assert message["content"] == []
    assert "display" not in message
    assert message["role"] == "custom" and message["customType"] == "ext"


@pytest.mark.parametrize("first_kept", ["c1", "elsewhere", None])
def test_compaction_keeping_nothing_before_it(first_kept: str | None) -> None:
    # Retain-none (its own id), an id not on the path, or a missing field: nothing before C.
    entries = [
        _user("u1", None),
        _user("x", None),
        _e("c1", "u1", "compaction", summary="s", firstKeptEntryId=first_kept, tokensBefore=1),
        _user("u2", "c1"),
    ]
    assert build_session_context(entries).message_entry_ids == ["c1", "u2"]


def test_only_the_last_compaction_on_the_path_counts() -> None:
    entries = [
        _user("u1", None),
        _e("c1", "u1", "compaction", summary="old", firstKeptEntryId="u1", tokensBefore=1),
        _user("u2", "c1"),
        _e("c2", "u2", "compaction", summary="new", firstKeptEntryId="c1", tokensBefore=2),
        _user("u3", "c2"),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["c2", "u2", "u3"]
    assert context.messages[0]["summary"] == "new"


def test_compaction_as_the_last_entry() -> None:
    entries = [
        _user("u1", None),
        _e("c1", "u1", "compaction", summary="s", firstKeptEntryId="u1", tokensBefore=7),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["c1", "u1"]


# ------------------------------------------------------------------------------------------
# context_edit, entry types


def test_context_edit_null_drops_the_target() -> None:
    entries = [
        _user("u1", None),
        _assistant("a1", "u1"),
        _e("x1", "a1", "context_edit", targetId="u1", replacement=None),
    ]
    assert build_session_context(entries).message_entry_ids == ["a1"]


def test_context_edit_replacement_replaces_content_and_the_last_edit_wins() -> None:
    entries = [
        _user("u1", None),
        _assistant("a1", "u1", text="long answer"),
        _e("x1", "a1", "context_edit", targetId="a1", replacement=None),
        _e("x2", "x1", "context_edit", targetId="a1", replacement={"content": "short"}),
        _e("x3", "x2", "context_edit", targetId="u1", replacement={"content": "edited"}),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["u1", "a1"]
    assert context.messages[0]["content"] == "edited"
    assert context.messages[1]["content"] == [{"type": "text", "text": "short"}]
    assert context.messages[1]["provider"] == "acme"
    assert entries[1].data["message"]["content"] == [{"type": "text", "text": "long answer"}]


def test_context_edits_are_branch_relative() -> None:
    entries = [
        _user("u1", None),
        _e("x1", "u1", "context_edit", targetId="u1", replacement=None),
        _assistant("a1", "u1"),
    ]
    assert build_session_context(entries).message_entry_ids == ["u1", "a1"]
    assert build_session_context(entries, "x1").message_entry_ids == []


def test_context_edit_ignores_system_targets_and_edits_custom_messages() -> None:
    entries = [
        _system("s1", None),
        _e("m1", "s1", "custom_message", customType="ext", content="old", display=True),
        _e("x1", "m1", "context_edit", targetId="s1", replacement=None),
        _e("x2", "x1", "context_edit", targetId="m1", replacement={"content": "new"}),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["s1", "m1"]
    assert context.messages[1]["content"] == "new"


def test_entry_types_map_to_messages() -> None:
    entries = [
        _user("u1", None),
        _e(
            "m1",
            "u1",
            "custom_message",
            customType="ext",
            content="note",
            display=False,
            details={"k": 1},
        ),
        _e("b0", "m1", "branch_summary", fromId="old", summary=""),
        _e("b1", "b0", "branch_summary", fromId="old", summary="tried A"),
        _e("l1", "b1", "label", targetId="u1", label="pin"),
        _e("i1", "l1", "session_info", name="name"),
        _e("k1", "i1", "custom", customType="state", data={"x": 1}),
        _e("g1", "k1", "usage", kind="cache_warm"),
        _e("t1", "g1", "thinking_level_change", thinkingLevel="high"),
        _e("mc", "t1", "model_change", provider="openai", modelId="gpt-x"),
        _e(
            "z1",
            "mc",
            message={
                "role": "bashExecution",
                "command": "ls",
                "output": "",
                "excludeFromContext": True,
            },
        ),
    ]
    context = build_session_context(entries)
    assert context.message_entry_ids == ["u1", "m1", "b1", "z1"]
    assert context.messages[1] == {
        "role": "custom",
        "customType": "ext",
        "content": "note",
        "display": False,
        "details": {"k": 1},
        "timestamp": 1767225605000,
    }
    assert context.messages[2] == {
        "role": "branchSummary",
        "summary": "tried A",
        "fromId": "old",
        "timestamp": 1767225605000,
    }
    assert context.thinking_level == "high"
    assert context.model == ("openai", "gpt-x")


def test_missing_content_is_normalised_like_pi() -> None:
    entries = [
        _e("u1", None, message={"role": "user"}),
        _e("s1", "u1", message={"role": "system", "content": None}),
    ]
    messages = build_session_context(entries).messages
    assert messages[0]["content"] == [] and messages[1]["content"] == ""


def test_current_model_prefers_the_latest_of_model_change_and_assistant() -> None:
    path = [
        _e("mc", None, "model_change", provider="openai", modelId="gpt-x"),
        _assistant("a1", "mc"),
    ]
    assert current_model(path) == ("acme", "m1")
    assert current_model(path[:1]) == ("openai", "gpt-x")
    assert current_model([]) is None
