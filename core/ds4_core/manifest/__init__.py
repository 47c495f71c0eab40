"""Context manifests: metadata of what each plan sent (docs/reference.md §3.15)."""

from ds4_core.manifest.manifest import (
    MAX_STORED_BYTES,
    PLANNER_VERSION,
    POLICY_VERSION,
    ROLLUP_KEEP,
    ROLLUP_THRESHOLD_BYTES,
    VIEWS,
    ManifestView,
    ManifestWindow,
    build_manifest,
    encode_manifest,
    new_manifest_id,
    prompt_hash,
    view_manifest,
)

__all__ = [
    "MAX_STORED_BYTES",
    "PLANNER_VERSION",
    "POLICY_VERSION",
    "ROLLUP_KEEP",
    "ROLLUP_THRESHOLD_BYTES",
    "VIEWS",
    "ManifestView",
    "ManifestWindow",
    "build_manifest",
    "encode_manifest",
    "new_manifest_id",
    "prompt_hash",
    "view_manifest",
]
