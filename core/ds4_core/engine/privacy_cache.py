"""Session messages as written for a destination, kept between plans (issue 13).

The privacy pass (`Sanitizer.message`: markers parsed, placeholders, secrets redacted) is a
pure function of a message and its `Destination`; a plan sends the recent tail of the session
again and again, so `SanitizedMessages` keeps, per (message object, destination), what the pass
wrote, what it counted (`PrivacyCounters`), the secret values it redacted (for the plan-wide
repeated-secret pass), the token estimate of the written message and, once a prompt hash asked
for it, its stable JSON and its wire form (`wire.WireObject`). Only the session's own
message objects are kept (`BuiltContext.native_ids`): they live in the session cache anyway,
and a caller's messages are new objects on every request. Entries hold their message, so an
object id is never reused while its entry exists; at most `capacity` entries (LRU).
Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..privacy.policy import Destination
from ..privacy.sanitizer import PrivacyCounters, Sanitized, Sanitizer
from ..tokens import estimate_message_tokens, stable_json
from ..wire import WireObject, wire_object

CAPACITY = 4_096
"""Messages kept (LRU): a few sessions' recent tails (a few hundred messages each) for a few
destinations. Each entry may hold its message's stable JSON and wire copy, so memory is about
three times the kept messages' JSON size (~12 MB for 1 KB messages)."""


@dataclass(frozen=True)
class Written:
    """What the privacy pass made of one message: the `Sanitized` value and level, its
    counters, the secret values it redacted and the `chars-v2` tokens of the written value."""

    sanitized: Sanitized
    counters: PrivacyCounters
    found: frozenset[str]
    tokens: int


class SanitizedMessages:
    """The kept writes (see the module docstring)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[int, Destination], tuple[Any, Written]] = OrderedDict()
        self._json: dict[int, tuple[Any, str | None, int]] = {}
        """id(written value) -> (value, its stable JSON once asked for, entries holding it)"""
        self._wired: dict[int, WireObject] = {}
        """id(written value) -> its wire form once asked for (while `_json` holds it)"""
        self._lock = threading.Lock()

    def write(self, sanitizer: Sanitizer, message: Any, keep: bool) -> Written:
        """`message` written for `sanitizer`'s destination, its counts merged into
        `sanitizer.counters` and its redacted values into `sanitizer.found`, as
        `sanitizer.message(message)` would do; kept for the next plan when `keep` (a session
        message object), else computed and not kept.

        Raises:
            whatever `Sanitizer.message` raises (the caller fails closed).
        """
        key = (id(message), sanitizer.target)
        written = None
        if keep:
            with self._lock:
                found = self._entries.get(key)
                if found is not None and found[0] is message:
                    self._entries.move_to_end(key)
                    written = found[1]
        if written is None:
            fresh = Sanitizer(sanitizer.target)
            sanitized = fresh.message(message)
            written = Written(
                sanitized,
                fresh.counters,
                frozenset(fresh.found),
                estimate_message_tokens(sanitized.value),
            )
            if keep:
                with self._lock:
                    if key not in self._entries:
                        self._hold(written.sanitized.value)
                        self._entries[key] = (message, written)
                    while len(self._entries) > self._capacity:
                        _, (_, old) = self._entries.popitem(last=False)
                        self._release(old.sanitized.value)
        sanitizer.counters.merge(written.counters)
        sanitizer.found |= written.found
        return written

    def stable_json(self, value: Any) -> str:
        """`tokens.stable_json(value)` (for the prompt hash), kept while `value` is the written
        value of a kept message; computed and not kept for any other value."""
        with self._lock:
            held = self._json.get(id(value))
            if held is not None and held[0] is value and held[1] is not None:
                return held[1]
        text = stable_json(value)
        with self._lock:
            held = self._json.get(id(value))
            if held is not None and held[0] is value:
                self._json[id(value)] = (value, text, held[2])
        return text

    def wire(self, value: Any) -> Any:
        """`value` in its wire shape (`wire.wire_object`), kept while `value` is the written
        value of a kept message (the next plan's result sends it again); any other value is
        returned as it is (the result's own conversion handles it)."""
        with self._lock:
            held = self._json.get(id(value))
            if held is None or held[0] is not value or not isinstance(value, Mapping):
                return value
            wired = self._wired.get(id(value))
            if wired is not None:
                return wired
        wired = wire_object(value)
        with self._lock:
            held = self._json.get(id(value))
            if held is not None and held[0] is value:
                self._wired[id(value)] = wired
        return wired

    def _hold(self, value: Any) -> None:
        held = self._json.get(id(value))
        if held is not None and held[0] is value:
            self._json[id(value)] = (value, held[1], held[2] + 1)
        else:
            self._json[id(value)] = (value, None, 1)

    def _release(self, value: Any) -> None:
        held = self._json.get(id(value))
        if held is not None and held[0] is value:
            if held[2] <= 1:
                del self._json[id(value)]
                self._wired.pop(id(value), None)
            else:
                self._json[id(value)] = (value, held[1], held[2] - 1)

    def clear(self) -> None:
        """Forget every kept write (tests; a settings change needs none: the destination is
        part of the key)."""
        with self._lock:
            self._entries.clear()
            self._json.clear()
            self._wired.clear()


SANITIZED = SanitizedMessages()
"""The process's kept writes."""
