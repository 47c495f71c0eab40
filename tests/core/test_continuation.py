"""Native continuation (core/ds4_core/continuation.py): the item hash rule, eligibility, the
delta-or-full decision (every reason) and the in-memory states."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ds4_core.config import DEFAULT_CONFIG
from ds4_core.continuation import (
    API_NOT_CONTINUED,
    BRANCH_CHANGED,
    CALL_FAILED,
    COLD_START,
    COMPACTED,
    DELTA_EMPTY,
    FAILED,
    HANDLE_REJECTED,
    IDENTITY_CHANGED,
    MAX_HASHES,
    MAX_ITEMS,
    NO_SESSION,
    NOT_MANAGED,
    OPTIONS_CHANGED,
    OUTPUT_MISSING,
    PREFIX_CHANGED,
    PROFILE_NOT_MATCHED,
    REASONS,
    RESPONSE_ID_MISSING,
    STATE_EXPIRED,
    TOO_LARGE,
    ContinuationStates,
    Decision,
    ItemHashCache,
    check_plan_inputs,
    ineligible_reason,
    item_hash,
    item_hashes,
    options_hash,
    profile_matches,
)
from ds4_core.requests import RequestError
from ds4_core.tokens import sha256_hex

KEY = ("sess-1", "openai", "gpt-x")
AGE = 1_800_000


def plan(
    states: ContinuationStates,
    items: list[str],
    *,
    key: tuple[str, str, str] = KEY,
    manifest: str = "m",
    options: str = "o",
    now: float = 0.0,
    leaf: str | None = "leaf",
    branch: frozenset[str] = frozenset({"leaf"}),
) -> Decision:
    return states.plan(
        key,
        manifest_id=manifest,
        items=items,
        options=options,
        now_ms=now,
        max_age_ms=AGE,
        leaf_id=leaf,
        branch=branch,
        session_file="/s.jsonl",
    )


def test_item_hash_ignores_bookkeeping_and_reads_a_string_content_as_one_text_block() -> None:
    received = {
        "role": "assistant",
        "content": [{"type": "text", "text": "done"}],
        "api": "openai-responses",
        "provider": "openai",
        "model": "gpt-x",
        "usage": {"input": 1},
        "stopReason": "stop",
        "timestamp": 123,
        "responseId": "resp_" + "abc",
    }
    stored = {"role": "assistant", "content": [{"type": "text", "text": "done"}], "timestamp": 9}
    assert item_hash(received) == item_hash(stored)
    assert item_hash({"role": "user", "content": "hi"}) == item_hash(
        {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    )
    assert item_hash({"role": "user", "content": "hi"}) != item_hash(
        {"role": "user", "content": "hj"}
    )
    # the documented rule, spelled out: sorted keys, no spaces, UTF-8
    assert item_hash({"role": "user", "content": [{"type": "text", "text": "é"}]}) == sha256_hex(
        '{"content":[{"text":"é","type":"text"}],"role":"user"}'
    )


def test_options_hash_leaves_out_input_and_previous_response_id() -> None:
    base = {"model": "gpt-x", "store": True, "tools": [{"name": "read"}]}
    assert options_hash(base) == options_hash(
        {**base, "input": [1, 2], "previous_response_id": "resp_" + "x"}
    )
    assert options_hash(base) != options_hash({**base, "temperature": 0.2})
    assert options_hash(None) == options_hash({})


def test_profiles_match_an_exact_model_or_a_provider_wildcard() -> None:
    assert profile_matches(["openai/*"], "openai", "gpt-x")
    assert profile_matches(["openai/gpt-x"], "openai", "gpt-x")
    assert not profile_matches(["openai/gpt-y"], "openai", "gpt-x")
    assert not profile_matches(["azure/*"], "openai", "gpt-x")


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"plan_mode": "observer"}, NOT_MANAGED),
        ({"plan_mode": "fallback"}, NOT_MANAGED),
        ({"session_id": None}, NO_SESSION),
        ({"provider": "anthropic"}, PROFILE_NOT_MATCHED),
        ({"api": "openai-completions"}, API_NOT_CONTINUED),
        ({"api": None}, API_NOT_CONTINUED),
        ({}, None),
    ],
)
def test_eligibility_names_the_condition_that_fails(changes: dict, reason: str | None) -> None:
    given_ = {
        "plan_mode": "managed",
        "session_id": "s",
        "provider": "openai",
        "model": "gpt-x",
        "api": "openai-responses",
        "profiles": ["openai/*"],
        **changes,
    }
    assert ineligible_reason(**given_) == reason


def test_a_grown_conversation_continues_after_the_previous_request_and_output() -> None:
    states = ContinuationStates()
    assert plan(states, ["a", "b"], manifest="m1") == Decision("full", 0, COLD_START)
    assert states.report_output("m1", "openai", "gpt-x", ["x"], True)
    decision = plan(states, ["a", "b", "x", "c"], manifest="m2", now=1)
    assert decision == Decision("delta", 3, None)
    assert decision.to_wire() == {
        "strategy": "openai-previous-response-v1",
        "mode": "delta",
        "deltaStart": 3,
        "reason": None,
    }
    # the delta call is the new state: the next one continues after it
    states.report_output("m2", "openai", "gpt-x", ["y"], True)
    assert plan(states, ["a", "b", "x", "c", "y", "d"], manifest="m3", now=2).delta_start == 5


def reached(states: ContinuationStates, reason: str) -> Decision:
    """Drive `states` (one plan m1 of [a, b] answered with [x]) to the plan that gives
    `reason`; returns that plan's decision."""
    if reason == COLD_START:
        return plan(states, ["a"])
    plan(states, ["a", "b"], manifest="m1")
    has_id = reason != RESPONSE_ID_MISSING
    if reason != OUTPUT_MISSING:
        states.report_output("m1", "openai", "gpt-x", ["x"], has_id, reason == CALL_FAILED)
    grown = ["a", "b", "x", "c"]
    if reason == STATE_EXPIRED:
        return plan(states, grown, now=AGE + 1)
    if reason == IDENTITY_CHANGED:
        return plan(states, grown, key=("sess-1", "openai", "gpt-y"))
    if reason == OPTIONS_CHANGED:
        return plan(states, grown, options="other")
    if reason == PREFIX_CHANGED:
        return plan(states, ["a", "B", "x", "c"])
    if reason == DELTA_EMPTY:
        return plan(states, ["a", "b", "x"])
    if reason == BRANCH_CHANGED:
        return plan(states, grown, leaf="other", branch=frozenset({"other"}))
    if reason == COMPACTED:
        states.invalidate_session("sess-1", COMPACTED)
        return plan(states, grown)
    if reason == HANDLE_REJECTED:
        states.invalidate_file("/s.jsonl", "openai", "gpt-x", HANDLE_REJECTED)
        return plan(states, grown)
    return plan(states, grown)


STATE_REASONS = [
    r for r in REASONS if not r.startswith("ineligible-") and r not in (FAILED, TOO_LARGE)
]
"""The reasons of the states (`ineligible-*` and `continuation-failed` come from the engine:
tests/core/test_engine_continuation.py; `continuation-state-too-large` keeps no state:
test_a_plan_of_more_than_max_items_is_full_and_not_kept)."""


@pytest.mark.parametrize("reason", STATE_REASONS)
def test_every_state_reason_is_reachable_and_gives_full(reason: str) -> None:
    assert reached(ContinuationStates(), reason) == Decision("full", 0, reason)


@pytest.mark.parametrize("reason", STATE_REASONS)
def test_after_any_full_the_next_plan_of_the_same_key_can_continue(reason: str) -> None:
    """A `full` call is sent whole, so it is the new state: report its output, grow, delta."""
    states = ContinuationStates()
    reached(states, reason)
    latest = next(
        k
        for k in (KEY, ("sess-1", "openai", "gpt-y"))
        if k in states._states  # noqa: SLF001
    )
    state = states._states[latest]  # noqa: SLF001
    states.report_output(state.manifest_id, *latest[1:], ["z"], True)
    leaf = state.leaf_id
    after = plan(
        states,
        [*state.request, "z", "n"],
        key=latest,
        options=state.options,
        now=state.planned_ms + 1,
        leaf=leaf,
        branch=frozenset({leaf or ""}),
    )
    request = state.request
    assert after == Decision("delta", len(request) + 1, None)


def test_a_report_for_a_superseded_manifest_or_another_model_is_not_taken() -> None:
    states = ContinuationStates()
    plan(states, ["a"], manifest="m1")
    plan(states, ["a", "b"], manifest="m2")
    assert not states.report_output("m1", "openai", "gpt-x", ["x"], True)
    assert not states.report_output("m2", "openai", "gpt-y", ["x"], True)
    assert not states.report_output("nope", "openai", "gpt-x", ["x"], True)
    assert states.report_output("m2", "openai", "gpt-x", ["x"], True)


def test_states_are_bounded_and_an_ineligible_plan_forgets_the_session() -> None:
    states = ContinuationStates(capacity=3)
    for number in range(5):
        plan(states, ["a"], key=(f"s{number}", "openai", "gpt-x"))
    assert len(states) == 3
    states.forget_session("s4")
    assert len(states) == 2
    states.clear()
    assert len(states) == 0


def test_states_keep_hashes_and_times_only() -> None:
    """Every value a state keeps is an id the plan gave, a hash, a time or a flag: never a
    message, its text or a response id."""
    secret = "the user's private words"
    messages = [{"role": "user", "content": secret}]
    reply = {"role": "assistant", "content": "ok", "responseId": "resp_" + "abc123"}
    states = ContinuationStates()
    plan(states, list(item_hashes(messages)), manifest="m1", options=options_hash({"a": 1}))
    states.report_output("m1", "openai", "gpt-x", item_hashes([reply]), False, True)
    kept = states._states[KEY]  # noqa: SLF001
    values = {f.name: getattr(kept, f.name) for f in dataclasses.fields(kept)}
    assert values == {
        "manifest_id": "m1",
        "request": item_hashes(messages),
        "options": options_hash({"a": 1}),
        "planned_ms": 0.0,
        "leaf_id": "leaf",
        "session_file": "/s.jsonl",
        "output": (item_hash(reply),),
        "response_id_missing": True,
        "call_failed": True,
    }
    for digest in (*values["request"], *values["output"], values["options"]):
        assert isinstance(digest, str) and len(digest) == 64
        assert int(digest, 16) >= 0
    assert secret not in repr(values) and "resp_" not in repr(values)


def test_concurrent_plans_reports_and_invalidations_keep_the_states_consistent() -> None:
    """Eight threads plan, report and invalidate the same few keys at once (switching often):
    no error (without the lock: KeyError, "mutated during iteration" on every run), and the
    hash count, the bounds and the key of each kept plan stay exact."""
    states = ContinuationStates(capacity=6, max_hashes=60)
    errors: list[BaseException] = []

    def work(number: int) -> None:
        key = (f"s{number % 3}", "openai", f"gpt-{number % 2}")
        try:
            for step in range(1000):
                manifest = f"{number}-{step}"
                plan(states, ["a"] * (step % 9), key=key, manifest=manifest, leaf=None)
                states.report_output(manifest, "openai", key[2], ["x"], True)
                states.invalidate_file("/s.jsonl", None, None, COMPACTED)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    kept = states._states  # noqa: SLF001
    assert states.kept_hashes() == sum(s.size for s in kept.values()) <= 60
    assert len(states) <= 6
    for key, state in kept.items():
        number = int(state.manifest_id.split("-")[0])
        assert key == (f"s{number % 3}", "openai", f"gpt-{number % 2}")


def test_a_plan_of_more_than_max_items_is_full_and_not_kept() -> None:
    assert MAX_ITEMS == 10_000
    states = ContinuationStates()
    plan(states, ["a"], manifest="m1")
    assert plan(states, ["a"] * (MAX_ITEMS + 1), manifest="m2") == Decision("full", 0, TOO_LARGE)
    assert len(states) == 0 and states.kept_hashes() == 0
    assert plan(states, ["a"] * MAX_ITEMS, manifest="m3") == Decision("full", 0, COLD_START)
    assert not states.report_output("m3", "openai", "gpt-x", ["x"] * (MAX_ITEMS + 1), True)
    assert states.kept_hashes() == MAX_ITEMS


def test_the_hashes_of_all_states_are_bounded_least_recently_used_dropped() -> None:
    states = ContinuationStates(max_hashes=10)
    for number in range(3):
        plan(states, ["a"] * 4, key=(f"s{number}", "openai", "gpt-x"), manifest=f"m{number}")
    assert len(states) == 2 and states.kept_hashes() == 8  # s0 dropped
    assert states.report_output("m1", "openai", "gpt-x", ["x", "y"], True)  # s1 used last
    plan(states, ["a"], key=("s3", "openai", "gpt-x"))
    assert states.kept_hashes() == 7
    assert {k[0] for k in states._states} == {"s1", "s3"}  # noqa: SLF001
    states.forget_session("s1")
    assert states.kept_hashes() == 1
    # the default: a hostile client planning many large sessions
    many = ContinuationStates()
    items = ["a"] * MAX_ITEMS
    for number in range(MAX_HASHES // MAX_ITEMS + 5):
        plan(many, items, key=(f"s{number}", "openai", "gpt-x"))
    assert many.kept_hashes() <= MAX_HASHES
    assert len(many) == MAX_HASHES // MAX_ITEMS


def test_a_failed_call_output_is_not_continued() -> None:
    states = ContinuationStates()
    plan(states, ["a"], manifest="m1")
    assert states.report_output("m1", "openai", "gpt-x", ["x"], True, call_failed=True)
    assert plan(states, ["a", "x", "b"], manifest="m2") == Decision("full", 0, CALL_FAILED)
    states.report_output("m2", "openai", "gpt-x", ["y"], True)
    assert plan(states, ["a", "x", "b", "y", "c"], manifest="m3") == Decision("delta", 4, None)


hashes = st.lists(st.sampled_from("abcdef"), max_size=12)


@given(request=hashes, output=hashes, rest=hashes)
def test_delta_exactly_when_the_plan_extends_request_and_output(
    request: list[str], output: list[str], rest: list[str]
) -> None:
    """Whatever the items, `delta` comes only with a strict extension of request + output,
    and its `deltaStart` cuts the plan exactly there."""
    states = ContinuationStates()
    plan(states, request, manifest="m1")
    states.report_output("m1", "openai", "gpt-x", output, True)
    current = [*request, *output, *rest]
    decision = plan(states, current, manifest="m2")
    if rest:
        assert decision == Decision("delta", len(request) + len(output), None)
        assert current[decision.delta_start :] == rest
    else:
        assert decision == Decision("full", 0, DELTA_EMPTY)


@given(request=hashes, output=hashes, current=hashes)
def test_a_delta_never_hides_a_changed_item(
    request: list[str], output: list[str], current: list[str]
) -> None:
    """For any current plan: `delta` implies the part not sent is exactly what the provider
    already holds (the previous request and its output); otherwise `full` with a reason."""
    states = ContinuationStates()
    plan(states, request, manifest="m1")
    states.report_output("m1", "openai", "gpt-x", output, True)
    decision = plan(states, current, manifest="m2")
    if decision.mode == "delta":
        assert current[: decision.delta_start] == [*request, *output]
        assert decision.delta_start < len(current)
    else:
        assert decision.delta_start == 0 and decision.reason in (PREFIX_CHANGED, DELTA_EMPTY)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=5))
def test_item_hash_does_not_depend_on_key_order(message: dict) -> None:
    assert item_hash(message) == item_hash(dict(reversed(list(message.items()))))


@pytest.mark.parametrize(
    ("api", "options", "field"),
    [
        ("x" * 101, None, "model.api"),
        ("openai responses\n", None, "model.api"),
        (None, [1], "requestOptions"),
        (None, {"instructions": "x" * (4 * 1024 * 1024)}, "requestOptions"),
    ],
)
def test_hostile_plan_inputs_are_rejected_naming_the_field(
    api: str | None, options: object, field: str
) -> None:
    with pytest.raises(RequestError) as caught:
        check_plan_inputs(api, options)
    assert caught.value.field == field and str(caught.value).startswith(field)
    check_plan_inputs("openai-responses", {"model": "gpt-x"})


@pytest.mark.parametrize("doc", ["docs/model-awareness.md", "docs/protocol.md"])
def test_every_reason_is_documented(doc: str) -> None:
    text = (Path(__file__).resolve().parents[2] / doc).read_text(encoding="utf-8")
    assert [r for r in REASONS if f"`{r}`" not in text] == []


def test_settings_validate_profiles_and_warn_when_storage_is_not_allowed() -> None:
    config, warnings = DEFAULT_CONFIG.with_settings({"nativeContinuation": {"enabled": True}})
    assert config.native_continuation.enabled and not config.native_continuation.active
    assert any("nativeContinuation.allowProviderStorage" in w for w in warnings)
    both, warnings = DEFAULT_CONFIG.with_settings(
        {"nativeContinuation": {"enabled": True, "allowProviderStorage": True}}
    )
    assert both.native_continuation.active and warnings == []
    for bad in ([], ["*"], ["openai"], ["openai/*", "openai/*"], [" openai/*"], ["/x"], [1]):
        kept, warnings = DEFAULT_CONFIG.with_settings({"nativeContinuation.profiles": bad})
        assert kept.native_continuation.profiles == ("openai/*",)
        assert len(warnings) == 1 and "nativeContinuation.profiles" in warnings[0]
    for age in (9_999, 86_400_001, True):
        _, warnings = DEFAULT_CONFIG.with_settings({"nativeContinuation.maxStateAgeMs": age})
        assert "nativeContinuation.maxStateAgeMs" in warnings[0]


def test_the_item_hash_cache_is_bounded_by_the_size_of_the_messages_it_holds() -> None:
    small = [{"role": "user", "content": str(n)} for n in range(10)]  # 54 characters each
    cache = ItemHashCache(max_chars=110)
    assert cache.hashes(small) == item_hashes(small)
    assert len(cache) == 2 and cache.kept_chars() == 108
    huge = {"role": "user", "content": "x" * 200}
    assert cache.hashes([huge]) == item_hashes([huge])
    assert len(cache) == 2  # larger than the bound alone: hashed, not kept
    assert cache.hashes(small[-2:]) == item_hashes(small[-2:])  # served from the kept entries


def test_kept_item_hashes_equal_fresh_ones_and_follow_new_objects() -> None:
    cache = ItemHashCache(capacity=4)
    messages = [{"role": "user", "content": str(n)} for n in range(6)]
    assert cache.hashes(messages) == item_hashes(messages)
    replaced = [*messages[:5], {"role": "user", "content": "new"}]
    assert cache.hashes(replaced) == item_hashes(replaced)
    assert cache.hashes(replaced) == item_hashes(replaced)  # served from the kept entries
