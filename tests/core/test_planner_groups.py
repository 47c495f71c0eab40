"""Atomic groups and selection validation (docs/reference.md §3.6)."""

from __future__ import annotations

from typing import Any

from ds4_core.planner import build_atomic_groups, validate_atomic_selection
from ds4_core.tokens import estimate_message_tokens


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def call(*ids: str) -> dict[str, Any]:
    blocks = [
        {"type": "toolCall", "id": i, "name": "read", "arguments": {"path": "a.py"}} for i in ids
    ]
    return {"role": "assistant", "content": blocks}


def result(call_id: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": "body"}],
        "isError": False,
    }


def summary(role: str = "compactionSummary") -> dict[str, Any]:
    return {"role": role, "summary": "earlier work", "tokensBefore": 1000}


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(g.group_id, g.kind, g.indices) for g in build_atomic_groups(messages)]


def test_turns_prefix_and_summaries_form_their_own_groups() -> None:
    messages = [
        {"role": "system", "content": "prompt"},
        summary(),
        user("a"),
        say("b"),
        summary("branchSummary"),
        say("after summary"),
        user("c"),
        call("x"),
        result("x"),
    ]
    assert shape(messages) == [
        ("group:0-0", "prefix", (0,)),
        ("group:1-1", "summary", (1,)),
        ("group:2-3", "turn", (2, 3)),
        ("group:4-4", "summary", (4,)),
        ("group:5-5", "turn", (5,)),
        ("group:6-8", "turn", (6, 7, 8)),
    ]


def test_a_tool_call_answered_after_the_next_user_message_merges_both_turns() -> None:
    messages = [user("a"), call("late"), user("b"), result("late"), say("ok"), user("c")]
    groups = build_atomic_groups(messages)
    assert [(g.group_id, g.kind, g.indices) for g in groups] == [
        ("group:0-4", "turn", (0, 1, 2, 3, 4)),
        ("group:5-5", "turn", (5,)),
    ]
    assert "late" in groups[0].reason


def test_merging_a_prefix_into_a_turn_gives_a_turn() -> None:
    messages = [call("p"), user("a"), result("p")]
    assert shape(messages) == [("group:0-2", "turn", (0, 1, 2))]


def test_a_merged_group_may_skip_over_a_summary() -> None:
    messages = [user("a"), call("k"), summary(), result("k")]
    assert shape(messages) == [
        ("group:0-3", "turn", (0, 1, 3)),
        ("group:2-2", "summary", (2,)),
    ]


def test_group_tokens_are_the_sum_of_member_estimates() -> None:
    messages = [user("hello there"), call("x", "y"), result("x"), result("y")]
    (group,) = build_atomic_groups(messages)
    assert group.tokens == sum(estimate_message_tokens(m) for m in messages)


def test_empty_message_list_has_no_groups() -> None:
    assert build_atomic_groups([]) == []


def test_a_call_selected_without_its_result_is_flagged() -> None:
    messages = [user("a"), call("x", "y"), result("x"), result("y")]
    problems = validate_atomic_selection(messages, {0, 1, 2})
    assert problems == ["tool call 'y' at message 1 is selected but its result at message 3 is not"]


def test_a_result_selected_without_its_call_is_flagged() -> None:
    messages = [user("a"), call("x"), result("x")]
    problems = validate_atomic_selection(messages, {0, 2})
    assert problems == [
        "tool result for 'x' at message 2 is selected but its call at message 1 is not"
    ]


def test_whole_groups_validate_cleanly() -> None:
    messages = [user("a"), call("x"), result("x"), user("b"), say("c")]
    for group in build_atomic_groups(messages):
        assert validate_atomic_selection(messages, set(group.indices)) == []


def test_calls_and_results_with_no_partner_in_the_input_are_not_the_selection_s_fault() -> None:
    messages = [user("a"), call("aborted"), result("orphan")]
    assert validate_atomic_selection(messages, {0, 1, 2}) == []


def test_indices_outside_the_messages_are_flagged() -> None:
    assert validate_atomic_selection([user("a")], {0, 3}) == [
        "selected index 3 is outside the 1 messages"
    ]


def test_odd_messages_do_not_break_grouping() -> None:
    messages: list[Any] = [
        user("a"),
        {"role": "assistant", "content": "plain string"},
        {"role": "assistant", "content": [{"type": "toolCall"}, "junk"]},
        {"role": "toolResult", "toolCallId": None},
        {"role": "mystery-extension-role", "content": {"x": 1}},
    ]
    assert shape(messages) == [("group:0-4", "turn", (0, 1, 2, 3, 4))]
    assert validate_atomic_selection(messages, {0}) == []
