"""Privacy where text leaves: plans, retrieved hits and summary prompts written for their
destination (docs/privacy.md).

Order of one plan: `plan_destination` resolves who receives the request; `withheld_summaries`
names the summary messages the planner must leave out; `screen_supplements` drops every
supplement that holds withheld content (judged with what is known of the text it was cut from:
`source_levels` of history hits, `snippet_levels` of project snippets) and writes the others
for the destination; after planning `sanitize_plan` rewrites the native turns (placeholders,
redaction), classifies the manifest items and counts what was sent and left out. Privacy fails
closed: `sanitize_plan` turns any exception into an empty request with a fallback reason and
`privacy.failed`, never the raw messages.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Any

from ..compaction.span import Span
from ..compaction.transcript import file_operations
from ..config import Config
from ..logs import describe_failure
from ..planner import ContextPlan, ModelProfile, PlanItem, Supplement
from ..planner.groups import SUMMARY_ROLES
from ..planner.planner import item_count
from ..privacy.levels import Level, highest
from ..privacy.markers import has_marker, line_span_level, parse
from ..privacy.policy import Destination, destination
from ..privacy.redaction import ANY_MARKER
from ..privacy.sanitizer import (
    PRIVACY_EXCLUSION_REASON,
    REDACTIONS,
    PrivacyCounters,
    Sanitizer,
)
from ..results import CommitHit, HistoryHit, ProjectHit
from ..tokens import estimate_message_tokens
from .privacy_cache import SANITIZED
from .profiles import UNKNOWN

log = logging.getLogger("ds4_core.engine")


def visible_text(target: Destination | None, text: str) -> str:
    """`text` as words `target` may see, for a search: without the segments it may not see
    (no placeholders), markers removed, and for a remote destination without its secrets (a
    secret in the request must never pick evidence, whose reason would name it); `text`
    itself without a destination or when privacy is off."""
    if target is None or not target.enabled:
        return text
    if has_marker(text) or not target.allows(target.default_level):
        parsed = parse(text, target.default_level)
        text = "".join(
            segment.text
            for segment in parsed.segments
            if target.allows(highest((segment.level,), parsed.floor))
        )
    if target.redact:
        text = ANY_MARKER.sub(" ", REDACTIONS.redact(text).text)
    return text


def plan_destination(config: Config, profile: ModelProfile) -> Destination:
    """The destination of a plan: its model's provider (`model.provider` of the request, else
    the session's current model); an unknown provider is treated as remote."""
    provider = profile.provider if profile.provider != UNKNOWN else None
    return destination(config, provider)


# --------------------------------------------------------------------------- plans


@dataclass
class Screened:
    """What screening did to a plan's supplements: the excluded items of those dropped, and
    for each kept message (by `id()`, the message itself kept alive here) its level and what
    writing it counted (merged into the plan's counters only if the planner sends it)."""

    dropped: list[PlanItem] = field(default_factory=list)
    kept: dict[int, tuple[Any, str, PrivacyCounters]] = field(default_factory=dict)
    found: set[str] = field(default_factory=set)
    """Secret values redacted while writing the kept supplements."""


class QuotedRedaction:
    """Secrets redacted out of quoted text BEFORE it is rendered into a supplement: the
    rendering writes the text as a JSON string, whose escapes hide a secret's shape
    (`\\"api_key\\": \\"...\\"`). Called `(source_id, text)`; markers are kept (the rendered
    message is still classified by them); what it redacts is counted per source id in
    `counted` (merged into the plan's counters when the supplement is sent). A no-op without
    a destination that redacts. `secrets[source_id]` are the secret lines of the text the
    quoted text was cut from."""

    def __init__(self, target: Destination | None, secrets: Mapping[str, Sequence[str]]) -> None:
        self.target = target
        self.secrets = secrets
        self.counted: dict[str, PrivacyCounters] = {}
        self.found: set[str] = set()  # secret values redacted (`Sanitizer.found`)

    def __call__(self, source_id: str, text: str) -> str:
        if self.target is None or not self.target.enabled or not self.target.redact:
            return text
        scratch = Sanitizer(self.target)
        out = scratch.redacted_text(text, secrets=self.secrets.get(source_id, ()))
        self.counted[source_id] = scratch.counters
        self.found |= scratch.found
        return out


def screen_supplements(
    target: Destination,
    supplements: Sequence[Supplement],
    screened: Screened,
    floors: Mapping[str, str] | None = None,
    counted: Mapping[str, PrivacyCounters] | None = None,
) -> list[Supplement]:
    """The supplements the destination may receive, each written for it (markers removed,
    secrets redacted) with its `classification` and re-estimated `tokens`; the others become
    excluded items in `screened.dropped` (metadata only, reason `excluded due to privacy
    policy`). `floors[source_id]` is the least level of a supplement (see the module
    docstring; a supplement missing from it is judged on its own text) and `counted[source_id]`
    what was redacted of its quoted text before rendering (`QuotedRedaction`)."""
    kept: list[Supplement] = []
    for supplement in supplements:
        scratch = Sanitizer(target)
        earlier = (counted or {}).get(supplement.source_id)
        if earlier is not None:
            scratch.counters.merge(earlier)
        floor = (floors or {}).get(supplement.source_id, "normal")
        admitted, level = scratch.admits(supplement.message, floor)
        if not admitted:
            screened.dropped.append(
                PlanItem(
                    kind=supplement.kind,
                    source_id=supplement.source_id,
                    group_id=None,
                    tokens=supplement.tokens or estimate_message_tokens(supplement.message),
                    score=round(float(supplement.score), 6),
                    reason=PRIVACY_EXCLUSION_REASON,
                    classification=level,
                )
            )
            continue
        message = scratch.message(supplement.message, count=False).value
        screened.kept[id(message)] = (message, level, scratch.counters)
        screened.found |= scratch.found
        kept.append(
            replace(
                supplement,
                message=message,
                tokens=estimate_message_tokens(message),
                classification=level,
            )
        )
    return kept


def withheld_summaries(
    target: Destination,
    messages: Sequence[Mapping[str, Any]],
    indices: Sequence[int] | None = None,
) -> dict[int, tuple[str, str]]:
    """Index -> (reason, level) of each summary message (`compactionSummary`,
    `branchSummary`) that holds content the destination may not see: the planner leaves it out
    whole, as a supplement (docs/reference.md §3.8). `indices`, when given, are the only
    messages that can be summaries (`Prepared.summary_indices`): the others are not looked at."""
    if not target.enabled:
        return {}
    sanitizer = Sanitizer(target)
    found: dict[int, tuple[str, str]] = {}
    for index in range(len(messages)) if indices is None else indices:
        message = messages[index]
        if isinstance(message, Mapping) and message.get("role") in SUMMARY_ROLES:
            admitted, level = sanitizer.admits(message)
            if not admitted:
                found[index] = (PRIVACY_EXCLUSION_REASON, level)
    return found


def sanitize_plan(
    plan: ContextPlan,
    sanitizer: Sanitizer,
    *,
    fixed_tokens: int,
    screened: Screened,
    source_ids: Sequence[str | None],
    native_ids: AbstractSet[int] = frozenset(),
) -> ContextPlan:
    """`plan` with its messages written for the sanitizer's destination.

    Messages whose object id is in `native_ids` (the session's own message objects) are
    written once per destination and kept for the next plans (`privacy_cache.SANITIZED`).

    Kept supplements (`screened.kept`) are sent as written ahead, their counts merged; every
    other message is rewritten (`Sanitizer.message`). Items get the classification of their
    message (managed plans: items and messages are in the same order; observer and fallback
    plans send the caller's messages, whose source ids are `source_ids`), the dropped
    supplements join the excluded items, and the counters count every item left out for
    privacy. `estimated_tokens` and the included items' `tokens` are those of the messages
    sent.

    Fails closed: any exception gives mode `fallback`, no messages, a `fallback_reason` saying
    that nothing was sent and `counters.failed`; every item is then excluded.
    """
    counters = sanitizer.counters
    try:
        messages: list[dict[str, Any]] = []
        levels: list[str] = []
        known: list[int | None] = []  # tokens of the written message, when kept
        for message in plan.messages:
            ahead = screened.kept.get(id(message))
            if ahead is not None and ahead[0] is message:
                _, level, written = ahead
                counters.merge(written)
                counters.count(counters.classified, level)
                messages.append(message)
                known.append(None)
            else:
                kept = SANITIZED.write(sanitizer, message, id(message) in native_ids)
                level = kept.sanitized.level
                messages.append(kept.sanitized.value)
                known.append(kept.tokens)
            levels.append(level)
        found = sorted(counters_found(sanitizer, screened), key=lambda v: (-len(v), v))
        if found:  # a secret redacted in one message, repeated bare in another
            again = [sanitizer.message(m, count=False, secrets=found).value for m in messages]
            known = [n if a is m else None for a, m, n in zip(again, messages, known, strict=True)]
            messages = again
        included = _classified(plan, levels, source_ids)
        excluded = [*plan.excluded, *screened.dropped]
        if sanitizer.target.enabled:
            for item in excluded:
                if item.reason == PRIVACY_EXCLUSION_REASON:
                    counters.count(counters.classified, item.classification)
                    counters.count(counters.excluded, item.classification)
        tokens = [
            estimate_message_tokens(message) if n is None else n
            for message, n in zip(messages, known, strict=True)
        ]
        if plan.mode == "managed" and len(included) == len(tokens):
            included = [
                item if item.tokens == n else replace(item, tokens=n)
                for item, n in zip(included, tokens, strict=True)
            ]
        return replace(
            plan,
            messages=messages,
            included=included,
            excluded=excluded,
            estimated_tokens=fixed_tokens + sum(tokens),
            stats=_counted_exclusions(plan.stats, screened.dropped),
        )
    except Exception as exc:  # privacy fails closed: nothing is sent
        log.warning("privacy sanitizer failed: error=%s", describe_failure(exc))
        reason = (
            f"privacy sanitizer failed ({type(exc).__name__}); nothing was sent: privacy fails "
            "closed"
        )
        counters.failed = True
        withdrawn = [replace(item, reason=reason) for item in plan.included]
        return replace(
            plan,
            mode="fallback",
            messages=[],
            included=[],
            excluded=[*withdrawn, *plan.excluded, *screened.dropped],
            estimated_tokens=fixed_tokens,
            fallback_reason=reason,
        )


def _counted_exclusions(stats: Mapping[str, Any], dropped: Sequence[PlanItem]) -> dict[str, Any]:
    """`stats` with the supplements privacy left out added to `counts.excluded`, so the
    manifest's count agrees with its `excluded` list."""
    out = dict(stats)
    counts = dict(out.get("counts") or {})
    if dropped and "excluded" in counts:
        counts["excluded"] = int(counts["excluded"]) + item_count(dropped)
        out["counts"] = counts
    return out


def counters_found(sanitizer: Sanitizer, screened: Screened) -> set[str]:
    """The secret values redacted anywhere in a plan: by `sanitizer` and while writing the
    kept supplements ahead (`Screened.found`)."""
    return sanitizer.found | screened.found


def sent_tokens(plan: ContextPlan, source_ids: Sequence[str | None]) -> dict[int, int]:
    """Index in the prepared messages -> tokens as sent, for the native messages of a managed
    `plan` (after `sanitize_plan`): a plan over the hard limit once placeholders and redaction
    markers are in is planned again with these sizes."""
    index_of = {
        (source_id if source_id else f"message:{i}"): i for i, source_id in enumerate(source_ids)
    }
    return {
        index_of[item.source_id]: item.tokens
        for item in plan.included
        if item.group_id is not None and item.source_id in index_of
    }


def _classified(
    plan: ContextPlan, levels: Sequence[str], source_ids: Sequence[str | None]
) -> list[PlanItem]:
    """The included items of `plan` with the classification of their message."""
    if plan.mode == "managed":
        if len(plan.included) != len(levels):
            return list(plan.included)
        return [
            item if item.classification == level else replace(item, classification=level)
            for item, level in zip(plan.included, levels, strict=True)
        ]
    by_source = {
        (source_ids[i] if i < len(source_ids) and source_ids[i] else f"message:{i}"): level
        for i, level in enumerate(levels)
    }
    return [
        replace(item, classification=by_source.get(item.source_id, item.classification))
        for item in plan.included
    ]


# --------------------------------------------------------------------------- sources


def source_levels(hits: Sequence[Any]) -> dict[str, str]:
    """Entry key -> the level of the whole text each history hit was cut from
    (`retrieval.HistoryHit.source_level`), for `screen_supplements` and `sanitize_hits`."""
    return {hit.entry_key: hit.source_level for hit in hits}


def source_secrets(hits: Sequence[Any]) -> dict[str, tuple[str, ...]]:
    """Entry key -> the secret lines of the whole text each history hit was cut from
    (`retrieval.HistoryHit.source_secrets`), for `screen_supplements` and `sanitize_hits`."""
    return {hit.entry_key: hit.source_secrets for hit in hits if hit.source_secrets}


class SnippetLevels:
    """The level of project snippets judged on their whole file (`markers.line_span_level`):
    a block opened above the snippet's lines, or a leading marker at the top of the file, still
    classifies it. Files are read through `read(hit)` (an open buffer's text, else the file on
    disk; None when unreadable: the snippet is then withheld as `local-only`) and remembered by
    (folder, path, file hash), at most `MAX_FILES`. Thread-safe."""

    MAX_FILES = 512

    def __init__(self) -> None:
        self._files: OrderedDict[tuple[str | None, str, str], str | None] = OrderedDict()
        self._lock = threading.Lock()

    def levels(
        self,
        hits: Sequence[ProjectHit] | Sequence[Any],
        read: Callable[[Any], str | None],
        default: Level,
    ) -> dict[str, str]:
        """Snippet id -> level of each of `hits`."""
        found: dict[str, str] = {}
        for hit in hits:
            text = self._text(hit, read)
            found[hit.snippet_id] = (
                "local-only"
                if text is None
                else line_span_level(text, hit.start_line, hit.end_line, default)
            )
        return found

    def _text(self, hit: Any, read: Callable[[Any], str | None]) -> str | None:
        key = (hit.folder, hit.path, hit.file_hash)
        with self._lock:
            if key in self._files:
                self._files.move_to_end(key)
                cached = self._files[key]
                return "" if cached is None else cached
        text = read(hit)
        if text is None:
            return None
        marked = text if has_marker(text) else None  # unmarked files: nothing to remember
        with self._lock:
            self._files[key] = marked
            while len(self._files) > self.MAX_FILES:
                self._files.popitem(last=False)
        return text


SNIPPET_LEVELS = SnippetLevels()
"""The process's snippet classification cache."""


# --------------------------------------------------------------------------- hits

HIT_TEXT_FIELDS: dict[type, tuple[str, ...]] = {
    HistoryHit: ("excerpt", "reason"),
    ProjectHit: ("text", "reason"),
    CommitHit: ("subject", "quoted", "reason"),
}
"""The fields of each retrieved hit type that carry quoted or request text."""


def sanitize_hits(
    sanitizer: Sanitizer,
    hits: Sequence[Any],
    *,
    rewrite: bool,
    key: Callable[[Any], str] | None = None,
    floors: Mapping[str, str] | None = None,
    secrets: Mapping[str, Sequence[str]] | None = None,
) -> tuple[Any, ...]:
    """Retrieved hits (frozen dataclasses of `results`) classified, and, when `rewrite`, written
    for the sanitizer's destination: a hit holding a withheld level is left out (counted in
    `excluded`), the others have their markers removed and secrets redacted. Without
    `rewrite` (no destination named) hits keep their text and only gain `classification`.
    `floors[key(hit)]` is the least level of a hit and `secrets[key(hit)]` the secret lines of
    the text it was cut from."""
    if not sanitizer.target.enabled:
        return tuple(hits)
    counters = sanitizer.counters
    out = []
    for hit in hits:
        fields = HIT_TEXT_FIELDS[type(hit)]
        texts = [getattr(hit, name) for name in fields]
        name = key(hit) if key is not None else ""
        floor = (floors or {}).get(name, "normal")
        known = (secrets or {}).get(name, ())
        admitted, level = sanitizer.admits(texts, floor)
        counters.count(counters.classified, level)
        if not rewrite:
            out.append(replace(hit, classification=level))
        elif not admitted:
            counters.count(counters.excluded, level)
        else:
            changes = {
                field_name: sanitizer.text(text, secrets=known)
                for field_name, text in zip(fields, texts, strict=True)
            }
            out.append(replace(hit, classification=level, **changes))
    return tuple(out)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True)
class SummaryPrivacy:
    """Privacy of one compaction: `prompt_span` is the span as the summarizer's destination may
    see it and `prompt_files` its (read, modified) file inventories, from its messages as
    written (both None when privacy is off); `level` the highest level of the
    span's text (an offline summary, written from the raw span, is wrapped in it);
    `client_level` the highest level the summarizer could see (its summary is wrapped in that);
    `instructions` the caller's custom instructions written for the destination;
    `failed` True when the sanitizer raised (then no prompt may go out: the offline summary is
    written)."""

    prompt_span: Span | None
    level: str
    client_level: str = "normal"
    prompt_files: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    instructions: str | None = None
    failed: bool = False


def summary_privacy(
    config: Config, provider: str | None, span: Span, instructions: str | None = None
) -> SummaryPrivacy:
    """What `ds4/summarize` may send to `provider` (the summarizer model's provider; None when
    unknown: remote) for `span` and the caller's `instructions`: its messages, previous
    summary and the instructions written for that destination. Never raises: a sanitizer
    failure gives `failed` (fail closed)."""
    sanitizer = Sanitizer(destination(config, provider))
    if not sanitizer.target.enabled:
        return SummaryPrivacy(None, "normal", instructions=instructions)
    try:
        raw = [span.messages, span.previous_summary]
        level = sanitizer.level_of(raw)
        shown = replace(
            span,
            messages=[sanitizer.message(m, count=False).value for m in span.messages],
            previous_summary=sanitizer.text(span.previous_summary),
        )
        read, modified = file_operations(shown.messages)
        raw_read, raw_modified = file_operations(span.messages)
        return SummaryPrivacy(
            shown,
            level,
            client_level=highest(
                sanitizer.visible_level(part) for part in (*span.messages, span.previous_summary)
            ),
            # only real paths: a withheld call's path argument became a placeholder
            prompt_files=(
                tuple(path for path in read if path in raw_read),
                tuple(path for path in modified if path in raw_modified),
            ),
            instructions=sanitizer.text(instructions) if instructions else instructions,
        )
    except Exception as exc:  # privacy fails closed: no prompt leaves
        log.warning(
            "privacy sanitizer failed for a summary prompt: error=%s", describe_failure(exc)
        )
        return SummaryPrivacy(None, "local-only", failed=True)
