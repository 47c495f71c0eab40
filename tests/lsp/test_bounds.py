"""Bounds on what crosses the wire, end to end: integers within 2^53 - 1, echoed values cut
short, lone surrogates and impossible paths named as fields, deep session lines that still
plan, and command arguments described by type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lsp_helpers import INVALID_PARAMS, execute, plan_params, request, request_error
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

MAX_SAFE_INTEGER = 2**53 - 1
HUGE = "x" * 10_000_000  # 10 MB


def assert_invalid_params(error: JsonRpcException, method: str, field: str) -> None:
    """-32602 naming `field`, with a short message and no traceback."""
    assert error.code == INVALID_PARAMS, error
    assert error.message.startswith(f"{method}: {field}"), error.message[:300]
    assert len(error.message) < 600, len(error.message)
    assert field in (error.data or {}).get("fields", []), error.data
    assert "traceback" not in json.dumps(error.data), error.data


async def test_integers_beyond_2_53_are_refused_naming_the_field(
    client: LanguageClient, session_file: Path
) -> None:
    for params, field in [
        ({**plan_params(session_file), "fixedTokens": 2**63}, "params.fixedTokens"),
        ({**plan_params(session_file), "fixedTokens": MAX_SAFE_INTEGER + 1}, "params.fixedTokens"),
        (
            {**plan_params(session_file), "model": {"contextWindow": 2**64}},
            "params.model.contextWindow",
        ),
    ]:
        error = await request_error(client, "ds4/plan", params)
        assert_invalid_params(error, "ds4/plan", field)
    error = await request_error(client, "ds4/retrieve", {"query": "x", "maxTokens": 2**63})
    assert_invalid_params(error, "ds4/retrieve", "params.maxTokens")


async def test_result_integers_stay_within_2_53(client: LanguageClient, session_file: Path) -> None:
    result = await request(
        client, "ds4/plan", {**plan_params(session_file), "fixedTokens": MAX_SAFE_INTEGER}
    )
    assert 0 < result["estimatedTokens"] <= MAX_SAFE_INTEGER


async def test_echoed_values_are_bounded(client: LanguageClient, session_file: Path) -> None:
    """A 10 MB manifest id or leaf id is named in a short message, not quoted whole."""
    error = await request_error(client, "ds4/manifest", {"id": HUGE})
    assert_invalid_params(error, "ds4/manifest", "params.id")
    assert "10000000 characters" in error.message
    error = await request_error(
        client,
        "ds4/plan",
        {**plan_params(session_file), "session": {"file": str(session_file), "leafId": HUGE}},
    )
    assert_invalid_params(error, "ds4/plan", "params.session.leafId")


async def test_lone_surrogates_and_impossible_paths_are_invalid_params(
    client: LanguageClient, session_file: Path
) -> None:
    error = await request_error(client, "ds4/manifest", {"id": "m-\ud800"})
    assert_invalid_params(error, "ds4/manifest", "params.id")
    error = await request_error(
        client, "ds4/retrieve", {"session": {"file": str(session_file) + "\udfff"}}
    )
    assert_invalid_params(error, "ds4/retrieve", "params.session.file")
    for path in (HUGE, "/tmp/" + "d" * 300 + "/s.jsonl", "/tmp/a\x00b.jsonl"):
        error = await request_error(
            client, "ds4/plan", {**plan_params(session_file), "session": {"file": path}}
        )
        assert_invalid_params(error, "ds4/plan", "params.session.file")
    result = await request(client, "ds4/retrieve", {"session": {"file": str(session_file)}})
    assert result["status"] in {"ok", "no-query"}


def deep_session(path: Path, depth: int) -> Path:
    """A v3 session whose assistant tool call has arguments nested `depth` levels."""
    arguments: Any = 1
    for _ in range(depth):
        arguments = {"a": arguments}
    stamp = "2026-01-01T00:00:00.000Z"
    records = [
        {"type": "session", "version": 3, "id": "deep-session", "timestamp": stamp, "cwd": "/p"},
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": stamp,
            "message": {"role": "user", "content": "write it", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "timestamp": stamp,
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "write", "arguments": arguments}
                ],
                "timestamp": 2,
            },
        },
        {
            "type": "message",
            "id": "r1",
            "parentId": "a1",
            "timestamp": stamp,
            "message": {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "write",
                "content": [{"type": "text", "text": "ok"}],
                "timestamp": 3,
            },
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def test_a_session_line_nested_330_deep_does_not_stop_its_plans(
    client: LanguageClient, tmp_path: Path
) -> None:
    session = deep_session(tmp_path / "deep.jsonl", 330)
    for text in ("first", "second"):
        result = await request(client, "ds4/plan", plan_params(session, text))
        assert result["mode"] in {"managed", "fallback"}, result.get("fallbackReason")
        assert result["messages"], result
    # The planned messages (the deep part omitted) fit in a request of their own.
    again = await request(
        client, "ds4/plan", {"messages": result["messages"], "model": {"contextWindow": 200000}}
    )
    assert again["mode"] == "managed"


async def test_commands_name_their_arguments_and_describe_them_by_type(
    client: LanguageClient,
) -> None:
    for command in ("ds4.rebuildIndex", "ds4.health", "ds4.projectStatus"):
        try:
            await execute(client, command, [{"a": 1}])
        except JsonRpcException as error:
            assert error.code == INVALID_PARAMS
            assert error.message == (
                f"{command}: params.arguments[0]: takes no arguments (got an object)"
            )
            assert error.data["fields"] == ["params.arguments[0]"]
        else:
            raise AssertionError(f"{command} accepted arguments")
    assert (await execute(client, "ds4.health", [{}]))["status"] in {"ok", "warning"}
