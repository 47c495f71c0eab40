"""The wire types in-process: camelCase, strict JSON types, field-naming errors, options."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from cattrs.errors import BaseValidationError

from ds4_core.requests import ModelSpec, PlanRequest, RetrieveRequest, SessionRef
from ds4_lsp.converter import (
    CONVERTER,
    describe_structure_error,
    parse_initialization_options,
    server_converter,
)
from ds4_lsp.envelopes import PlanRequestMessage
from ds4_lsp.logs import RedactPyglsFilter
from ds4_lsp.params import RetrieveParams, settings_section


def plan_message(params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "ds4/plan", "params": params}


def structure_error(data: dict[str, Any]) -> str:
    with pytest.raises(BaseValidationError) as caught:
        CONVERTER.structure(data, PlanRequestMessage)
    return describe_structure_error("ds4/plan", caught.value)[0]


def test_camel_case_params_become_core_requests() -> None:
    """Wire camelCase maps to the core request, defaults filled in."""
    message = server_converter().structure(
        plan_message(
            {
                "session": {"file": "/s.jsonl", "leafId": "e9"},
                "model": {"provider": "openai", "contextWindow": 128000, "maxOutputTokens": 1},
                "fixedTokens": 900,
                "request": "go",
                "futureField": {"ignored": True},
            }
        ),
        PlanRequestMessage,
    )
    assert message.params.to_core() == PlanRequest(
        session=SessionRef(file="/s.jsonl", leaf_id="e9"),
        request="go",
        model=ModelSpec(provider="openai", context_window=128000, max_output_tokens=1),
        fixed_tokens=900,
    )
    assert RetrieveParams().to_core() == RetrieveRequest(scopes=("history",))


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"model": {"contextWindow": "1"}},
            "ds4/plan: params.model.contextWindow: expected an integer",
        ),
        (
            {"model": {"contextWindow": 1.0}},
            "ds4/plan: params.model.contextWindow: expected an integer",
        ),
        (
            {"model": {"contextWindow": False}},
            "ds4/plan: params.model.contextWindow: expected an integer",
        ),
        ({"request": 12}, "ds4/plan: params.request: expected a string"),
        ({"session": {}}, "ds4/plan: params.session.file: required field missing"),
        ({"mode": True}, "ds4/plan: params.mode: expected one of 'managed', 'observer'"),
        ({"messages": {"role": "user"}}, "ds4/plan: params.messages: expected an array"),
        ([], "ds4/plan: params: expected an object"),
    ],
)
def test_wrong_json_types_name_the_field_and_never_the_value(params: Any, expected: str) -> None:
    """Strict types: no coercion of strings, floats or booleans into integers."""
    message = structure_error(plan_message(params))
    assert message == expected


def test_a_result_is_written_exactly_as_its_wire_json() -> None:
    """Handlers answer a result's `to_wire()`; pygls writes that dict unchanged: nulls stay
    null, absent keys stay absent, integers already clamped by `to_wire` stay as they are,
    non-ASCII text and lone surrogates are JSON escapes (the body is ASCII), as `ds4 --json`."""
    from pygls.protocol import JsonRPCResponseMessage

    from ds4_core.json_bounds import MAX_SAFE_INTEGER
    from ds4_core.results import RetrievalStats
    from ds4_core.wire import to_wire
    from ds4_lsp.app import create_server

    result = {
        "mode": "managed",
        "messages": [{"role": "user", "content": "h\u00e9 \ud800", "note": None}],
        "stats": to_wire(RetrievalStats(candidates=2**60)),
        "nested": to_wire({"total": -(2**70), "ok": True}),
    }
    protocol = create_server().protocol
    written = io.BytesIO()
    protocol.set_writer(written, include_headers=False)
    protocol._send_data(JsonRPCResponseMessage(id=7, result=result, jsonrpc="2.0"))
    body = written.getvalue()
    assert body.isascii()
    answer = json.loads(body)
    assert answer == {"id": 7, "jsonrpc": "2.0", "result": result}
    assert answer["result"]["stats"]["candidates"] == MAX_SAFE_INTEGER
    assert answer["result"]["nested"] == {"total": -MAX_SAFE_INTEGER, "ok": True}


def test_send_response_writes_a_dict_result_as_pygls_would_and_other_results_through_pygls() -> (
    None
):
    """`Ds4Protocol._send_response` writes a handler's dict answer directly (no cattrs walk):
    the bytes equal pygls's own response for the same dict, the id's result type is forgotten,
    and lists, None, lsprotocol objects and errors keep pygls's path. A dict holding an object
    JSON has no form for (a slotted dataclass) is answered with an InternalError, not lost."""
    from lsprotocol import types
    from pygls.protocol import LanguageServerProtocol

    from ds4_core.results import RetrievalStats
    from ds4_lsp.app import create_server

    protocol = create_server().protocol

    def sent(call: Callable[[], None]) -> Any:
        written = io.BytesIO()
        protocol.set_writer(written, include_headers=False)
        call()
        return json.loads(written.getvalue())

    result = {
        "mode": "managed",
        "messages": [{"role": "user", "n": None}],
        "kind": types.MarkupKind.Markdown,
    }
    protocol._result_types[9] = object  # what an id of ours would have registered
    ours = sent(lambda: protocol._send_response(9, result=result))
    assert 9 not in protocol._result_types
    theirs = sent(lambda: LanguageServerProtocol._send_response(protocol, 9, result=result))
    assert ours == theirs == {"jsonrpc": "2.0", "id": 9, "result": {**result, "kind": "markdown"}}

    hover = types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="x"))
    for other in (None, [1, {"a": 2}], hover):
        assert sent(lambda o=other: protocol._send_response(3, result=o)) == sent(
            lambda o=other: LanguageServerProtocol._send_response(protocol, 3, result=o)
        )
    error = types.ResponseError(code=-32602, message="bad")
    assert sent(lambda: protocol._send_response(4, error=error))["error"]["message"] == "bad"

    unencodable = sent(lambda: protocol._send_response(5, result={"stats": RetrievalStats()}))
    assert unencodable["id"] == 5 and unencodable["error"]["code"] == -32603


def test_initialization_options_ignore_each_bad_field() -> None:
    """Bad fields fall back to defaults, good ones are kept, each problem is named."""
    options, warnings = parse_initialization_options(
        {"trusted": 1, "databasePath": "/tmp/x.db", "settings": "no"}
    )
    assert (options.trusted, options.database_path, options.settings) == (False, "/tmp/x.db", None)
    assert warnings == [
        "initializationOptions.trusted: expected true or false; ignored",
        "initializationOptions.settings: expected an object; ignored",
    ]
    assert parse_initialization_options(None)[1] == []
    assert parse_initialization_options([1])[1] == [
        "initializationOptions: expected an object; ignored"
    ]


def test_settings_are_read_under_ds4_or_at_the_top_level() -> None:
    """VS Code nests settings under `ds4`; other clients may not."""
    assert settings_section({"ds4": {"enabled": False}, "python": {}}) == {"enabled": False}
    assert settings_section({"enabled": False}) == {"enabled": False}
    assert settings_section(None) is None and settings_section([1]) is None


def test_pygls_log_records_lose_their_arguments_and_exception_text() -> None:
    """pygls formats message bodies into its logs; the filter keeps numbers only."""
    try:
        raise ValueError("secret session text")
    except ValueError:
        import sys

        record = logging.LogRecord(
            "pygls.protocol.json_rpc",
            logging.ERROR,
            __file__,
            1,
            "Failed to handle request %s %s %s",
            (7, "ds4/plan", {"request": "secret"}),
            sys.exc_info(),
        )
    assert RedactPyglsFilter().filter(record)
    text = logging.Formatter().format(record)
    assert text == "Failed to handle request 7 <redacted> <redacted> [ValueError]"
    ours = logging.LogRecord("ds4_lsp", logging.INFO, __file__, 1, "n=%d", (3,), None)
    assert RedactPyglsFilter().filter(ours) and ours.getMessage() == "n=3"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"summary": "text"}, ("text", None, None)),
        ({"summary": "text", "provider": None, "model": None}, ("text", None, None)),
        ({"summary": "text", "provider": "acme", "model": "m-1"}, ("text", "acme", "m-1")),
    ],
)
def test_summarize_answers_with_unknown_provider_are_accepted(
    answer: dict[str, Any], expected: tuple[str, str | None, str | None]
) -> None:
    from ds4_lsp.converter import summarize_answer

    core = summarize_answer(answer)
    assert (core.summary, core.provider, core.model) == expected


@pytest.mark.parametrize(
    "answer", [None, "text", {"summary": 3}, {"summary": "x", "provider": 5}, {"text": "x"}]
)
def test_badly_shaped_summarize_answers_are_refused(answer: Any) -> None:
    from ds4_core.requests import SummarizerUnavailable
    from ds4_lsp.converter import summarize_answer

    with pytest.raises(SummarizerUnavailable):
        summarize_answer(answer)


def test_compact_reason_null_or_absent_is_manual() -> None:
    from ds4_lsp.params import CompactParams

    for raw in ({"session": {"file": "s.jsonl"}}, {"session": {"file": "s.jsonl"}, "reason": None}):
        assert CONVERTER.structure(raw, CompactParams).to_core().reason == "manual"
    structured = CONVERTER.structure(
        {"session": {"file": "s.jsonl"}, "reason": "overflow"}, CompactParams
    )
    assert structured.to_core().reason == "overflow"
