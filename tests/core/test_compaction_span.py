"""The span a compaction summarizes (compaction/span.py; docs/compaction.md "The flow")."""

from __future__ import annotations

from typing import Any

import pytest

from ds4_core.compaction.span import SpanError, prepare_span
from ds4_core.sessions import SessionEntry, build_session_context
from ds4_core.tokens import estimate_message_tokens

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


def _user(entry_id: str, parent: str | None, text: str) -> SessionEntry:
    return _e(entry_id, parent, message={"role": "user", "content": text, "timestamp": 1})


def _assistant(
    entry_id: str, parent: str | None, text: str = "", calls: list[str] = ()
) -> SessionEntry:  # type: ignore[assignment]
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "toolCall", "id": call, "name": "read", "arguments": {"path": f"src/{call}.py"}}
        for call in calls
    ]
    return _e(entry_id, parent, message={"role": "assistant", "content": content, "timestamp": 2})


def _result(entry_id: str, parent: str | None, call: str, text: str = "file text") -> SessionEntry:
    return _e(
        entry_id,
        parent,
        message={
            "role": "toolResult",
            "toolCallId": call,
            "toolName": "read",
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "timestamp": 3,
        },
    )


def _conversation() -> list[SessionEntry]:
    """u1 a1(call c1) r1 a2 | u2 a3(call c2) r2 a4 | u3 a5"""
    return [
        _user("u1", None, "port the selector " * 20),
        _assistant("a1", "u1", "reading", ["c1"]),
        _result("r1", "a1", "c1", "x" * 400),
        _assistant("a2", "r1", "done reading " * 10),
        _user("u2", "a2", "now the tests " * 20),
        _assistant("a3", "u2", "running", ["c2"]),
        _result("r2", "a3", "c2", "y" * 400),
        _assistant("a4", "r2", "tests pass " * 10),
        _user("u3", "a4", "next step " * 20),
        _assistant("a5", "u3", "ok " * 30),
    ]


def _prepare(entries: list[SessionEntry], **kwargs: Any) -> Any:
    context = build_session_context(entries)
    tokens = [estimate_message_tokens(m) for m in context.messages]
    kwargs.setdefault("first_kept_entry_id", None)
    kwargs.setdefault("keep_recent_tokens", 0)
    return prepare_span(context, tokens, **kwargs), context, tokens


def test_explicit_first_kept_entry_summarizes_everything_before_it() -> None:
    span, context, tokens = _prepare(_conversation(), first_kept_entry_id="u2")
    assert span.source_entry_ids == ("u1", "a1", "r1", "a2")
    assert span.first_kept_entry_id == "u2"
    assert span.is_split_turn is False
    assert span.previous_compaction_entry_id is None and span.previous_summary == ""
    assert span.tokens_before == sum(tokens)
    assert span.span_tokens + span.kept_tokens == span.tokens_before
    assert span.message_count == 4


def test_first_kept_at_an_assistant_message_is_a_split_turn() -> None:
    span, _, _ = _prepare(_conversation(), first_kept_entry_id="a2")
    assert span.is_split_turn is True
    assert span.source_entry_ids == ("u1", "a1", "r1")


@pytest.mark.parametrize("entry_id", ["r1", "r2"])
def test_a_tool_result_is_never_the_first_kept_message(entry_id: str) -> None:
    with pytest.raises(SpanError) as raised:
        _prepare(_conversation(), first_kept_entry_id=entry_id)
    assert raised.value.field == "firstKeptEntryId"
    assert "tool call" in str(raised.value)


def test_unknown_or_first_entry_is_rejected_naming_the_field() -> None:
    with pytest.raises(SpanError, match="no entry 'nope'") as raised:
        _prepare(_conversation(), first_kept_entry_id="nope")
    assert raised.value.field == "firstKeptEntryId"
    with pytest.raises(SpanError, match="leaves nothing to summarize"):
        _prepare(_conversation(), first_kept_entry_id="u1")


def test_derived_cut_keeps_at_least_the_recent_budget_and_never_splits_a_tool_call() -> None:
    entries = _conversation()
    context = build_session_context(entries)
    tokens = [estimate_message_tokens(m) for m in context.messages]
    for keep in range(1, sum(tokens)):
        try:
            span = prepare_span(context, tokens, first_kept_entry_id=None, keep_recent_tokens=keep)
        except SpanError as exc:
            assert exc.field is None and "nothing to compact" in str(exc)
            continue
        assert span.kept_tokens >= keep
        kept_roles = context.messages[span.first_kept_index].get("role")
        assert kept_roles in ("user", "assistant")
        # no call in the span has its result in the kept part
        span_calls = {
            block["id"]
            for m in span.messages
            if m.get("role") == "assistant"
            for block in m["content"]
            if block.get("type") == "toolCall"
        }
        kept_results = {
            m.get("toolCallId")
            for m in context.messages[span.first_kept_index :]
            if m.get("role") == "toolResult"
        }
        assert not span_calls & kept_results


def test_a_branch_within_the_keep_budget_has_nothing_to_compact() -> None:
    with pytest.raises(SpanError, match="nothing to compact") as raised:
        _prepare(_conversation(), keep_recent_tokens=10**9)
    assert raised.value.field is None


def test_span_starts_after_the_branch_latest_compaction() -> None:
    entries = _conversation()
    compaction = _e(
        "c1x",
        "a4",
        "compaction",
        summary="## Objective\n- earlier work",
        firstKeptEntryId="u2",
        tokensBefore=999,
    )
    tail = [
        _user("u4", "c1x", "more " * 30),
        _assistant("a6", "u4", "fine " * 30),
        _user("u5", "a6", "again " * 30),
    ]
    span, context, _ = _prepare([*entries, compaction, *tail], first_kept_entry_id="u4")
    assert span.previous_compaction_entry_id == "c1x"
    assert span.previous_summary == "## Objective\n- earlier work"
    # kept part of the old compaction (u2..a4) and nothing before it
    assert span.source_entry_ids == ("u2", "a3", "r2", "a4")
    with pytest.raises(SpanError, match="already summarized"):
        _prepare([*entries, compaction, *tail], first_kept_entry_id="a1")


def test_branch_isolation_ignores_another_branch_compaction() -> None:
    entries = _conversation()
    other = _e(
        "cX", "a4", "compaction", summary="other branch", firstKeptEntryId="u3", tokensBefore=1
    )
    mine = [_user("u9", "a2", "branch here " * 30), _assistant("a9", "u9", "ok " * 30)]
    span, _, _ = _prepare([*entries, other, *mine], first_kept_entry_id="u9")
    assert span.previous_compaction_entry_id is None
    assert span.source_entry_ids == ("u1", "a1", "r1", "a2")
