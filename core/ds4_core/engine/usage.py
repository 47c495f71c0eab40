"""Usage reports and calibration (DS4 M11, docs/model-awareness.md): `ds4/usage` and
`ds4 usage` record what a provider counted for a planned call on its manifest, turn it into a
calibration sample of the reporting provider/model, and keep each profile's calibration
(`ds4_core.calibration`) for the budgets of later plans.

A report calibrates when the call ended normally (`stopReason` not `error` or `aborted`), the
provider counted input (input + cacheRead + cacheWrite > 0) and the manifest has an estimate
of the current estimator. A report that cannot calibrate is still recorded on the manifest; a
repeated report for one manifest replaces the earlier one (its sample too).

The manifest's usage and its sample are written in one transaction. Calibrations are kept in
memory per (provider, model, estimator, settings) and all dropped when a sample is written; a
calibration read while a sample was being written is answered but not kept (a generation
count), so a plan running beside a report never keeps the older ratio. A database failure
reads as uncalibrated (ratio 1.0, fail open) and is logged.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from typing import Any

from ..calibration import (
    Calibration,
    CalibrationSettings,
    Sample,
    cache_share,
    calibrate,
    settings_of,
)
from ..json_bounds import MAX_SAFE_INTEGER, echo
from ..logs import describe_failure
from ..requests import RequestError, UsageCounts, UsageReport
from ..results import UsageResult
from ..store import calibration as calibration_repo
from ..store.database import utc_now_iso
from ..tokens import ESTIMATOR_VERSION
from .context import EngineContext
from .manifests import Manifests

log = logging.getLogger("ds4_core.engine")

FAILED_STOPS = frozenset({"error", "aborted"})
"""Pi stop reasons of calls that did not complete: their usage does not calibrate."""

MAX_NAME_CHARS = 256
"""Longest provider or model id accepted in a report (characters)."""

MAX_TOKENS = MAX_SAFE_INTEGER
"""Largest token count accepted (2^53 - 1, what every JSON client represents exactly;
docs/reference.md §3.5 asks for safe integers)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""Control characters (C0, DEL, C1): never part of a provider, model or stop reason, and a line
break in one would break every view that shows it."""

MAX_STOP_REASON_CHARS = 64
"""Longest stop reason accepted (Pi's are single words: `stop`, `toolUse`, ...)."""

KEPT_CALIBRATIONS = 256
"""Profiles whose calibration is kept in memory (least recently used dropped first)."""


def check_report(report: UsageReport) -> None:
    """Reject a report the caller can fix, naming the field.

    Raises:
        RequestError: an empty `manifestId`; an empty or over-long (`MAX_NAME_CHARS`)
            `provider` or `model`, or an empty or over-long (`MAX_STOP_REASON_CHARS`)
            `stopReason`, or one holding a control character; a usage count that is not an
            integer in 0..`MAX_TOKENS`, or counts whose input sum exceeds it.
    """
    if not report.manifest_id:
        raise RequestError("manifestId: expected the id of a planned call's manifest", "manifestId")
    for value, name in ((report.provider, "provider"), (report.model, "model")):
        if not value.strip() or len(value) > MAX_NAME_CHARS or _CONTROL.search(value):
            raise RequestError(
                f"{name}: expected a non-empty id of at most {MAX_NAME_CHARS} characters "
                "without control characters",
                name,
            )
    stop = report.stop_reason
    if stop is not None and (not 0 < len(stop) <= MAX_STOP_REASON_CHARS or _CONTROL.search(stop)):
        raise RequestError(
            f"stopReason: expected Pi's stop reason, 1..{MAX_STOP_REASON_CHARS} characters "
            "without control characters",
            "stopReason",
        )
    counts = report.usage
    for count, field_name in (
        (counts.input, "usage.input"),
        (counts.output, "usage.output"),
        (counts.cache_read, "usage.cacheRead"),
        (counts.cache_write, "usage.cacheWrite"),
    ):
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_TOKENS:
            raise RequestError(
                f"{field_name}: expected an integer in 0..{MAX_TOKENS:,} (tokens)", field_name
            )
    if counts.actual_input > MAX_SAFE_INTEGER:
        raise RequestError(
            f"usage: input + cacheRead + cacheWrite must not exceed {MAX_SAFE_INTEGER:,}", "usage"
        )


def usage_json(report: UsageReport, reported_at: str) -> dict[str, Any]:
    """The manifest's `usage` object for a report (docs/protocol.md, `ds4/manifest`)."""
    counts = report.usage
    return {
        "provider": report.provider,
        "model": report.model,
        "input": counts.input,
        "output": counts.output,
        "cacheRead": counts.cache_read,
        "cacheWrite": counts.cache_write,
        "stopReason": report.stop_reason,
        "cacheShare": cache_share(counts.cache_read, counts.actual_input),
        "reportedAt": reported_at,
    }


def why_no_sample(report: UsageReport, estimated: Any, estimator_version: Any) -> str | None:
    """Why a report cannot calibrate, or None when it can (see the module docstring)."""
    if report.stop_reason in FAILED_STOPS:
        return f"the call ended with stopReason '{report.stop_reason}'"
    if report.usage.actual_input <= 0:
        return "the provider reported no input tokens"
    if isinstance(estimated, bool) or not isinstance(estimated, int) or estimated <= 0:
        return "the manifest has no estimate"
    if estimator_version != ESTIMATOR_VERSION:
        return f"the manifest was estimated by {echo(estimator_version)}, not {ESTIMATOR_VERSION}"
    return None


class UsageReports:
    """Usage reports and calibrations of one engine (see the module docstring)."""

    def __init__(self, context: EngineContext, manifests: Manifests) -> None:
        self._context = context
        self._manifests = manifests
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[str, str, str, CalibrationSettings], Calibration] = (
            OrderedDict()
        )
        self._generation = 0
        """Bumped whenever a sample changes: a calibration read before a bump is not kept."""

    def calibration(self, provider: str, model: str) -> Calibration:
        """The calibration of `provider/model` for the current estimator and settings; ratio
        1.0 (uncalibrated) when the database cannot be read. Never raises."""
        settings = settings_of(self._context.config())
        key = (provider, model, ESTIMATOR_VERSION, settings)
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
                return found
            generation = self._generation
        try:
            samples = calibration_repo.recent_samples(
                self._context.store(), provider, model, ESTIMATOR_VERSION, settings.window
            )
        except Exception as exc:  # fail open: an uncalibrated budget is the safe default
            log.warning("calibration not read: error=%s", describe_failure(exc))
            return Calibration(provider, model, ESTIMATOR_VERSION, minimum=settings.minimum)
        found = calibrate(provider, model, ESTIMATOR_VERSION, samples, settings)
        with self._lock:
            if generation == self._generation:  # no sample changed while this one was read
                self._kept[key] = found
                while len(self._kept) > KEPT_CALIBRATIONS:
                    self._kept.popitem(last=False)
        return found

    def record(self, report: UsageReport) -> UsageResult:
        """Record `report` on its manifest and, when it can calibrate, as a sample of the
        reporting profile (`ContextEngine.record_usage`).

        Raises:
            RequestError: a field the caller can fix (`check_report`), or a `manifestId` no
                manifest has (never planned here, or evicted).
        """
        check_report(report)
        reported_at = utc_now_iso()
        counts = report.usage
        usage = usage_json(report, reported_at)

        def change(manifest: dict[str, Any]) -> None:
            manifest["actualTokens"] = counts.actual_input
            manifest["usage"] = usage

        with self._context.store().write():  # the manifest's usage and its sample, together
            manifest = self._manifests.update_usage(report.manifest_id, change, counts)
            if manifest is None:
                raise RequestError(
                    f"manifestId: no manifest with id {echo(report.manifest_id)} (never planned "
                    "by this server's database, or evicted: the latest 128 stored and 64 "
                    "in-memory manifests are kept)",
                    "manifestId",
                )
            estimated = manifest.get("estimatedTokens")
            why_not = why_no_sample(report, estimated, manifest.get("estimatorVersion"))
            self._save_sample(report, estimated, why_not, reported_at)
        self._forget()
        calibration = self.calibration(report.provider, report.model)
        log.info(
            "usage: manifest=%s profile=%s/%s actual=%d sample=%s ratio=%.6f samples=%d",
            report.manifest_id,
            echo(report.provider),
            echo(report.model),
            counts.actual_input,
            why_not is None,
            calibration.ratio,
            calibration.samples,
        )
        return UsageResult(
            manifest_id=report.manifest_id,
            provider=report.provider,
            model=report.model,
            estimated_tokens=estimated if isinstance(estimated, int) else None,
            actual_tokens=counts.actual_input,
            cache_share=usage["cacheShare"],
            sample=why_not is None,
            why_not=why_not,
            calibration=calibration.to_wire(),
        )

    def _save_sample(
        self, report: UsageReport, estimated: Any, why_not: str | None, reported_at: str
    ) -> None:
        """Write (or, for a report that cannot calibrate, delete) the manifest's sample."""
        store = self._context.store()
        if why_not is None:
            counts: UsageCounts = report.usage
            calibration_repo.save_sample(
                store,
                calibration_repo.StoredSample(
                    manifest_id=report.manifest_id,
                    provider=report.provider,
                    model=report.model,
                    estimator_version=ESTIMATOR_VERSION,
                    sample=Sample(
                        estimated=int(estimated),
                        actual=counts.actual_input,
                        input=counts.input,
                        cache_read=counts.cache_read,
                        cache_write=counts.cache_write,
                    ),
                    output=counts.output,
                    created_at=reported_at,
                ),
            )
        else:
            calibration_repo.delete_sample(store, report.manifest_id)

    def _forget(self) -> None:
        """Drop every kept calibration (a sample changed; a replaced report may move a sample
        from one profile to another, so all of them)."""
        with self._lock:
            self._kept.clear()
            self._generation += 1

    def profiles(self) -> list[dict[str, Any]]:
        """Each profile with samples, the most recently reported first: its calibration
        (`Calibration.to_wire`) plus `lastReportedAt` (`ds4.health`).

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        rows = calibration_repo.profiles(self._context.store())
        return [
            {
                **self.calibration(row.provider, row.model).to_wire(),
                "lastReportedAt": row.last_reported_at,
            }
            for row in rows
            if row.estimator_version == ESTIMATOR_VERSION
        ]
