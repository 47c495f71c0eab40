"""Summary graph nodes (docs/reference.md §3.13; docs/compaction.md "Graph rules").

A node is immutable once created: its id, content, kind, level, sources and children never
change. Only its lifecycle (`prepared` -> `committed` | `failed`, and `failed` -> `committed`
when the session file proves the compaction was written) and the Pi compaction entry id that
carries it are updated.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tokens import sha256_hex

SummaryKind = Literal["segment", "aggregate", "branch"]
SUMMARY_KINDS: tuple[str, ...] = ("segment", "aggregate", "branch")
Lifecycle = Literal["prepared", "committed", "failed"]
LIFECYCLES: tuple[str, ...] = ("prepared", "committed", "failed")
ValidationStatus = Literal["valid", "warning", "invalid"]

DETAILS_KEY = "ds4ContextEngine"
"""Key of our record inside a Pi compaction entry's `details` (docs/reference.md §3.13)."""
DETAILS_SCHEMA_VERSION = 2
PI_SUMMARY_ISSUE = "imported-pi-summary-unverified"
"""Issue code of a Pi-native summary imported as a `branch` node (docs/reference.md §3.13)."""


def new_summary_id() -> str:
    """A fresh ds4 node id: `s-` + 16 random hex characters."""
    return "s-" + secrets.token_hex(8)


def pi_summary_id(entry_id: str) -> str:
    """The id of the `branch` node imported from Pi compaction entry `entry_id`: `pi-` + the
    first 16 hex of sha256(`entry_id`). Pi entry ids are unique only per session, and so is
    this id, which is enough: nodes are keyed by (session, summary id). A session forked by Pi
    keeps the entry ids it copies, so its copy of the entry gets the same node id, and a copied
    ds4 aggregate over that node still finds its child."""
    return "pi-" + sha256_hex(entry_id)[:16]


@dataclass(frozen=True)
class SummaryNode:
    """One node of a session's summary graph.

    Attributes:
        summary_id: immutable id (`s-…` for ds4 nodes, `pi-…` for imported Pi summaries).
        session_id: the Pi session id the node belongs to.
        kind: segment (level 0, one compaction's span), aggregate (ordered children
            [previousRoot, newSegment]) or branch (a Pi-native summary imported as is).
        content: the summary text (Markdown; the twelve-section contract for ds4 nodes).
        source_hash: hex sha256 per docs/compaction.md "Source hashes".
        graph_level: 0 for segment and branch; max(child levels) + 1 for aggregate.
        created_at: ISO-8601 UTC with milliseconds (`generatedAt`; a Pi entry's timestamp).
        validation_status: valid | warning | invalid.
        validation_issue_codes: issue codes found before repairs, unique, in order.
        provider, model: who wrote the text (`ds4`/`offline-v1` for the offline summarizer;
            `ds4`/`merge-v1` for aggregates), or None when unknown.
        first_kept_entry_id: the compaction's first kept entry (root and segment), or None.
        tokens_before: context tokens before the compaction, or None.
        reason: manual | threshold | overflow, or None when unknown.
        lifecycle: prepared | committed | failed.
        pi_entry_id: id of the Pi compaction entry whose `summary` is this node's text (only
            the operation's root has one), or None.
        operation_id: the summary id of the root of the operation that created the node (the
            unit that is prepared, committed or failed together).
        source_entry_ids: the entries the node summarizes directly, in span order (segment and
            branch); empty for aggregate (its sources are its children's, transitively).
        child_ids: ordered children (aggregate only).
        metadata: JSON-ready extras: readFiles, modifiedFiles, isSplitTurn, messageCount,
            repairs, summarizer, fallbackReason, schemaVersion of an imported record, ...
    """

    summary_id: str
    session_id: str
    kind: SummaryKind
    content: str
    source_hash: str
    graph_level: int
    created_at: str
    validation_status: ValidationStatus
    validation_issue_codes: tuple[str, ...] = ()
    provider: str | None = None
    model: str | None = None
    first_kept_entry_id: str | None = None
    tokens_before: int | None = None
    reason: str | None = None
    lifecycle: Lifecycle = "prepared"
    pi_entry_id: str | None = None
    operation_id: str = ""
    source_entry_ids: tuple[str, ...] = ()
    child_ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def read_files(self) -> list[str]:
        """The node's known read-file inventory (`metadata.readFiles`)."""
        value = self.metadata.get("readFiles")
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []

    @property
    def modified_files(self) -> list[str]:
        """The node's known modified-file inventory (`metadata.modifiedFiles`)."""
        value = self.metadata.get("modifiedFiles")
        return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
