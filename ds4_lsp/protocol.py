"""Typed ds4/* messages: params and results on the wire, and their conversion to ds4_core.

Every class here is an attrs class whose fields are snake_case in Python and camelCase on the
wire (`context_window` <-> `contextWindow`, the lsprotocol rule). They are structured by
`CONVERTER`, a converter built on lsprotocol's that is strict about JSON types: an integer field
rejects `"12"`, `12.5` and `true`; a string field rejects numbers; an enum field rejects values
outside its set. Unknown keys are ignored and optional fields have defaults (docs/reference.md
§L3), so newer clients keep working. `describe_structure_error` turns a failed
structuring into one message that names each offending field, e.g.
`ds4/plan: params.model.contextWindow: expected an integer`; the server answers it as JSON-RPC
InvalidParams (-32602). Messages never echo the offending value.

Results are the engine's dicts seen through these classes and written back unchanged: every
field is present (None as `null`) except the few the engine only sets when they apply
(`fallbackReason`, `session`), and fields this version does not model pass through (`extra`).
So the LSP answer equals what `ds4 ... --json` prints. docs/protocol.md documents each field.
"""

import re
from collections.abc import Callable, Mapping, Sequence
from types import GenericAlias
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    BaseValidationError,
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, override
from lsprotocol import converters
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.protocol import default_converter

from ds4_core.json_bounds import MAX_SAFE_INTEGER
from ds4_core.requests import (
    CompactionReason,
    CompactRequest,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RetrieveRequest,
    SessionRef,
    SummarizeAnswer,
    SummarizeCall,
    SummarizerUnavailable,
)

DS4_PLAN = "ds4/plan"
DS4_RETRIEVE = "ds4/retrieve"
DS4_MANIFEST = "ds4/manifest"
DS4_TOOL_EXECUTED = "ds4/toolExecuted"
DS4_INDEX_UPDATED = "ds4/indexUpdated"
DS4_COMPACT = "ds4/compact"
DS4_SUMMARIZE = "ds4/summarize"
DS4_COMPACT_COMMITTED = "ds4/compactCommitted"
DS4_COMPACT_FAILED = "ds4/compactFailed"
REBUILD_INDEX = "ds4.rebuildIndex"
HEALTH = "ds4.health"
PROJECT_STATUS = "ds4.projectStatus"
SUMMARIES = "ds4.summaries"

ARGUMENT_ROOT = "params.arguments[0]"
"""The wire path of a command's argument object, as error messages name it (a command's
fields are `params.arguments[0].session.file`, ...; docs/protocol.md "Errors")."""

JsonObject = dict[str, Any]
"""A JSON object passed through as is (Pi `AgentMessage`, settings, stats)."""

MsgId = Union[int, str]  # noqa: UP007 - a runtime type alias that cattrs dispatches on

Scope = Literal["history", "project"]
ManifestView = Literal["summary", "included", "excluded", "full"]
PlanMode = Literal["managed", "observer"]
SummariesFormat = Literal["json", "dot"]

R = TypeVar("R")

OMIT_IF_NONE = "ds4_omit_if_none"
"""attrs metadata key: leave the field out of the wire object when its value is None (fields
the engine only sets when they apply, like `fallbackReason`). Other None values are `null`."""

EXTRA = "extra"
"""Result classes hold the engine's fields this version does not model in `extra`; they are
passed through to the wire unchanged, so a newer core's additions are not lost."""


class WireTypeError(TypeError):
    """A JSON value of the wrong type; `expected` says what the field takes ("an integer")."""

    def __init__(self, expected: str) -> None:
        super().__init__(f"expected {expected}")
        self.expected = expected


def camel_case(name: str) -> str:
    """`context_window` -> `contextWindow`; a trailing `_` is dropped (lsprotocol's rule)."""
    head, *rest = name.removesuffix("_").split("_")
    return head + "".join(part.title() for part in rest)


# --------------------------------------------------------------------------- params


@attrs.define
class SessionParams:
    """A Pi session file and optionally the leaf entry whose branch is active.

    `file` is a filesystem path (absolute, or relative to the server's working directory);
    `leafId` defaults to the last entry in file order (docs/reference.md §P6).
    """

    file: str
    leaf_id: str | None = None

    def to_core(self) -> SessionRef:
        """The core `SessionRef`."""
        return SessionRef(file=self.file, leaf_id=self.leaf_id)


@attrs.define
class ModelParams:
    """The model of the planned call. Missing parts come from the session's current model,
    `modelAwareness.overrides` and the table of well-known models. Units: tokens."""

    provider: str | None = None
    id: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None

    def to_core(self) -> ModelSpec:
        """The core `ModelSpec`."""
        return ModelSpec(
            provider=self.provider,
            id=self.id,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
        )


@attrs.define
class PlanParams:
    """`ds4/plan` params: plan the messages of the next model call.

    With `messages` absent, the messages are built from `session`'s active branch and
    `request` is appended as the new user message. `fixedTokens` is the size of the system
    prompt and tool schemas (tokens). `mode` overrides the `context.mode` setting.
    """

    session: SessionParams | None = None
    messages: list[JsonObject] | None = None
    request: str | None = None
    model: ModelParams = attrs.Factory(ModelParams)
    fixed_tokens: int = 0
    mode: PlanMode | None = None

    def to_core(self) -> PlanRequest:
        """The core `PlanRequest`."""
        return PlanRequest(
            session=self.session.to_core() if self.session else None,
            messages=self.messages,
            request=self.request,
            model=self.model.to_core(),
            fixed_tokens=self.fixed_tokens,
            mode=self.mode,
        )


@attrs.define
class RetrieveParams:
    """`ds4/retrieve` params: rank transcript evidence for a query.

    `query` defaults to the text of the last user message on the session's active branch;
    `scopes` defaults to `["history"]`; `maxResults` (1..100) and `maxTokens` (tokens, >= 1)
    default to the `retrieval.maxResults` and `context.maxRetrievedHistoryTokens` settings.
    """

    query: str | None = None
    session: SessionParams | None = None
    scopes: list[Scope] | None = None
    max_results: int | None = None
    max_tokens: int | None = None

    def to_core(self) -> RetrieveRequest:
        """The core `RetrieveRequest`."""
        return RetrieveRequest(
            query=self.query,
            session=self.session.to_core() if self.session else None,
            scopes=tuple(self.scopes) if self.scopes is not None else ("history",),
            max_results=self.max_results,
            max_tokens=self.max_tokens,
        )


@attrs.define
class ManifestParams:
    """`ds4/manifest` params: a stored manifest by `id`, or the latest one of `session` with
    `latest: true`. `view` selects how much of the plan's item lists is returned."""

    id: str | None = None
    session: SessionParams | None = None
    latest: bool = False
    view: ManifestView = "summary"

    def to_core(self) -> ManifestRequest:
        """The core `ManifestRequest`."""
        return ManifestRequest(
            id=self.id,
            session=self.session.to_core() if self.session else None,
            latest=self.latest,
            view=self.view,
        )


@attrs.define
class ToolExecutedParams:
    """`ds4/toolExecuted` params (a notification): an agent tool ran.

    `tool` is the tool's name (`write`, `edit`, `bash`, `read`, ...); `paths` the files it
    touched when known, absolute or relative to the workspace root.
    """

    tool: str
    paths: list[str] = attrs.Factory(list)


@attrs.define
class CompactParams:
    """`ds4/compact` params: summarize the older part of a session's active branch.

    `firstKeptEntryId` chooses the span (the entries before it, after the branch's latest
    compaction); absent, the most recent `compaction.keepRecentTokens` tokens are kept.
    `previousSummaryId`, when given, must be the branch's current root (it is checked).
    `customInstructions` are passed on to the summarizer's prompt (docs/compaction.md).
    """

    session: SessionParams
    reason: CompactionReason | None = None
    first_kept_entry_id: str | None = None
    previous_summary_id: str | None = None
    custom_instructions: str | None = None

    def to_core(self) -> CompactRequest:
        """The core `CompactRequest` (`reason` absent or null: `manual`)."""
        return CompactRequest(
            session=self.session.to_core(),
            reason=self.reason or "manual",
            first_kept_entry_id=self.first_kept_entry_id,
            previous_summary_id=self.previous_summary_id,
            custom_instructions=self.custom_instructions,
        )


@attrs.define
class CompactCommittedParams:
    """`ds4/compactCommitted` params (a notification): the client wrote the compaction entry
    of the operation whose root is `summaryId`; `entryId` is that Pi entry's id, if known.
    `session` (optional) names the session file it was written to; without it the operation is
    committed in every session where it is prepared or failed (summary ids are unique per
    session only: a forked session holds copies)."""

    summary_id: str
    entry_id: str | None = None
    session: SessionParams | None = None


@attrs.define
class CompactFailedParams:
    """`ds4/compactFailed` params (a notification): the client did not write the compaction
    entry of the operation whose root is `summaryId`; `reason` says why, if known. `session`
    (optional) names the session file; without it the operation is failed in every session
    where it is prepared."""

    summary_id: str
    reason: str | None = None
    session: SessionParams | None = None


@attrs.define
class SummariesArguments:
    """The one argument object of the `ds4.summaries` command: the session (and leaf) whose
    summary graph to show, and `format` (`dot` adds the Graphviz text as `dot`)."""

    session: SessionParams
    format: SummariesFormat = "json"


@attrs.define
class SummarizeParams:
    """`ds4/summarize` params (a request from the server to the client).

    `prompt` is the whole prompt (summary contract, file lists, previous summary, the quoted
    conversation source); `tokenLimit` the most tokens the summary may have (chars-v2);
    `sourceHash` the hex sha256 of the span (docs/compaction.md "Source hashes");
    `sourceEntryIds` the span's entry ids in order; `readFiles` / `modifiedFiles` the known
    file inventories of the span.
    """

    summary_kind: str
    prompt: str
    source_hash: str
    token_limit: int
    session_id: str
    source_entry_ids: list[str]
    read_files: list[str]
    modified_files: list[str]

    @classmethod
    def from_core(cls, call: SummarizeCall) -> "SummarizeParams":
        """The wire params of the engine's summarize call."""
        return cls(
            summary_kind=call.summary_kind,
            prompt=call.prompt,
            source_hash=call.source_hash,
            token_limit=call.token_limit,
            session_id=call.session_id,
            source_entry_ids=list(call.source_entry_ids),
            read_files=list(call.read_files),
            modified_files=list(call.modified_files),
        )


@attrs.define
class SummarizeResult:
    """`ds4/summarize` result (the client's answer): the summary text (Markdown, the twelve
    sections of docs/compaction.md) and, when known, the provider and model that wrote it."""

    summary: str
    provider: str | None = None
    model: str | None = None

    def to_core(self) -> SummarizeAnswer:
        """The core `SummarizeAnswer`."""
        return SummarizeAnswer(summary=self.summary, provider=self.provider, model=self.model)


@attrs.define
class InitializationOptions:
    """`initializationOptions` of `initialize`.

    `trusted`: whether the workspace is trusted (project files may be read); `settings`:
    settings in the key names of docs/reference.md §2, nested or dotted, optionally under a `ds4`
    key; `databasePath`: the database file, overriding `DS4_DB` and `storage.databasePath`.
    """

    trusted: bool = False
    settings: JsonObject | None = None
    database_path: str | None = None


# --------------------------------------------------------------------------- results


@attrs.define
class Budget:
    """The token budget of a plan (docs/reference.md §3.4/§3.5). All values are tokens."""

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


# --------------------------------------------------------------------------- JSON-RPC envelopes


@attrs.define
class PlanRequestMessage:
    """The JSON-RPC request of `ds4/plan`."""

    id: MsgId
    params: PlanParams
    method: str = DS4_PLAN
    jsonrpc: str = "2.0"


@attrs.define
class PlanResponseMessage:
    """The JSON-RPC response of `ds4/plan`."""

    id: MsgId
    result: PlanResult | None = None
    jsonrpc: str = "2.0"


@attrs.define
class RetrieveRequestMessage:
    """The JSON-RPC request of `ds4/retrieve` (params may be omitted: all fields optional)."""

    id: MsgId
    params: RetrieveParams = attrs.Factory(RetrieveParams)
    method: str = DS4_RETRIEVE
    jsonrpc: str = "2.0"


@attrs.define
class RetrieveResponseMessage:
    """The JSON-RPC response of `ds4/retrieve`."""

    id: MsgId
    result: RetrieveResult | None = None
    jsonrpc: str = "2.0"


@attrs.define
class ManifestRequestMessage:
    """The JSON-RPC request of `ds4/manifest`."""

    id: MsgId
    params: ManifestParams = attrs.Factory(ManifestParams)
    method: str = DS4_MANIFEST
    jsonrpc: str = "2.0"


@attrs.define
class ManifestResponseMessage:
    """The JSON-RPC response of `ds4/manifest`: the manifest object (metadata only)."""

    id: MsgId
    result: JsonObject | None = None
    jsonrpc: str = "2.0"


@attrs.define
class ToolExecutedMessage:
    """The JSON-RPC notification `ds4/toolExecuted`."""

    params: ToolExecutedParams
    method: str = DS4_TOOL_EXECUTED
    jsonrpc: str = "2.0"


@attrs.define
class CompactRequestMessage:
    """The JSON-RPC request of `ds4/compact`."""

    id: MsgId
    params: CompactParams
    method: str = DS4_COMPACT
    jsonrpc: str = "2.0"


@attrs.define
class CompactResponseMessage:
    """The JSON-RPC response of `ds4/compact`."""

    id: MsgId
    result: CompactResult | None = None
    jsonrpc: str = "2.0"


@attrs.define
class SummarizeRequestMessage:
    """The JSON-RPC request `ds4/summarize` (server to client)."""

    id: MsgId
    params: SummarizeParams
    method: str = DS4_SUMMARIZE
    jsonrpc: str = "2.0"


@attrs.define
class SummarizeResponseMessage:
    """The client's response to `ds4/summarize`. The result is kept as raw JSON and checked by
    the summarizer bridge, so a wrong shape becomes an offline fallback with a reason instead
    of a message pygls cannot structure (which would look like no answer at all)."""

    id: MsgId
    result: Any = None
    jsonrpc: str = "2.0"


@attrs.define
class CompactCommittedMessage:
    """The JSON-RPC notification `ds4/compactCommitted`."""

    params: CompactCommittedParams
    method: str = DS4_COMPACT_COMMITTED
    jsonrpc: str = "2.0"


@attrs.define
class CompactFailedMessage:
    """The JSON-RPC notification `ds4/compactFailed`."""

    params: CompactFailedParams
    method: str = DS4_COMPACT_FAILED
    jsonrpc: str = "2.0"


MESSAGE_TYPES: dict[str, tuple[type, type | None]] = {
    DS4_PLAN: (PlanRequestMessage, PlanResponseMessage),
    DS4_RETRIEVE: (RetrieveRequestMessage, RetrieveResponseMessage),
    DS4_MANIFEST: (ManifestRequestMessage, ManifestResponseMessage),
    DS4_TOOL_EXECUTED: (ToolExecutedMessage, None),
    DS4_COMPACT: (CompactRequestMessage, CompactResponseMessage),
    DS4_SUMMARIZE: (SummarizeRequestMessage, SummarizeResponseMessage),
    DS4_COMPACT_COMMITTED: (CompactCommittedMessage, None),
    DS4_COMPACT_FAILED: (CompactFailedMessage, None),
}
"""method -> (message type, response message type or None for a notification) for the custom
requests and notifications, in both directions (`ds4/summarize` goes server to client)."""


# --------------------------------------------------------------------------- converter


def is_wire_type(cls: Any) -> bool:
    """True for the attrs classes of this module (structured by `CONVERTER`)."""
    return isinstance(cls, type) and attrs.has(cls) and cls.__module__ == __name__


def _strict_scalar(
    kind: type[Any] | tuple[type[Any], ...], expected: str
) -> Callable[[Any, Any], Any]:
    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) and kind is not bool:
            raise WireTypeError(expected)
        if not isinstance(value, kind):
            raise WireTypeError(expected)
        return float(value) if kind == (int, float) else value

    return structure


def _structure_int(value: Any, _: Any) -> int:
    """An integer within +-MAX_SAFE_INTEGER (2^53 - 1): what JavaScript clients represent
    exactly (json_bounds)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireTypeError("an integer")
    if abs(value) > MAX_SAFE_INTEGER:
        raise WireTypeError(f"an integer within +-{MAX_SAFE_INTEGER} (2^53 - 1)")
    return value


def _structure_str(value: Any, _: Any) -> str:
    """A string of Unicode scalar values: a lone surrogate (`"\\ud800"` on the wire) cannot
    be written as UTF-8 (SQLite, file names, logs), so it is refused here, naming the field."""
    if not isinstance(value, str):
        raise WireTypeError("a string")
    if not value.isascii() and _LONE_SURROGATE.search(value):
        raise WireTypeError("a string without lone surrogates (unpaired \\ud800-\\udfff)")
    return value


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _unstructure_int(value: int) -> int:
    """Integers in results are clamped to +-MAX_SAFE_INTEGER (a sum of huge inputs must not
    reach a JavaScript client as an inexact number); booleans pass unchanged."""
    if isinstance(value, bool):
        return value
    return max(-MAX_SAFE_INTEGER, min(MAX_SAFE_INTEGER, value))


def _structure_msg_id(value: Any, _: Any) -> MsgId:
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise WireTypeError("an integer or a string")


def _structure_json_object(value: Any, _: Any) -> JsonObject:
    if not isinstance(value, dict):
        raise WireTypeError("an object")
    return value


def _literal_hook(cls: Any) -> Callable[[Any, Any], Any]:
    options = get_args(cls)
    expected = "one of " + ", ".join(repr(o) for o in options)

    def structure(value: Any, _: Any) -> Any:
        if isinstance(value, bool) or value not in options:
            raise WireTypeError(expected)
        return value

    return structure


def _list_hook(cls: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    (item_type,) = get_args(cls) or (Any,)
    list_type = GenericAlias(list, (item_type,))
    # cattrs annotates `type`, but its own converter passes generic aliases such as list[int].
    structure_items = list_structure_factory(list_type, converter)  # type: ignore[arg-type]

    def structure(value: Any, _: Any) -> list[Any]:
        if not isinstance(value, list):
            raise WireTypeError("an array")
        return structure_items(value, cls)

    return structure


def _object_hook(cls: type, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    # Typed `Any` because mypy cannot tell these field names from the keyword parameters
    # (`_cattrs_*`) that `make_dict_structure_fn` declares before `**kwargs`.
    renames: dict[str, Any] = {
        a.name: override(omit=True) if a.name == EXTRA else override(rename=camel_case(a.name))
        for a in attrs.fields(cls)
    }
    structure_fields: cattrs.SimpleStructureHook[Mapping[str, Any], Any] = make_dict_structure_fn(
        cls, converter, **renames
    )
    known = {camel_case(a.name) for a in attrs.fields(cls) if a.name != EXTRA}
    keeps_extra = EXTRA in attrs.fields_dict(cls)

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, dict):
            raise WireTypeError("an object")
        structured = structure_fields(value, cls)
        if keeps_extra:
            setattr(structured, EXTRA, {k: v for k, v in value.items() if k not in known})
        return structured

    return structure


def _object_unstructure_hook(cls: type, converter: cattrs.Converter) -> Callable[[Any], Any]:
    fields = [
        (a.name, camel_case(a.name), bool(a.metadata.get(OMIT_IF_NONE)))
        for a in attrs.fields(cls)
        if a.name != EXTRA
    ]

    def unstructure(value: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key, omit_if_none in fields:
            item = getattr(value, name)
            if item is not None or not omit_if_none:
                out[key] = converter.unstructure(item)
        for key, item in getattr(value, EXTRA, {}).items():
            out.setdefault(key, item)
        return out

    return unstructure


def _clamp_int(value: Any, _: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireTypeError("an integer")
    return _unstructure_int(value)


def _make_converter(results: bool = False) -> cattrs.Converter:
    converter = converters.get_converter(cattrs.Converter(forbid_extra_keys=False))
    converter.register_structure_hook(int, _clamp_int if results else _structure_int)
    converter.register_structure_hook(float, _strict_scalar((int, float), "a number"))
    converter.register_structure_hook(str, _structure_str)
    converter.register_unstructure_hook(int, _unstructure_int)
    converter.register_structure_hook(bool, _strict_scalar(bool, "true or false"))
    # Generic aliases and unions go through predicates: `register_structure_hook(Union[int,
    # str])` would register the hook for `int` and `str` themselves.
    converter.register_structure_hook_func(lambda t: t == MsgId, _structure_msg_id)
    converter.register_structure_hook_func(lambda t: t == JsonObject, _structure_json_object)
    converter.register_structure_hook_func(lambda t: t is Any, lambda value, _: value)
    converter.register_structure_hook_factory(lambda t: get_origin(t) is Literal, _literal_hook)
    converter.register_structure_hook_factory(lambda t: get_origin(t) is list, _list_hook)
    converter.register_structure_hook_factory(is_wire_type, _object_hook)
    converter.register_unstructure_hook_factory(is_wire_type, _object_unstructure_hook)
    return converter


CONVERTER = _make_converter()
"""Structures and unstructures the classes of this module (strict JSON types, camelCase)."""

RESULT_CONVERTER = _make_converter(results=True)
"""`CONVERTER` for engine results: integers beyond +-MAX_SAFE_INTEGER are clamped to it
instead of refused (a result must still be answered)."""


def server_converter() -> cattrs.Converter:
    """pygls's default converter, delegating the classes of this module to `CONVERTER`.

    Used as the server's `converter_factory`, so standard LSP messages keep pygls's handling.
    """
    converter = default_converter()
    converter.register_structure_hook_factory(is_wire_type, CONVERTER.get_structure_hook)
    converter.register_unstructure_hook_factory(is_wire_type, CONVERTER.get_unstructure_hook)
    return converter


# --------------------------------------------------------------------------- errors


def field_errors(exc: BaseException, path: str = "") -> list[tuple[str, str]]:
    """Flatten a cattrs structuring error into `(wire path, problem)` pairs.

    Paths use wire (camelCase) names and `[i]` for array items, e.g. `params.messages[2]`.
    Problems say what was expected, never what was received.
    """
    if isinstance(exc, ClassValidationError | IterableValidationError):
        found: list[tuple[str, str]] = []
        with_notes, without_notes = exc.group_exceptions()
        for inner, note in with_notes:
            if isinstance(note, AttributeValidationNote):
                key = camel_case(note.name)
                found += field_errors(inner, f"{path}.{key}" if path else key)
            elif isinstance(note, IterableValidationNote):
                found += field_errors(inner, f"{path}[{note.index}]")
        for inner in without_notes:
            found += field_errors(inner, path)
        return found
    if isinstance(exc, KeyError):
        return [(path, "required field missing")]
    if isinstance(exc, WireTypeError):
        return [(path, f"expected {exc.expected}")]
    return [(path, f"invalid value ({type(exc).__name__})")]


def describe_structure_error(
    label: str, exc: BaseValidationError, root: str = ""
) -> tuple[str, list[str]]:
    """A message naming every bad field, and the list of their wire paths.

    `label` starts the message (the method); `root` prefixes each path (`result` for
    results; request envelopes already start their paths with `params`). Example:
    `("ds4/plan: params.model.contextWindow: expected an integer",
    ["params.model.contextWindow"])`.
    """
    errors = field_errors(exc, root) or [(root, "could not be read")]
    paths = [path or "params" for path, _ in errors]
    message = "; ".join(
        f"{path}: {problem}" for path, (_, problem) in zip(paths, errors, strict=True)
    )
    return f"{label}: {message}", paths


def settings_section(raw: Any) -> Mapping[str, Any] | None:
    """The ds4 settings inside a client's settings object, or None when there are none.

    Clients send either `{"ds4": {...}}` (VS Code's section layout) or the settings at the top
    level; both are accepted. Anything that is not an object gives None.
    """
    if not isinstance(raw, Mapping):
        return None
    section = raw.get("ds4")
    return section if isinstance(section, Mapping) else raw


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


def command_argument(command: str, arguments: Sequence[Any], cls: type[R]) -> R:
    """Structure the one argument object of a workspace command into `cls`.

    Raises:
        JsonRpcInvalidParams: not exactly one argument, or fields of the wrong type or
            missing; the message names each field from `params.arguments[0]` (e.g.
            `ds4.summaries: params.arguments[0].session.file: required field missing`) and
            `data.fields` lists their paths (docs/reference.md §L4).
    """
    if len(arguments) != 1:
        raise JsonRpcInvalidParams(
            message=f"{command}: params.arguments: expected one argument object "
            f"(got {len(arguments)})",
            data={"fields": ["params.arguments"]},
        )
    try:
        return CONVERTER.structure(arguments[0], cls)
    except BaseValidationError as exc:
        message, fields = describe_structure_error(command, exc, root=ARGUMENT_ROOT)
    except WireTypeError as exc:  # the argument itself is not an object
        message, fields = f"{command}: {ARGUMENT_ROOT}: {exc}", [ARGUMENT_ROOT]
    raise JsonRpcInvalidParams(message=message, data={"fields": fields})


def summarize_answer(result: Any) -> SummarizeAnswer:
    """The core answer from the client's `ds4/summarize` result (raw JSON).

    Raises:
        SummarizerUnavailable: the result is not an object with a string `summary`, or its
            `provider` / `model` are not strings; the message (the compaction's
            `fallbackReason`) says which, without echoing the values.
    """
    if not isinstance(result, dict) or not isinstance(result.get("summary"), str):
        raise SummarizerUnavailable(f"{DS4_SUMMARIZE} answered without a string `summary`")
    # `provider: null` / `model: null` mean "unknown", as if absent.
    present = {key: value for key, value in result.items() if value is not None}
    try:
        return CONVERTER.structure(present, SummarizeResult).to_core()
    except BaseValidationError as exc:
        problem, _ = describe_structure_error(DS4_SUMMARIZE, exc, root="result")
        raise SummarizerUnavailable(f"{problem} in the client's answer") from None


def parse_initialization_options(raw: Any) -> tuple[InitializationOptions, list[str]]:
    """Read `initializationOptions`, ignoring each invalid field with a warning.

    Never raises: a bad field falls back to its default and the warning names it
    (`initializationOptions.trusted: expected true or false; ignored`).
    """
    if raw is None:
        return InitializationOptions(), []
    if not isinstance(raw, dict):
        return InitializationOptions(), ["initializationOptions: expected an object; ignored"]
    data = dict(raw)
    warnings: list[str] = []
    for _ in range(len(data) + 1):
        try:
            return CONVERTER.structure(data, InitializationOptions), warnings
        except BaseValidationError as exc:
            for path, problem in field_errors(exc):
                warnings.append(f"initializationOptions.{path}: {problem}; ignored")
                data.pop(path.split(".")[0].split("[")[0], None)
    return InitializationOptions(), warnings
