"""Budgets (docs/reference.md §3.4) and adaptive ceilings / overrides (§3.5)."""

from __future__ import annotations

import pytest

from ds4_core.config import DEFAULT_CONFIG, Config
from ds4_core.planner import (
    ModelProfile,
    calculate_budget,
    profile_with_overrides,
    resolve_overrides,
)


def configured(**settings: object) -> Config:
    config, warnings = DEFAULT_CONFIG.with_settings(settings)
    assert warnings == []
    return config


def test_worked_example_200k_window_gives_hard_164k_and_target_140k() -> None:
    profile = ModelProfile("anthropic", "claude", 200_000, max_output_tokens=32_000)
    budget = calculate_budget(profile, DEFAULT_CONFIG)
    assert budget.output_reserve == 32_000
    assert budget.safety_margin == 4_000
    assert budget.hard_input_limit == 164_000
    assert budget.target_input_tokens == 140_000
    assert budget.active_input_budget == 140_000
    assert budget.soft_limit == 160_000


def test_unknown_output_limit_reserves_the_preferred_reserve() -> None:
    budget = calculate_budget(ModelProfile("p", "m", 200_000), DEFAULT_CONFIG)
    assert budget.output_reserve == 32_768


def test_small_output_limit_caps_the_reserve() -> None:
    budget = calculate_budget(
        ModelProfile("p", "m", 200_000, max_output_tokens=4_096), DEFAULT_CONFIG
    )
    assert budget.output_reserve == 4_096


@pytest.mark.parametrize(
    ("window", "margin"),
    [(10_000, 1_024), (200_000, 4_000), (1_000_000, 8_192)],
)
def test_default_safety_margin_is_two_percent_between_1024_and_8192(
    window: int, margin: int
) -> None:
    budget = calculate_budget(
        ModelProfile("p", "m", window, max_output_tokens=1_000), DEFAULT_CONFIG
    )
    assert budget.safety_margin == margin


def test_safety_margin_never_exceeds_what_the_reserve_leaves() -> None:
    budget = calculate_budget(
        ModelProfile("p", "m", 2_000, max_output_tokens=1_500), DEFAULT_CONFIG
    )
    assert budget.safety_margin == 500
    assert budget.hard_input_limit == 0


def test_window_smaller_than_the_reserve_gives_a_zero_hard_limit_not_a_negative_one() -> None:
    budget = calculate_budget(ModelProfile("p", "m", 4_096), DEFAULT_CONFIG)
    assert budget.hard_input_limit == 0
    assert budget.target_input_tokens == 0


def test_calibration_only_shrinks_limits() -> None:
    profile = ModelProfile("p", "m", 200_000, max_output_tokens=32_000)
    nominal = calculate_budget(profile, DEFAULT_CONFIG)
    shrunk = calculate_budget(profile, DEFAULT_CONFIG, calibration_ratio=1.25)
    low = calculate_budget(profile, DEFAULT_CONFIG, calibration_ratio=0.5)
    assert shrunk.hard_input_limit == 131_200  # floor(164000 / 1.25)
    assert shrunk.target_input_tokens == 112_000
    assert shrunk.recent_tail_tokens == 25_600  # floor(32000 / 1.25)
    assert low.hard_input_limit == nominal.hard_input_limit
    assert low.target_input_tokens == nominal.target_input_tokens
    assert low.calibration_ratio == 0.5


@pytest.mark.parametrize(
    ("window", "tail", "history", "project"),
    [
        (40_000, 12_000, 4_000, 4_000),
        (40_001, 24_000, 8_000, 12_000),
        (131_072, 24_000, 8_000, 12_000),
        (131_073, 32_000, 16_000, 20_000),
        (262_144, 32_000, 16_000, 20_000),
        # Larger windows: ceilings 64k/32k/32k, but the config values (64k/16k/20k) still cap.
        (262_145, 64_000, 16_000, 20_000),
    ],
)
def test_adaptive_ceilings_follow_the_window(
    window: int, tail: int, history: int, project: int
) -> None:
    budget = calculate_budget(
        ModelProfile("p", "m", window, max_output_tokens=1_000), DEFAULT_CONFIG
    )
    assert (budget.recent_tail_tokens, budget.max_retrieved_history_tokens) == (tail, history)
    assert budget.max_project_tokens == project


def test_without_model_awareness_the_config_values_apply() -> None:
    config = configured(
        **{
            "modelAwareness.enabled": False,
            "modelAwareness.overrides": {"*": {"recentTailTokens": 1_000}},
        }
    )
    budget = calculate_budget(ModelProfile("p", "m", 32_000, max_output_tokens=1_000), config)
    assert budget.recent_tail_tokens == 64_000
    assert budget.max_retrieved_history_tokens == 16_000
    assert budget.max_project_tokens == 20_000


def test_overrides_merge_star_then_provider_then_exact_model() -> None:
    config = configured(
        **{
            "modelAwareness.overrides": {
                "anthropic/claude": {"recentTailTokens": 30_000},
                "*": {"recentTailTokens": 10_000, "maxProjectTokens": 1_000},
                "anthropic/*": {"recentTailTokens": 20_000, "safetyMarginTokens": 500},
            }
        }
    )
    assert resolve_overrides(config, "anthropic", "claude") == {
        "recentTailTokens": 30_000,
        "maxProjectTokens": 1_000,
        "safetyMarginTokens": 500,
    }
    assert resolve_overrides(config, "anthropic", "haiku")["recentTailTokens"] == 20_000
    assert resolve_overrides(config, "openai", "gpt")["recentTailTokens"] == 10_000
    budget = calculate_budget(ModelProfile("anthropic", "claude", 200_000, 32_000), config)
    assert budget.recent_tail_tokens == 30_000
    assert budget.max_project_tokens == 1_000
    assert budget.safety_margin == 500
    assert budget.hard_input_limit == 167_500


def test_an_override_lifts_the_ceiling_but_not_the_configured_maximum() -> None:
    profile = ModelProfile("p", "m", 100_000, max_output_tokens=8_000)  # ceiling: tail 24k
    lifted = configured(**{"modelAwareness.overrides": {"p/m": {"recentTailTokens": 60_000}}})
    too_far = configured(**{"modelAwareness.overrides": {"p/m": {"recentTailTokens": 90_000}}})
    assert calculate_budget(profile, DEFAULT_CONFIG).recent_tail_tokens == 24_000
    assert calculate_budget(profile, lifted).recent_tail_tokens == 60_000
    assert calculate_budget(profile, too_far).recent_tail_tokens == 64_000


def test_profile_overrides_replace_window_and_output_and_say_so() -> None:
    config = configured(
        **{
            "modelAwareness.overrides": {
                "local/*": {"contextWindow": 32_768, "maxOutputTokens": 4_096}
            }
        }
    )
    profile = profile_with_overrides(ModelProfile("local", "qwen", 8_192), config)
    assert (profile.context_window, profile.max_output_tokens, profile.source) == (
        32_768,
        4_096,
        "override",
    )
    untouched = ModelProfile("openai", "gpt", 128_000)
    assert profile_with_overrides(untouched, config) is untouched


@pytest.mark.parametrize("window", [0, -5, True])
def test_a_non_positive_window_is_rejected_with_the_model_named(window: int) -> None:
    with pytest.raises(ValueError, match="p/m: context window"):
        calculate_budget(ModelProfile("p", "m", window), DEFAULT_CONFIG)


def test_a_non_positive_calibration_ratio_is_rejected() -> None:
    with pytest.raises(ValueError, match="calibration ratio"):
        calculate_budget(ModelProfile("p", "m", 10_000), DEFAULT_CONFIG, calibration_ratio=0)


def test_budget_wire_shape_is_camel_case() -> None:
    wire = calculate_budget(ModelProfile("p", "m", 200_000, 32_000), DEFAULT_CONFIG).to_json()
    assert wire["hardInputLimit"] == 164_000
    assert wire["targetInputTokens"] == 140_000
    assert all("_" not in key for key in wire)
