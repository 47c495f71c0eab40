"""Token budgets for one model call (docs/reference.md §3.4) with adaptive ceilings (§3.5).

All numbers are `chars-v2` token estimates (`int`). The budget says how many input tokens a
plan may use (`hard_input_limit`, `target_input_tokens`) and how those tokens are shared out
between the verbatim recent tail, retrieved history, project snippets, summaries, pins and
memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ds4_core.config import Config

OVERRIDE_FIELDS = (
    "contextWindow",
    "maxOutputTokens",
    "safetyMarginTokens",
    "recentTailTokens",
    "maxRetrievedHistoryTokens",
    "maxProjectTokens",
)
"""Fields a `modelAwareness.overrides` entry may set (docs/reference.md §2)."""

AUTO_TUNE_BOOST = 1.125
"""`autoTune` raises the target and soft limit by this factor (docs/reference.md §3.5)."""

ADAPTIVE_CEILINGS: tuple[tuple[int | None, int, int, int], ...] = (
    (40_000, 12_000, 4_000, 4_000),
    (131_072, 24_000, 8_000, 12_000),
    (262_144, 32_000, 16_000, 20_000),
    (None, 64_000, 32_000, 32_000),
)
"""(largest window or None for "larger", recent tail, history, project) in tokens
(docs/reference.md §3.5, "Adaptive ceilings by context window")."""


@dataclass(frozen=True)
class ModelProfile:
    """The model a plan is made for.

    `context_window` and `max_output_tokens` are tokens; `max_output_tokens` is None when
    unknown (the preferred output reserve is used instead). `source` says where the numbers
    came from, e.g. "request", "override", "models-table", "session".
    """

    provider: str
    model_id: str
    context_window: int
    max_output_tokens: int | None = None
    source: str = "request"


@dataclass(frozen=True)
class ContextBudget:
    """Token limits of one plan (docs/reference.md §3.4, §3.5); every field is in tokens.

    `hard_input_limit` is the most the input (system prompt, tools and messages) may use;
    `soft_limit` <= hard; `target_input_tokens` is the preferred fill, never above hard;
    `active_input_budget` is what the planner fills up to (equal to the target here; a cache-
    aware policy may lower it). The `max_*` fields and `recent_tail_tokens` are per-category
    caps for message content. `calibration_ratio` is the applied actual/estimated ratio
    (1.0 when uncalibrated); `auto_tuned` says the target and soft limit were raised by
    `autoTune` (docs/model-awareness.md).
    """

    context_window: int
    output_reserve: int
    safety_margin: int
    hard_input_limit: int
    soft_limit: int
    target_input_tokens: int
    active_input_budget: int
    recent_tail_tokens: int
    max_retrieved_history_tokens: int
    max_project_tokens: int
    max_summary_tokens: int
    max_pinned_tokens: int
    max_memory_tokens: int
    calibration_ratio: float = 1.0
    auto_tuned: bool = False

    def to_json(self) -> dict[str, Any]:
        """The budget in wire shape (camelCase keys), as `ds4/plan` and manifests carry it."""
        return {
            "contextWindow": self.context_window,
            "outputReserve": self.output_reserve,
            "safetyMargin": self.safety_margin,
            "hardInputLimit": self.hard_input_limit,
            "softLimit": self.soft_limit,
            "targetInputTokens": self.target_input_tokens,
            "activeInputBudget": self.active_input_budget,
            "recentTailTokens": self.recent_tail_tokens,
            "maxRetrievedHistoryTokens": self.max_retrieved_history_tokens,
            "maxProjectTokens": self.max_project_tokens,
            "maxSummaryTokens": self.max_summary_tokens,
            "maxPinnedTokens": self.max_pinned_tokens,
            "maxMemoryTokens": self.max_memory_tokens,
            "calibrationRatio": self.calibration_ratio,
            "autoTuned": self.auto_tuned,
        }


def _override_keys(provider: str, model_id: str) -> tuple[str, ...]:
    return ("*", f"{provider}/*", f"{provider}/{model_id}")


def resolve_overrides(config: Config, provider: str, model_id: str) -> dict[str, int]:
    """Merge the `modelAwareness.overrides` entries that apply to `provider/model_id`.

    Entries are applied in the order `*`, `provider/*`, `provider/model_id`, later ones winning
    field by field (docs/reference.md §3.5). Only the fields of `OVERRIDE_FIELDS` are kept
    (config validation admits no others and only integers). The result does not depend on
    `modelAwareness.enabled`; `calculate_budget` checks that. Never raises.
    """
    overrides = config.model_awareness.overrides
    merged: dict[str, int] = {}
    for key in _override_keys(provider, model_id):
        entry = overrides.get(key, {})
        for name in OVERRIDE_FIELDS:
            value = entry.get(name)
            if isinstance(value, int) and not isinstance(value, bool):
                merged[name] = value
    return merged


def auto_tune_enabled(config: Config, provider: str, model_id: str) -> bool:
    """Whether `autoTune` is on for `provider/model_id`: the `modelAwareness.overrides` entries
    `*`, `provider/*`, `provider/model_id` in that order, the last one naming it winning; off
    when none does or `modelAwareness.enabled` is off."""
    if not config.model_awareness.enabled:
        return False
    overrides = config.model_awareness.overrides
    enabled = False
    for key in _override_keys(provider, model_id):
        value = overrides.get(key, {}).get("autoTune")
        if isinstance(value, bool):
            enabled = value
    return enabled


def adaptive_ceilings(context_window: int) -> tuple[int, int, int]:
    """(recent tail, history, project) ceilings in tokens for a window (docs/reference.md §3.5)."""
    for largest, tail, history, project in ADAPTIVE_CEILINGS:
        if largest is None or context_window <= largest:
            return tail, history, project
    raise AssertionError("unreachable: the last ceiling row has no upper bound")


def default_safety_margin(context_window: int) -> int:
    """min(8192, max(1024, ceil(0.02 x window))) tokens (docs/reference.md §3.4)."""
    return min(8192, max(1024, math.ceil(0.02 * context_window)))


def calculate_budget(
    profile: ModelProfile,
    config: Config,
    calibration_ratio: float = 1.0,
    *,
    auto_tune: bool = False,
) -> ContextBudget:
    """Compute the token budget of one call (docs/reference.md §3.4, ceilings of §3.5).

    - output ceiling = `profile.max_output_tokens` or `context.preferredOutputReserve`;
      reserve = max(min(minimum, ceiling), min(preferred, ceiling)).
    - safety margin = override `safetyMarginTokens` or the default of `default_safety_margin`,
      capped at window - reserve (and at least 0).
    - hard = min(window - reserve - margin, floor(window x hardLimitRatio)); soft and target
      use their ratios and never exceed hard. All three are divided by max(1, calibration
      ratio): calibration only ever shrinks limits. With `auto_tune` (the caller decided, see
      `calibration.auto_tune_applies`), soft and target are then multiplied by 1.125, never
      past hard (docs/reference.md §3.5, "autoTune").
    - With `modelAwareness.enabled`, the recent tail, history and project caps are
      min(config, floor(nominal / max(1, r))) with nominal = the override or
      min(config, ceiling for the window); without it they are the config values.
      The override fields `contextWindow` / `maxOutputTokens` are not applied here: they
      describe the model and belong in the `ModelProfile` (see `profile_with_overrides`).

    Example: a 200,000-token window, 32,000 output reserve and 4,000 margin give
    hard = 164,000 and target = 140,000.

    Raises:
        ValueError: if `profile.context_window` is not a positive integer, or
            `profile.max_output_tokens` is negative, or `calibration_ratio` is not a positive
            finite number.
    """
    window = profile.context_window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(
            f"model {profile.provider}/{profile.model_id}: context window {window!r} must be a "
            "positive integer number of tokens"
        )
    if profile.max_output_tokens is not None and profile.max_output_tokens < 0:
        raise ValueError(
            f"model {profile.provider}/{profile.model_id}: maxOutputTokens "
            f"{profile.max_output_tokens!r} must not be negative"
        )
    if not (isinstance(calibration_ratio, int | float) and math.isfinite(calibration_ratio)) or (
        calibration_ratio <= 0
    ):
        raise ValueError(f"calibration ratio {calibration_ratio!r} must be a positive number")

    aware = config.model_awareness.enabled
    overrides = resolve_overrides(config, profile.provider, profile.model_id) if aware else {}
    shrink = max(1.0, float(calibration_ratio))

    minimum_reserve = config.context.minimum_output_reserve
    preferred_reserve = config.context.preferred_output_reserve
    ceiling = (
        profile.max_output_tokens if profile.max_output_tokens is not None else preferred_reserve
    )
    reserve = max(min(minimum_reserve, ceiling), min(preferred_reserve, ceiling))

    margin = overrides.get("safetyMarginTokens", default_safety_margin(window))
    margin = max(0, min(margin, window - reserve))

    model_hard = max(0, window - reserve - margin)
    nominal_hard = min(model_hard, math.floor(window * config.context.hard_limit_ratio))
    nominal_soft = min(nominal_hard, math.floor(window * config.context.soft_limit_ratio))
    nominal_preferred = math.floor(window * config.context.target_fill_ratio)

    hard = math.floor(nominal_hard / shrink)
    soft = min(hard, math.floor(nominal_soft / shrink))
    target = min(hard, math.floor(nominal_preferred / shrink))
    if auto_tune:
        soft = min(hard, math.floor(soft * AUTO_TUNE_BOOST))
        target = min(hard, math.floor(target * AUTO_TUNE_BOOST))

    config_tail = config.context.recent_tail_tokens
    config_history = config.context.max_retrieved_history_tokens
    config_project = config.context.max_project_tokens
    if aware:
        tail_ceiling, history_ceiling, project_ceiling = adaptive_ceilings(window)

        def effective(config_value: int, ceiling_value: int, override_key: str) -> int:
            nominal = overrides.get(override_key, min(config_value, ceiling_value))
            return min(config_value, math.floor(nominal / shrink))

        tail = effective(config_tail, tail_ceiling, "recentTailTokens")
        history = effective(config_history, history_ceiling, "maxRetrievedHistoryTokens")
        project = effective(config_project, project_ceiling, "maxProjectTokens")
    else:
        tail, history, project = config_tail, config_history, config_project

    return ContextBudget(
        context_window=window,
        output_reserve=reserve,
        safety_margin=margin,
        hard_input_limit=hard,
        soft_limit=soft,
        target_input_tokens=target,
        active_input_budget=target,
        recent_tail_tokens=tail,
        max_retrieved_history_tokens=history,
        max_project_tokens=project,
        max_summary_tokens=config.context.max_summary_tokens,
        max_pinned_tokens=config.context.max_pinned_tokens,
        max_memory_tokens=config.context.max_memory_tokens,
        calibration_ratio=round(float(calibration_ratio), 6),
        auto_tuned=auto_tune,
    )


def profile_with_overrides(profile: ModelProfile, config: Config) -> ModelProfile:
    """`profile` with the `contextWindow` / `maxOutputTokens` overrides applied.

    Uses `resolve_overrides` (order `*`, `provider/*`, `provider/model`; docs/reference.md §3.5)
    only when `modelAwareness.enabled`. When an override changes a number, `source` becomes
    "override". A `maxOutputTokens` above the resulting window is capped at the window.
    """
    if not config.model_awareness.enabled:
        return profile
    overrides = resolve_overrides(config, profile.provider, profile.model_id)
    window = overrides.get("contextWindow", profile.context_window)
    output = overrides.get("maxOutputTokens", profile.max_output_tokens)
    if output is not None:
        output = min(output, window)
    if window == profile.context_window and output == profile.max_output_tokens:
        return profile
    return ModelProfile(profile.provider, profile.model_id, window, output, "override")
