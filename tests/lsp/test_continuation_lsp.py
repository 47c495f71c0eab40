"""Native continuation over LSP, end to end: `ds4/plan`'s `continuation` (with `model.api` and
`requestOptions`), `delta` after a `ds4/usage` report of the answer, the invalidations (model
switch, tree navigation, compaction, `ds4/continuationFailed`, changed options, expiry, a changed
prefix, a response without an id) and hostile params; a response id never reaches a manifest
or a log line.

Sessions are small synthetic Pi v3 files grown the way Pi grows them (`SessionWriter`), so the
whole branch fits the recent tail and no evidence is inserted.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import (
    INVALID_PARAMS,
    Servers,
    notify_and_wait,
    request,
    request_error,
)
from session_files import SessionWriter, responses_reply

from ds4_core.continuation import item_hash

ON = {"nativeContinuation": {"enabled": True, "allowProviderStorage": True}}
SETTINGS = {"settings": {**ON, "compaction": {"keepRecentTokens": 50}}}
"""initializationOptions: continuation on; a few turns make a compaction span."""
GPT = {"provider": "openai", "id": "gpt-x", "contextWindow": 200000, "api": "openai-responses"}


@pytest.fixture
def writer(tmp_path: Path) -> SessionWriter:
    return SessionWriter.with_turns(tmp_path / "s.jsonl", 2)


def plan_params(writer: SessionWriter, text: str, **changes: Any) -> dict[str, Any]:
    return {
        "session": {"file": str(writer.path)},
        "request": text,
        "model": GPT,
        "requestOptions": {"store": True, "tools": [{"type": "function", "name": "read"}]},
        **changes,
    }


def full(reason: str) -> dict[str, Any]:
    return {
        "strategy": "openai-previous-response-v1",
        "mode": "full",
        "deltaStart": 0,
        "reason": reason,
    }


async def test_the_first_plan_is_a_cold_start_and_an_unreported_answer_replays(
    servers: Servers, writer: SessionWriter
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    first = await request(client, "ds4/plan", plan_params(writer, "Step 3."))
    assert first["continuation"] == full("cold-start")
    manifest = await request(client, "ds4/manifest", {"id": first["manifestId"]})
    assert manifest["continuation"] == full("cold-start")
    writer.user("Step 3.")
    writer.assistant("Done.")
    second = await request(client, "ds4/plan", plan_params(writer, "Step 4."))
    assert second["continuation"] == full("provider-output-missing")


@pytest.mark.parametrize(
    "change",
    ["model", "options", "branch", "compact", "failed", "failed-path-alias"],
)
async def test_each_invalidation_over_lsp_gives_full_with_its_reason(
    servers: Servers, writer: SessionWriter, change: str
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    await request(client, "ds4/plan", plan_params(writer, "Step 3."))
    writer.user("Step 3.")
    writer.assistant("Done.")
    params = plan_params(writer, "Step 4.")
    expected = "provider-output-missing"  # without ds4/usage, what each reason takes over
    if change == "model":
        params["model"] = {**GPT, "id": "gpt-y"}
        expected = "continuation-identity-changed"
    elif change == "options":
        params["requestOptions"] = {"store": True, "temperature": 0.2}
        expected = "provider-request-options-changed"
    elif change == "branch":
        writer.leaf = None
        writer.user("Start over.")
        expected = "session-branch-changed"
    elif change == "compact":
        await request(client, "ds4/compact", {"session": {"file": str(writer.path)}})
        expected = "session-compacted"
    else:
        key = "path" if change == "failed-path-alias" else "file"
        line = await notify_and_wait(
            client,
            "ds4/continuationFailed",
            {
                "session": {key: str(writer.path)},
                "provider": "openai",
                "model": "gpt-x",
                "reason": "previous_response_not_found",
            },
        )
        assert line == "ds4/continuationFailed: dropped=1"
        expected = "continuation-handle-rejected"
    result = await request(client, "ds4/plan", params)
    assert result["continuation"] == full(expected)


async def test_an_old_state_expires(
    servers: Servers, writer: SessionWriter, client_name: str
) -> None:
    if client_name != "neovim":
        pytest.skip("waits 10 s: one client is enough")
    options = {"settings": {**ON, "nativeContinuation": {**ON["nativeContinuation"]}}}
    options["settings"]["nativeContinuation"]["maxStateAgeMs"] = 10_000  # the smallest
    client = await servers.start(initialization_options=options)
    await request(client, "ds4/plan", plan_params(writer, "Step 3."))
    await asyncio.sleep(10.2)
    result = await request(client, "ds4/plan", plan_params(writer, "Step 3 again."))
    assert result["continuation"] == full("state-expired")


async def test_continuation_is_null_when_off_and_says_why_when_not_eligible(
    servers: Servers, writer: SessionWriter
) -> None:
    off = await servers.start()
    assert (await request(off, "ds4/plan", plan_params(writer, "x")))["continuation"] is None
    client = await servers.start(initialization_options=SETTINGS)
    chat = plan_params(writer, "x", model={**GPT, "api": "openai-completions"})
    assert (await request(client, "ds4/plan", chat))["continuation"] == full("ineligible-api")
    ephemeral = {"messages": [{"role": "user", "content": "hi"}], "model": GPT}
    result = await request(client, "ds4/plan", ephemeral)
    assert result["continuation"] == full("ineligible-no-session")


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"model": {**GPT, "api": 5}}, "params.model.api"),
        ({"model": {**GPT, "api": "x" * 500}}, "params.model.api"),
        ({"requestOptions": [1, 2]}, "params.requestOptions"),
        ({"requestOptions": "store"}, "params.requestOptions"),
    ],
)
async def test_hostile_params_are_rejected_naming_the_field_and_the_server_serves_on(
    servers: Servers, writer: SessionWriter, changes: dict[str, Any], field: str
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    error = await request_error(client, "ds4/plan", plan_params(writer, "x", **changes))
    assert error.code == INVALID_PARAMS and field in error.message
    client.protocol.notify("ds4/continuationFailed", {"session": 5})  # ignored, no answer
    line = await notify_and_wait(
        client, "ds4/continuationFailed", {"session": {"file": str(writer.path) + ".gone"}}
    )
    assert line.startswith("ds4/continuationFailed:")
    result = await request(client, "ds4/plan", plan_params(writer, "x"))
    assert result["continuation"] == full("cold-start")


RESPONSE_ID = "resp_" + "5f1c0ffee0ddba11"
"""A provider response id: it must never reach a manifest or a log line."""


def received(text: str) -> dict[str, Any]:
    """The assistant message a client got back (with its response id)."""
    return responses_reply(text, RESPONSE_ID)


async def report(client: Any, manifest_id: str, **fields: Any) -> None:
    """`ds4/usage` for `manifest_id`, waited for (its log line)."""
    await notify_and_wait(
        client,
        "ds4/usage",
        {
            "manifestId": manifest_id,
            "provider": "openai",
            "model": "gpt-x",
            "usage": {"input": 900, "output": 12, "cacheRead": 512, "cacheWrite": 0},
            **fields,
        },
    )


@pytest.mark.parametrize("shape", ["items", "hashes"])
async def test_a_reported_answer_makes_the_next_plan_a_delta_and_its_id_is_never_kept(
    servers: Servers, writer: SessionWriter, shape: str, capfd: pytest.CaptureFixture[str]
) -> None:
    options = {"settings": {**SETTINGS["settings"], "diagnostics": {"logLevel": "debug"}}}
    client = await servers.start(initialization_options=options)
    first = await request(client, "ds4/plan", plan_params(writer, "Step 3."))
    writer.user("Step 3.")
    writer.assistant("Done.")
    output = (
        {"outputItems": [received("Done.")]}
        if shape == "items"
        else {"outputItemHashes": [item_hash(received("Done."))]}
    )
    await report(client, first["manifestId"], hasResponseId=True, **output)
    second = await request(client, "ds4/plan", plan_params(writer, "Step 4."))
    start = len(first["messages"]) + 1
    assert second["continuation"] == {
        "strategy": "openai-previous-response-v1",
        "mode": "delta",
        "deltaStart": start,
        "reason": None,
    }
    assert [m["content"] for m in second["messages"][start:]] == [
        [{"type": "text", "text": "Step 4."}]
    ]
    # and again: the delta call is the new state
    writer.user("Step 4.")
    writer.assistant("Ran it.")
    await report(client, second["manifestId"], outputItems=[received("Ran it.")])
    third = await request(client, "ds4/plan", plan_params(writer, "Step 5."))
    assert third["continuation"]["deltaStart"] == len(second["messages"]) + 1
    manifest = await request(client, "ds4/manifest", {"id": third["manifestId"], "view": "full"})
    assert manifest["continuation"] == third["continuation"]
    await servers.stop(client)
    logged = capfd.readouterr().err + "".join(m.message for m in client.log_messages)
    assert RESPONSE_ID not in logged and RESPONSE_ID not in json.dumps(manifest)


@pytest.mark.parametrize(
    ("what", "reason"),
    [
        ("no-id", "provider-response-id-missing"),
        ("edited", "managed-context-prefix-changed"),
        ("nothing-new", "delta-empty"),
        ("bad-hashes", "provider-output-missing"),
        ("other-model", "provider-output-missing"),
    ],
)
async def test_what_the_report_says_decides_the_next_plan(
    servers: Servers, writer: SessionWriter, what: str, reason: str
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    first = await request(client, "ds4/plan", plan_params(writer, "Step 3."))
    writer.user("Step 3.")
    writer.assistant("Done.")
    fields: dict[str, Any] = {"outputItems": [received("Done.")], "hasResponseId": True}
    if what == "no-id":
        fields["hasResponseId"] = False
    elif what == "edited":
        fields["outputItems"] = [received("Something else.")]
    elif what == "bad-hashes":
        fields = {"outputItemHashes": ["not-a-hash"]}
    elif what == "other-model":
        fields["model"] = "gpt-y"
    await report(client, first["manifestId"], **fields)
    if what == "nothing-new":
        params = {
            "session": {"file": str(writer.path)},
            "model": GPT,
            "requestOptions": plan_params(writer, "")["requestOptions"],
        }
    else:
        params = plan_params(writer, "Step 4.")
    result = await request(client, "ds4/plan", params)
    assert result["continuation"] == full(reason)
