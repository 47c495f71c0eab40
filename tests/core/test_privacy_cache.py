"""Privacy writes kept between plans (issue 13): a kept write is exactly what the sanitizer
writes and counts, per destination; the prompt hash written from kept parts is the hash of the
whole stable JSON."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.config import Config
from ds4_core.engine.privacy_cache import SanitizedMessages
from ds4_core.manifest.manifest import prompt_hash
from ds4_core.privacy.policy import destination
from ds4_core.privacy.sanitizer import Sanitizer
from ds4_core.tokens import estimate_message_tokens, sha256_hex, stable_json

REMOTE = destination(Config(), "openai")
LOCAL = destination(Config(), "ollama")
KEY = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"  # built, so the file holds no key


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def test_a_kept_write_is_the_sanitizers_write_and_counts() -> None:
    kept = SanitizedMessages()
    original = message(f"use {KEY} and [ds4:local-only]the private plan[/ds4:local-only]")
    plain = Sanitizer(REMOTE)
    expected = plain.message(original)
    for _ in range(3):  # the first write, then two reuses
        sanitizer = Sanitizer(REMOTE)
        written = kept.write(sanitizer, original, keep=True)
        assert written.sanitized == expected
        assert sanitizer.counters == plain.counters
        assert sanitizer.found == plain.found and KEY in sanitizer.found
        assert written.tokens == estimate_message_tokens(expected.value)
    # the same object for the next plan: its stable JSON is kept too
    again = kept.write(Sanitizer(REMOTE), original, keep=True)
    assert again is written
    assert kept.stable_json(again.sanitized.value) == stable_json(expected.value)
    # another destination is another write
    local = kept.write(Sanitizer(LOCAL), original, keep=True)
    assert local is not written and "the private plan" in stable_json(local.sanitized.value)
    assert KEY in stable_json(local.sanitized.value)  # a local provider: not redacted


def test_an_equal_but_new_message_object_is_never_taken_for_a_kept_one() -> None:
    kept = SanitizedMessages(capacity=2)
    first = message("the first text")
    kept.write(Sanitizer(REMOTE), first, keep=True)
    other = message(f"another text with {KEY}")
    written = kept.write(Sanitizer(REMOTE), other, keep=False)
    assert KEY not in stable_json(written.sanitized.value)
    for n in range(5):  # evictions release what they held
        kept.write(Sanitizer(REMOTE), message(f"filler {n}"), keep=True)
    assert kept.stable_json(first) == stable_json(first)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.none() | st.text(max_size=10), json_values, st.lists(json_values, max_size=4))
def test_the_prompt_hash_from_parts_is_the_hash_of_the_whole(
    system: Any, tools: Any, messages: list[Any]
) -> None:
    whole = sha256_hex(stable_json({"system": system, "tools": tools, "messages": messages}))
    assert prompt_hash(system, tools, messages) == whole
    assert prompt_hash(system, tools, messages, SanitizedMessages().stable_json) == whole


def test_a_kept_messages_wire_form_is_kept_and_passes_through_to_wire() -> None:
    from ds4_core.wire import WireObject, to_wire

    kept = SanitizedMessages()
    original = message("a message sent on every plan") | {"timestamp": 2**60}
    written = kept.write(Sanitizer(REMOTE), original, keep=True)
    wired = kept.wire(written.sanitized.value)
    assert type(wired) is WireObject and wired == to_wire(original)
    assert wired["timestamp"] == 2**53 - 1  # clamped once, as to_wire does
    assert kept.wire(written.sanitized.value) is wired
    assert to_wire([wired]) == [wired] and to_wire([wired])[0] is wired
    other = message("not kept")
    assert kept.wire(other) is other
