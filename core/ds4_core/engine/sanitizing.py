"""Privacy for plans: the destination of a plan, supplements screened before planning, and the
planned messages written for the destination after it (docs/privacy.md).

Order of one plan: `plan_destination` resolves who receives the request; `screen_supplements`
drops every supplement that holds withheld content (kept ones are written for the destination
and carry their level); `withheld_summaries` names the summary messages the planner must leave
out; after planning `sanitize_plan` rewrites the native turns (placeholders, redaction) and
classifies the manifest items. Privacy fails closed: `sanitize_plan` turns any exception into
an empty request with a fallback reason, never the raw messages.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..compaction.span import Span
from ..config import Config
from ..logs import describe_failure
from ..planner import ContextPlan, ModelProfile, PlanItem, Supplement
from ..planner.groups import SUMMARY_ROLES
from ..privacy.policy import Destination, destination
from ..privacy.sanitizer import PRIVACY_EXCLUSION_REASON, Sanitizer
from ..tokens import estimate_message_tokens

log = logging.getLogger("ds4_core.engine")

UNKNOWN_PROVIDER = "unknown"
"""The provider a profile names when neither the request nor the session named one
(`profiles.resolve_profile`); its destination is an unnamed remote one."""


def plan_destination(config: Config, profile: ModelProfile) -> Destination:
    """The destination of a plan: its model's provider (`model.provider` of the request, else
    the session's current model); an unknown provider is treated as remote."""
    provider = profile.provider if profile.provider != UNKNOWN_PROVIDER else None
    return destination(config, provider)


def screen_supplements(
    sanitizer: Sanitizer, supplements: Sequence[Supplement]
) -> tuple[list[Supplement], list[PlanItem], dict[int, str]]:
    """Split `supplements` into those the destination may receive and those it may not.

    Returns `(kept, dropped, levels)`: `kept` are new supplements whose message is written for
    the destination (markers removed, secrets redacted) with their `classification` and
    re-estimated `tokens`; `dropped` are excluded manifest items (metadata only, reason
    `excluded due to privacy policy`); `levels` maps `id()` of each kept message to its level
    (for `sanitize_plan`, which leaves those messages as they are).
    """
    kept: list[Supplement] = []
    dropped: list[PlanItem] = []
    levels: dict[int, str] = {}
    for supplement in supplements:
        admitted, level = sanitizer.admits(supplement.message)
        if not admitted:
            dropped.append(
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
        message = sanitizer.message(supplement.message, count=False).value
        levels[id(message)] = level
        kept.append(
            replace(
                supplement,
                message=message,
                tokens=estimate_message_tokens(message),
                classification=level,
            )
        )
    return kept, dropped, levels


def withheld_summaries(
    sanitizer: Sanitizer, messages: Sequence[Mapping[str, Any]]
) -> dict[int, tuple[str, str]]:
    """Index -> (reason, level) of each summary message (`compactionSummary`,
    `branchSummary`) that holds content the destination may not see: the planner leaves it out
    whole, as a supplement (docs/reference.md §3.8)."""
    if not sanitizer.target.enabled:
        return {}
    found: dict[int, tuple[str, str]] = {}
    for index, message in enumerate(messages):
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
    presanitized: Mapping[int, str],
    source_ids: Sequence[str | None],
    dropped: Sequence[PlanItem] = (),
) -> ContextPlan:
    """`plan` with its messages written for the sanitizer's destination.

    Messages in `presanitized` (by `id()`: kept supplements) are sent as they are; every other
    message is rewritten (`Sanitizer.message`). Items get the classification of their message
    (managed plans: items and messages are in the same order; observer and fallback plans send
    the caller's messages, whose source ids are `source_ids`), and `dropped` supplements join the
    excluded items. `estimated_tokens` is recomputed from the messages sent.

    Fails closed: any exception gives mode `fallback`, no messages and a `fallback_reason`
    saying that nothing was sent; every item is then excluded.
    """
    try:
        messages: list[dict[str, Any]] = []
        levels: list[str] = []
        for message in plan.messages:
            level = presanitized.get(id(message))
            if level is not None:
                sanitizer.counters.count(sanitizer.counters.classified, level)
                messages.append(message)
            else:
                sanitized = sanitizer.message(message)
                level = sanitized.level
                messages.append(sanitized.value)
            levels.append(level)
        included = _classified(plan, levels, source_ids)
        excluded = [*plan.excluded, *dropped]
        tokens = [estimate_message_tokens(message) for message in messages]
        if plan.mode == "managed" and len(included) == len(tokens):
            included = [replace(item, tokens=n) for item, n in zip(included, tokens, strict=True)]
        return replace(
            plan,
            messages=messages,
            included=included,
            excluded=excluded,
            estimated_tokens=fixed_tokens + sum(tokens),
        )
    except Exception as exc:  # privacy fails closed: nothing is sent
        log.warning("privacy sanitizer failed: error=%s", describe_failure(exc))
        reason = (
            f"privacy sanitizer failed ({type(exc).__name__}); nothing was sent: privacy fails "
            "closed"
        )
        withdrawn = [replace(item, reason=reason) for item in plan.included]
        return replace(
            plan,
            mode="fallback",
            messages=[],
            included=[],
            excluded=[*withdrawn, *plan.excluded, *dropped],
            estimated_tokens=fixed_tokens,
            fallback_reason=reason,
        )


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


HIT_TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "HistoryHit": ("excerpt",),
    "ProjectHit": ("text",),
    "CommitHit": ("subject", "quoted"),
}
"""The fields of each retrieved hit type that carry quoted text."""


def sanitize_hits(sanitizer: Sanitizer, hits: Sequence[Any], *, rewrite: bool) -> tuple[Any, ...]:
    """Retrieved hits (frozen dataclasses of `results`) classified, and, when `rewrite`, written
    for the sanitizer's destination: a hit holding a withheld level is left out (counted in
    `excluded`), the others have their markers removed and secrets redacted. Without
    `rewrite` (no destination named) hits keep their text and only gain `classification`.
    """
    if not sanitizer.target.enabled:
        return tuple(hits)
    out = []
    for hit in hits:
        fields = HIT_TEXT_FIELDS[type(hit).__name__]
        texts = [getattr(hit, name) for name in fields]
        if rewrite:
            admitted, level = sanitizer.admits(texts)
            if not admitted:
                continue
            changes: dict[str, Any] = {
                name: sanitizer.text(text) for name, text in zip(fields, texts, strict=True)
            }
        else:
            level = sanitizer.level_of(texts)
            changes = {}
        sanitizer.counters.count(sanitizer.counters.classified, level)
        out.append(replace(hit, classification=level, **changes))
    return tuple(out)


@dataclass(frozen=True)
class SummaryPrivacy:
    """Privacy of one compaction: `prompt_span` is the span as the summarizer's destination may
    see it (None when privacy is off), `level` the highest level of the span's text (the
    summary is wrapped in it), `failed` True when the sanitizer raised (then no prompt may go
    out: the offline summary is written)."""

    prompt_span: Span | None
    level: str
    failed: bool = False


def summary_privacy(config: Config, provider: str | None, span: Span) -> SummaryPrivacy:
    """What `ds4/summarize` may send to `provider` (the summarizer model's provider; None when
    unknown: remote) for `span`: its messages and previous summary written for that
    destination. Never raises: a sanitizer failure gives `failed` (fail closed)."""
    sanitizer = Sanitizer(destination(config, provider))
    if not sanitizer.target.enabled:
        return SummaryPrivacy(None, "normal")
    try:
        level = sanitizer.level_of([span.messages, span.previous_summary])
        shown = replace(
            span,
            messages=[sanitizer.message(m, count=False).value for m in span.messages],
            previous_summary=sanitizer.text(span.previous_summary),
        )
        return SummaryPrivacy(shown, level)
    except Exception as exc:  # privacy fails closed: no prompt leaves
        log.warning(
            "privacy sanitizer failed for a summary prompt: error=%s", describe_failure(exc)
        )
        return SummaryPrivacy(None, "local-only", failed=True)
