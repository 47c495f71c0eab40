"""Engine results as attrs classes (transitional: removed once the engine returns typed
results; the handlers then answer `result.to_wire()`)."""

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
from cattrs.errors import BaseValidationError
from pygls.exceptions import JsonRpcInternalError

from ds4_core.wire import OMIT_IF_NONE, JsonObject
from ds4_lsp.converter import RESULT_CONVERTER, describe_structure_error

R = TypeVar("R")


def result_from_core(result: Mapping[str, Any], cls: type[R], method: str) -> R:
    """Structure an engine result dict into its wire class.

    Raises:
        JsonRpcInternalError: the dict does not have the documented shape, which means
            ds4-lsp and ds4-context-core are different versions.
    """
    try:
        return RESULT_CONVERTER.structure(result, cls)
    except BaseValidationError as exc:
        problem, _ = describe_structure_error(method, exc, root="result")
        raise JsonRpcInternalError(
            f"{problem} (ds4-lsp and ds4-context-core disagree on the result shape; "
            "install the same version of both)"
        ) from None


@attrs.define
class Budget:
    """The token budget of a plan (ds4-reference.md 3.4/3.5). All values are tokens."""

    context_window: int
    output_reserve: int
    safety_margin: int
    hard_input_limit: int
    soft_limit: int
    target_input_tokens: int
    recent_tail_tokens: int
    max_retrieved_history_tokens: int
    max_project_tokens: int
    max_summary_tokens: int
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class ModelInfo:
    """The model a plan was made for. `source` says where the window came from: `request`,
    `override`, `table:<key>` or `default`. Token units; `maxOutputTokens` absent if unknown."""

    provider: str
    id: str
    context_window: int
    source: str
    max_output_tokens: int | None = None
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class PlanSession:
    """The session a plan was built from: Pi session id, resolved file path, active leaf."""

    id: str
    file: str
    leaf_id: str | None = None
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class PlanResult:
    """`ds4/plan` result.

    `mode` is `managed` (messages were planned), `observer` (messages unchanged, plan
    recorded) or `fallback` (messages unchanged because planning failed; `fallbackReason`
    says why). `estimatedTokens` uses the token estimator named by `estimatorVersion`
    (`chars-v2`, ds4_core.tokens). `manifestStored` is false when the manifest was kept in memory only (no session, or
    storage disabled). `overHardLimit` is true when `fixedTokens` + `currentTurnTokens`
    exceed `hardInputLimit` (tokens): no plan fits, the client must shorten the request.
    """

    mode: str
    messages: list[JsonObject]
    manifest_id: str
    estimated_tokens: int
    budget: Budget
    model: ModelInfo
    estimator_version: str
    over_hard_limit: bool
    current_turn_tokens: int
    fixed_tokens: int
    hard_input_limit: int
    manifest_stored: bool = False
    warnings: list[str] = attrs.Factory(list)
    stats: JsonObject = attrs.Factory(dict)
    fallback_reason: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    session: PlanSession | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    extra: JsonObject = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_core(cls, result: Mapping[str, Any], method: str) -> "PlanResult":
        """Wrap the dict returned by `ContextEngine.plan` (see `result_from_core`)."""
        return result_from_core(result, cls, method)

    def log_summary(self) -> str:
        """One log line: counts, ids and timings only."""
        return (
            f"mode={self.mode} messages={len(self.messages)} tokens={self.estimated_tokens} "
            f"manifest={self.manifest_id} warnings={len(self.warnings)}"
        )


@attrs.define
class HistoryHit:
    """A transcript entry that matched. `entryKey` is `<sessionId>:<entryId>`; `createdAt`
    is ISO-8601 UTC; `excerpt` is the quoted text, `tokens` its size (chars-v2)."""

    entry_key: str
    entry_id: str
    score: float
    reason: str
    excerpt: str
    tokens: int
    role: str | None = None
    created_at: str | None = None
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class ProjectHit:
    """A project snippet of a trusted workspace, re-validated against the live text. Lines
    are 1-based, inclusive; `path` is relative to the project root; `fileHash` is the sha256
    of the file's text. The engine's other fields (`snippetId`, `tokens`, ...) pass through."""

    path: str
    start_line: int
    end_line: int
    file_hash: str
    score: float
    reason: str
    text: str
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class RetrievalStats:
    """Counters of one retrieval; `latencyMs` in milliseconds."""

    candidates: int = 0
    duplicates: int = 0
    alternate_branch_candidates: int = 0
    already_in_context: int = 0
    latency_ms: float = 0.0
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class RetrieveResult:
    """`ds4/retrieve` result. `status` is `ok`, `no-query`, `disabled` or `no-session`;
    `query` is the query actually used (the default one when none was given)."""

    status: str
    query: str | None = None
    history: list[HistoryHit] = attrs.Factory(list)
    project: list[ProjectHit] = attrs.Factory(list)
    stats: RetrievalStats = attrs.Factory(RetrievalStats)
    warnings: list[str] = attrs.Factory(list)
    extra: JsonObject = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_core(cls, result: Mapping[str, Any], method: str) -> "RetrieveResult":
        """Wrap the dict returned by `ContextEngine.retrieve` (see `result_from_core`)."""
        return result_from_core(result, cls, method)

    def log_summary(self) -> str:
        """One log line: counts and timings only."""
        return (
            f"status={self.status} history={len(self.history)} project={len(self.project)} "
            f"candidates={self.stats.candidates} latency_ms={self.stats.latency_ms:.1f}"
        )


@attrs.define
class CompactionEntry:
    """The Pi compaction entry for the client to append (without `type`, `id`, `parentId`,
    `timestamp`, which the client's session writer sets). `tokensBefore` in tokens; `details`
    holds `readFiles`, `modifiedFiles` and the `ds4ContextEngine` record (schema 2)."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: JsonObject
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class CompactValidation:
    """How the summary fared against the contract: `status` valid | warning | invalid,
    `issueCodes` found before repairs, `repairs` applied (names, in order)."""

    status: str
    issue_codes: list[str] = attrs.Factory(list)
    repairs: list[str] = attrs.Factory(list)
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class CompactSpan:
    """What was summarized: `messageCount` messages of `tokens` tokens before
    `firstKeptEntryId`; `isSplitTurn` when the cut falls inside a turn; `previousSummaryId` the
    branch's root before this compaction (null for the first one)."""

    message_count: int
    tokens: int
    is_split_turn: bool
    first_kept_entry_id: str | None = None
    previous_summary_id: str | None = None
    extra: JsonObject = attrs.field(factory=dict, repr=False)


@attrs.define
class CompactResult:
    """`ds4/compact` result.

    `summaryId` is the new root (the node whose text is `compaction.summary`), `segmentSummaryId`
    the new segment (the same id when there was no previous root); `summaryKind` is `segment` or
    `aggregate` at `graphLevel`. `summarizer` says who wrote the segment text: `client`
    (`ds4/summarize`) or `offline`; `fallbackReason` says why it is `offline` (null otherwise).
    The batch stays `prepared` until `ds4/compactCommitted`, `ds4/compactFailed`, or a sync that
    finds the entry in the session file.
    """

    compaction: CompactionEntry
    summary_id: str
    segment_summary_id: str
    operation_id: str
    summary_kind: str
    graph_level: int
    summarizer: str
    validation: CompactValidation
    span: CompactSpan
    fallback_reason: str | None = None
    warnings: list[str] = attrs.Factory(list)
    extra: JsonObject = attrs.field(factory=dict, repr=False)

    @classmethod
    def from_core(cls, result: Mapping[str, Any], method: str) -> "CompactResult":
        """Wrap the dict returned by `ContextEngine.compact` (see `result_from_core`)."""
        return result_from_core(result, cls, method)

    def log_summary(self) -> str:
        """One log line: ids and counts only."""
        return (
            f"summary={self.summary_id} kind={self.summary_kind} level={self.graph_level} "
            f"summarizer={self.summarizer} validation={self.validation.status} "
            f"messages={self.span.message_count} tokens={self.span.tokens} "
            f"warnings={len(self.warnings)}"
        )
