"""Notifications that feed native continuation, end to end: a `ds4/usage` report and the
`ds4/plan` a client sends right after it without waiting (notifications have no answer), which
must see the reported response (the server takes it on its event loop as the notification
arrives; recording the usage in SQLite runs on a worker thread beside the plan); and a
`ds4/continuationFailed` whose `reason` is the provider's whole error object."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import Servers, notify_and_wait, request
from session_files import SessionWriter, responses_reply

SETTINGS = {"settings": {"nativeContinuation": {"enabled": True, "allowProviderStorage": True}}}
GPT = {"provider": "openai", "id": "gpt-x", "contextWindow": 200000, "api": "openai-responses"}


async def test_a_plan_sent_right_after_a_report_continues_from_it(
    servers: Servers, tmp_path: Path
) -> None:
    writer = SessionWriter.with_turns(tmp_path / "s.jsonl", 2)
    client = await servers.start(initialization_options=SETTINGS)
    params = {"session": {"file": str(writer.path)}, "model": GPT}
    planned = await request(client, "ds4/plan", {**params, "request": "Step 0."})
    for step in range(1, 6):
        writer.user(f"Step {step - 1}.")
        writer.assistant(f"Done {step - 1}.")
        client.protocol.notify(
            "ds4/usage",
            {
                "manifestId": planned["manifestId"],
                "provider": "openai",
                "model": "gpt-x",
                "usage": {"input": 900, "output": 12, "cacheRead": 512},
                "outputItems": [responses_reply(f"Done {step - 1}.", "resp_x")],
            },
        )  # and at once, without waiting for the report to be recorded:
        following = await request(client, "ds4/plan", {**params, "request": f"Step {step}."})
        assert following["continuation"]["mode"] == "delta", (step, following["continuation"])
        assert following["continuation"]["deltaStart"] == len(planned["messages"]) + 1
        planned = following


async def test_a_continuation_failure_with_the_providers_error_object_is_taken(
    servers: Servers, tmp_path: Path
) -> None:
    """`reason` may be the provider's whole error object: the notification still drops the
    state (it was a string field, and an object made the whole notification fail)."""
    writer = SessionWriter.with_turns(tmp_path / "s.jsonl", 2)
    client = await servers.start(initialization_options=SETTINGS)
    params = {"session": {"file": str(writer.path)}, "model": GPT, "request": "Step 0."}
    await request(client, "ds4/plan", params)
    error = {"type": "invalid_request_error", "code": "previous_response_not_found", "param": None}
    line = await notify_and_wait(
        client, "ds4/continuationFailed", {"session": {"file": str(writer.path)}, "reason": error}
    )
    assert line == "ds4/continuationFailed: dropped=1"
    again = await request(client, "ds4/plan", params)
    assert again["continuation"]["reason"] == "continuation-handle-rejected"


async def test_a_plan_sent_right_after_reports_uses_their_calibration(
    servers: Servers, tmp_path: Path
) -> None:
    """Three reports at 1.5 times the estimate, each sent without waiting, then a plan at
    once: it is divided by 1.5 (the plan waits for the reports its model has pending)."""
    writer = SessionWriter.with_turns(tmp_path / "s.jsonl", 2)
    client = await servers.start()
    for model in ("m1", "m2", "m3"):  # three fresh profiles: three chances to overtake
        params = {
            "session": {"file": str(writer.path)},
            "request": "Next step.",
            "model": {"provider": "acme", "id": model, "contextWindow": 100000},
        }
        for _ in range(3):
            planned = await request(client, "ds4/plan", params)
            client.protocol.notify(
                "ds4/usage",
                {
                    "manifestId": planned["manifestId"],
                    "provider": "acme",
                    "model": model,
                    "usage": {"input": round(planned["estimatedTokens"] * 1.5)},
                },
            )
        following = await request(client, "ds4/plan", params)
        assert following["budget"]["calibrationRatio"] == pytest.approx(1.5, abs=0.01), model
