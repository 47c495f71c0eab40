"""A span's messages as evidence text, and the file inventories of its tool calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ds4_core.compaction.transcript import (
    MAX_TOOL_TEXT_CHARS,
    conversation_text,
    file_operations,
)
from ds4_core.sessions import build_session_context, read_all


def call(name: str, arguments: Any, call_id: str = "t1") -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def assistant(*blocks: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks), **extra}


def test_transcript_is_readable_and_skips_thinking_and_images() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "fix src/a.ts"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            ],
        },
        assistant(
            {"type": "thinking", "thinking": "secret plan"},
            {"type": "text", "text": "Reading it."},
            call("read", {"path": "src/a.ts"}),
        ),
        {
            "role": "toolResult",
            "toolCallId": "t1",
            "toolName": "read",
            "content": [{"type": "text", "text": "no such file"}],
            "isError": True,
        },
    ]
    assert conversation_text(messages) == (
        "[user]\nfix src/a.ts\n\n"
        "[assistant]\nReading it.\n\n"
        '[assistant → read]\n{"path": "src/a.ts"}\n\n'
        "[toolResult read error]\nno such file"
    )


def test_bash_commands_appear_raw_so_they_are_literal_evidence() -> None:
    command = 'grep -n "chalk\\." src/x.ts | head -5'
    text = conversation_text([assistant(call("bash", {"command": command}))])
    assert f"\n{command}" in text.split("\n", 1)[1]
    assert '"command": "grep -n \\"chalk\\\\.\\" src/x.ts | head -5"' in text


def test_long_tool_output_is_capped_around_an_omission_note() -> None:
    body = "h" * 3000 + "m" * 5000 + "t" * 3000
    text = conversation_text(
        [
            {"role": "toolResult", "toolName": "bash", "content": [{"type": "text", "text": body}]},
            {"role": "bashExecution", "command": "make", "output": body, "exitCode": 2},
        ]
    )
    omitted = len(body) - MAX_TOOL_TEXT_CHARS
    assert text.count(f"[… {omitted} characters omitted]") == 2
    assert "m" * 2000 not in text
    assert text.count("h" * 2000) == 2 and text.count("t" * 2000) == 2
    assert "[bashExecution exit 2]\nmake\n[output]\n" in text


def test_summaries_custom_and_unknown_roles_are_included() -> None:
    text = conversation_text(
        [
            {"role": "compactionSummary", "summary": "## Objective\n- earlier", "tokensBefore": 9},
            {"role": "branchSummary", "summary": "tried another way", "fromId": "x"},
            {"role": "custom", "customType": "note", "content": "remember the flag"},
            {"role": "weirdExtension", "content": "opaque words"},
            {"role": "bashExecution", "command": "ls", "output": "a", "excludeFromContext": True},
        ]
    )
    assert text == (
        "[compactionSummary]\n## Objective\n- earlier\n\n"
        "[branchSummary]\ntried another way\n\n"
        "[custom note]\nremember the flag\n\n"
        "[weirdExtension]\nopaque words"
    )


def test_assistant_error_message_is_evidence() -> None:
    text = conversation_text([assistant(stopReason="error", errorMessage="rate limited (429)")])
    assert text == "[assistant error]\nrate limited (429)"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(st.lists(json_values, max_size=6))
def test_any_json_input_serializes_deterministically(messages: list[Any]) -> None:
    first = conversation_text(messages)
    assert first == conversation_text(messages)
    file_operations(messages)


def test_file_operations_classify_read_and_modified_in_first_seen_order() -> None:
    messages = [
        assistant(
            call("read", {"path": "a.ts"}),
            call("read", {"file_path": " b.ts "}),
            call("edit", {"path": "c.ts"}),
            call("read", {"path": "c.ts"}),
            call("write", {"path": "d.ts"}),
            call("multi_edit", {"file_path": "e.ts"}),
            call("apply_patch", {"path": "f.ts"}),
            call("apply_patch", {"patch": "*** no path"}),
            call("read", {"path": "a.ts"}),
            call("edit", {"path": "b.ts"}),
            call("bash", {"command": "cat g.ts", "path": "g.ts"}),
        )
    ]
    read, modified = file_operations(messages)
    assert read == ["a.ts"]
    assert modified == ["c.ts", "d.ts", "e.ts", "f.ts", "b.ts"]


def test_file_operations_drop_unsafe_paths() -> None:
    messages = [
        assistant(
            call("read", {"path": ""}),
            call("read", {"path": "   "}),
            call("read", {"path": "two\nlines.ts"}),
            call("read", {"path": "bell\x07.ts"}),
            call("read", {"path": "x" * 1025}),
            call("read", {"path": 42}),
            call("read", "not a dict"),
            call("read", {"path": "ok.ts"}),
            "not a block",
        ),
        {"role": "user", "content": [call("read", {"path": "user-side.ts"})]},
    ]
    assert file_operations(messages) == (["ok.ts"], [])


def test_real_session_files_come_from_its_tool_calls(pi_sessions_dir: Path) -> None:
    session = read_all(pi_sessions_dir / "pi-mono-v1-large-session.jsonl")
    messages = build_session_context(session.entries).messages
    read, modified = file_operations(messages)
    assert "packages/coding-agent/src/tui/oauth-selector.ts" in read
    assert "packages/coding-agent/src/tui/user-message-selector.ts" in modified
    assert not set(read) & set(modified)
    text = conversation_text(messages)
    assert 'find packages/coding-agent/src -name "*selector.ts" -type f' in text
