"""Pi message shapes accepted for owned sessions, and the engine's ds4/sessionOpen /
ds4/sessionAppend errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ds4_core.engine import ContextEngine
from ds4_core.requests import (
    RequestError,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
)
from ds4_core.sessions import build_session_context, read_all
from ds4_core.sessions.message_shapes import MessageShapeError, checked_message


def test_missing_fields_get_pi_values_and_unknown_keys_stay() -> None:
    assistant = {
        "role": "assistant",
        "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}],
        "responseId": "r-1",
    }
    checked = checked_message(assistant, "messages[0]", now_ms=42)
    assert checked == {
        **assistant,
        "timestamp": 42,
        "api": "unknown",
        "provider": "unknown",
        "model": "unknown",
        "stopReason": "toolUse",
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
    }
    assert "timestamp" not in assistant  # the caller's message is not changed
    result = {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": []}
    assert checked_message(result, "m", now_ms=1)["isError"] is False
    text = checked_message({"role": "assistant", "content": [], "timestamp": 5}, "m")
    assert text["stopReason"] == "stop" and text["timestamp"] == 5


def test_a_partial_usage_gets_each_missing_count_and_cost() -> None:
    usage = {"input": 5, "cacheRead": 2, "cost": {"output": 0.5, "input": 0.25}, "extra": 1}
    message = {"role": "assistant", "content": [], "usage": usage}
    checked = checked_message(message, "m", now_ms=1)
    assert checked["usage"] == {
        "input": 5,
        "output": 0,
        "cacheRead": 2,
        "cacheWrite": 0,
        "totalTokens": 7,
        "cost": {"input": 0.25, "output": 0.5, "cacheRead": 0, "cacheWrite": 0, "total": 0.75},
        "extra": 1,
    }
    assert message["usage"] is usage and "output" not in usage  # the caller's usage is kept
    given = {"role": "assistant", "content": [], "usage": {"totalTokens": 9, "cost": {"total": 1}}}
    filled = checked_message(given, "m", now_ms=1)["usage"]
    assert filled["totalTokens"] == 9 and filled["input"] == 0 and filled["cost"]["total"] == 1


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": "x", "timestamp": True}, "m.timestamp"),
        ({"role": "user", "content": "x", "timestamp": -1}, "m.timestamp"),
        ({"role": "user", "content": [{"type": "image", "data": "AA=="}]}, "m.content[0].mimeType"),
        ({"role": "assistant", "content": "text"}, "m.content"),
        ({"role": "assistant", "content": [{"type": "image"}]}, "m.content[0].type"),
        ({"role": "assistant", "content": [], "model": 4}, "m.model"),
        ({"role": "assistant", "content": [], "usage": {"input": 1.5}}, "m.usage.input"),
        (
            {"role": "assistant", "content": [], "usage": {"cost": {"total": "1"}}},
            "m.usage.cost.total",
        ),
        (
            {"role": "assistant", "content": [{"type": "toolCall", "id": "", "name": "x"}]},
            "m.content[0].id",
        ),
        ({"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": "x"}, "m.content"),
        (
            {"role": "toolResult", "toolCallId": "c", "toolName": "t", "content": [], "isError": 1},
            "m.isError",
        ),
        ({"role": "bashExecution", "command": "ls"}, "m.role"),
        ({"content": "no role"}, "m.role"),
    ],
)
def test_a_bad_field_is_named(message: dict[str, Any], field: str) -> None:
    with pytest.raises(MessageShapeError) as caught:
        checked_message(message, "m")
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: expected")


def test_the_engine_appends_only_to_its_own_sessions(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "data" / "ds4.db")
    try:
        opened = engine.session_open(SessionOpenRequest(cwd="/w", title="T"))
        assert Path(opened.file).parent == tmp_path / "data" / "sessions"
        user = {"role": "user", "content": "hi", "timestamp": 7}
        result = engine.session_append(SessionAppendRequest(SessionRef(opened.file), [user, user]))
        assert result.session_id == opened.session_id and len(result.entry_ids) == 2
        assert build_session_context(read_all(opened.file).entries).messages == [user, user]
        foreign = tmp_path / "foreign.jsonl"
        foreign.write_bytes(Path(opened.file).read_bytes())
        with pytest.raises(RequestError) as caught:
            engine.session_append(SessionAppendRequest(SessionRef(str(foreign)), [user]))
        assert caught.value.field == "session.file"
        assert "not a session this server owns" in str(caught.value)
        with pytest.raises(RequestError) as caught:
            engine.session_append(SessionAppendRequest(SessionRef(opened.file), [user] * 1001))
        assert caught.value.field == "messages"
        with pytest.raises(RequestError) as caught:
            engine.session_open(SessionOpenRequest(session_id="a b"))
        assert caught.value.field == "sessionId"
    finally:
        engine.close()
