"""The sanitizer: what one destination receives of a message, a supplement or a text
(docs/reference.md §3.8, "Recursive payload sanitizer"; docs/privacy.md).

- A **native turn** (a message of the conversation) keeps its structure: every string in it is
  written for the destination (`markers.render`: allowed segments without their markers,
  disallowed ones as `[DS4 <level> content excluded by privacy policy]`), then its secrets are
  redacted when the destination is remote (`redaction.redact_secrets`). Strings under a
  structural key (`STRUCTURAL_KEYS`: role, type, ids, names, the model) are left as they are
  unless they hold a marker; every other string is content (a superset of the reference's
  content keys, so a secret in a tool's `details` is redacted too). Binary data (`data` of an
  `image` block) is emptied when the message's level is withheld and never redacted.
- A **supplement** (history evidence, a project snippet, a summary; later pins and memory) is
  sent whole or not at all: one withheld span drops it (`Sanitizer.admits`).
- The structure floor of a message (`markers.Parsed.floor`: a broken or split marker in any of
  its strings) raises every string of the message.

`Sanitizer` counts what it does (`PrivacyCounters`). It raises on nothing but bugs; callers
fail closed on any exception: an empty request, never the raw one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .levels import Level, highest
from .markers import Parsed, has_marker, parse, render
from .policy import Destination
from .redaction import Redacted, redact_secrets

STRUCTURAL_KEYS = frozenset(
    {
        "api",
        "id",
        "model",
        "name",
        "role",
        "stopReason",
        "stop_reason",
        "toolCallId",
        "tool_call_id",
        "type",
        "provider",
        "mimeType",
    }
)
"""Keys whose string values are never rewritten unless they hold a marker (the reference's
structural keys, plus Pi's `provider` and an image's `mimeType`)."""

PRIVACY_EXCLUSION_REASON = "excluded due to privacy policy"
"""The manifest reason of a supplement dropped because it holds withheld content."""


@dataclass
class PrivacyCounters:
    """What the sanitizer did for one request: units (messages, supplements, hits) by level
    (`classified`), secrets redacted (`redacted`, and by kind), native segments replaced by a
    placeholder by level (`withheld`) and supplements dropped whole by level (`excluded`)."""

    classified: dict[str, int] = field(default_factory=dict)
    redacted: int = 0
    redacted_by_kind: dict[str, int] = field(default_factory=dict)
    withheld: dict[str, int] = field(default_factory=dict)
    excluded: dict[str, int] = field(default_factory=dict)

    def count(self, bucket: dict[str, int], key: str, n: int = 1) -> None:
        """Add `n` to `bucket[key]`."""
        bucket[key] = bucket.get(key, 0) + n

    def to_wire(self, target: Destination) -> dict[str, Any]:
        """`{enabled, destination, classified, redacted, redactedByKind, withheld, excluded}`
        (docs/protocol.md, "Privacy")."""
        return {
            "enabled": target.enabled,
            "destination": target.to_wire(),
            "classified": dict(sorted(self.classified.items())),
            "redacted": self.redacted,
            "redactedByKind": dict(sorted(self.redacted_by_kind.items())),
            "withheld": dict(sorted(self.withheld.items())),
            "excluded": dict(sorted(self.excluded.items())),
        }


class Sanitized(NamedTuple):
    """A value written for a destination, and the level of the original."""

    value: Any
    level: Level


class Sanitizer:
    """Writes messages, supplements and texts for one `Destination`, counting in `counters`."""

    def __init__(self, target: Destination) -> None:
        self.target = target
        self.counters = PrivacyCounters()

    # ----------------------------------------------------------------- classification

    def level_of(self, value: Any) -> Level:
        """The classification of a message, supplement or text: the highest level of its
        strings' segments and of its structure floor (`privacy.defaultClassification` for
        unmarked text)."""
        floor, parsed = self._parse_all(value)
        return highest((p.level for p in parsed.values()), highest((floor,), self._default))

    def admits(self, value: Any) -> tuple[bool, Level]:
        """Whether a supplement may be sent whole, and its level. A withheld level anywhere in
        it (a segment, or the structure floor) drops it; a drop is counted in `classified` and
        `excluded` (a kept supplement is counted when it is sent). Always True, level
        `normal`, when privacy is off."""
        if not self.target.enabled:
            return True, "normal"
        level = self.level_of(value)
        if self.target.allows(level):
            return True, level
        self.counters.count(self.counters.classified, level)
        self.counters.count(self.counters.excluded, level)
        return False, level

    # ----------------------------------------------------------------- rewriting

    def message(self, message: Any, *, count: bool = True) -> Sanitized:
        """`message` (any JSON value) as the destination may receive it, with its level;
        counted in `classified` unless `count` is false. The input is never changed: parts
        that change are copied, and a message nothing changes in is returned as it is (also
        when privacy is off; level `normal` then)."""
        if not self.target.enabled:
            return Sanitized(message, "normal")
        floor, parsed = self._parse_all(message)
        level = highest((p.level for p in parsed.values()), highest((floor,), self._default))
        if count:
            self.counters.count(self.counters.classified, level)
        return Sanitized(self._rewrite(message, floor, parsed, level, False), level)

    def text(self, text: str) -> str:
        """One string as the destination may receive it (a retrieved hit's text, a prompt):
        markers rendered, secrets redacted for a remote destination."""
        if not self.target.enabled:
            return text
        return self._string(text, parse(text, self._default))

    # ----------------------------------------------------------------- internals

    @property
    def _default(self) -> Level:
        return self.target.default_level

    def _parse_all(self, value: Any) -> tuple[Level, dict[int, Parsed]]:
        """The structure floor of `value` and the parse of each of its strings that holds a
        marker (by id). A block opened in one string and closed in another leaves both
        unbalanced, which raises the floor."""
        parsed: dict[int, Parsed] = {}
        floor: Level = "normal"
        stack: list[Any] = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                if has_marker(item):
                    result = parse(item, self._default)
                    parsed[id(item)] = result
                    floor = highest((result.floor,), floor)
            elif isinstance(item, Mapping):
                if item.get("type") == "image":  # binary data: emptied or kept, never parsed
                    stack.extend(v for k, v in item.items() if k != "data")
                else:
                    stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)
        return floor, parsed

    def _rewrite(
        self, value: Any, floor: Level, parsed: dict[int, Parsed], level: Level, structural: bool
    ) -> Any:
        """`value` written for the destination; the same object when nothing in it changes."""
        if isinstance(value, str):
            found = parsed.get(id(value))
            if found is not None:
                return self._string(value, found, floor)
            if structural:
                return value  # a structural string without a marker
            if not self.target.allows(highest((self._default,), floor)):
                return self._string(value, parse(value, self._default), floor)
            return self._redacted(value)
        if isinstance(value, Mapping):
            binary = value.get("type") == "image" and isinstance(value.get("data"), str)
            out: dict[str, Any] | None = None
            for key, item in value.items():
                if binary and key == "data":
                    new = item if self.target.allows(level) else ""
                else:
                    new = self._rewrite(item, floor, parsed, level, key in STRUCTURAL_KEYS)
                if new is not item:
                    if out is None:
                        out = dict(value)
                    out[key] = new
            return value if out is None else out
        if isinstance(value, list | tuple):
            items: list[Any] | None = None
            for index, item in enumerate(value):
                new = self._rewrite(item, floor, parsed, level, False)
                if new is not item:
                    if items is None:
                        items = list(value)
                    items[index] = new
            return value if items is None else items
        return value

    def _string(self, text: str, found: Parsed, floor: Level = "normal") -> str:
        rendered = render(
            text, self.target.allowed, default=self._default, floor=floor, parsed=found
        )
        for withheld_level, n in rendered.withheld.items():
            self.counters.count(self.counters.withheld, withheld_level, n)
        return self._redacted(rendered.text)

    def _redacted(self, text: str) -> str:
        """`text` with its secrets redacted when the destination is remote (counted)."""
        if not self.target.redact:
            return text
        redacted = REDACTIONS.redact(text)
        if not redacted.count:
            return text
        self.counters.redacted += redacted.count
        for kind, n in redacted.by_kind.items():
            self.counters.count(self.counters.redacted_by_kind, kind, n)
        return redacted.text


class RedactionCache:
    """`redact_secrets` results by text, most recently used kept, at most `max_chars`
    characters of keys in all. Plans of one session quote the same strings again and again (the
    session cache keeps the parsed messages), so a string is redacted once, then looked up.
    Thread-safe; a result is the same as `redact_secrets(text)` (a pure function)."""

    def __init__(self, max_chars: int = 64_000_000) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, Redacted] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def redact(self, text: str) -> Redacted:
        """`redact_secrets(text)`, from the cache when `text` was redacted before."""
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
                return hit
        result = redact_secrets(text)
        if len(text) * 4 > self.max_chars:
            return result  # too large to keep
        with self._lock:
            if text not in self._items:
                self._items[text] = result
                self._chars += len(text)
                while self._chars > self.max_chars:
                    old, _ = self._items.popitem(last=False)
                    self._chars -= len(old)
        return result


REDACTIONS = RedactionCache()
"""The process's redaction cache (64 M characters of keys at most)."""
