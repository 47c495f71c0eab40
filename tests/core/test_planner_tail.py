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
            reused = draw(st.integers(0, 9)) == 0  # now and then an id used before
            call_id = f"c{draw(st.integers(0, 5))}" if reused else f"c{index}"
            open_calls.append(call_id)
            message = text("assistant", size)
            message["content"].append({"type": "toolCall", "id": call_id, "name": "read"})
        elif kind == "result" and open_calls:
            message = text("toolResult", size)
            latest = draw(st.integers(0, 3)) > 0  # mostly the newest call, else any
            message["toolCallId"] = open_calls[-1] if latest else draw(st.sampled_from(open_calls))
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
    # a message listed on its own names its group (a bulk of one message is never made)
    singles = [i for i in plan.included + plan.excluded if i.count == 1]
    assert all(i.group_id for i in singles if i.source_id.startswith("e"))
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


@settings(max_examples=200, deadline=None)
@given(sessions(), st.data())
def test_a_structure_extended_by_appended_messages_equals_one_built_again(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A session that grew: the kept structure extended by the new messages equals the
    structure built from all of them (whichever way `extended` takes)."""
    ids: list[str | None] = [f"e{i}" if i % 5 else None for i in range(len(messages))]
    cut = data.draw(st.integers(0, len(messages)))
    grown = build_structure(messages[:cut], None, ids[:cut]) if cut else None
    tokens = build_structure(messages).tokens
    whole = build_structure(messages, tokens, ids)
    if grown is None:
        return
    extended = grown.extended(messages, tokens[cut:], ids[cut:])
    fields = [f for f in vars(whole) if not f.endswith("positions")]
    assert {f: getattr(extended, f) for f in fields} == {f: getattr(whole, f) for f in fields}
    assert all(extended.indices_of(s) == whole.indices_of(s) for s in whole.source_ids)


@st.composite
def agent_turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """What an agent appends: a request, tool calls each answered right after, a reply; now
    and then a summary, or a result answering a call of an earlier turn."""
    messages: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 30))):
        messages.append(text("user", draw(st.integers(1, 300))))
        for call in range(draw(st.integers(0, 3))):
            call_id = f"t{turn}-{call}"
            late = draw(st.integers(0, 19)) == 0 and turn > 0
            message = text("assistant", draw(st.integers(1, 200)))
            message["content"].append({"type": "toolCall", "id": call_id, "name": "bash"})
            result = text("toolResult", draw(st.integers(1, 900)))
            result["toolCallId"] = f"t{turn - 1}-0" if late else call_id
            messages += [message, result]
        messages.append(text("assistant", draw(st.integers(1, 300))))
        if draw(st.integers(0, 9)) == 0:
            messages.append({"role": "compactionSummary", "summary": "s " * 50})
    return messages


@settings(max_examples=150, deadline=None)
@given(agent_turns(), st.data())
def test_an_agent_sessions_structure_extended_turn_by_turn_equals_one_built_again(
    messages: list[dict[str, Any]], data: st.DataObject
) -> None:
    ids: list[str | None] = [f"e{i}" for i in range(len(messages))]
    tokens = build_structure(messages).tokens
    cuts = sorted(data.draw(st.lists(st.integers(1, len(messages)), max_size=4)))
    structure = None
    done = 0
    for cut in [*cuts, len(messages)]:
        if structure is None:
            structure = build_structure(messages[:cut], tokens[:cut], ids[:cut])
        else:
            structure = structure.extended(messages[:cut], tokens[done:cut], ids[done:cut])
        done = cut
    whole = build_structure(messages, tokens, ids)
    fields = [f for f in vars(whole) if not f.endswith("positions")]
    assert {f: getattr(structure, f) for f in fields} == {f: getattr(whole, f) for f in fields}
    assert all(structure.indices_of(s) == whole.indices_of(s) for s in whole.source_ids)


def test_a_bulk_of_one_message_is_listed_as_an_item_of_its_own() -> None:
    """When quoting leaves one older message outside the listed ones, it is an ordinary item
    (with its group), not a bulk item of one."""
    limits = budget(32_000)
    for turns in range(60, 400):  # the session whose bulk holds exactly one turn (2 messages)
        messages = long_session(turns)
        ids = [f"e{i}" for i in range(len(messages))]
        plan = plan_context(
            messages, fixed_tokens=0, budget=limits, config=CONFIG, message_source_ids=ids
        )
        if plan.excluded and plan.excluded[0].count == 2:
            break
    else:
        raise AssertionError("no session with a bulk of 2 messages")
    evidence = Supplement("history", "s1:e0", text("user", 30), score=2.0)
    plan = plan_context(
        messages,
        fixed_tokens=0,
        budget=limits,
        config=CONFIG,
        supplements=[evidence],
        message_source_ids=ids,
    )
    covered(plan, len(messages))
    assert all(item.count == 1 for item in plan.excluded)
    first = {item.source_id: item for item in plan.excluded}
    assert first["e0"].reason == QUOTED_TURN_REASON
    assert first["e1"].reason == OLDER_TURN_REASON and first["e1"].group_id == "group:0-1"
