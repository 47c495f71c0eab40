"""Calibration from usage samples (`ds4_core.calibration`; rules of docs/model-awareness.md),
its storage (`store/calibration.py`, migration 10) and its settings."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.calibration import (
    Calibration,
    CalibrationSettings,
    Sample,
    auto_tune_applies,
    cache_share,
    calibrate,
)
from ds4_core.config import DEFAULT_CONFIG
from ds4_core.engine.profiles import profile_and_budget
from ds4_core.requests import ModelSpec
from ds4_core.results import PlanResult, UsageResult
from ds4_core.store import calibration as repo
from ds4_core.store import open_store

DEFAULTS = CalibrationSettings()


def samples(*ratios: float, estimated: int = 10_000) -> list[Sample]:
    """Samples with these actual/estimated ratios, newest first."""
    return [Sample(estimated, round(estimated * r), input=round(estimated * r)) for r in ratios]


def of(*ratios: float, config: CalibrationSettings = DEFAULTS) -> Calibration:
    return calibrate("p", "m", "chars-v2", samples(*ratios), config)


def test_uncalibrated_until_the_minimum_of_accepted_samples() -> None:
    assert of().ratio == 1.0 and not of().calibrated
    assert of(1.3, 1.3).ratio == 1.0 and of(1.3, 1.3).accepted == 2
    three = of(1.3, 1.31, 1.29)
    assert three.calibrated and three.ratio == 1.3 and three.samples == 3


def test_the_applied_ratio_is_the_median_of_accepted_rounded_to_six_decimals() -> None:
    found = of(1.1234567, 1.2, 1.15)
    assert found.ratio == round(statistics.median([1.1234567, 1.2, 1.15]), 6)


def test_a_ratio_outside_the_bounds_or_far_from_the_center_is_an_outlier() -> None:
    found = of(1.2, 1.21, 1.19, 2.5, 0.3, 1.9)
    assert found.accepted == 3 and found.outliers == 3 and found.ratio == 1.2
    assert [w.code for w in found.warnings] == ["calibration-outliers"]


def test_the_tolerance_widens_with_the_spread() -> None:
    """tolerance = max(0.05, 0.1 x center, 3 x 1.4826 x MAD): a wide, even spread keeps all."""
    spread = (0.9, 1.0, 1.1, 1.2, 1.3)
    assert of(*spread).accepted == 5


def test_only_the_newest_window_is_read() -> None:
    config = CalibrationSettings(window=4, minimum=3)
    found = of(1.0, 1.0, 1.0, 1.0, 1.8, 1.8, 1.8, config=config)
    assert found.samples == 4 and found.ratio == 1.0 and found.warnings == ()


@pytest.mark.parametrize(
    ("ratio", "code", "severity"),
    [
        (1.25, "persistent-underestimate", "warning"),
        (1.59, "persistent-underestimate", "warning"),
        (1.6, "persistent-underestimate", "critical"),
        (0.8, "persistent-overestimate", "warning"),
        (0.63, "persistent-overestimate", "warning"),
        (0.625, "persistent-overestimate", "critical"),
    ],
)
def test_drift_warnings_at_the_reference_thresholds(ratio: float, code: str, severity: str) -> None:
    [warning] = of(ratio, ratio, ratio).warnings
    assert (warning.code, warning.severity) == (code, severity)


@pytest.mark.parametrize("ratio", [0.81, 1.0, 1.24])
def test_no_drift_warning_in_between(ratio: float) -> None:
    assert of(ratio, ratio, ratio).warnings == ()


def test_turned_off_it_never_calibrates_nor_warns() -> None:
    off = of(1.7, 1.7, 1.7, config=CalibrationSettings(enabled=False))
    assert off.ratio == 1.0 and not off.calibrated and off.warnings == ()


def test_cache_share_is_reads_over_all_input() -> None:
    assert cache_share(900, 1000) == 0.9 and cache_share(0, 0) is None
    window = [Sample(100, 100, input=50, cache_read=50), Sample(100, 300, input=0, cache_read=300)]
    assert calibrate("p", "m", "v", window, DEFAULTS).cache_share == round(350 / 400, 4)


@settings(max_examples=200, deadline=None)
@given(
    ratios=st.lists(st.floats(0.05, 8.0, allow_nan=False), max_size=40),
    window=st.integers(3, 40),
    minimum=st.integers(1, 3),
)
def test_the_ratio_is_always_one_or_within_the_bounds(
    ratios: list[float], window: int, minimum: int
) -> None:
    config = CalibrationSettings(window=window, minimum=minimum)
    found = of(*ratios, config=config)
    assert found.samples == min(window, len(ratios))
    assert found.accepted + found.outliers == found.samples
    if found.calibrated:
        assert config.lower <= found.ratio <= config.upper
        assert found.accepted >= minimum
    else:
        assert found.ratio == 1.0


def test_a_calibrated_ratio_divides_the_budget_and_auto_tune_raises_it() -> None:
    spec = ModelSpec("anthropic", "claude-sonnet-4-5", 200_000)
    _, nominal, _ = profile_and_budget(spec, None, DEFAULT_CONFIG, [])
    under = of(1.4, 1.4, 1.4)
    _, budget, used = profile_and_budget(spec, None, DEFAULT_CONFIG, [], lambda p, m: under)
    assert used is under
    assert budget.target_input_tokens == int(nominal.target_input_tokens / 1.4)
    assert budget.hard_input_limit == int(nominal.hard_input_limit / 1.4)
    over = of(*[0.7] * 8, 0.7)  # overestimates never raise limits by themselves
    _, budget, _ = profile_and_budget(spec, None, DEFAULT_CONFIG, [], lambda p, m: over)
    assert budget.target_input_tokens == nominal.target_input_tokens and not budget.auto_tuned
    tuned, _ = DEFAULT_CONFIG.with_settings(
        {"modelAwareness": {"overrides": {"anthropic/*": {"autoTune": True}}}}
    )
    small = calibrate("anthropic", "claude-sonnet-4-5", "chars-v2", samples(*[0.7] * 9), DEFAULTS)
    assert auto_tune_applies(small, nominal.target_input_tokens)
    _, budget, _ = profile_and_budget(spec, None, tuned, [], lambda p, m: small)
    assert budget.auto_tuned
    assert budget.target_input_tokens == min(
        nominal.hard_input_limit, int(nominal.target_input_tokens * 1.125)
    )
    big = calibrate(
        "anthropic",
        "claude-sonnet-4-5",
        "chars-v2",
        samples(*[0.7] * 9, estimated=200_000),
        DEFAULTS,
    )
    assert not auto_tune_applies(big, nominal.target_input_tokens)  # calls used over 60%


def test_the_override_flag_is_validated() -> None:
    _, warnings = DEFAULT_CONFIG.with_settings(
        {"modelAwareness": {"overrides": {"p/*": {"autoTune": "yes"}}}}
    )
    assert warnings and "'p/*'.autoTune: expected true or false" in warnings[0]


@pytest.mark.parametrize(
    ("setting", "rule"),
    [
        (
            {"minimumCalibrationSamples": 30},
            "minimumCalibrationSamples must be <= calibrationWindow",
        ),
        ({"calibrationRatioLowerBound": 2.5}, "calibrationRatioLowerBound must be <"),
        ({"calibrationWindow": 2}, "expected an integer >= 3"),
        ({"calibrationRatioUpperBound": 5}, "expected a number in 0.25..4.0"),
    ],
)
def test_calibration_settings_are_checked_across_fields(setting: dict, rule: str) -> None:
    config, warnings = DEFAULT_CONFIG.with_settings({"modelAwareness": setting})
    assert any(rule in w for w in warnings), warnings
    assert config.model_awareness == DEFAULT_CONFIG.model_awareness


def stored(manifest_id: str, ratio: float, model: str = "m") -> repo.StoredSample:
    return repo.StoredSample(
        manifest_id, "p", model, "chars-v2", samples(ratio)[0], output=5, created_at=""
    )


def test_samples_are_kept_per_profile_newest_first_and_a_report_replaces_its_own(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "c.db") as store:
        for n in range(repo.KEEP_PER_PROFILE + 5):
            repo.save_sample(store, stored(f"m{n}", 1.0 + n / 1000))
        repo.save_sample(store, stored("other", 1.5, model="m2"))
        kept = repo.recent_samples(store, "p", "m", "chars-v2", 1000)
        assert len(kept) == repo.KEEP_PER_PROFILE
        assert kept[0].ratio == pytest.approx(1.204) and kept[-1].ratio == pytest.approx(1.005)
        repo.save_sample(store, stored("m204", 1.9))  # the same manifest reported again
        assert repo.recent_samples(store, "p", "m", "chars-v2", 1)[0].ratio == pytest.approx(1.9)
        assert repo.delete_sample(store, "m204") and not repo.delete_sample(store, "m204")
        # the most recently reported profile first (a replaced report keeps its place)
        assert [(r.model, r.samples) for r in repo.profiles(store)] == [
            ("m2", 1),
            ("m", repo.KEEP_PER_PROFILE - 1),
        ]
    with pytest.raises(ValueError, match="estimated > 0"), open_store(tmp_path / "d.db") as store:
        repo.save_sample(store, repo.StoredSample("x", "p", "m", "v", Sample(0, 1), 0, ""))


def test_a_calibration_read_while_a_report_lands_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan reading the samples on one thread while a report writes one on another: the
    older read is answered but not kept, so the next plan sees the report (issue 14 review)."""
    from ds4_core.engine import ContextEngine
    from ds4_core.engine import usage as usage_module
    from ds4_core.requests import PlanRequest, UsageCounts, UsageReport

    engine = ContextEngine(
        database_path=tmp_path / "r.db", settings={"modelAwareness.minimumCalibrationSamples": 1}
    )
    messages = [{"role": "user", "content": "hello there", "timestamp": 1}]

    def plan_for(provider: str, model: str) -> PlanResult:
        spec = ModelSpec(provider, model, 100_000)
        return engine.plan(PlanRequest(messages=messages, model=spec))

    reported = plan_for("q", "n")  # its usage will be reported as answered by p/m
    report = UsageReport(reported.manifest_id, "p", "m", UsageCounts(reported.estimated_tokens * 2))
    read = usage_module.calibration_repo.recent_samples
    landed: list[UsageResult] = []
    started: list[bool] = []

    def read_then_report(*args: object, **kwargs: object) -> list[Sample]:
        samples = read(*args, **kwargs)  # type: ignore[arg-type]
        if not started:  # the report lands between this read and the keeping of its result
            started.append(True)
            landed.append(engine.record_usage(report))
        return samples

    monkeypatch.setattr(usage_module.calibration_repo, "recent_samples", read_then_report)
    assert plan_for("p", "m").budget.calibration_ratio == 1.0  # read before the report
    assert landed and landed[0].calibration["ratio"] == 2.0
    assert plan_for("p", "m").budget.calibration_ratio == 2.0  # not the older read, kept
    engine.close()


def test_reports_and_plans_on_a_small_pool_never_wait_for_queued_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plan waits for reports of its model being written, never for one still queued: a
    burst of reports, or plans submitted before a report, on a 4-thread pool (the server's)
    finish without anyone waiting out `PENDING_WAIT_S` (set to 60 s here: a wait for queued
    work would time the futures out). Issue 14's second review found 2 s stalls."""
    from concurrent.futures import ThreadPoolExecutor

    from ds4_core.engine import ContextEngine
    from ds4_core.engine import usage as usage_module
    from ds4_core.requests import PlanRequest, UsageCounts, UsageReport

    monkeypatch.setattr(usage_module, "PENDING_WAIT_S", 60.0)
    engine = ContextEngine(database_path=tmp_path / "p.db")
    spec = ModelSpec("acme", "m", 100_000)
    messages = [{"role": "user", "content": "hello there", "timestamp": 1}]

    def plan() -> PlanResult:
        return engine.plan(PlanRequest(messages=messages, model=spec))

    reports = [UsageReport(plan().manifest_id, "acme", "m", UsageCounts(1_000)) for _ in range(8)]
    with ThreadPoolExecutor(4) as pool:
        for future in [pool.submit(engine.record_usage, report) for report in reports]:
            assert future.result(timeout=20).sample
        plans = [pool.submit(plan) for _ in range(4)]
        reported = pool.submit(engine.record_usage, reports[0])
        for future in plans:
            future.result(timeout=20)
        assert reported.result(timeout=20).calibration["samples"] == 8
    engine.close()
