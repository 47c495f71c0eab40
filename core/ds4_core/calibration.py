"""Token calibration (DS4 M11, docs/model-awareness.md; rules of docs/reference.md §3.5).

The token estimator (`tokens.ESTIMATOR_VERSION`) counts characters, so its estimate of a
model call is off by a factor that depends on the model's tokenizer and on what the caller
leaves out of `fixedTokens`. When a provider reports what a call really cost (`ds4/usage`),
the pair (estimated, actual) becomes a sample of its exact provider, model and estimator
version. This module turns a profile's samples into the ratio its budgets are divided by:

- actual = input + cacheRead + cacheWrite (every input token the provider counted);
  ratio = actual / estimated;
- the newest `calibrationWindow` samples are read; ratios outside
  [`calibrationRatioLowerBound`, `calibrationRatioUpperBound`] are outliers;
- center = the median of the rest, MAD their median absolute deviation,
  tolerance = max(0.05, 0.1 x center, 3 x 1.4826 x MAD); a ratio within tolerance of the center
  is accepted, any other is an outlier;
- with `minimumCalibrationSamples` accepted, the applied ratio is their median, clamped to the
  bounds and rounded to 6 decimals; before that it is 1.0;
- drift warnings once calibrated: `persistent-underestimate` at a ratio >= 1.25 (critical at
  >= 1.6), `persistent-overestimate` at <= 0.8 (critical at <= 0.625); `calibration-outliers`
  when outliers reach `minimumCalibrationSamples`.

Pure: no I/O. The samples live in `store/calibration.py`; `engine/usage.py` records them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .config import Config

UNDERESTIMATE = 1.25
UNDERESTIMATE_CRITICAL = 1.6
OVERESTIMATE = 0.8
OVERESTIMATE_CRITICAL = 0.625
"""Drift thresholds on the applied ratio (docs/reference.md §3.5)."""

MIN_TOLERANCE = 0.05
RELATIVE_TOLERANCE = 0.1
MAD_TOLERANCE = 3 * 1.4826
"""tolerance = max(MIN_TOLERANCE, RELATIVE_TOLERANCE x center, MAD_TOLERANCE x MAD): 1.4826
scales a median absolute deviation to a standard deviation for normal data, so three of them
is the usual robust outlier cut (docs/reference.md §3.5)."""

AUTO_TUNE_SAMPLES = 8
AUTO_TUNE_FILL = 0.6
"""`autoTune`: with 8 accepted samples whose largest actual input is at most 0.6 of the target,
the target and soft limit grow by `planner.budget.AUTO_TUNE_BOOST`, never past the hard limit
(docs/reference.md §3.5)."""


@dataclass(frozen=True)
class Sample:
    """One usage report matched with its plan's estimate. Every count is tokens; `actual` =
    `input` + `cache_read` + `cache_write` > 0 and `estimated` > 0 (the plan's
    `estimatedTokens`, `fixedTokens` included)."""

    estimated: int
    actual: int
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def ratio(self) -> float:
        """actual / estimated."""
        return self.actual / self.estimated


@dataclass(frozen=True)
class DriftWarning:
    """One calibration warning: `code` (`persistent-underestimate`, `persistent-overestimate`,
    `calibration-outliers`), `severity` (`warning` or `critical`) and a sentence for people."""

    code: str
    severity: str
    message: str

    def to_wire(self) -> dict[str, str]:
        """`{code, severity, message}`."""
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass(frozen=True)
class CalibrationSettings:
    """The `modelAwareness.*` values calibration uses (see `settings_of`)."""

    enabled: bool = True
    window: int = 24
    minimum: int = 3
    lower: float = 0.5
    upper: float = 2.0


def settings_of(config: Config) -> CalibrationSettings:
    """The calibration settings of `config` (`modelAwareness.enabled`, `calibrationWindow`,
    `minimumCalibrationSamples`, `calibrationRatioLowerBound` / `UpperBound`)."""
    aware = config.model_awareness
    return CalibrationSettings(
        enabled=aware.enabled,
        window=aware.calibration_window,
        minimum=aware.minimum_calibration_samples,
        lower=aware.calibration_ratio_lower_bound,
        upper=aware.calibration_ratio_upper_bound,
    )


@dataclass(frozen=True)
class Calibration:
    """A profile's calibration: `ratio` is what budgets are divided by (1.0 until
    `calibrated`); `samples` counts the window's samples, `accepted` and `outliers` split them,
    and `minimum` accepted ones are needed to calibrate (`minimumCalibrationSamples`); `cache_share`
    is cacheRead over actual input across the window (None when nothing was read);
    `max_actual` the largest accepted actual input (tokens, 0 without any)."""

    provider: str
    model: str
    estimator_version: str
    ratio: float = 1.0
    calibrated: bool = False
    samples: int = 0
    accepted: int = 0
    outliers: int = 0
    minimum: int = 3
    cache_share: float | None = None
    max_actual: int = 0
    warnings: tuple[DriftWarning, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """`{provider, model, estimatorVersion, ratio, calibrated, samples, accepted, outliers,
        minimumSamples, cacheShare, warnings[]}` (docs/protocol.md, manifest `modelAwareness.calibration`)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "estimatorVersion": self.estimator_version,
            "ratio": self.ratio,
            "calibrated": self.calibrated,
            "samples": self.samples,
            "accepted": self.accepted,
            "outliers": self.outliers,
            "minimumSamples": self.minimum,
            "cacheShare": self.cache_share,
            "warnings": [warning.to_wire() for warning in self.warnings],
        }


def cache_share(cache_read: int, actual: int) -> float | None:
    """cacheRead / actual input, 4 decimals; None when `actual` is 0. How much of the prompt
    the provider served from its cache: near 0 means prompt caching is not working."""
    if actual <= 0:
        return None
    return round(min(1.0, max(0.0, cache_read / actual)), 4)


def calibrate(
    provider: str,
    model: str,
    estimator_version: str,
    samples: Sequence[Sample],
    settings: CalibrationSettings,
) -> Calibration:
    """The calibration of one profile from its samples, newest first (only the first
    `settings.window` are read). See the module docstring for the rules. Never raises."""
    window = list(samples[: settings.window])
    kept = [s.ratio for s in window if settings.lower <= s.ratio <= settings.upper]
    accepted: list[Sample] = []
    if kept:
        center = statistics.median(kept)
        mad = statistics.median(abs(r - center) for r in kept)
        tolerance = max(MIN_TOLERANCE, RELATIVE_TOLERANCE * center, MAD_TOLERANCE * mad)
        accepted = [
            s
            for s in window
            if settings.lower <= s.ratio <= settings.upper and abs(s.ratio - center) <= tolerance
        ]
    outliers = len(window) - len(accepted)
    median = statistics.median(s.ratio for s in accepted) if accepted else None
    calibrated = settings.enabled and len(accepted) >= settings.minimum
    ratio = 1.0
    if calibrated and median is not None:
        ratio = round(min(settings.upper, max(settings.lower, median)), 6)
    actual = sum(s.actual for s in window)
    return Calibration(
        provider=provider,
        model=model,
        estimator_version=estimator_version,
        ratio=ratio,
        calibrated=calibrated,
        samples=len(window),
        accepted=len(accepted),
        outliers=outliers,
        minimum=settings.minimum,
        cache_share=cache_share(sum(s.cache_read for s in window), actual),
        max_actual=max((s.actual for s in accepted), default=0),
        warnings=_warnings(ratio if calibrated else None, outliers, len(window), settings),
    )


def _warnings(
    ratio: float | None, outliers: int, samples: int, settings: CalibrationSettings
) -> tuple[DriftWarning, ...]:
    found: list[DriftWarning] = []
    if ratio is not None and ratio >= UNDERESTIMATE:
        severity = "critical" if ratio >= UNDERESTIMATE_CRITICAL else "warning"
        found.append(
            DriftWarning(
                "persistent-underestimate",
                severity,
                f"the provider counts {ratio:.2f}x the estimated input tokens; budgets are "
                "divided by that ratio (is fixedTokens missing the system prompt or tools?)",
            )
        )
    elif ratio is not None and ratio <= OVERESTIMATE:
        severity = "critical" if ratio <= OVERESTIMATE_CRITICAL else "warning"
        found.append(
            DriftWarning(
                "persistent-overestimate",
                severity,
                f"the provider counts only {ratio:.2f}x the estimated input tokens; budgets stay "
                "at nominal (calibration never raises them; autoTune in modelAwareness.overrides "
                "adds up to 12.5% for a model whose calls stay small)",
            )
        )
    if settings.enabled and outliers >= settings.minimum:
        found.append(
            DriftWarning(
                "calibration-outliers",
                "warning",
                f"{outliers} of the last {samples} usage reports were outside the ratio bounds "
                f"[{settings.lower:g}, {settings.upper:g}] or far from the others (reports for "
                "another model or request, or bounds that exclude this model's real ratio?)",
            )
        )
    return tuple(found)


def auto_tune_applies(calibration: Calibration, target_input_tokens: int) -> bool:
    """Whether `autoTune` may raise a profile's target: calibrated with at least
    `AUTO_TUNE_SAMPLES` accepted samples, none of which used more than `AUTO_TUNE_FILL` of the
    nominal target (tokens). The caller checks that `autoTune` is on for the profile."""
    return (
        calibration.calibrated
        and calibration.accepted >= AUTO_TUNE_SAMPLES
        and target_input_tokens > 0
        and calibration.max_actual <= AUTO_TUNE_FILL * target_input_tokens
    )
