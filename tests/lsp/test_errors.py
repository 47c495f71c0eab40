"""Bad input gets JSON-RPC InvalidParams naming the field, and the server keeps serving."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from lsp_helpers import INVALID_PARAMS, execute, plan_params, request, request_error
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

MALFORMED: list[tuple[str, Any, str, str]] = [
    # method, params, field named in the message, problem
    (
        "ds4/plan",
        {"model": {"contextWindow": "200000"}},
        "params.model.contextWindow",
        "expected an integer",
    ),
    (
        "ds4/plan",
        {"model": {"contextWindow": 2.5e5}},
        "params.model.contextWindow",
        "expected an integer",
    ),
    ("ds4/plan", {"session": {"leafId": "abc"}}, "params.session.file", "required field missing"),
    ("ds4/plan", {"mode": "aggressive"}, "params.mode", "expected one of 'managed', 'observer'"),
    (
        "ds4/plan",
        {"messages": [{"role": "user"}, "hello"]},
        "params.messages[1]",
        "expected an object",
    ),
    ("ds4/plan", {"fixedTokens": True}, "params.fixedTokens", "expected an integer"),
    ("ds4/plan", None, "params", "expected an object"),
    (
        "ds4/retrieve",
        {"scopes": ["history", "web"]},
        "params.scopes[1]",
        "expected one of 'history', 'project'",
    ),
    ("ds4/retrieve", {"scopes": "history"}, "params.scopes", "expected an array"),
    ("ds4/retrieve", {"maxResults": "5"}, "params.maxResults", "expected an integer"),
    ("ds4/retrieve", {"session": "a.jsonl"}, "params.session", "expected an object"),
    ("ds4/manifest", {"latest": "yes"}, "params.latest", "expected true or false"),
    ("ds4/manifest", {"view": "everything"}, "params.view", "expected one of"),
]


async def test_malformed_params_are_invalid_params_naming_the_field(
    client: LanguageClient, session_file: Path
) -> None:
    """Each malformed request is answered with -32602 and a message naming the field; a valid
    request right after each one still succeeds."""
    for method, params, field, problem in MALFORMED:
        error = await request_error(client, method, params)
        assert error.code == INVALID_PARAMS, (method, params, error)
        assert error.message.startswith(f"{method}: {field}: {problem}"), error.message

        result = await request(client, "ds4/retrieve", {"session": {"file": str(session_file)}})
        assert result["status"] in {"ok", "no-query"}


async def test_every_bad_field_is_named_in_one_answer(client: LanguageClient) -> None:
    """Several bad fields give one error listing all of them (and `data.fields`)."""
    error = await request_error(
        client, "ds4/plan", {"model": {"id": 7, "maxOutputTokens": "lots"}, "request": ["x"]}
    )
    assert error.code == INVALID_PARAMS
    for field in ("params.model.id", "params.model.maxOutputTokens", "params.request"):
        assert field in error.message
    assert set(error.data["fields"]) == {
        "params.model.id",
        "params.model.maxOutputTokens",
        "params.request",
    }


async def test_input_the_engine_rejects_is_invalid_params_naming_the_field(
    client: LanguageClient, session_file: Path, tmp_path: Path
) -> None:
    """Well-typed but unusable input (missing file, out-of-range limit, no manifest selector)
    is rejected by the engine and answered as InvalidParams naming the field."""
    missing = tmp_path / "nope.jsonl"
    cases = [
        ("ds4/plan", plan_params(missing), "params.session.file"),
        (
            "ds4/retrieve",
            {"session": {"file": str(session_file)}, "maxResults": 500},
            "params.maxResults",
        ),
        ("ds4/manifest", {}, "params.id"),
        ("ds4/manifest", {"id": "no-such-manifest"}, "params.id"),
    ]
    for method, params, field in cases:
        error = await request_error(client, method, params)
        assert error.code == INVALID_PARAMS, (method, error)
        assert error.message.startswith(f"{method}: ") and field in error.message, error.message

    result = await request(client, "ds4/plan", plan_params(session_file))
    assert result["mode"] == "managed"


async def test_commands_refuse_arguments(client: LanguageClient) -> None:
    """Commands take no arguments; passing some is InvalidParams naming the command."""
    try:
        await execute(client, "ds4.health", [{"verbose": True}, 2])
    except JsonRpcException as error:
        assert error.code == INVALID_PARAMS
        assert error.message == "ds4.health: params.arguments: takes no arguments (got 2)"
        assert error.data["fields"] == ["params.arguments"]
    else:
        raise AssertionError("ds4.health accepted arguments")
    assert (await execute(client, "ds4.health", []))["status"] in {"ok", "warning"}


async def test_a_session_file_name_that_is_not_utf8_is_invalid_params(
    client: LanguageClient, session_file: Path
) -> None:
    """A `session.file` naming a file whose name is not valid UTF-8 reaches the server as a
    lone surrogate (`os.fsdecode`); it is -32602 naming the field, not an internal error
    (the params check refuses lone surrogates before the engine could store the path)."""
    odd = os.fsdecode(bytes(session_file.parent) + b"/b\xff.jsonl")
    shutil.copyfile(session_file, odd)
    for method in ("ds4/plan", "ds4/retrieve"):
        error = await request_error(client, method, plan_params(Path(odd)))
        assert error.code == INVALID_PARAMS, (method, error)
        assert error.message.startswith(f"{method}: params.session.file: "), error.message

    result = await request(client, "ds4/plan", plan_params(session_file))
    assert result["mode"] == "managed"
