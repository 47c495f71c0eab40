"""`ds4/usage` end to end (issue 14, docs/model-awareness.md): usage reports on manifests,
calibration from 1.0 to a stable ratio, drift warnings raised and cleared, profiles kept apart,
samples surviving a restart, model switches recorded, and malformed reports ignored while the
server keeps serving.

The usage objects are real ones: Pi `Usage` objects recorded in the fixture sessions (an
Anthropic call of the pi-mono session with cache reads and writes, an OpenAI call of the
prompt-cache fixture), sent whole (`totalTokens` and `cost` included) as a Pi client would,
with the cache-read count scaled so that the reported input is a chosen multiple of the plan's
estimate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import Servers, execute, notify_and_wait, plan_params, request
from pytest_lsp import LanguageClient

FIXTURES = Path(__file__).parent.parent / "fixtures" / "pi-sessions"

SETTINGS = {
    "settings": {"modelAwareness": {"calibrationWindow": 4, "minimumCalibrationSamples": 3}}
}
"""A short window, so that four reports replace every earlier sample."""


def recorded_usage(name: str, provider: str) -> dict[str, Any]:
    """The first Pi `Usage` object of an assistant message of `provider` in a fixture session
    that read from the prompt cache."""
    for line in (FIXTURES / name).read_text(encoding="utf-8").splitlines():
        message = json.loads(line).get("message") or {}
        usage = message.get("usage") or {}
        if message.get("provider") == provider and usage.get("cacheRead"):
            return dict(usage)
    raise AssertionError(f"no {provider} usage with cache reads in {name}")


ANTHROPIC = recorded_usage("pi-mono-v1-large-session.jsonl", "anthropic")
OPENAI = recorded_usage("v1-prompt-cache-replay.jsonl", "openai")


def scaled(usage: dict[str, Any], estimated: int, ratio: float) -> dict[str, Any]:
    """`usage` with cacheRead set so that input + cacheRead + cacheWrite = ratio x estimated."""
    actual = round(estimated * ratio)
    cache_read = actual - usage["input"] - usage["cacheWrite"]
    assert cache_read >= 0
    return {**usage, "cacheRead": cache_read, "totalTokens": actual + usage["output"]}


def anthropic_plan(session_file: Path) -> dict[str, Any]:
    return {**plan_params(session_file, "where do we parse the session file?"), "fixedTokens": 2000}


def openai_plan(session_file: Path) -> dict[str, Any]:
    params = anthropic_plan(session_file)
    return {**params, "model": {"provider": "openai", "id": "gpt-4o", "contextWindow": 128000}}


async def plan_and_report(
    client: LanguageClient, params: dict[str, Any], usage: dict[str, Any], ratio: float
) -> tuple[dict[str, Any], str]:
    """Plan, then report usage of `ratio` x the plan's estimate; returns the plan result and
    the server's log line for the report."""
    planned = await request(client, "ds4/plan", params)
    model = params["model"]
    line = await notify_and_wait(
        client,
        "ds4/usage",
        {
            "manifestId": planned["manifestId"],
            "provider": model["provider"],
            "model": model["id"],
            "usage": scaled(usage, planned["estimatedTokens"], ratio),
            "stopReason": "stop",
        },
    )
    return planned, line


async def manifest(client: LanguageClient, manifest_id: str) -> dict[str, Any]:
    answer = await request(client, "ds4/manifest", {"id": manifest_id})
    return answer


async def test_reports_calibrate_raise_and_clear_drift_and_survive_a_restart(
    servers: Servers, session_file: Path
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    params = anthropic_plan(session_file)
    nominal = None
    for number in range(3):
        planned, line = await plan_and_report(client, params, ANTHROPIC, 1.3)
        assert planned["budget"]["calibrationRatio"] == 1.0  # not calibrated yet
        nominal = planned["budget"]["targetInputTokens"]
        assert "sample=yes" in line and f"samples={number + 1}" in line
    recorded = await manifest(client, planned["manifestId"])
    usage = recorded["usage"]
    assert recorded["actualTokens"] == usage["input"] + usage["cacheRead"] + usage["cacheWrite"]
    assert recorded["actualTokens"] == round(planned["estimatedTokens"] * 1.3)
    assert usage["cacheWrite"] == ANTHROPIC["cacheWrite"] and usage["stopReason"] == "stop"
    assert usage["cacheShare"] == round(usage["cacheRead"] / recorded["actualTokens"], 4)

    calibrated = await request(client, "ds4/plan", params)
    assert calibrated["budget"]["calibrationRatio"] == pytest.approx(1.3, abs=1e-3)
    assert (
        calibrated["budget"]["targetInputTokens"] == int(nominal / 1.3)
        or abs(calibrated["budget"]["targetInputTokens"] - nominal / 1.3) <= 1
    )
    awareness = (await manifest(client, calibrated["manifestId"]))["modelAwareness"]
    assert awareness["calibration"]["calibrated"] is True
    assert [w["code"] for w in awareness["calibration"]["warnings"]] == ["persistent-underestimate"]
    assert awareness["calibration"]["warnings"][0]["severity"] == "warning"
    health = await execute(client, "ds4.health")
    [profile] = health["calibration"]
    assert (profile["provider"], profile["model"], profile["samples"]) == (
        "anthropic",
        "claude-sonnet-4-5",
        3,
    )
    assert profile["cacheShare"] is not None and 0 < profile["cacheShare"] <= 1

    # the estimate becomes right: four reports at 1.0 fill the window, the warning clears
    for _ in range(4):
        planned, _ = await plan_and_report(client, params, ANTHROPIC, 1.0)
    health = await execute(client, "ds4.health")
    [profile] = health["calibration"]
    assert profile["ratio"] == 1.0 and profile["warnings"] == [] and profile["accepted"] == 4

    # a critical underestimate makes ds4.health warn, and the samples outlive the process
    for _ in range(4):
        await plan_and_report(client, params, ANTHROPIC, 1.7)
    health = await execute(client, "ds4.health")
    assert health["status"] == "warning"
    assert health["calibration"][0]["warnings"][0]["severity"] == "critical"
    await servers.stop(client)
    again = await servers.start(initialization_options=SETTINGS)
    planned = await request(again, "ds4/plan", params)
    assert planned["budget"]["calibrationRatio"] == pytest.approx(1.7, abs=1e-3)


async def test_profiles_are_calibrated_apart_and_a_switch_is_recorded(
    servers: Servers, session_file: Path
) -> None:
    client = await servers.start(initialization_options=SETTINGS)
    for _ in range(3):
        await plan_and_report(client, anthropic_plan(session_file), ANTHROPIC, 1.4)
    switched, line = await plan_and_report(client, openai_plan(session_file), OPENAI, 0.9)
    assert "samples=1" in line  # the OpenAI profile's first sample
    awareness = (await manifest(client, switched["manifestId"]))["modelAwareness"]
    assert awareness["modelSwitch"] == {
        "from": "anthropic/claude-sonnet-4-5",
        "to": "openai/gpt-4o",
    }
    assert awareness["calibration"]["calibrated"] is False
    assert switched["budget"]["calibrationRatio"] == 1.0  # not Anthropic's 1.4
    back = await request(client, "ds4/plan", anthropic_plan(session_file))
    assert back["budget"]["calibrationRatio"] == pytest.approx(1.4, abs=1e-3)
    awareness = (await manifest(client, back["manifestId"]))["modelAwareness"]
    assert awareness["modelSwitch"] == {
        "from": "openai/gpt-4o",
        "to": "anthropic/claude-sonnet-4-5",
    }
    health = await execute(client, "ds4.health")
    assert {(p["provider"], p["samples"]) for p in health["calibration"]} == {
        ("anthropic", 3),
        ("openai", 1),
    }


async def test_a_failed_call_is_recorded_but_does_not_calibrate(
    client: LanguageClient, session_file: Path
) -> None:
    planned = await request(client, "ds4/plan", anthropic_plan(session_file))
    line = await notify_and_wait(
        client,
        "ds4/usage",
        {
            "manifestId": planned["manifestId"],
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": {**ANTHROPIC, "output": 0},
            "stopReason": "error",
        },
    )
    assert "sample=no" in line
    recorded = await manifest(client, planned["manifestId"])
    assert recorded["usage"]["stopReason"] == "error" and recorded["actualTokens"] > 0
    assert (await execute(client, "ds4.health"))["calibration"] == []


BAD_REPORTS = [
    ({"provider": "anthropic", "model": "m", "usage": {"input": 1}}, "manifestId"),
    ({"manifestId": "{id}", "provider": "anthropic", "model": "m"}, "usage"),
    ({"manifestId": "{id}", "provider": "a", "model": "m", "usage": {"input": -1}}, "usage.input"),
    (
        {"manifestId": "{id}", "provider": "a", "model": "m", "usage": {"input": "12"}},
        "usage.input",
    ),
    (
        {
            "manifestId": "{id}",
            "provider": "a",
            "model": "m",
            "usage": {"input": 1, "cacheRead": 1.5},
        },
        "usage.cacheRead",
    ),
    (
        {"manifestId": "{id}", "provider": "a", "model": "m", "usage": {"input": 2**60}},
        "usage.input",
    ),
    ({"manifestId": "{id}", "provider": "", "model": "m", "usage": {"input": 1}}, "provider"),
    ({"manifestId": "{id}", "provider": "a\nb", "model": "m", "usage": {"input": 1}}, "provider"),
    (
        {
            "manifestId": "{id}",
            "provider": "a",
            "model": "m",
            "usage": {"input": 1},
            "outputItemHashes": ["AB" * 32],
        },
        "outputItemHashes[0]",
    ),
    (
        {
            "manifestId": "{id}",
            "provider": "a",
            "model": "m",
            "usage": {"input": 1},
            "outputItems": [{}] * 10_001,
        },
        "outputItems",
    ),
    (
        {
            "manifestId": "{id}",
            "provider": "a",
            "model": "m",
            "usage": {"input": 2**52, "cacheRead": 2**52, "cacheWrite": 2**52},
        },
        "usage",
    ),
    (
        {
            "manifestId": "{id}",
            "provider": "a",
            "model": "m",
            "usage": {"input": 1},
            "stopReason": "x" * 100,
        },
        "stopReason",
    ),
    (
        {"manifestId": "m-unknown", "provider": "a", "model": "m", "usage": {"input": 1}},
        "manifestId",
    ),
]


async def test_malformed_reports_are_ignored_and_the_server_keeps_serving(
    servers: Servers, session_file: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Each bad report is dropped with its field named: a wrong shape in the server's
    warnings (stderr), a value the engine rejects in the client's log. A good report after
    them is recorded alone."""
    client = await servers.start()
    planned = await request(client, "ds4/plan", anthropic_plan(session_file))
    manifest_id = planned["manifestId"]
    for report, _ in BAD_REPORTS:
        report = json.loads(json.dumps(report).replace("{id}", manifest_id))
        client.protocol.notify("ds4/usage", report)
    client.protocol.notify("ds4/usage", [1, 2, 3])  # not even an object
    good = {
        "manifestId": manifest_id,
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": scaled(ANTHROPIC, planned["estimatedTokens"], 1.1),
    }
    line = await notify_and_wait(client, "ds4/usage", good)
    while "manifest=" not in line:  # the bad reports' lines came first
        line = await notify_and_wait(client, "ds4/usage", good)
    assert "sample=yes" in line
    recorded = await manifest(client, manifest_id)
    assert recorded["actualTokens"] == round(planned["estimatedTokens"] * 1.1)
    assert (await execute(client, "ds4.health"))["calibration"][0]["samples"] == 1
    logged = "\n".join(m.message for m in client.log_messages)
    await servers.stop(client)
    logged += capfd.readouterr().err
    for _, field in BAD_REPORTS:
        assert re.search(rf"ds4/usage: .*\b{re.escape(field)}(?![\w.\[])", logged), field
