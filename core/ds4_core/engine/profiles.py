"""The model of a call and its token budget: which model a plan is for (request, then the
session's current model), its context window and output limit (request,
`modelAwareness.overrides`, the well-known table `ds4_core.models`, then the default), the
limits a request may give (`check_model`), and the budget (`planner.calculate_budget`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..calibration import Calibration, auto_tune_applies
from ..config import Config
from ..models import DEFAULT_CONTEXT_WINDOW, lookup_model
from ..planner import ContextBudget, ModelProfile, calculate_budget, resolve_overrides
from ..planner.budget import auto_tune_enabled
from ..requests import ModelSpec, RequestError

MAX_MODEL_TOKENS = 10_000_000
"""Largest context window or output limit accepted, as for `modelAwareness.overrides`
(docs/reference.md §2)."""


UNKNOWN = "unknown"
"""The provider (and model id) of a call that neither the request nor the session names."""


def check_model(model: ModelSpec) -> None:
    """Reject impossible model limits up front, naming the field.

    Raises:
        RequestError: `contextWindow` or `maxOutputTokens` outside 1..10,000,000.
    """
    for value, field_name in (
        (model.context_window, "model.contextWindow"),
        (model.max_output_tokens, "model.maxOutputTokens"),
    ):
        if value is not None and not 1 <= value <= MAX_MODEL_TOKENS:
            raise RequestError(
                f"{field_name}: expected a number of tokens in 1..{MAX_MODEL_TOKENS:,}", field_name
            )


def resolve_profile(
    spec: ModelSpec, session_model: tuple[str, str] | None, config: Config
) -> ModelProfile:
    """Fill the model of a call: request, then the session's current model (`(provider, id)`);
    the window from the request, `modelAwareness.overrides`, the well-known table, then the
    default. `ModelProfile.source` says where the window came from (`request`, `override`,
    `table:<key>`, `default`); the output limit (tokens) is capped at the window."""
    provider = spec.provider or (session_model[0] if session_model else None) or UNKNOWN
    model_id = spec.id or (session_model[1] if session_model else None) or UNKNOWN
    overrides = resolve_overrides(config, provider, model_id)
    known = lookup_model(model_id)
    if spec.context_window is not None:
        window, source = spec.context_window, "request"
    elif "contextWindow" in overrides:
        window, source = int(overrides["contextWindow"]), "override"
    elif known is not None:
        window, source = known.context_window, f"table:{known.key}"
    else:
        window, source = DEFAULT_CONTEXT_WINDOW, "default"
    max_output = spec.max_output_tokens
    if max_output is None:
        max_output = overrides.get("maxOutputTokens") or (
            known.max_output_tokens if known else None
        )
    if max_output is not None:
        max_output = min(int(max_output), window)
    return ModelProfile(
        provider=provider,
        model_id=model_id,
        context_window=window,
        max_output_tokens=max_output,
        source=source,
    )


CalibrationOf = Callable[[str, str], Calibration]
"""The calibration of `(provider, model)` for the current estimator (`engine/usage.py`)."""


def profile_and_budget(
    model: ModelSpec,
    session_model: tuple[str, str] | None,
    config: Config,
    warnings: list[str],
    calibration_of: CalibrationOf | None = None,
) -> tuple[ModelProfile, ContextBudget, Calibration | None]:
    """The model profile, budget and calibration of a call; appends a warning when the window
    is a guess. The budget's limits are divided by the profile's calibrated ratio (when it is
    above 1) and raised by `autoTune` when that applies (docs/model-awareness.md); without
    `calibration_of`, or for an unknown provider, the ratio is 1 and the calibration None."""
    profile = resolve_profile(model, session_model, config)
    if profile.source == "default":
        warnings.append(
            f"context window of model '{profile.provider}/{profile.model_id}' is unknown; "
            f"assumed {profile.context_window} tokens (set model.contextWindow, or "
            "--context-window on the command line, or modelAwareness.overrides)"
        )
    if calibration_of is None or profile.provider == UNKNOWN:
        return profile, calculate_budget(profile, config), None
    calibration = calibration_of(profile.provider, profile.model_id)
    budget = calculate_budget(profile, config, calibration.ratio)
    if auto_tune_enabled(config, profile.provider, profile.model_id):
        nominal = calculate_budget(profile, config)  # the gate compares with the nominal target
        if auto_tune_applies(calibration, nominal.target_input_tokens):
            budget = calculate_budget(profile, config, calibration.ratio, auto_tune=True)
    return profile, budget, calibration
