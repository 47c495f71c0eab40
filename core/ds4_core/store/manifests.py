"""Repository for `context_manifests` (docs/reference.md §3.15).

A manifest is metadata about one plan (ids, token counts, reasons; never content), built by
`ds4_core.manifest.build_manifest` and encoded by `encode_manifest` (which applies the 256 KiB
roll-up and 1 MiB limits). The queryable columns are copied out of the manifest dict; the full
JSON text is stored as given in `manifest_json`. Retention: only the latest `keep` manifests
(128 by default, docs/reference.md §3.15) are kept across all sessions; older ones are deleted in
the same transaction that saves a new one.

`estimated_tokens` is in the units of the manifest's `estimatorVersion` (kept in
`manifest_json`; `chars-v2` since the estimator changed): whatever compares it with
`actual_tokens` must group rows by that version and never mix two.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ds4_core.store.database import Store, utc_now_iso
from ds4_core.store.sql import placeholders
from ds4_core.tokens import compact_json

DEFAULT_KEEP = 128
"""Manifests kept in total (docs/reference.md §3.15 "Retention")."""

# column -> manifest keys to read it from, in order (camelCase as build_manifest writes them,
# the column name as a fallback).
_COLUMN_KEYS: dict[str, tuple[str, ...]] = {
    "session_id": ("sessionId", "session_id"),
    "branch_leaf_id": ("branchLeafId", "branch_leaf_id"),
    "created_at": ("createdAt", "created_at"),
    "provider": ("provider",),
    "model": ("model", "modelId"),
    "context_window": ("contextWindow", "context_window"),
    "output_reserve": ("outputReserve", "output_reserve"),
    "hard_input_limit": ("hardInputLimit", "hard_input_limit"),
    "target_input_tokens": ("targetInputTokens", "target_input_tokens"),
    "estimated_tokens": ("estimatedTokens", "estimated_tokens"),
    "actual_tokens": ("actualTokens", "actual_tokens"),
    "pi_reported_tokens": ("piReportedTokens", "pi_reported_tokens"),
    "prompt_hash": ("promptHash", "prompt_hash"),
    "policy_version": ("policyVersion", "policy_version"),
    "planner_version": ("plannerVersion", "planner_version"),
}
_INT_COLUMNS = frozenset(
    {
        "context_window",
        "output_reserve",
        "hard_input_limit",
        "target_input_tokens",
        "estimated_tokens",
        "actual_tokens",
        "pi_reported_tokens",
    }
)
_COLUMNS = ("manifest_id", *_COLUMN_KEYS, "manifest_json")


def _pick(manifest: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in manifest:
            return manifest[key]
    return None


def _column_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column in _INT_COLUMNS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return int(value)
    if isinstance(value, Mapping) and column == "model":
        value = value.get("id")  # tolerate {"provider": ..., "id": ...}
        return value if isinstance(value, str) else None
    return value if isinstance(value, str) else str(value)


def save_manifest(
    store: Store, manifest: Mapping[str, Any], manifest_json: str, keep: int = DEFAULT_KEEP
) -> str:
    """Store one manifest and delete all but the latest `keep` (by `created_at`, then insertion).

    `manifest` supplies the columns (`id`, `sessionId`, `createdAt`, ... as `build_manifest`
    names them; snake_case column names are accepted too); `manifest_json` is stored verbatim.
    Saving an existing id replaces that row. A missing `createdAt` becomes now (UTC).
    Returns the manifest id.

    Raises:
        ValueError: if the manifest has no string `id`, `manifest_json` is not a string, or
            `keep < 1`.
    """
    manifest_id = _pick(manifest, ("id", "manifestId", "manifest_id"))
    if not isinstance(manifest_id, str) or not manifest_id:
        raise ValueError("cannot save a context manifest without a string 'id'")
    if not isinstance(manifest_json, str):
        raise ValueError("manifest_json must be the encoded manifest text (a str)")
    if keep < 1:
        raise ValueError(f"keep must be >= 1, got {keep}")
    values = {c: _column_value(c, _pick(manifest, keys)) for c, keys in _COLUMN_KEYS.items()}
    if not values["created_at"]:
        values["created_at"] = utc_now_iso()
    params = (manifest_id, *values.values(), manifest_json)
    updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    with store.write() as conn:
        conn.execute(
            f"INSERT INTO context_manifests ({', '.join(_COLUMNS)}) "
            f"VALUES ({placeholders(len(_COLUMNS))}) "
            f"ON CONFLICT (manifest_id) DO UPDATE SET {updates}",
            params,
        )
        conn.execute(
            "DELETE FROM context_manifests WHERE rowid NOT IN ("
            "SELECT rowid FROM context_manifests ORDER BY created_at DESC, rowid DESC LIMIT ?)",
            (keep,),
        )
    return manifest_id


def _decode(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if row is None:
        return None
    value = json.loads(row[0])
    return value if isinstance(value, dict) else None


def get_manifest(store: Store, manifest_id: str) -> dict[str, Any] | None:
    """The stored manifest (decoded `manifest_json`) with this id, or `None`."""
    row = (
        store.connection()
        .execute(
            "SELECT manifest_json FROM context_manifests WHERE manifest_id = ?", (manifest_id,)
        )
        .fetchone()
    )
    return _decode(row)


def _latest_row(store: Store, session_id: str, columns: str) -> tuple[Any, ...] | None:
    """`columns` of the most recent stored manifest of `session_id` (by `created_at`, then
    insertion), or None."""
    row: tuple[Any, ...] | None = (
        store.connection()
        .execute(
            f"SELECT {columns} FROM context_manifests WHERE session_id = ? "
            "ORDER BY created_at DESC, rowid DESC LIMIT 1",
            (session_id,),
        )
        .fetchone()
    )
    return row


def latest_manifest(store: Store, session_id: str) -> dict[str, Any] | None:
    """The most recent stored manifest of `session_id` (by `created_at`, then insertion)."""
    return _decode(_latest_row(store, session_id, "manifest_json"))


def count_manifests(store: Store) -> int:
    """Number of stored manifests (all sessions)."""
    return int(store.connection().execute("SELECT COUNT(*) FROM context_manifests").fetchone()[0])


USAGE_COLUMNS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
"""The usage columns a report fills (migration 10), in the order `update_usage` takes them."""


def update_usage(
    store: Store,
    manifest_id: str,
    change: Callable[[dict[str, Any]], None],
    actual_tokens: int,
    usage: tuple[int, int, int, int],
) -> dict[str, Any] | None:
    """Apply `change` to the stored manifest `manifest_id` and write it back with its
    `actual_tokens` and usage columns (`USAGE_COLUMNS`: input, output, cache read, cache write
    tokens), in one transaction. Returns the changed manifest, or None when no manifest has
    that id (nothing is written).

    Raises:
        sqlite3.Error: the database failed.
    """
    with store.write() as conn:
        row = conn.execute(
            "SELECT manifest_json FROM context_manifests WHERE manifest_id = ?", (manifest_id,)
        ).fetchone()
        manifest = _decode(row)
        if manifest is None:
            return None
        change(manifest)
        sets = ", ".join(f"{column} = ?" for column in USAGE_COLUMNS)
        conn.execute(
            f"UPDATE context_manifests SET manifest_json = ?, actual_tokens = ?, {sets} "
            "WHERE manifest_id = ?",
            (compact_json(manifest), actual_tokens, *usage, manifest_id),
        )
    return manifest


def latest_model(store: Store, session_id: str) -> tuple[str, str] | None:
    """`(provider, model)` of the most recent stored manifest of `session_id`, or None (no
    manifest, or one without both)."""
    row = _latest_row(store, session_id, "provider, model")
    if row is None or not isinstance(row[0], str) or not isinstance(row[1], str):
        return None
    return (row[0], row[1])
