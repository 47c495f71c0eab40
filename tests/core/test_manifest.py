"""Manifests: metadata only, size rules, views, the in-memory window (docs/reference.md §3.15)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from ds4_core.config import DEFAULT_CONFIG
from ds4_core.manifest import (
    PLANNER_VERSION,
    POLICY_VERSION,
    ManifestWindow,
    build_manifest,
    encode_manifest,
    new_manifest_id,
    prompt_hash,
    view_manifest,
)
from ds4_core.planner import (
    ContextPlan,
    ModelProfile,
    PlanItem,
    Supplement,
    calculate_budget,
    plan_context,
)
from ds4_core.tokens import ESTIMATOR_VERSION

SECRET = "sk-live-7f3a9c0d5e2b41a8b6c4"
PROFILE = ModelProfile("anthropic", "claude", 200_000, 32_000)
BUDGET = calculate_budget(PROFILE, DEFAULT_CONFIG)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def manifest_of(plan: ContextPlan, **overrides: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "manifest_id": "m-test",
        "session_id": "session-1",
        "branch_leaf_id": "leaf-9",
        "profile": PROFILE,
        "budget": BUDGET,
        "plan": plan,
        "retrieved": [],
        "prompt_hash": "0" * 64,
        "created_at": "2026-11-30T10:00:00Z",
        "estimator_version": ESTIMATOR_VERSION,
        "fixed_tokens": 1_200,
        "warnings": [],
        "retrieval_stats": None,
    }
    arguments.update(overrides)
    return build_manifest(**arguments)


def secret_plan() -> tuple[list[dict[str, Any]], ContextPlan]:
    messages = [
        user(f"my key is {SECRET}"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": f"the user pasted {SECRET}"},
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"cmd": SECRET}},
            ],
        },
        {"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": SECRET},
        {"role": "compactionSummary", "summary": f"earlier: {SECRET}", "tokensBefore": 10},
        user(f"use {SECRET} again"),
    ]
    evidence = Supplement("history", "session-1:e7", user(f"[DS4 HISTORY] {SECRET}"), score=3.5)
    plan = plan_context(
        messages, fixed_tokens=1_200, budget=BUDGET, config=DEFAULT_CONFIG, supplements=[evidence]
    )
    return messages, plan


def test_a_manifest_never_contains_message_text() -> None:
    messages, plan = secret_plan()
    assert plan.mode == "managed"
    manifest = manifest_of(
        plan,
        retrieved=[{"entryKey": "session-1:e7", "score": 3.5, "reason": "fts", "excerpt": SECRET}],
        prompt_hash=prompt_hash("system", [], plan.messages),
        retrieval_stats={"candidates": 4, "latency_ms": 1.5},
    )
    text, rolled_up = encode_manifest(manifest)
    assert text is not None and not rolled_up
    assert SECRET not in text
    assert json.loads(text) == manifest
    assert manifest["retrieved"] == [{"entryKey": "session-1:e7", "score": 3.5, "reason": "fts"}]
    assert manifest["retrievedEventIds"] == ["session-1:e7"]
    assert manifest["retrieval"] == {"candidates": 4, "latencyMs": 1.5}


def test_a_fallback_manifest_never_contains_message_text_either() -> None:
    messages: list[Any] = [user(f"token {SECRET}"), "broken"]
    plan = plan_context(messages, fixed_tokens=0, budget=BUDGET, config=DEFAULT_CONFIG)
    assert plan.mode == "fallback"
    text, _ = encode_manifest(manifest_of(plan))
    assert text is not None and SECRET not in text


def test_manifest_carries_the_call_metadata_in_camel_case() -> None:
    _, plan = secret_plan()
    manifest = manifest_of(plan)
    assert manifest["id"] == "m-test"
    assert manifest["sessionId"] == "session-1"
    assert manifest["branchLeafId"] == "leaf-9"
    assert (manifest["provider"], manifest["model"]) == ("anthropic", "claude")
    assert manifest["contextWindow"] == 200_000
    assert manifest["outputReserve"] == 32_000
    assert manifest["hardInputLimit"] == 164_000
    assert manifest["targetInputTokens"] == 140_000
    assert manifest["estimatedTokens"] == plan.estimated_tokens
    assert manifest["policyVersion"] == POLICY_VERSION
    assert manifest["plannerVersion"] == PLANNER_VERSION
    assert manifest["estimatorVersion"] == "chars-v2"
    assert manifest["budgets"]["maxRetrievedHistoryTokens"] == BUDGET.max_retrieved_history_tokens
    assert manifest["summaryIds"] == ["message:3"]
    planning = manifest["planning"]
    assert planning["mode"] == "managed" and planning["fallbackReason"] is None
    assert planning["counts"]["messages"] == 5
    assert planning["rescuedImmediatePredecessor"] is False
    assert planning["oversizedTurnExclusions"] == 0
    item = manifest["included"][0]
    assert set(item) == {
        "kind",
        "sourceId",
        "groupId",
        "classification",
        "tokens",
        "score",
        "reason",
    }
    kinds = [i["kind"] for i in manifest["included"]]
    assert "history" in kinds and "current" in kinds


def test_prompt_hash_ignores_key_order_but_not_content() -> None:
    a = prompt_hash("sys", [{"name": "read", "parameters": {}}], [{"role": "user", "content": "x"}])
    b = prompt_hash("sys", [{"parameters": {}, "name": "read"}], [{"content": "x", "role": "user"}])
    c = prompt_hash("sys", [{"name": "read", "parameters": {}}], [{"role": "user", "content": "y"}])
    assert a == b != c
    assert len(a) == 64


def item(
    n: int, reason: str = "older turn outside the recent tail; no retrieval evidence"
) -> PlanItem:
    return PlanItem("background", f"entry-{n:08d}", f"group:{n}-{n}", 120, 40.5, reason)


def big_plan(excluded_items: int, reason_chars: int = 60) -> ContextPlan:
    reason = "r" * reason_chars
    return ContextPlan(
        mode="managed",
        messages=[],
        included=[item(i) for i in range(10)],
        excluded=[item(i, reason) for i in range(excluded_items)],
        estimated_tokens=1_000,
    )


def test_a_300_kib_manifest_keeps_included_items_and_rolls_up_the_excluded() -> None:
    manifest = manifest_of(big_plan(2_000))
    size = len(json.dumps(manifest, separators=(",", ":")).encode())
    assert 256 * 1024 < size <= 1024 * 1024
    text, rolled_up = encode_manifest(manifest)
    assert text is not None and rolled_up
    stored = json.loads(text)
    assert len(text.encode()) < 256 * 1024
    assert stored["included"] == manifest["included"]
    assert stored["excluded"] == manifest["excluded"][:128] + manifest["excluded"][-128:]
    tokens = sum(item["tokens"] for item in manifest["excluded"])
    kept_tokens = sum(item["tokens"] for item in stored["excluded"])
    assert stored["excludedRollup"] == {
        "total": 2_000,
        "omitted": 2_000 - 256,
        "tokens": tokens,
        "omittedTokens": tokens - kept_tokens,
    }


def test_a_manifest_under_256_kib_is_stored_as_is() -> None:
    manifest = manifest_of(big_plan(300))
    text, rolled_up = encode_manifest(manifest)
    assert text is not None and not rolled_up
    assert json.loads(text) == manifest


def test_a_2_mib_manifest_is_rolled_up_before_the_1_mib_limit_applies() -> None:
    """A long session's manifest (thousands of excluded turns) is stored rolled up, not
    dropped: the 1 MiB limit applies to what would be stored."""
    manifest = manifest_of(big_plan(4_000, reason_chars=400))
    assert len(json.dumps(manifest).encode()) > 2 * 1024 * 1024
    text, rolled_up = encode_manifest(manifest)
    assert text is not None and rolled_up
    assert len(text.encode()) <= 1024 * 1024
    rollup = json.loads(text)["excludedRollup"]
    assert (rollup["total"], rollup["omitted"]) == (4_000, 4_000 - 256)
    assert rollup["tokens"] == sum(item["tokens"] for item in manifest["excluded"])


def test_a_manifest_over_1_mib_even_rolled_up_is_not_stored() -> None:
    manifest = dict(manifest_of(big_plan(3)))
    manifest["included"] = [{**manifest["included"][0], "reason": "x" * 1000} for _ in range(1_500)]
    assert encode_manifest(manifest) == (None, False)


def test_views_drop_the_lists_they_do_not_show() -> None:
    manifest = manifest_of(big_plan(3))
    summary = view_manifest(manifest, "summary")
    assert "included" not in summary and "excluded" not in summary
    assert summary["itemCounts"] == {"included": 10, "excluded": 3}
    assert summary["planning"] == manifest["planning"]
    assert "excluded" not in view_manifest(manifest, "included")
    assert "included" not in view_manifest(manifest, "excluded")
    assert view_manifest(manifest, "full") == manifest
    assert "included" in manifest  # views never modify the stored manifest


def test_summary_view_of_a_rolled_up_manifest_counts_every_excluded_item() -> None:
    text, _ = encode_manifest(manifest_of(big_plan(2_000)))
    assert text is not None
    assert view_manifest(json.loads(text), "summary")["itemCounts"]["excluded"] == 2_000


def test_an_unknown_view_is_rejected_with_the_choices_named() -> None:
    with pytest.raises(ValueError, match="summary, included, excluded, full"):
        view_manifest({}, "everything")


def test_manifest_ids_are_unique_and_sort_by_time() -> None:
    ids = [new_manifest_id() for _ in range(200)]
    assert len(set(ids)) == 200
    assert all(i.startswith("m-") for i in ids)
    assert [i[:14] for i in ids] == sorted(i[:14] for i in ids)


def test_the_window_keeps_the_latest_manifests_and_the_latest_per_session() -> None:
    window = ManifestWindow(capacity=3)
    for n, session in enumerate(["a", "b", "a", "c"]):
        window.put({"id": f"m{n}", "sessionId": session})
    assert len(window) == 3
    assert window.get("m0") is None  # evicted, oldest first
    assert window.latest("a") == {"id": "m2", "sessionId": "a"}
    assert window.latest("b") == {"id": "m1", "sessionId": "b"}
    window.put({"id": "m4", "sessionId": "c"})
    assert window.latest("b") is None
    assert window.latest("c") == {"id": "m4", "sessionId": "c"}
    window.put({"id": "m5", "sessionId": None}, session_key="/tmp/s.jsonl")
    assert window.latest("/tmp/s.jsonl") == {"id": "m5", "sessionId": None}


def test_the_window_survives_concurrent_writers() -> None:
    window = ManifestWindow(capacity=64)

    def writer(t: int) -> None:
        for n in range(500):
            window.put({"id": f"t{t}-{n}", "sessionId": f"s{t}"})
            window.latest(f"s{(t + 1) % 8}")

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(window) == 64
    for t in range(8):
        latest = window.latest(f"s{t}")
        assert latest is None or latest["sessionId"] == f"s{t}"


def test_a_manifest_without_an_id_cannot_be_kept() -> None:
    with pytest.raises(ValueError, match="no 'id'"):
        ManifestWindow().put({"sessionId": "a"})
