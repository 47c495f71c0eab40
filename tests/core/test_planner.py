"""The managed-context planner (docs/reference.md §3.7): selection, supplements, fail-open."""

from __future__ import annotations

import copy
import time
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ds4_core.config import DEFAULT_CONFIG, Config
from ds4_core.planner import (
    ContextBudget,
    ContextPlan,
    ModelProfile,
    Supplement,
    build_atomic_groups,
    calculate_budget,
    fallback_plan,
    plan_context,
    validate_atomic_selection,
)
from ds4_core.planner.planner import OLDER_TURN_REASON
from ds4_core.tokens import estimate_message_tokens

# -- message helpers ---------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def call(*ids: str, text: str = "") -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [
        {"type": "toolCall", "id": i, "name": "read", "arguments": {"path": "a.py"}} for i in ids
    ]
    return {"role": "assistant", "content": blocks}


def result(call_id: str, text: str = "body") -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": "read",
        "content": [{"type": "text", "text": text}],
        "isError": False,
    }


def summary(text: str, role: str = "compactionSummary") -> dict[str, Any]:
    return {"role": role, "summary": text, "tokensBefore": 1000}


def evidence(label: str, size: int = 40) -> dict[str, Any]:
    return user(f"[DS4 {label}] " + "e" * size)


def budget(
    *,
    hard: int = 100_000,
    target: int | None = None,
    tail: int = 50_000,
    history: int = 16_000,
    project: int = 20_000,
    summaries: int = 12_000,
    pins: int = 16_000,
    memory: int = 8_000,
) -> ContextBudget:
    target = hard if target is None else target
    return ContextBudget(
        context_window=hard * 2,
        output_reserve=hard // 2,
        safety_margin=0,
        hard_input_limit=hard,
        soft_limit=hard,
        target_input_tokens=target,
        active_input_budget=target,
        recent_tail_tokens=tail,
        max_retrieved_history_tokens=history,
        max_project_tokens=project,
        max_summary_tokens=summaries,
        max_pinned_tokens=pins,
        max_memory_tokens=memory,
    )


def configured(**settings_: object) -> Config:
    config, warnings = DEFAULT_CONFIG.with_settings(settings_)
    assert warnings == []
    return config


def plan(messages: list[dict[str, Any]], **kwargs: Any) -> ContextPlan:
    kwargs.setdefault("fixed_tokens", 0)
    kwargs.setdefault("budget", budget())
    kwargs.setdefault("config", DEFAULT_CONFIG)
    return plan_context(messages, **kwargs)


def turns(count: int, size: int = 200) -> list[dict[str, Any]]:
    """`count` turns of (user, assistant), each about size/2 tokens per message."""
    out: list[dict[str, Any]] = []
    for t in range(count):
        out += [user(f"q{t} " + "u" * size), say(f"a{t} " + "a" * size)]
    return out


def group_tokens(messages: list[dict[str, Any]]) -> list[int]:
    return [g.tokens for g in build_atomic_groups(messages)]


def selected_indices(messages: list[dict[str, Any]], planned: ContextPlan) -> list[int]:
    position = {id(m): i for i, m in enumerate(messages)}
    return [position[id(m)] for m in planned.messages if id(m) in position]


# -- selection -----------------------------------------------------------------------------------


def test_current_turn_and_recent_tail_are_kept_and_older_turns_are_excluded() -> None:
    messages = turns(6)
    sizes = group_tokens(messages)
    tail = sizes[5] + sizes[4] + sizes[3] + 10  # room for the current turn and two more
    planned = plan(messages, budget=budget(tail=tail))
    assert planned.mode == "managed"
    assert selected_indices(messages, planned) == [6, 7, 8, 9, 10, 11]
    reasons = {item.source_id: item.reason for item in planned.excluded}
    assert reasons["message:0"] == OLDER_TURN_REASON
    assert reasons["message:2"] == OLDER_TURN_REASON
    assert reasons["message:4"].startswith("closes the recent tail")
    kinds = {item.source_id: item.kind for item in planned.included}
    assert kinds["message:10"] == kinds["message:11"] == "current"
    assert kinds["message:6"] == "recent"
    assert planned.estimated_tokens == sum(estimate_message_tokens(m) for m in planned.messages)


def test_a_tool_call_is_never_split_from_its_result_when_the_budget_cuts_between_them() -> None:
    messages = [
        user("read the file"),
        call("read-1", text="reading"),
        result("read-1", "x" * 8_000),
        say("done"),
        user("now what?"),
    ]
    current = estimate_message_tokens(messages[4])
    head = sum(estimate_message_tokens(m) for m in messages[:2])
    config = configured(**{"context.rescueImmediatePredecessor": False})
    planned = plan(messages, budget=budget(tail=current + head + 5), config=config)
    assert planned.mode == "managed"
    assert planned.messages == [messages[4]]
    excluded = {item.source_id for item in planned.excluded}
    assert {"message:1", "message:2"} <= excluded


def test_the_turn_just_before_the_current_one_is_rescued_when_it_only_overflows_the_tail() -> None:
    messages = turns(3)
    sizes = group_tokens(messages)
    planned = plan(messages, budget=budget(tail=sizes[2] + sizes[1] - 1))
    assert selected_indices(messages, planned) == [2, 3, 4, 5]
    assert planned.stats["rescued_immediate_predecessor"] is True
    rescued = next(i for i in planned.included if i.source_id == "message:2")
    assert "immediate predecessor rescued" in rescued.reason

    off = configured(**{"context.rescueImmediatePredecessor": False})
    strict = plan(messages, budget=budget(tail=sizes[2] + sizes[1] - 1), config=off)
    assert selected_indices(messages, strict) == [4, 5]
    assert strict.stats["rescued_immediate_predecessor"] is False


def test_rescue_never_breaks_the_target() -> None:
    messages = turns(3)
    sizes = group_tokens(messages)
    tight = budget(tail=sizes[2] + sizes[1] - 1, hard=sizes[2] + sizes[1] - 1)
    planned = plan(messages, budget=tight)
    assert selected_indices(messages, planned) == [4, 5]
    assert planned.stats["rescued_immediate_predecessor"] is False


def test_turns_larger_than_the_tail_are_counted_as_oversized_exclusions() -> None:
    messages = [user("old " + "z" * 4_000), say("big answer " + "z" * 4_000)] + turns(2, size=20)
    sizes = group_tokens(messages)
    config = configured(**{"context.rescueImmediatePredecessor": False})
    planned = plan(messages, budget=budget(tail=sizes[1] + sizes[2] + 1), config=config)
    assert selected_indices(messages, planned) == [2, 3, 4, 5]
    assert planned.stats["oversized_turn_exclusions"] == 1


def test_old_system_messages_are_always_kept() -> None:
    messages = [{"role": "system", "content": "tools changed"}, *turns(4)]
    planned = plan(messages, budget=budget(tail=group_tokens(messages)[-1]))
    assert planned.messages[0] is messages[0]
    assert next(i for i in planned.included if i.source_id == "message:0").kind == "system"


def test_summaries_are_kept_newest_first_within_their_cap() -> None:
    older, newer = summary("first part " * 20), summary("second part " * 20, "branchSummary")
    messages = [older, user("a"), say("b"), newer, user("c")]
    cap = estimate_message_tokens(newer) + 1
    planned = plan(messages, budget=budget(summaries=cap))
    assert newer in planned.messages and older not in planned.messages
    dropped = next(i for i in planned.excluded if i.source_id == "message:0")
    assert dropped.kind == "summary"
    assert "context.maxSummaryTokens" in dropped.reason
    assert planned.stats["tokens"]["summary"] == estimate_message_tokens(newer)


def test_source_ids_come_from_the_entry_ids_when_given() -> None:
    messages = turns(2)
    planned = plan(messages, message_source_ids=["e1", "e2", None, "e4"])
    assert [i.source_id for i in planned.included] == ["e1", "e2", "message:2", "e4"]


def test_scores_are_priority_plus_position() -> None:
    messages = turns(2)
    planned = plan(messages)
    scores = {i.source_id: i.score for i in planned.included}
    assert scores["message:3"] == 1000.8  # current: 1000 + (3 + 1) / (4 + 1)
    assert scores["message:0"] == 100.4  # recent: 100 + (1 + 1) / (4 + 1)


# -- supplements ----------------------------------------------------------------------------------


def test_supplements_go_just_before_the_last_user_message_in_category_order() -> None:
    messages = [*turns(1), user("current"), call("c1"), result("c1")]
    supplied = [
        Supplement("project", "snippet-1", evidence("PROJECT"), score=3.0),
        Supplement("history", "s:e1", evidence("HISTORY"), score=2.0),
        Supplement("memory", "mem-1", evidence("MEMORY"), score=1.0),
        Supplement("pin", "pin-1", evidence("PIN"), score=950),
    ]
    planned = plan(messages, supplements=supplied)
    assert planned.mode == "managed"
    expected = [
        messages[0],
        messages[1],
        supplied[3].message,
        supplied[2].message,
        supplied[1].message,
        supplied[0].message,
        messages[2],
        messages[3],
        messages[4],
    ]
    assert planned.messages == expected
    kinds = [i.kind for i in planned.included]
    assert kinds[2:6] == ["pin", "memory", "history", "project"]


def test_history_over_its_cap_is_excluded_with_a_reason_and_smaller_evidence_still_fits() -> None:
    messages = turns(2)
    big = Supplement("history", "s:big", evidence("HISTORY", 4_000), score=9.0)
    small = Supplement("history", "s:small", evidence("HISTORY", 40), score=1.0)
    cap = estimate_message_tokens(small.message) + 10
    planned = plan(messages, supplements=[big, small], budget=budget(history=cap))
    assert small.message in planned.messages
    assert big.message not in planned.messages
    dropped = next(i for i in planned.excluded if i.source_id == "s:big")
    assert dropped.kind == "history"
    assert "category cap" in dropped.reason
    assert "context.maxRetrievedHistoryTokens" in dropped.reason


def test_within_a_category_the_higher_score_wins_the_cap() -> None:
    messages = turns(1)
    low = Supplement("project", "snip-low", evidence("PROJECT"), score=0.2)
    high = Supplement("project", "snip-high", evidence("PROJECT"), score=0.9)
    cap = estimate_message_tokens(high.message) + 1
    planned = plan(messages, supplements=[low, high], budget=budget(project=cap))
    assert any(m is high.message for m in planned.messages)
    assert not any(m is low.message for m in planned.messages)
    assert [i.source_id for i in planned.excluded] == ["snip-low"]


def test_supplements_never_push_the_plan_past_the_target() -> None:
    messages = turns(1)
    need = sum(group_tokens(messages))
    memo = Supplement("memory", "mem-1", evidence("MEMORY", 400))
    planned = plan(messages, supplements=[memo], budget=budget(hard=need + 5))
    assert planned.mode == "managed"
    assert memo.message not in planned.messages
    assert "message budget" in next(i for i in planned.excluded if i.source_id == "mem-1").reason


def test_a_supplement_without_a_source_id_is_never_inserted() -> None:
    messages = turns(1)
    anonymous = Supplement("history", "", evidence("HISTORY"))
    planned = plan(messages, supplements=[anonymous])
    assert anonymous.message not in planned.messages
    assert any("source id" in w for w in planned.warnings)


# -- fail-open ----------------------------------------------------------------------------------


def assert_fallback(messages: list[dict[str, Any]], planned: ContextPlan, reason: str) -> None:
    assert planned.mode == "fallback"
    assert planned.messages is messages
    assert planned.fallback_reason is not None and reason in planned.fallback_reason


def test_fallback_returns_the_original_messages_untouched() -> None:
    messages = turns(3)
    snapshot = copy.deepcopy(messages)
    pin = Supplement("pin", "pin-1", evidence("PIN", 400))
    planned = plan(messages, supplements=[pin], budget=budget(pins=10))
    assert_fallback(messages, planned, "context.maxPinnedTokens")
    assert messages == snapshot
    assert pin.message not in planned.messages
    assert [i.source_id for i in planned.excluded] == ["pin-1"]
    assert len(planned.included) == len(messages)


def test_no_messages_falls_back() -> None:
    messages: list[dict[str, Any]] = []
    assert_fallback(messages, plan(messages), "no messages")


def test_no_user_message_falls_back() -> None:
    messages = [say("hello"), summary("s")]
    assert_fallback(messages, plan(messages), "no user message")


def test_fixed_tokens_over_the_hard_limit_fall_back() -> None:
    messages = turns(1)
    assert_fallback(
        messages, plan(messages, fixed_tokens=2_000, budget=budget(hard=1_000)), "exceed"
    )


def test_a_current_turn_larger_than_the_hard_limit_falls_back() -> None:
    messages = [user("x" * 40_000)]
    planned = plan(messages, budget=budget(hard=1_000))
    assert_fallback(messages, planned, "current turn")
    assert planned.estimated_tokens > 1_000  # the hard limit is not guaranteed in fallback


def test_a_current_turn_over_the_hard_limit_is_flagged_with_its_numbers() -> None:
    """The fallback says, in fields a client can act on, that no plan can fit the request."""
    messages = [*turns(2), user("x" * 40_000)]
    planned = plan(messages, fixed_tokens=100, budget=budget(hard=1_000))
    assert_fallback(messages, planned, "current turn")
    assert planned.over_hard_limit is True
    assert planned.current_turn_tokens == estimate_message_tokens(messages[-1]) > 1_000


def test_fixed_tokens_plus_a_small_current_turn_over_the_hard_limit_are_flagged() -> None:
    messages = turns(1)
    planned = plan(messages, fixed_tokens=990, budget=budget(hard=1_000))
    assert planned.mode == "fallback" and planned.over_hard_limit is True
    assert planned.current_turn_tokens == sum(group_tokens(messages)) < 1_000


def test_a_fallback_for_another_reason_or_a_managed_plan_is_not_over_the_hard_limit() -> None:
    messages = turns(3)
    disabled = plan(messages, config=configured(enabled=False))
    managed = plan(messages)
    last_turn = sum(estimate_message_tokens(m) for m in messages[-2:])
    for planned in (disabled, managed):
        assert planned.over_hard_limit is False
        assert planned.current_turn_tokens == last_turn
    assert plan(messages, budget=None).over_hard_limit is False  # garbage budget: no limit


def test_disabled_engine_falls_back() -> None:
    messages = turns(1)
    assert_fallback(messages, plan(messages, config=configured(enabled=False)), "disabled")


def test_an_internal_error_falls_back_instead_of_raising() -> None:
    messages = turns(2)
    planned = plan(messages, budget=None)
    assert_fallback(messages, planned, "internal planner error")


def test_non_object_messages_fall_back_with_the_position_named() -> None:
    messages: list[Any] = [user("a"), "not a message"]
    assert_fallback(messages, plan(messages), "message 1")


# -- observer -------------------------------------------------------------------------------------


def test_observer_mode_sends_the_original_messages_but_records_the_dry_run() -> None:
    messages = turns(6)
    sizes = group_tokens(messages)
    tight = budget(tail=sizes[5] + sizes[4] + 1)
    observer = configured(**{"context.mode": "observer"})
    memo = Supplement("memory", "mem-1", evidence("MEMORY"))
    dry = plan(messages, budget=tight, config=observer, supplements=[memo])
    managed = plan(messages, budget=tight, supplements=[memo])
    assert dry.mode == "observer"
    assert dry.messages is messages
    assert dry.included == managed.included
    assert dry.excluded == managed.excluded
    assert dry.estimated_tokens == sum(estimate_message_tokens(m) for m in messages)
    assert dry.stats["planned_tokens"] == managed.estimated_tokens


# -- speed ----------------------------------------------------------------------------------------


def test_a_thousand_message_session_plans_in_a_few_milliseconds() -> None:
    messages: list[dict[str, Any]] = []
    for t in range(250):
        messages += [
            user(f"question {t} " + "q" * 300),
            call(f"c{t}", text="looking"),
            result(f"c{t}", "r" * 1_500),
            say("answer " * 30),
        ]
    sizes = [estimate_message_tokens(m) for m in messages]
    real = calculate_budget(ModelProfile("anthropic", "claude", 200_000, 32_000), DEFAULT_CONFIG)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        planned = plan_context(
            messages, fixed_tokens=4_000, budget=real, config=DEFAULT_CONFIG, message_tokens=sizes
        )
        best = min(best, time.perf_counter() - start)
    assert planned.mode == "managed"
    assert best < 0.025, f"planning 1,000 messages took {best * 1000:.1f} ms"


# -- property: never split, always within the hard limit or a fallback --------------------------


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    text = st.integers(min_value=0, max_value=3_000).map(lambda n: "t" * n)
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append(say(draw(text)))
    pending: list[str] = []
    counter = 0
    for _ in range(draw(st.integers(min_value=0, max_value=10))):
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            messages.append(summary(draw(text)))
        messages.append(user(draw(text)))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            ids = [f"call-{counter + k}" for k in range(draw(st.integers(0, 3)))]
            counter += len(ids)
            messages.append(call(*ids, text=draw(text)) if ids else say(draw(text)))
            for call_id in ids:
                if draw(st.integers(min_value=0, max_value=5)) == 0:
                    pending.append(call_id)  # answered later, maybe after another user message
                else:
                    messages.append(result(call_id, draw(text)))
            while pending and draw(st.booleans()):
                messages.append(result(pending.pop(0), draw(text)))
    messages.extend(result(call_id) for call_id in pending)
    return messages


supplement_lists = st.lists(
    st.builds(
        lambda kind, n, size, score: Supplement(
            kind, f"{kind}-{n}", evidence(kind, size), score=score
        ),
        st.sampled_from(["pin", "memory", "history", "project"]),
        st.integers(min_value=0, max_value=99),
        st.integers(min_value=0, max_value=4_000),
        st.floats(min_value=0, max_value=10, allow_nan=False),
    ),
    max_size=5,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(),
    supplements=supplement_lists,
    window=st.integers(min_value=4_000, max_value=60_000),
    max_output=st.integers(min_value=1, max_value=3_000),
    tail=st.integers(min_value=0, max_value=20_000),
    summaries=st.integers(min_value=0, max_value=5_000),
    rescue=st.booleans(),
    fixed=st.integers(min_value=0, max_value=3_000),
)
def test_any_plan_keeps_tool_calls_whole_and_fits_the_hard_limit_or_falls_back(
    messages: list[dict[str, Any]],
    supplements: list[Supplement],
    window: int,
    max_output: int,
    tail: int,
    summaries: int,
    rescue: bool,
    fixed: int,
) -> None:
    config = configured(
        **{
            "context.recentTailTokens": tail,
            "context.maxSummaryTokens": summaries,
            "context.rescueImmediatePredecessor": rescue,
        }
    )
    limits = calculate_budget(ModelProfile("p", "m", window, max_output), config)
    planned = plan_context(
        messages, fixed_tokens=fixed, budget=limits, config=config, supplements=supplements
    )
    event(f"mode={planned.mode}")
    event(f"excluded some messages={len(planned.messages) < len(messages) + len(supplements)}")
    if planned.mode == "fallback":
        assert planned.messages is messages
        assert planned.fallback_reason
        return
    assert planned.mode == "managed"
    chosen = selected_indices(messages, planned)
    assert chosen == sorted(chosen)
    assert validate_atomic_selection(messages, set(chosen)) == []
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    assert last_user in chosen
    assert planned.estimated_tokens == fixed + sum(
        estimate_message_tokens(m) for m in planned.messages
    )
    assert planned.estimated_tokens <= limits.hard_input_limit
    assert len(planned.included) == len(planned.messages)


def test_the_public_fallback_plan_lists_every_message_and_drops_supplements() -> None:
    messages: list[Any] = [*turns(1), "not a message"]
    pin = Supplement("pin", "pin-1", evidence("PIN"))
    planned = fallback_plan(messages, "engine disabled", supplements=[pin], fixed_tokens=10)
    assert_fallback(messages, planned, "engine disabled")
    assert [i.kind for i in planned.included] == ["current", "current", "current"]
    assert [i.source_id for i in planned.excluded] == ["pin-1"]
    assert planned.estimated_tokens == 10 + sum(estimate_message_tokens(m) for m in messages[:2])


def test_a_tuple_or_garbage_instead_of_a_list_still_plans_or_falls_back() -> None:
    messages = tuple(turns(2))
    assert plan(messages).mode == "managed"  # type: ignore[arg-type]
    garbage = plan(None)  # type: ignore[arg-type]
    assert garbage.mode == "fallback" and garbage.messages == []
