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

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .levels import LEVELS, Level, highest
from .markers import Parsed, has_marker, parse, placeholder, render
from .policy import Destination
from .redaction import SECRET_MARKER, Redacted, redact_with_values
from .secrets import MIN_SECRET_LINE_CHARS

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
        "toolName",
        "tool_name",
        "customType",
    }
)
"""Keys whose string values are never rewritten unless they hold a marker (the reference's
structural keys, plus Pi's `provider`, `toolName`, `customType` and an image's `mimeType`),
outside tool data (`DATA_KEYS`)."""

DATA_KEYS = frozenset({"arguments", "input", "details", "parameters", "args"})
"""Keys whose value is a tool's own data (a call's arguments, a result's details): inside it no
key is structural (`{"name": "<a token>"}` is redacted) and object keys are written for the
destination too."""

PRIVACY_EXCLUSION_REASON = "excluded due to privacy policy"

ELLIPSIS = "\u2026"
"""How an excerpt marks a cut end (`retrieval.history_results`)."""

CUT_SECRET_KIND = "secret cut from its entry"
"""`redactedByKind` of a known secret line found in an excerpt without its context."""
"""The manifest reason of a supplement dropped because it holds withheld content."""


@dataclass
class PrivacyCounters:
    """What the sanitizer did for one request: units (messages, supplements, hits) by level
    (`classified`), secrets redacted (`redacted`, and by kind), native segments replaced by a
    placeholder by level (`withheld`) and supplements dropped whole by level (`excluded`);
    `failed` is True when the sanitizer raised and nothing was sent."""

    classified: dict[str, int] = field(default_factory=dict)
    redacted: int = 0
    redacted_by_kind: dict[str, int] = field(default_factory=dict)
    withheld: dict[str, int] = field(default_factory=dict)
    excluded: dict[str, int] = field(default_factory=dict)

    failed: bool = False

    def count(self, bucket: dict[str, int], key: str, n: int = 1) -> None:
        """Add `n` to `bucket[key]`."""
        bucket[key] = bucket.get(key, 0) + n

    def merge(self, other: PrivacyCounters) -> None:
        """Add the counts of `other` (e.g. of a supplement written ahead, once it is sent)."""
        for mine, theirs in (
            (self.classified, other.classified),
            (self.redacted_by_kind, other.redacted_by_kind),
            (self.withheld, other.withheld),
            (self.excluded, other.excluded),
        ):
            for key, n in theirs.items():
                self.count(mine, key, n)
        self.redacted += other.redacted

    def to_wire(self, target: Destination) -> dict[str, Any]:
        """`{enabled, destination, classified, redacted, redactedByKind, withheld, excluded,
        failed}` (docs/protocol.md, `ds4/plan` result `privacy`)."""
        return {
            "enabled": target.enabled,
            "failed": self.failed,
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
        self._literals: Sequence[str] = ()  # known secret lines of the call in progress
        self.found: set[str] = set()
        """Every secret value redacted so far (8 or more characters): `sanitize_plan` looks
        for them in the plan's other messages (the same password repeated bare)."""

    # ----------------------------------------------------------------- classification

    def level_of(self, value: Any) -> Level:
        """The classification of a message, supplement or text: the highest level of its
        strings' segments and of its structure floor (`privacy.defaultClassification` for
        unmarked text)."""
        floor, parsed = self._parse_all(value)
        return highest((p.level for p in parsed.values()), highest((floor,), self._default))

    def admits(self, value: Any, floor: str = "normal") -> tuple[bool, Level]:
        """Whether a supplement may be sent whole, and its level: the higher of `level_of`
        and `floor` (what is known of the text it was cut from, e.g. a whole file's markers
        for one snippet). A withheld level anywhere in it drops it. Counts nothing: the caller
        counts what it finally sends or leaves out. Always True, level `normal`, when privacy
        is off."""
        if not self.target.enabled:
            return True, "normal"
        level = highest((self.level_of(value),), floor)
        return self.target.allows(level), level

    def visible_level(self, value: Any) -> Level:
        """The highest level of the content of `value` (one message, or one text) this
        destination may see: the level of what it is sent once withheld segments are
        placeholders (a summary written from it carries this level). The structure floor is
        `value`'s as a whole: call it per message."""
        floor, parsed = self._parse_all(value)
        levels = [
            highest((segment.level,), floor)
            for result in parsed.values()
            for segment in result.segments
        ]
        seen = [
            level
            for level in (*levels, highest((floor,), self._default))
            if self.target.allows(level)
        ]
        return highest(seen)

    # ----------------------------------------------------------------- rewriting

    def message(
        self, message: Any, *, count: bool = True, secrets: Sequence[str] = ()
    ) -> Sanitized:
        """`message` (any JSON value) as the destination may receive it, with its level;
        counted in `classified` unless `count` is false. `secrets` are literal secret lines
        known from the text `message` was cut from (`secrets.secret_lines`), redacted wherever
        they occur for a remote destination. The input is never changed: parts that change are
        copied, and a message nothing changes in is returned as it is (also when privacy is
        off; level `normal` then)."""
        if not self.target.enabled:
            return Sanitized(message, "normal")
        floor, parsed = self._parse_all(message)
        level = highest((p.level for p in parsed.values()), highest((floor,), self._default))
        if count:
            self.counters.count(self.counters.classified, level)
        self._literals = secrets
        try:
            return Sanitized(self._rewrite(message, floor, parsed, level, False, False), level)
        finally:
            self._literals = ()

    def text(self, text: str, *, secrets: Sequence[str] = ()) -> str:
        """One string as the destination may receive it (a retrieved hit's text, a prompt):
        markers rendered, secrets redacted for a remote destination (`secrets` as in
        `message`)."""
        if not self.target.enabled:
            return text
        self._literals = secrets
        try:
            return self._string(text, parse(text, self._default))
        finally:
            self._literals = ()

    def redacted_text(self, text: str, *, secrets: Sequence[str] = ()) -> str:
        """`text` with its secrets (and the known `secrets` lines) redacted for a remote
        destination, markers left in place: for quoted text before it is rendered into a
        message (the rendering escapes it, which hides a secret's shape), so that the
        rendered message is still classified by its markers."""
        if not self.target.enabled:
            return text
        self._literals = secrets
        try:
            return self._redacted(text)
        finally:
            self._literals = ()

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
            elif isinstance(item, dict):
                if item.get("type") == "image":  # binary data: emptied or kept, never parsed
                    stack.extend(v for k, v in item.items() if k != "data")
                else:
                    stack.extend(item.values())
            elif isinstance(item, list | tuple):
                stack.extend(item)
        return floor, parsed

    def _rewrite(
        self,
        value: Any,
        floor: Level,
        parsed: dict[int, Parsed],
        level: Level,
        structural: bool,
        data: bool,
    ) -> Any:
        """`value` written for the destination; the same object when nothing in it changes.
        `structural`: a string under a structural key; `data`: inside tool data (`DATA_KEYS`)."""
        if isinstance(value, str):
            found = parsed.get(id(value))
            if found is not None:
                return self._string(value, found, floor)
            if structural:
                return value  # a structural string without a marker
            if not self.target.allows(highest((self._default,), floor)):
                return self._string(value, parse(value, self._default), floor)
            return self._redacted(value)
        if isinstance(value, dict):
            binary = value.get("type") == "image" and isinstance(value.get("data"), str)
            out: dict[str, Any] | None = None
            for key, item in value.items():
                if binary and key == "data":
                    new = item if self.target.allows(level) else ""
                else:
                    inside = data or key in DATA_KEYS
                    structural_key = not data and key in STRUCTURAL_KEYS
                    new = self._rewrite(item, floor, parsed, level, structural_key, inside)
                    if inside and not data and isinstance(new, dict | list | tuple):
                        new = self._data_redacted(new, highest((level,), floor))
                new_key = self._key(key, floor) if data and isinstance(key, str) else key
                if new is not item or new_key is not key:
                    if out is None:
                        out = dict(value)
                    if new_key is not key:
                        out.pop(key, None)
                        base, number = new_key, 1
                        while new_key in out:  # two keys written alike: keep both
                            number += 1
                            new_key = f"{base} ({number})"
                    out[new_key] = new
            return value if out is None else out
        if isinstance(value, list | tuple):
            items: list[Any] | None = None
            for index, item in enumerate(value):
                new = self._rewrite(item, floor, parsed, level, False, data)
                if new is not item:
                    if items is None:
                        items = list(value)
                    items[index] = new
            return value if items is None else items
        return value

    def _data_redacted(self, value: Any, level: Level) -> Any:
        """Tool data (`DATA_KEYS`) whose secrets only show as JSON: a value under a secret's
        key (`{"password": "..."}`, `{"DB_PASSWORD": 12345678}`), a value after a
        `"--password"` argument. Redacted on its JSON text (redaction keeps JSON valid) and
        read back; numbers of a message whose level is withheld become placeholders too. An
        answer that does not read back as JSON is replaced whole (fail closed)."""
        if not self.target.allows(level):
            value = _scalars_withheld(value, placeholder(level))
        if not self.target.redact:
            return value
        value = self._named_secrets(value)
        text = json.dumps(value, ensure_ascii=False)
        redacted, values = REDACTIONS.redact_with_values(text)
        self.found.update(values)
        if not redacted.count:
            return value
        self.counters.redacted += redacted.count
        for kind, n in redacted.by_kind.items():
            self.counters.count(self.counters.redacted_by_kind, kind, n)
        try:
            return json.loads(redacted.text)
        except ValueError:
            return SECRET_MARKER

    def _named_secrets(self, value: Any) -> Any:
        """Tool data with the value of every secret-named key (`SECRET_NAMES`, ignoring case,
        `-` and `_`: `pw`, `DB_PASSWORD`, `apiKey`) and the argument after a secret-named
        option (`"--password", "<value>"`) replaced; the same object when none."""
        if isinstance(value, dict):
            out: dict[Any, Any] | None = None
            for key, item in value.items():
                if isinstance(key, str) and _secret_name(key) and _is_secret_scalar(item):
                    new: Any = SECRET_MARKER
                    self._count_named()
                else:
                    new = self._named_secrets(item)
                if new is not item:
                    out = dict(value) if out is None else out
                    out[key] = new
            return value if out is None else out
        if isinstance(value, list | tuple):
            items: list[Any] | None = None
            for index, item in enumerate(value):
                previous = value[index - 1] if index else None
                if (
                    isinstance(previous, str)
                    and previous.startswith("-")
                    and _secret_name(previous.lstrip("-"))
                    and _is_secret_scalar(item)
                ):
                    new = SECRET_MARKER
                    self._count_named()
                else:
                    new = self._named_secrets(item)
                if new is not item:
                    items = list(value) if items is None else items
                    items[index] = new
            return value if items is None else items
        return value

    def _count_named(self) -> None:
        self.counters.redacted += 1
        self.counters.count(self.counters.redacted_by_kind, NAMED_SECRET_KIND)

    def _key(self, key: str, floor: Level) -> str:
        """An object key of tool data written for the destination (the same object when it
        does not change)."""
        if has_marker(key) or not self.target.allows(highest((self._default,), floor)):
            return self._string(key, parse(key, self._default), floor)
        return self._redacted(key)

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
        redacted, values = REDACTIONS.redact_with_values(text)
        out = redacted.text
        self.found.update(values)
        if redacted.count:
            self.counters.redacted += redacted.count
            for kind, n in redacted.by_kind.items():
                self.counters.count(self.counters.redacted_by_kind, kind, n)
        if self._literals:
            out = self._known_lines(out)
        return out if out != text else text

    def _known_lines(self, text: str) -> str:
        """`text` with the known secret lines of the call (`self._literals`) redacted: whole,
        wherever they occur, and cut, at the ends of an excerpt (its first line the end of one,
        its last line the start of one)."""
        found = 0
        for line in self._literals:  # longest first: a line inside another goes with it
            n = text.count(line)
            if n:
                text = text.replace(line, SECRET_MARKER)
                found += n
        lines = text.split("\n")
        head = lines[0].removeprefix(ELLIPSIS).strip()
        if len(head) >= MIN_SECRET_LINE_CHARS and any(s.endswith(head) for s in self._literals):
            lines[0] = lines[0].replace(head, SECRET_MARKER)
            found += 1
        tail = lines[-1].removesuffix(ELLIPSIS).strip()
        if (
            len(lines) > 1
            and len(tail) >= MIN_SECRET_LINE_CHARS
            and any(s.startswith(tail) for s in self._literals)
        ):
            lines[-1] = lines[-1].replace(tail, SECRET_MARKER)
            found += 1
        if found:
            self.counters.redacted += found
            self.counters.count(self.counters.redacted_by_kind, CUT_SECRET_KIND, found)
        return "\n".join(lines)


SECRET_NAMES = frozenset(
    {"pw", "pwd", "pass", "passwd", "password", "passphrase", "secret", "token", "apikey",
     "accesskey", "privatekey", "clientsecret", "authorization", "credential", "credentials"}
)  # fmt: skip
"""Key and option names whose value in tool data is a secret (compared lower-cased, without
`-` and `_`; also as the end of a longer name: `dbpassword`, `githubtoken`)."""

NAMED_SECRET_KIND = "secret by its name in tool data"
"""`redactedByKind` of a value replaced because of its key or option name."""


def _secret_name(name: str) -> bool:
    folded = name.lower().replace("-", "").replace("_", "")
    return folded in SECRET_NAMES or (
        len(folded) > 4 and folded.endswith(("password", "passwd", "secret", "token", "apikey"))
    )


def _is_secret_scalar(value: Any) -> bool:
    """A value that may be a secret: a string of 4 or more characters that is not already a
    marker, or a number."""
    if isinstance(value, str):
        return len(value) >= 4 and not value.startswith("[DS4 ")
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scalars_withheld(value: Any, text: str) -> Any:
    """`value` with every number replaced by `text` (strings were rewritten already)."""
    if isinstance(value, dict):
        return {key: _scalars_withheld(item, text) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scalars_withheld(item, text) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return text
    return value


MIN_CACHED_CHARS = 8
"""Strings shorter than this hold no secret (`password=x` is the shortest shape a rule takes:
a key, a separator and 4 characters) and are answered without a lookup."""


class RedactionCache:
    """`redact_secrets` results by text, most recently used kept, at most `max_chars`
    characters in all (each entry counts its key, its redacted text when that differs, and
    `ENTRY_OVERHEAD_CHARS`). Plans of one session quote the same strings again and again (the
    session cache keeps the parsed messages), so a string is redacted (or found to hold no
    secret pattern's anchor) once, then looked up; strings shorter than `MIN_CACHED_CHARS`
    cannot hold a secret (the shortest value any rule takes is 4 characters after a key). Thread-safe; a result is the same as
    `redact_secrets(text)` (a pure function)."""

    ENTRY_OVERHEAD_CHARS = 256
    """What one entry costs beyond its characters (the dict slot, the result tuple)."""

    def __init__(self, max_chars: int = 16_000_000) -> None:
        self.max_chars = max_chars
        self._items: OrderedDict[str, tuple[Redacted, tuple[str, ...]]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def redact(self, text: str) -> Redacted:
        """`redact_secrets(text)`, from the cache when `text` was redacted before."""
        return self.redact_with_values(text)[0]

    def redact_with_values(self, text: str) -> tuple[Redacted, tuple[str, ...]]:
        """`redaction.redact_with_values(text)`, from the cache when `text` was redacted
        before."""
        if len(text) < MIN_CACHED_CHARS:
            return Redacted(text, 0, {}), ()  # too short to hold a secret
        with self._lock:
            hit = self._items.get(text)
            if hit is not None:
                self._items.move_to_end(text)
                return hit
        result = redact_with_values(text)
        size = self._size(text, result[0])
        if size * 4 > self.max_chars:
            return result  # too large to keep
        with self._lock:
            if text not in self._items:
                self._items[text] = result
                self._chars += size
                while self._chars > self.max_chars:
                    old, gone = self._items.popitem(last=False)
                    self._chars -= self._size(old, gone[0])
        return result

    def _size(self, text: str, result: Redacted) -> int:
        extra = len(result.text) if result.text is not text else 0
        return len(text) + extra + self.ENTRY_OVERHEAD_CHARS


REDACTIONS = RedactionCache()
"""The process's redaction cache (16 M characters at most)."""


_EVERY_LEVEL_REDACTED = Destination(None, "remote", LEVELS, True, True, "normal", "secrets only")


def without_secrets(value: Any) -> Any:
    """`value` (any JSON value) with the secrets of every string redacted and markers removed,
    nothing withheld: text that stays on this machine but may be quoted later (the offline
    summary of a compaction, whose outer marker carries the level). The same object when
    nothing changes."""
    return Sanitizer(_EVERY_LEVEL_REDACTED).message(value, count=False).value
