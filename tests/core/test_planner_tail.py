"""The planner walks from the newest group and stops once the recent tail is closed (issue 13):
the older turns are one bulk item, a kept `MessageStructure` gives the same plan as the messages
alone, and extending it by the request gives the same plan as building it again."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.config import Config
from ds4_core.planner import Supplement, plan_context
from ds4_core.planner.budget import ModelProfile, calculate_budget
from ds4_core.planner.planner import (
    OLDER_ITEMS,
    OLDER_TURN_REASON,
    QUOTED_TURN_REASON,
    ContextPlan,
    item_count,
)
from ds4_core.planner.structure import build_structure

CONFIG = Config()


def text(role: str, size: int) -> dict[str, Any]:
    return {"role": role, "content": [{"type": "text", "text": "w " * size}]}


@st.composite
def sessions(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Messages with turns, tool calls answered later (sometimes far later, sometimes twice),
    summaries and system messages; the last is a user message."""
    n = draw(st.integers(1, 400))
    messages: list[dict[str, Any]] = []
    open_calls: list[str] = []
    for index in range(n - 1):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result", "summary", "system"]))
        size = draw(st.integers(1, 900))
        if kind == "call":
            call_id = f"c{index}" if draw(st.booleans()) else f"c{draw(st.integers(0, 5))}"
            open_calls.append(call_id)
            message = text("assistant", size)
            message["content"].append({"type": "toolCall", "id": call_id, "name": "read"})
        elif kind == "result" and open_calls:
            message = text("toolResult", size)
            message["toolCallId"] = draw(st.sampled_from(open_calls))
        elif kind == "summary":
            message = {"role": "compactionSummary", "summary": "s " * size}
        elif kind == "system":
            message = {"role": "system", "content": "tools changed"}
        else:
            message = text("user" if kind == "user" else "assistant", size)
        messages.append(message)
    messages.append(text("user", draw(st.integers(1, 300))))
    return messages


def budget(window: int) -> Any:
    return calculate_budget(ModelProfile("p", "m", window, 1_000), CONFIG)


def covered(plan: ContextPlan, n: int) -> None:
    """Every message is included or excluded exactly once (a bulk item covers the older turns
    not listed), and the counts and tokens add up."""
    listed = [i.source_id for i in plan.included + plan.excluded if i.count == 1]
    bulk = [i for i in plan.excluded if i.count > 1]
    message_items = [s for s in listed if s.startswith("e")]
    assert len(message_items) == len(set(message_items))
    assert len(message_items) + sum(b.count for b in bulk) == n
    assert len(bulk) <= 1
    for item in bulk:
        assert item.reason == OLDER_TURN_REASON and item.group_id is None
    assert plan.stats["counts"]["excluded"] == item_count(plan.excluded)


@settings(max_examples=150, deadline=None)
@given(sessions(), st.sampled_from([2_000, 8_000, 30_000, 200_000]), st.integers(0, 3))
def test_a_kept_structure_and_an_appended_request_plan_the_same(
    messages: list[dict[str, Any]], window: int, quoted: int
) -> None:
    ids = [f"e{i}" for i in range(len(messages))]
    supplements = [
        Supplement("history", f"s1:{ids[i * 7 % len(ids)]}", text("user", 40), score=1.0)
        for i in range(quoted)
    ]
    limits = budget(window)
    kwargs: dict[str, Any] = {
        "fixed_tokens": 100,
        "budget": limits,
        "config": CONFIG,
        "supplements": supplements,
        "message_source_ids": ids,
    }
    alone = plan_context(messages, **kwargs)
    kept = plan_context(messages, **kwargs, structure=build_structure(messages, None, ids))
    assert kept == alone
    if alone.mode == "managed":
        covered(alone, len(messages))
    # the request appended to the structure of the messages before it
    before = messages[:-1]
    if before:
        structure = build_structure(before, None, ids[:-1])
        request = messages[-1]
        tokens = build_structure([request]).tokens[0]
        grown = structure.appended(request, tokens, ids[-1])
        whole = build_structure(messages, None, ids)
        fields = [f for f in vars(whole) if not f.endswith("positions")]
        assert {f: getattr(grown, f) for f in fields} == {f: getattr(whole, f) for f in fields}
        assert all(grown.indices_of(i) == whole.indices_of(i) for i in ids)
        assert plan_context(messages, **kwargs, structure=grown) == alone


def long_session(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for _ in range(turns):
        messages += [text("user", 50), text("assistant", 200)]
    return [*messages, text("user", 10)]


def test_older_turns_beyond_the_listed_ones_are_one_bulk_item() -> None:
    messages = long_session(5_000)
    ids = [f"e{i}" for i in range(len(messages))]
    plan = plan_context(
        messages, fixed_tokens=0, budget=budget(32_000), config=CONFIG, message_source_ids=ids
    )
    assert plan.mode == "managed"
    covered(plan, len(messages))
    bulk = plan.excluded[0]
    older = [i for i in plan.excluded if i.reason == OLDER_TURN_REASON and i.count == 1]
    assert bulk.count > 9_000 and len(older) == OLDER_ITEMS
    assert bulk.source_id == "e0" and bulk.last_source_id == f"e{bulk.count - 1}"
    # a plan's items do not grow with the session: the tail, the closing group, 128 listed
    assert len(plan.included) + len(plan.excluded) < len(plan.included) + OLDER_ITEMS + 4


def test_a_quoted_turn_inside_the_bulk_is_listed_with_its_reason() -> None:
    messages = long_session(2_000)
    ids = [f"e{i}" for i in range(len(messages))]
    evidence = Supplement("history", "s1:e10", text("user", 30), score=2.0)
    plan = plan_context(
        messages,
        fixed_tokens=0,
        budget=budget(32_000),
        config=CONFIG,
        supplements=[evidence],
        message_source_ids=ids,
    )
    covered(plan, len(messages))
    quoted = [i for i in plan.excluded if i.source_id == "e10"]
    assert [i.reason for i in quoted] == [QUOTED_TURN_REASON]
    bulk = plan.excluded[0]
    assert bulk.count > 1 and bulk.source_id == "e0"


def test_a_short_session_lists_every_excluded_message() -> None:
    messages = long_session(60)  # 121 messages: fewer older ones than OLDER_ITEMS
    plan = plan_context(messages, fixed_tokens=0, budget=budget(3_000), config=CONFIG)
    assert plan.mode == "managed" and plan.excluded
    assert all(item.count == 1 for item in plan.excluded)
    assert len(plan.included) + len(plan.excluded) == len(messages)
