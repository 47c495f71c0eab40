"""Usage reports and calibration (DS4 M11, docs/model-awareness.md): `ds4/usage` and
`ds4 usage` record what a provider counted for a planned call on its manifest, turn it into a
calibration sample of the reporting provider/model, and keep each profile's calibration
(`ds4_core.calibration`) for the budgets of later plans.

A report calibrates when the call ended normally (`stopReason` not `error` or `aborted`), the
provider counted input (input + cacheRead + cacheWrite > 0) and the manifest has an estimate
of the current estimator. A report that cannot calibrate is still recorded on the manifest; a
repeated report for one manifest replaces the earlier one (its sample too).

A stored manifest's usage and its sample are written in one transaction (an in-memory
manifest is changed first, then the sample written). A calibration is read from the database
each time (one indexed query of at most `calibrationWindow` rows, ~0.2 ms), so a sample written
by another process (`ds4 usage`, another editor window) counts at once. A plan waits for the
reports of its model being written when it gets there; the engine's threads take work in
order, so that includes every report the client sent before the plan, and the plan a client
sends right after its report uses it. A database failure reads as uncalibrated (ratio 1.0,
fail open) and is logged.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from ..calibration import (
    Calibration,
    Sample,
    cache_share,
    calibrate,
    settings_of,
)
from ..continuation import MAX_ITEMS, is_item_hash
from ..json_bounds import MAX_SAFE_INTEGER, echo
from ..logs import describe_failure
from ..quoting import UNSAFE_CHARACTERS
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

MAX_STOP_REASON_CHARS = 64
"""Longest stop reason accepted (Pi's are single words: `stop`, `toolUse`, ...)."""

PENDING_WAIT_S = 2.0
"""Longest a calibration waits for reports of its model being written (seconds); then it reads
what is there (a report stuck behind a long write must not stall plans)."""


def check_report(report: UsageReport) -> None:
    """Reject a report the caller can fix, naming the field.

    Raises:
        RequestError: an empty `manifestId`; an empty or over-long (`MAX_NAME_CHARS`)
            `provider` or `model`, or an empty or over-long (`MAX_STOP_REASON_CHARS`)
            `stopReason`, or one holding a character quoted text never holds raw
            (`quoting.UNSAFE_CHARACTERS`: controls, line separators, bidi controls, ...); a usage count that is not an
            integer in 0..`MAX_TOKENS`, or counts whose input sum exceeds it; an
            `outputItemHashes` element that is not an item hash.
    """
    if not report.manifest_id:
        raise RequestError("manifestId: expected the id of a planned call's manifest", "manifestId")
    for value, name in ((report.provider, "provider"), (report.model, "model")):
        if not value.strip() or len(value) > MAX_NAME_CHARS or UNSAFE_CHARACTERS.search(value):
            raise RequestError(
                f"{name}: expected a non-empty id of at most {MAX_NAME_CHARS} characters "
                "without control characters",
                name,
            )
    stop = report.stop_reason
    if stop is not None and (
        not 0 < len(stop) <= MAX_STOP_REASON_CHARS or UNSAFE_CHARACTERS.search(stop)
    ):
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
    for items, name in (
        (report.output_items, "outputItems"),
        (report.output_item_hashes, "outputItemHashes"),
    ):
        if items is not None and len(items) > MAX_ITEMS:
            raise RequestError(
                f"{name}: at most {MAX_ITEMS:,} items (a response's output), got {len(items):,}",
                name,
            )
    for index, value in enumerate(report.output_item_hashes or ()):
        if not is_item_hash(value):
            name = f"outputItemHashes[{index}]"
            raise RequestError(
                f"{name}: expected an item hash, 64 lower-case hex digits "
                "(docs/model-awareness.md, the item hash rule)",
                name,
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
        self._settled = threading.Condition()
        self._running: Counter[tuple[str, str]] = Counter()
        """Reports being written right now, per (provider, model)."""

    def calibration(self, provider: str, model: str, *, wait: bool = True) -> Calibration:
        """The calibration of `provider/model` for the current estimator and settings, read
        from the database (one indexed query of at most `calibrationWindow` rows, so a report
        written by another process, `ds4 usage`, counts at once). With `wait`, after the
        reports of that model being written right now (at most `PENDING_WAIT_S`): the engine's
        thread pool takes work first in, first out, so a report the client sent before a plan
        is being written, or written, when the plan gets here; never a report still queued,
        so no thread waits for work that needs a thread. Ratio 1.0 (uncalibrated) when the
        database cannot be read. Never raises."""
        settings = settings_of(self._context.config())
        if wait:
            with self._settled:
                if not self._settled.wait_for(
                    lambda: (provider, model) not in self._running, timeout=PENDING_WAIT_S
                ):
                    log.info(
                        "calibration: a usage report still writing after %.0f s", PENDING_WAIT_S
                    )
        try:
            samples = calibration_repo.recent_samples(
                self._context.store(), provider, model, ESTIMATOR_VERSION, settings.window
            )
        except Exception as exc:  # fail open: an uncalibrated budget is the safe default
            log.warning("calibration not read: error=%s", describe_failure(exc))
            return Calibration(provider, model, ESTIMATOR_VERSION, minimum=settings.minimum)
        return calibrate(provider, model, ESTIMATOR_VERSION, samples, settings)

    def record(self, report: UsageReport) -> UsageResult:
        """Record `report` on its manifest and, when it can calibrate, as a sample of the
        reporting profile (`ContextEngine.record_usage`). While it is written, calibrations of
        its model wait for it (`calibration`); its own answer does not wait for others.

        Raises:
            RequestError: a field the caller can fix (`check_report`), or a `manifestId` no
                manifest has (never planned here, or evicted).
        """
        key = (report.provider, report.model)
        with self._settled:
            self._running[key] += 1
        try:
            estimated, why_not, usage = self._write(report)
        finally:
            with self._settled:
                self._running[key] -= 1
                if self._running[key] <= 0:
                    del self._running[key]
                self._settled.notify_all()
        calibration = self.calibration(report.provider, report.model, wait=False)
        counts = report.usage
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

    def _write(self, report: UsageReport) -> tuple[Any, str | None, dict[str, Any]]:
        """Check `report`, then write the manifest's usage and its sample in one transaction.
        Returns (the manifest's estimate, why no sample or None, the manifest's `usage`)."""
        check_report(report)
        reported_at = utc_now_iso()
        counts = report.usage
        usage = usage_json(report, reported_at)

        def change(manifest: dict[str, Any]) -> None:
            manifest["actualTokens"] = counts.actual_input
            manifest["usage"] = usage

        with self._context.store().write():
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
        return estimated, why_not, usage

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

    def profiles(self) -> list[dict[str, Any]]:
        """Each profile with samples, the most recently reported first: its calibration
        (`Calibration.to_wire`) plus `lastReportedAt` (`ds4.health`).

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        rows = calibration_repo.profiles(self._context.store())
        return [
            {
                **self.calibration(row.provider, row.model, wait=False).to_wire(),
                "lastReportedAt": row.last_reported_at,
            }
            for row in rows
            if row.estimator_version == ESTIMATOR_VERSION
        ]
