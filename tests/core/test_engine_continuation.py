"""Native continuation through the engine (`ContextEngine.plan`, `continuation_response`,
`continuation_failed`, `compact`, `close`) on a real Pi session file grown the way Pi grows it."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from session_files import SessionWriter, responses_reply

from ds4_core.continuation import item_hash
from ds4_core.engine import ContextEngine
from ds4_core.requests import (
    CompactRequest,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    SessionRef,
)
from ds4_core.results import PlanResult

ON = {"nativeContinuation": {"enabled": True, "allowProviderStorage": True}}
GPT = ModelSpec(provider="openai", id="gpt-x", context_window=200_000, api="openai-responses")
RESPONSE_ID = "resp_" + "0123456789abcdef"
"""A provider response id; it must never reach a manifest or a log."""


@pytest.fixture
def writer(tmp_path: Path) -> SessionWriter:
    return SessionWriter.with_turns(tmp_path / "s.jsonl", 2)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    settings = {**ON, "compaction": {"keepRecentTokens": 50}}  # a few turns make a span
    started = ContextEngine(database_path=tmp_path / "db" / "ds4.db", settings=settings)
    yield started
    started.close()


def plan(
    engine: ContextEngine,
    writer: SessionWriter,
    text: str,
    model: ModelSpec = GPT,
    options: dict[str, Any] | None = None,
) -> PlanResult:
    return engine.plan(
        PlanRequest(
            session=SessionRef(str(writer.path)),
            request=text,
            model=model,
            request_options=options,
        )
    )


def answer(engine: ContextEngine, writer: SessionWriter, result: PlanResult, text: str) -> None:
    """What Pi does after the call: the request and the reply join the session, and the
    client reports the reply (as the item it received, response id included)."""
    writer.user(result.messages[-1]["content"][0]["text"])
    writer.assistant(text)
    received = responses_reply(text, RESPONSE_ID)
    engine.continuation_response(result.manifest_id, "openai", "gpt-x", [received], None, True)


def test_a_reported_answer_lets_the_next_plan_send_only_the_new_messages(
    engine: ContextEngine, writer: SessionWriter, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    first = plan(engine, writer, "Step 3: add a test.")
    assert first.continuation == {
        "strategy": "openai-previous-response-v1",
        "mode": "full",
        "deltaStart": 0,
        "reason": "cold-start",
    }
    answer(engine, writer, first, "Added the test.")
    second = plan(engine, writer, "Step 4: run it.")
    assert second.continuation is not None and second.continuation["mode"] == "delta"
    start = second.continuation["deltaStart"]
    assert start == len(first.messages) + 1
    assert [m["role"] for m in second.messages[start:]] == ["user"]
    manifest = engine.manifest(ManifestRequest(id=second.manifest_id, view="full")).to_wire()
    assert manifest["continuation"] == second.continuation
    assert RESPONSE_ID not in json.dumps(manifest)
    assert RESPONSE_ID not in caplog.text


def test_output_reported_as_hashes_continues_like_the_items(
    engine: ContextEngine, writer: SessionWriter
) -> None:
    first = plan(engine, writer, "Step 3: add a test.")
    writer.user("Step 3: add a test.")
    writer.assistant("Added.")
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Added."}]}
    engine.continuation_response(
        first.manifest_id, "openai", "gpt-x", None, [item_hash(reply)], None
    )
    assert plan(engine, writer, "Step 4.").continuation["mode"] == "delta"  # type: ignore[index]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("model", "continuation-identity-changed"),
        ("options", "provider-request-options-changed"),
        ("branch", "session-branch-changed"),
        ("compact", "session-compacted"),
        ("failed", "continuation-handle-rejected"),
        ("close", "cold-start"),
        ("no-output", "provider-output-missing"),
        ("no-id", "provider-response-id-missing"),
        ("error", "provider-call-failed"),
        ("aborted", "provider-call-failed"),
        ("edited", "managed-context-prefix-changed"),
    ],
)
def test_each_invalidation_gives_full_with_its_reason(
    engine: ContextEngine, writer: SessionWriter, change: str, reason: str
) -> None:
    first = plan(engine, writer, "Step 3: add a test.", options={"store": True})
    if change == "no-output":
        writer.user("Step 3: add a test.")
        writer.assistant("Added.")
    elif change == "no-id":
        answer(engine, writer, first, "Added.")
        engine.continuation_response(first.manifest_id, "openai", "gpt-x", None, None, False)
    elif change in ("error", "aborted"):  # the output of a failed call is not continued
        writer.user("Step 3: add a test.")
        writer.assistant("Added.")
        received = responses_reply("Added.", RESPONSE_ID)
        engine.continuation_response(
            first.manifest_id, "openai", "gpt-x", [received], None, True, stop_reason=change
        )
    else:
        answer(engine, writer, first, "Added.")
    model, options = GPT, {"store": True}
    if change == "model":
        model = ModelSpec(provider="openai", id="gpt-y", context_window=200_000, api=GPT.api)
    elif change == "options":
        options = {"store": True, "temperature": 0.5}
    elif change == "branch":
        writer.leaf = None  # a new root: the previous leaf is off the active branch
        writer.user("Start over.")
        writer.assistant("Sure.")
    elif change == "compact":
        engine.compact(CompactRequest(session=SessionRef(str(writer.path))))
    elif change == "failed":
        assert engine.continuation_failed(SessionRef(str(writer.path)), "openai", "gpt-x") == 1
    elif change == "close":
        engine.close()
    elif change == "edited":
        lines = writer.path.read_text(encoding="utf-8").splitlines()
        entry = json.loads(lines[1])
        entry["message"]["content"] = "Step 0: something else entirely."
        lines[1] = json.dumps(entry)
        writer.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    second = plan(engine, writer, "Step 4: run it.", model=model, options=options)
    assert second.continuation == {
        "strategy": "openai-previous-response-v1",
        "mode": "full",
        "deltaStart": 0,
        "reason": reason,
    }


@pytest.mark.parametrize(
    ("model", "settings", "reason"),
    [
        (ModelSpec(provider="openai", id="gpt-x", api="openai-completions"), ON, "ineligible-api"),
        (ModelSpec(provider="anthropic", id="c", api="openai-responses"), ON, "ineligible-profile"),
        (GPT, {**ON, "context": {"mode": "observer"}}, "ineligible-mode"),
        (GPT, {"nativeContinuation": {"enabled": True}}, None),
        (GPT, {}, None),
    ],
)
def test_a_plan_that_cannot_be_continued_says_why_or_is_null_when_off(
    tmp_path: Path, writer: SessionWriter, model: ModelSpec, settings: dict, reason: str | None
) -> None:
    engine = ContextEngine(database_path=tmp_path / "db2.db", settings=settings)
    try:
        result = plan(engine, writer, "Step 3.", model=model)
    finally:
        engine.close()
    if reason is None:
        assert result.continuation is None
    else:
        assert result.continuation is not None and result.continuation["reason"] == reason


def test_an_ephemeral_plan_is_never_continued(engine: ContextEngine) -> None:
    result = engine.plan(
        PlanRequest(messages=[{"role": "user", "content": "hi"}], request="more", model=GPT)
    )
    assert result.continuation is not None
    assert result.continuation["reason"] == "ineligible-no-session"


def test_hostile_inputs_name_their_field(engine: ContextEngine, writer: SessionWriter) -> None:
    with pytest.raises(RequestError) as caught:
        plan(engine, writer, "x", model=ModelSpec(provider="openai", id="g", api="a b"))
    assert caught.value.field == "model.api"
    with pytest.raises(RequestError) as caught:
        engine.continuation_failed(SessionRef(str(writer.path) + ".missing"))
    assert caught.value.field == "session.file"


@pytest.mark.parametrize("stop", [None, "stop", "toolUse", "length"])
def test_a_completed_call_output_is_continued(
    engine: ContextEngine, writer: SessionWriter, stop: str | None
) -> None:
    first = plan(engine, writer, "Step 3: add a test.")
    writer.user("Step 3: add a test.")
    writer.assistant("Added.")
    received = responses_reply("Added.", RESPONSE_ID)
    engine.continuation_response(
        first.manifest_id, "openai", "gpt-x", [received], None, True, stop_reason=stop
    )
    assert plan(engine, writer, "Step 4.").continuation["mode"] == "delta"  # type: ignore[index]


def test_a_failing_decision_fails_open_to_a_full_replay(
    engine: ContextEngine, writer: SessionWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(messages: object) -> tuple[str, ...]:
        raise MemoryError

    monkeypatch.setattr(engine._continuations._hashes, "hashes", broken)  # noqa: SLF001
    result = plan(engine, writer, "Step 3.")
    assert result.mode == "managed"
    assert result.continuation is not None
    assert result.continuation["reason"] == "continuation-failed"
