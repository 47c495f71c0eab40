"""Calibration samples (`token_calibration`, docs/model-awareness.md; the schema is in
`calibration_schema.py`).

One row per usage report that can calibrate (`engine/usage.py` decides which): the exact
provider, model and estimator version, the plan's estimate and the provider's counts. A
manifest has at most one sample (a repeated report replaces it, keeping its place in the
order). Samples outlive their manifests (no foreign key: manifests keep only the latest 128)
and are kept per profile up to `KEEP_PER_PROFILE`, the oldest deleted first. They are not in any
session file, so a database that is deleted or moved aside starts uncalibrated (ratio 1.0).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..calibration import Sample
from .database import Store, utc_now_iso

KEEP_PER_PROFILE = 200
"""Samples kept per provider/model/estimator (docs/reference.md §3.15 "Retention")."""

MAX_PROFILES = 64
"""Profiles `profiles` lists at most (the most recently reported first)."""


@dataclass(frozen=True)
class StoredSample:
    """A sample as stored: its profile, counts (tokens) and the UTC time it was reported."""

    manifest_id: str
    provider: str
    model: str
    estimator_version: str
    sample: Sample
    output: int
    created_at: str


def save_sample(store: Store, stored: StoredSample) -> None:
    """Insert the sample of `stored.manifest_id` (or replace the one that manifest had) and
    delete its profile's samples beyond the newest `KEEP_PER_PROFILE`, in one transaction.

    Raises:
        ValueError: an estimate or actual count that is not positive.
        sqlite3.Error: the database failed.
    """
    sample = stored.sample
    if sample.estimated <= 0 or sample.actual <= 0:
        raise ValueError("a calibration sample needs estimated > 0 and actual > 0 tokens")
    profile = (stored.provider, stored.model, stored.estimator_version)
    with store.write() as conn:
        conn.execute(
            "INSERT INTO token_calibration (manifest_id, provider, model, estimator_version, "
            "estimated_tokens, actual_tokens, input_tokens, output_tokens, cache_read_tokens, "
            "cache_write_tokens, ratio, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (manifest_id) DO UPDATE SET provider = excluded.provider, "
            "model = excluded.model, estimator_version = excluded.estimator_version, "
            "estimated_tokens = excluded.estimated_tokens, "
            "actual_tokens = excluded.actual_tokens, input_tokens = excluded.input_tokens, "
            "output_tokens = excluded.output_tokens, "
            "cache_read_tokens = excluded.cache_read_tokens, "
            "cache_write_tokens = excluded.cache_write_tokens, ratio = excluded.ratio, "
            "created_at = excluded.created_at",
            (
                stored.manifest_id,
                *profile,
                sample.estimated,
                sample.actual,
                sample.input,
                stored.output,
                sample.cache_read,
                sample.cache_write,
                sample.ratio,
                stored.created_at or utc_now_iso(),
            ),
        )
        conn.execute(
            "DELETE FROM token_calibration WHERE provider = ? AND model = ? "
            "AND estimator_version = ? AND sample_id NOT IN (SELECT sample_id "
            "FROM token_calibration WHERE provider = ? AND model = ? AND estimator_version = ? "
            "ORDER BY sample_id DESC LIMIT ?)",
            (*profile, *profile, KEEP_PER_PROFILE),
        )


def delete_sample(store: Store, manifest_id: str) -> bool:
    """Delete the sample of `manifest_id` (a later report of that call could not calibrate:
    an error, or zero usage). Returns whether there was one."""
    with store.write() as conn:
        cursor = conn.execute("DELETE FROM token_calibration WHERE manifest_id = ?", (manifest_id,))
        return cursor.rowcount > 0


def recent_samples(
    store: Store, provider: str, model: str, estimator_version: str, limit: int
) -> list[Sample]:
    """The newest `limit` samples of one profile, newest first."""
    rows = (
        store.connection()
        .execute(
            "SELECT estimated_tokens, actual_tokens, input_tokens, cache_read_tokens, "
            "cache_write_tokens FROM token_calibration WHERE provider = ? AND model = ? "
            "AND estimator_version = ? ORDER BY sample_id DESC LIMIT ?",
            (provider, model, estimator_version, limit),
        )
        .fetchall()
    )
    return [Sample(*row) for row in rows]


@dataclass(frozen=True)
class ProfileRow:
    """A profile with samples: who, the estimator, how many samples are kept, the last report."""

    provider: str
    model: str
    estimator_version: str
    samples: int
    last_reported_at: str


def profiles(store: Store, limit: int = MAX_PROFILES) -> list[ProfileRow]:
    """Every profile with samples, the most recently reported first (at most `limit`)."""
    rows = (
        store.connection()
        .execute(
            "SELECT provider, model, estimator_version, COUNT(*), MAX(created_at) "
            "FROM token_calibration GROUP BY provider, model, estimator_version "
            "ORDER BY MAX(sample_id) DESC LIMIT ?",
            (limit,),
        )
        .fetchall()
    )
    return [ProfileRow(*row) for row in rows]
