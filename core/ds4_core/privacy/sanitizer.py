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

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .levels import Level, highest
from .markers import Parsed, has_marker, parse, render
from .policy import Destination
from .redaction import redact_secrets

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
        """`message` (any JSON value) as the destination may receive it (a new value; the
        input is never changed), with its level; counted in `classified` unless `count` is
        false. Returns the input itself (level `normal`) when privacy is off."""
        if not self.target.enabled:
            return Sanitized(message, "normal")
        floor, parsed = self._parse_all(message)
        level = highest((p.level for p in parsed.values()), highest((floor,), self._default))
        if count:
            self.counters.count(self.counters.classified, level)
        return Sanitized(self._rewrite(message, floor, parsed, level, structural=False), level)

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
        """The structure floor of `value` and the parse of each of its strings (by id), also
        of strings under structural keys that hold a marker. A block opened in one string and
        closed in another leaves both unbalanced, which raises the floor."""
        parsed: dict[int, Parsed] = {}
        floor: Level = "normal"
        stack: list[tuple[Any, bool]] = [(value, False)]
        while stack:
            item, structural = stack.pop()
            if isinstance(item, str):
                if structural and not has_marker(item):
                    continue
                result = parse(item, self._default)
                parsed[id(item)] = result
                floor = highest((result.floor,), floor)
            elif isinstance(item, Mapping):
                binary = item.get("type") == "image"
                stack.extend(
                    (v, k in STRUCTURAL_KEYS)
                    for k, v in item.items()
                    if not (binary and k == "data")  # binary: emptied or kept, never parsed
                )
            elif isinstance(item, list | tuple):
                stack.extend((v, False) for v in item)
        return floor, parsed

    def _rewrite(
        self, value: Any, floor: Level, parsed: dict[int, Parsed], level: Level, structural: bool
    ) -> Any:
        if isinstance(value, str):
            found = parsed.get(id(value))
            if found is None:
                return value  # a structural string without a marker
            return self._string(value, found, floor)
        if isinstance(value, Mapping):
            binary = value.get("type") == "image" and isinstance(value.get("data"), str)
            out: dict[str, Any] = {}
            for key, item in value.items():
                if binary and key == "data":
                    out[key] = item if self.target.allows(level) else ""
                else:
                    out[key] = self._rewrite(item, floor, parsed, level, key in STRUCTURAL_KEYS)
            return out
        if isinstance(value, list | tuple):
            return [self._rewrite(item, floor, parsed, level, False) for item in value]
        return value

    def _string(self, text: str, found: Parsed, floor: Level = "normal") -> str:
        rendered = render(
            text, self.target.allowed, default=self._default, floor=floor, parsed=found
        )
        for withheld_level, n in rendered.withheld.items():
            self.counters.count(self.counters.withheld, withheld_level, n)
        out = rendered.text
        if self.target.redact:
            redacted = redact_secrets(out)
            if redacted.count:
                self.counters.redacted += redacted.count
                for kind, n in redacted.by_kind.items():
                    self.counters.count(self.counters.redacted_by_kind, kind, n)
                out = redacted.text
        return out
