"""Privacy settings, destinations and the sanitizer (privacy/policy.py, privacy/sanitizer.py,
engine/sanitizing.py), on real message shapes of Pi sessions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from privacy_session import VALUES, write_privacy_session
from session_files import SessionWriter

from ds4_core.config import DEFAULT_CONFIG, Config
from ds4_core.engine import ContextEngine, sanitizing
from ds4_core.planner import ContextPlan, PlanItem, Supplement
from ds4_core.privacy.markers import line_span_level, placeholder
from ds4_core.privacy.policy import destination, explain
from ds4_core.privacy.sanitizer import PRIVACY_EXCLUSION_REASON, Sanitizer
from ds4_core.requests import (
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RetrieveRequest,
    SessionRef,
)


def config(**settings: Any) -> Config:
    built, warnings = DEFAULT_CONFIG.with_settings({"privacy": settings})
    assert warnings == []
    return built


# ------------------------------------------------------------------ settings


def test_privacy_settings_are_known_and_validated() -> None:
    built, warnings = DEFAULT_CONFIG.with_settings({"privacy": {"enabled": True}})
    assert warnings == [] and built.privacy.enabled
    for raw, word in (
        ({"privacy.remoteDefaultAllowed": ["normal", "local-only"]}, "local-only"),
        ({"privacy.remoteDefaultAllowed": ["normal", "normal"]}, "twice"),
        ({"privacy.remoteProviders": {"x": ["secret"]}}, "not a level"),
        ({"privacy.localProviders": []}, "non-empty"),
        ({"privacy.localProviders": ["Ollama", "ollama"]}, "twice"),
        ({"privacy.defaultClassification": "top-secret"}, "expected one of"),
        ({"privacy.remoteProviders": {"ollama": ["normal"]}}, "both local and remote"),
    ):
        built, warnings = DEFAULT_CONFIG.with_settings(raw)
        assert len(warnings) == 1 and word in warnings[0], (raw, warnings)
        assert built.privacy == DEFAULT_CONFIG.privacy  # the bad value is ignored


def test_destinations_follow_the_reference_rules() -> None:
    settings = config(remoteProviders={"OpenRouter": ["normal"]})
    local = destination(settings, "OLLAMA")
    assert local.kind == "local" and local.allowed == (
        "normal",
        "internal",
        "sensitive",
        "local-only",
    )
    assert not local.redact
    assert destination(settings, "openrouter").allowed == ("normal",)
    assert destination(settings, "openrouter").rule == "privacy.remoteProviders.OpenRouter"
    default = destination(settings, "openai")
    assert default.kind == "remote" and default.allowed == ("normal", "internal") and default.redact
    unnamed = destination(settings, None)
    assert unnamed.provider is None and unnamed.kind == "remote"
    assert "withheld" in explain(default) and "local" in explain(local)
    assert "off" in explain(destination(config(enabled=False), "openai"))


# ------------------------------------------------------------------ sanitizer


def remote() -> Sanitizer:
    return Sanitizer(destination(DEFAULT_CONFIG, "openai"))


def test_a_native_turn_keeps_its_structure_and_gets_placeholders() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "ok [ds4:local-only]the vault code is 4242[/ds4:local-only]"},
            {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "ls"}},
        ],
        "provider": "anthropic",
        "model": "claude",
        "stopReason": "toolUse",
    }
    sanitizer = remote()
    out = sanitizer.message(message)
    assert out.level == "local-only"
    assert out.value["content"][0]["text"] == f"ok {placeholder('local-only')}"
    assert out.value["content"][1] == message["content"][1]
    assert {k: v for k, v in out.value.items() if k != "content"} == {
        k: v for k, v in message.items() if k != "content"
    }
    assert "4242" in json.dumps(message)  # the input is never changed
    assert sanitizer.counters.withheld == {"local-only": 1}


def test_a_marker_split_across_blocks_raises_the_whole_message() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "public part [ds4:sensitive]begins"},
            {"type": "text", "text": "and ends here[/ds4:sensitive] tail"},
        ],
    }
    out = remote().message(message).value
    assert [block["text"] for block in out["content"]] == [placeholder("sensitive")] * 2


def test_structural_strings_are_kept_unless_marked_and_images_emptied_when_withheld() -> None:
    message = {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "[ds4:local-only]secret-tool[/ds4:local-only]",
        "content": [
            {"type": "text", "text": "[ds4:local-only]screenshot of the vault"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
        ],
    }
    out = remote().message(message).value
    assert out["toolCallId"] == "call_1" and out["role"] == "toolResult"
    assert out["toolName"] == placeholder("local-only")
    assert out["content"][1] == {"type": "image", "data": "", "mimeType": "image/png"}
    local = Sanitizer(destination(DEFAULT_CONFIG, "ollama")).message(message).value
    assert local["content"][1]["data"] == "iVBORw0KGgo="
    assert local["content"][0]["text"] == "screenshot of the vault"


def test_privacy_off_sends_everything_as_it_is() -> None:
    sanitizer = Sanitizer(destination(config(enabled=False), "openai"))
    message = {"role": "user", "content": "[ds4:local-only]x[/ds4:local-only]"}
    assert sanitizer.message(message).value is message
    assert sanitizer.admits(message) == (True, "normal")


def test_supplements_with_a_withheld_span_are_dropped_whole() -> None:
    target = destination(DEFAULT_CONFIG, "openai")
    kept = Supplement("history", "s:e1", {"role": "user", "content": "about the parser"}, 9, 0.9)
    dropped = Supplement(
        "project",
        "snippet-1",
        {"role": "user", "content": "def f(): pass  # [ds4:sensitive]do not share[/ds4:sensitive]"},
        20,
        0.8,
    )
    cut = Supplement("history", "s:e2", {"role": "user", "content": "a cut excerpt"}, 5, 0.7)
    screened = sanitizing.Screened()
    out = sanitizing.screen_supplements(
        target, [kept, dropped, cut], screened, {"s:e2": "local-only"}
    )
    assert [s.source_id for s in out] == ["s:e1"] and out[0].classification == "normal"
    assert id(out[0].message) in screened.kept
    assert screened.dropped == [
        PlanItem(
            kind="project",
            source_id="snippet-1",
            group_id=None,
            tokens=20,
            score=0.8,
            reason=PRIVACY_EXCLUSION_REASON,
            classification="sensitive",
        ),
        PlanItem(
            kind="history",
            source_id="s:e2",
            group_id=None,
            tokens=5,
            score=0.7,
            reason=PRIVACY_EXCLUSION_REASON,
            classification="local-only",  # judged on the text it was cut from
        ),
    ]
    assert "do not share" not in json.dumps([i.__dict__ for i in screened.dropped])


def test_a_snippet_is_judged_on_its_whole_file() -> None:
    text = "# [ds4:local-only]\n" + "".join(f"line {n}\n" for n in range(2, 300))
    assert line_span_level(text, 200, 279) == "local-only"  # a leading marker, far above
    block = "a\n[ds4:sensitive]\n" + "x\n" * 200 + "[/ds4:sensitive]\nz\n"
    assert line_span_level(block, 100, 120) == "sensitive"  # inside a block opened above
    assert line_span_level(block, 204, 204) == "normal"  # after it
    levels = sanitizing.SnippetLevels()
    hit = SimpleNamespace(
        folder=None, path="a.py", file_hash="h", snippet_id="s1", start_line=100, end_line=120
    )
    assert levels.levels([hit], lambda _: block, "normal") == {"s1": "sensitive"}
    assert levels.levels([hit], lambda _: None, "normal") == {"s1": "sensitive"}  # remembered
    other = SimpleNamespace(**{**hit.__dict__, "file_hash": "h2", "snippet_id": "s2"})
    assert levels.levels([other], lambda _: None, "normal") == {"s2": "local-only"}  # unreadable


def test_a_history_excerpt_carries_the_level_of_the_whole_entry(tmp_path: Path) -> None:
    """An excerpt cut from the middle of a long local-only message has no marker of its own;
    the hit still carries the entry's level, and a plan for a remote model leaves it out."""
    session = tmp_path / "s.jsonl"
    writer = SessionWriter(session)
    body = " ".join(f"filler{n}" for n in range(3000))
    writer.user(f"[ds4:local-only] {body} the quasar launch code is zeta-9 {body}")
    writer.assistant("noted")
    for n in range(1, 40):
        writer.turn(n)
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    found = engine.retrieve(
        RetrieveRequest(
            query="quasar launch code",
            session=SessionRef(str(session)),
            model=ModelSpec(context_window=8000, max_output_tokens=1000),
        )
    ).to_wire()
    assert found["privacy"]["excluded"] == {"local-only": 1}, found["privacy"]
    assert "zeta-9" not in json.dumps(found)
    planned = engine.plan(
        PlanRequest(
            session=SessionRef(str(session)),
            request="what was the quasar launch code?",
            model=ModelSpec(
                provider="openai", id="gpt-4o", context_window=8000, max_output_tokens=1000
            ),
        )
    ).to_wire()
    assert "zeta-9" not in json.dumps(planned)
    engine.close()


def test_a_sanitizer_exception_gives_an_empty_request_never_the_raw_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "[ds4:local-only]the vault code is 4242[/ds4:local-only]"
    messages = [{"role": "user", "content": secret}]
    item = PlanItem("current", "e1", "group:0-0", 10, 1000.0, "current turn")
    plan = ContextPlan("managed", messages, [item], [], 10)

    def broken(self: Sanitizer, message: Any, *, count: bool = True) -> Any:
        raise RuntimeError("sanitizer bug")

    monkeypatch.setattr(Sanitizer, "message", broken)
    sanitizer = remote()
    out = sanitizing.sanitize_plan(
        plan, sanitizer, fixed_tokens=0, screened=sanitizing.Screened(), source_ids=["e1"]
    )
    assert sanitizer.counters.failed
    assert out.mode == "fallback" and out.messages == []
    assert "privacy sanitizer failed (RuntimeError)" in (out.fallback_reason or "")
    assert out.included == [] and out.excluded[0].source_id == "e1"
    assert "4242" not in json.dumps(out.messages)


def test_a_plan_whose_sanitizer_fails_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the whole engine: a sanitizer exception gives mode `fallback` with no messages
    and a reason, the manifest says so, and a later plan works again."""
    session = tmp_path / "s.jsonl"
    write_privacy_session(session)
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    request = PlanRequest(
        session=SessionRef(str(session)),
        request="what is the launch code?",
        model=ModelSpec(provider="openai", id="gpt-4o", context_window=200000),
    )

    def broken(self: Sanitizer, message: Any, *, count: bool = True) -> Any:
        raise ValueError("sanitizer bug")

    with monkeypatch.context() as patch:
        patch.setattr(Sanitizer, "message", broken)
        failed = engine.plan(request).to_wire()
    assert failed["mode"] == "fallback" and failed["messages"] == []
    assert failed["fallbackReason"].startswith("privacy sanitizer failed (ValueError)")
    assert not any(value in json.dumps(failed) for value in VALUES)
    manifest = engine.manifest(ManifestRequest(id=failed["manifestId"])).to_wire()
    assert manifest["planning"]["fallbackReason"] == failed["fallbackReason"]
    again = engine.plan(request).to_wire()
    assert again["mode"] == "managed" and again["messages"]
    engine.close()
