"""Context manifests: what a plan sent and left out, as metadata only (docs/reference.md §3.15).

A manifest never holds message text, evidence or excerpts: only ids, kinds, token counts,
scores and reason strings the planner wrote itself. It is served as JSON to editors, so keys
are camelCase. Size rules: a manifest over 256 KiB keeps its included items but rolls the
excluded ones up to the first and last 128; one over 1 MiB is not stored at all.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from ds4_core.planner.budget import ContextBudget, ModelProfile
from ds4_core.planner.planner import ContextPlan, PlanItem
from ds4_core.requests import ManifestView
from ds4_core.tokens import compact_json, sha256_hex, stable_json
from ds4_core.wire import camel_case

PLANNER_VERSION = "ds4-lsp-planner-1"
"""Version of the selection rules in `ds4_core.planner` (docs/reference.md §3.7)."""
POLICY_VERSION = "ds4-context-policy-1"
"""Version of the budget and priority policy (docs/reference.md §3.4, §3.5, §3.7)."""

ROLLUP_THRESHOLD_BYTES = 256 * 1024
MAX_STORED_BYTES = 1024 * 1024
ROLLUP_KEEP = 128
"""Excluded items kept at each end of a rolled-up manifest."""

VIEWS: tuple[str, ...] = get_args(ManifestView)
"""The manifest views, in order (`ds4_core.requests.ManifestView`)."""


def new_manifest_id() -> str:
    """A new manifest id, `m-<12 hex ms since the epoch><16 random hex>`, sortable by time."""
    return f"m-{time.time_ns() // 1_000_000:012x}{secrets.token_hex(8)}"


def prompt_hash(
    system: Any,
    tools: Any,
    messages: Sequence[Any],
    message_json: Callable[[Any], str] = stable_json,
) -> str:
    """sha256 hex of the stable JSON of `{"system", "tools", "messages"}`
    (docs/reference.md §3.15).

    `system` is the system prompt (string or None), `tools` the tool schemas (list or None),
    `messages` the AgentMessages sent. Equal inputs give equal hashes whatever the key order.
    `message_json(m)` must equal `stable_json(m)`: a caller may pass one that remembers the
    text of messages it sends again (`engine/privacy_cache.py`). The text hashed is that of
    `stable_json` of the whole object, written out from its parts.
    """
    head = stable_json({"system": system, "tools": tools})  # {"system":...,"tools":...}
    parts = ",".join(message_json(message) for message in messages)
    return sha256_hex(f'{{"messages":[{parts}],{head[1:]}')


def _camel_keys(value: Mapping[str, Any]) -> dict[str, Any]:
    return {camel_case(str(k)): v for k, v in value.items()}


def _item_json(item: PlanItem) -> dict[str, Any]:
    """One manifest item; a bulk item (`PlanItem.count` > 1) adds `count` and `lastSourceId`."""
    found = {
        "kind": item.kind,
        "sourceId": item.source_id,
        "groupId": item.group_id,
        "classification": item.classification,
        "tokens": item.tokens,
        "score": item.score,
        "reason": item.reason,
    }
    if item.count > 1:
        found["count"] = item.count
        found["lastSourceId"] = item.last_source_id
    return found


def manifest_item_count(items: Sequence[Any]) -> int:
    """How many messages and supplements the manifest items stand for: a bulk item counts its
    `count` (a positive integer), any other item 1."""
    total = 0
    for item in items:
        count = item.get("count") if isinstance(item, Mapping) else None
        total += (
            count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1
        )
    return total


def build_manifest(
    *,
    manifest_id: str,
    session_id: str | None,
    branch_leaf_id: str | None,
    profile: ModelProfile,
    budget: ContextBudget,
    plan: ContextPlan,
    retrieved: Sequence[Mapping[str, Any]],
    prompt_hash: str,
    created_at: str,
    estimator_version: str,
    fixed_tokens: int,
    warnings: Sequence[str],
    retrieval_stats: Mapping[str, Any] | None,
    relevance: Mapping[str, Any] | None = None,
    privacy: Mapping[str, Any] | None = None,
    model_awareness: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest of one plan as a JSON-ready dict (docs/reference.md §3.15). Metadata only.

    `retrieved` items are `{entryKey, score, reason}`; only those three keys are copied, so an
    excerpt passed along by mistake is dropped. `created_at` is ISO-8601 UTC with `Z`;
    `fixed_tokens` and every token count are `chars-v2` estimates. `retrieval_stats` keys are
    converted to camelCase. `actualTokens` and `usage` are None until the provider reports
    usage (`ds4/usage`: `engine/usage.py` sets both).

    Shape: id, sessionId, branchLeafId, createdAt, provider, model, modelSource,
    contextWindow, outputReserve, hardInputLimit, targetInputTokens, estimatedTokens,
    actualTokens, usage, fixedTokens, promptHash, policyVersion, plannerVersion, estimatorVersion,
    budgets{...ContextBudget.to_json()}, included[] / excluded[] of {kind, sourceId, groupId,
    classification, tokens, score, reason}, summaryIds[], retrievedEventIds[], retrieved[],
    planning{mode, fallbackReason, counts, tokens, rescuedImmediatePredecessor,
    oversizedTurnExclusions, plannedTokens, currentTurnTokens, overHardLimit},
    retrieval{...} or None, relevance{history?, project?} (each {status, sent, belowFloor,
    floor, best, why}: `engine/relevance.py`; empty when no search ran), privacy{enabled,
    failed, destination{provider, kind, allowed, redactSecrets}, classified, redacted,
    redactedByKind, withheld, excluded} (`privacy/sanitizer.py`; None when not given),
    modelAwareness{estimatorVersion, calibration (`Calibration.to_wire`, or None when not
    looked up), modelSwitch ({from, to} as `provider/model`, or None)}, warnings[].
    """
    stats = plan.stats or {}
    retrieved_items = [
        {
            "entryKey": str(hit.get("entryKey")),
            "score": hit.get("score"),
            "reason": hit.get("reason"),
        }
        for hit in retrieved
    ]
    return {
        "id": manifest_id,
        "sessionId": session_id,
        "branchLeafId": branch_leaf_id,
        "createdAt": created_at,
        "provider": profile.provider,
        "model": profile.model_id,
        "modelSource": profile.source,
        "contextWindow": budget.context_window,
        "outputReserve": budget.output_reserve,
        "hardInputLimit": budget.hard_input_limit,
        "targetInputTokens": budget.target_input_tokens,
        "estimatedTokens": plan.estimated_tokens,
        "actualTokens": None,
        "usage": None,
        "fixedTokens": fixed_tokens,
        "promptHash": prompt_hash,
        "policyVersion": POLICY_VERSION,
        "plannerVersion": PLANNER_VERSION,
        "estimatorVersion": estimator_version,
        "budgets": budget.to_json(),
        "included": [_item_json(item) for item in plan.included],
        "excluded": [_item_json(item) for item in plan.excluded],
        "summaryIds": [item.source_id for item in plan.included if item.kind == "summary"],
        "retrievedEventIds": [item["entryKey"] for item in retrieved_items],
        "retrieved": retrieved_items,
        "planning": {
            "mode": plan.mode,
            "fallbackReason": plan.fallback_reason,
            "counts": dict(stats.get("counts", {})),
            "tokens": dict(stats.get("tokens", {})),
            "rescuedImmediatePredecessor": bool(stats.get("rescued_immediate_predecessor")),
            "oversizedTurnExclusions": int(stats.get("oversized_turn_exclusions", 0)),
            "plannedTokens": stats.get("planned_tokens"),
            "currentTurnTokens": plan.current_turn_tokens,
            "overHardLimit": plan.over_hard_limit,
        },
        "retrieval": _camel_keys(retrieval_stats) if retrieval_stats is not None else None,
        "relevance": dict(relevance or {}),
        "privacy": dict(privacy) if privacy is not None else None,
        "modelAwareness": dict(model_awareness or {"estimatorVersion": estimator_version}),
        "warnings": [*plan.warnings, *warnings],
    }


def _encode(manifest: Mapping[str, Any]) -> str:
    return compact_json(manifest)


def _item_tokens(items: Sequence[Any]) -> int:
    """Sum of the integer `tokens` of manifest items (anything else counts 0)."""
    total = 0
    for item in items:
        tokens = item.get("tokens") if isinstance(item, Mapping) else None
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            total += tokens
    return total


def encode_manifest(manifest: Mapping[str, Any]) -> tuple[str | None, bool]:
    """Serialise a manifest for storage, applying the size rules of docs/reference.md §3.15.

    Returns `(json_text, rolled_up)`. Up to 256 KiB (UTF-8 bytes) the manifest is encoded as is.
    Over 256 KiB the included items stay and `excluded` keeps only its first and last 128
    items, with `excludedRollup: {total, omitted, tokens, omittedTokens}` added: `total` and
    `tokens` are the item count (a bulk item counts its `count`) and token sum of the whole
    excluded list, `omitted` and
    `omittedTokens` those of the items left out, so reports can show the true totals
    (`rolled_up` is True when items were omitted). A manifest still over 1 MiB after the
    rollup is not stored: `(None, False)`. Never raises on values JSON cannot encode (they
    are written with `str()`).
    """
    text = _encode(manifest)
    size = len(text.encode("utf-8"))
    if size <= ROLLUP_THRESHOLD_BYTES:
        return text, False
    excluded = list(manifest.get("excluded") or [])
    if len(excluded) > 2 * ROLLUP_KEEP:
        kept = excluded[:ROLLUP_KEEP] + excluded[-ROLLUP_KEEP:]
    else:
        kept = excluded
    total = manifest_item_count(excluded)
    omitted = total - manifest_item_count(kept)
    tokens = _item_tokens(excluded)
    rollup = {
        "total": total,
        "omitted": omitted,
        "tokens": tokens,
        "omittedTokens": tokens - _item_tokens(kept),
    }
    rolled = {**manifest, "excluded": kept, "excludedRollup": rollup}
    rolled_text = _encode(rolled)
    if len(rolled_text.encode("utf-8")) > MAX_STORED_BYTES:
        return None, False
    return rolled_text, omitted > 0


def view_manifest(manifest: Mapping[str, Any], view: str = "summary") -> dict[str, Any]:
    """A view of a manifest for `ds4/manifest` (`view` is summary | included | excluded | full).

    `summary` drops the `included` / `excluded` item lists and adds `itemCounts: {included,
    excluded}` (the rollup total counts for a rolled-up excluded list); `included` drops the
    excluded list; `excluded` drops the included list; `full` returns everything. The input is
    not modified.

    Raises:
        ValueError: for any other `view`, naming the accepted values.
    """
    if view not in VIEWS:
        raise ValueError(f"view {view!r} is not one of {', '.join(VIEWS)}")
    result = dict(manifest)
    if view == "full":
        return result
    if view == "summary":
        rollup = manifest.get("excludedRollup")
        excluded_total = (
            rollup.get("total")
            if isinstance(rollup, Mapping)
            else manifest_item_count(manifest.get("excluded") or [])
        )
        result["itemCounts"] = {
            "included": len(manifest.get("included") or []),
            "excluded": excluded_total,
        }
        result.pop("included", None)
        result.pop("excluded", None)
    elif view == "included":
        result.pop("excluded", None)
        result.pop("excludedRollup", None)
    else:
        result.pop("included", None)
    return result


class ManifestWindow:
    """Thread-safe in-memory store of the latest `capacity` manifests (ephemeral plans).

    Used when manifests are not written to the database (no session, storage off, or over
    1 MiB). The oldest manifest is evicted first. `latest(session_key)` is the most recently
    put manifest for that key (by default its `sessionId`).

    Raises:
        ValueError: from the constructor if `capacity < 1`.
    """

    def __init__(self, capacity: int = 64) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity!r} must be at least 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._items: OrderedDict[str, tuple[str | None, dict[str, Any]]] = OrderedDict()
        self._latest: dict[str | None, str] = {}

    def put(self, manifest: dict[str, Any], session_key: str | None = None) -> None:
        """Remember `manifest` (keyed by its `id`); `session_key` defaults to its `sessionId`.

        Raises:
            ValueError: if the manifest has no string `id`.
        """
        manifest_id = manifest.get("id")
        if not isinstance(manifest_id, str) or not manifest_id:
            raise ValueError("manifest has no 'id'; build it with build_manifest")
        key = session_key if session_key is not None else manifest.get("sessionId")
        with self._lock:
            previous = self._items.pop(manifest_id, None)
            if previous is not None and self._latest.get(previous[0]) == manifest_id:
                del self._latest[previous[0]]
            self._items[manifest_id] = (key, manifest)
            self._latest[key] = manifest_id
            while len(self._items) > self.capacity:
                old_id, (old_key, _) = self._items.popitem(last=False)
                if self._latest.get(old_key) == old_id:
                    del self._latest[old_key]

    def get(self, manifest_id: str) -> dict[str, Any] | None:
        """The manifest with this id, or None if unknown or evicted."""
        with self._lock:
            entry = self._items.get(manifest_id)
            return entry[1] if entry is not None else None

    def update(
        self, manifest_id: str, change: Callable[[dict[str, Any]], None]
    ) -> dict[str, Any] | None:
        """Apply `change` to the kept manifest `manifest_id` in place (its place in the window
        unchanged). Returns a deep copy of the result, or None if unknown or evicted."""
        with self._lock:
            entry = self._items.get(manifest_id)
            if entry is None:
                return None
            change(entry[1])
            return copy.deepcopy(entry[1])

    def latest(self, session_key: str | None) -> dict[str, Any] | None:
        """The most recently put manifest for `session_key`, or None."""
        with self._lock:
            manifest_id = self._latest.get(session_key)
            if manifest_id is None:
                return None
            entry = self._items.get(manifest_id)
            return entry[1] if entry is not None else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)
