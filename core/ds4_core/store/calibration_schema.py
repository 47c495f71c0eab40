"""The schema of migration 10 (`model-calibration`, docs/model-awareness.md): the calibration
samples (`token_calibration`, written by `store/calibration.py`) and the usage columns of
`context_manifests` (written by `store/manifests.update_usage`). Its own module, as
`subword_schema.py`, so the repository can import the store without a cycle.
"""

CALIBRATION_SQL = """
CREATE TABLE token_calibration (
    sample_id INTEGER PRIMARY KEY,
    manifest_id TEXT NOT NULL UNIQUE,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    estimator_version TEXT NOT NULL,
    estimated_tokens INTEGER NOT NULL CHECK (estimated_tokens > 0),
    actual_tokens INTEGER NOT NULL CHECK (actual_tokens > 0),
    input_tokens INTEGER NOT NULL CHECK (input_tokens >= 0),
    output_tokens INTEGER NOT NULL CHECK (output_tokens >= 0),
    cache_read_tokens INTEGER NOT NULL CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL CHECK (cache_write_tokens >= 0),
    ratio REAL NOT NULL,
    created_at TEXT NOT NULL
) STRICT;
CREATE INDEX token_calibration_profile
    ON token_calibration (provider, model, estimator_version, sample_id);
ALTER TABLE context_manifests ADD COLUMN input_tokens INTEGER;
ALTER TABLE context_manifests ADD COLUMN output_tokens INTEGER;
ALTER TABLE context_manifests ADD COLUMN cache_read_tokens INTEGER;
ALTER TABLE context_manifests ADD COLUMN cache_write_tokens INTEGER;
"""
"""The SQL of migration 10 (`model-calibration`; docs/reference.md §3.11 v10 in our shape)."""

__all__ = ["CALIBRATION_SQL"]
