"""The params of the ds4/* methods and commands on the wire, as attrs classes.

Fields are snake_case in Python and camelCase on the wire (`context_window` <->
`contextWindow`, the lsprotocol rule). `ds4_lsp.converter` structures them strictly (an integer
field rejects `"12"`, `12.5` and `true`; a string field rejects numbers; an enum field rejects
values outside its set) and names every bad field. Unknown keys are ignored and optional fields
have defaults (docs/reference.md §L3), so newer clients keep working. `to_core()` gives the
core request (`ds4_core.requests`). docs/protocol.md documents each field.

`SummarizeResult` is the client's answer to the server's `ds4/summarize`: input too, read as
strictly as params.
"""

from collections.abc import Mapping
from typing import Any, Literal, Union

import attrs

from ds4_core.requests import (
    ArtifactSearchRequest,
    CompactionReason,
    CompactRequest,
    ManifestRequest,
    ManifestView,
    MemoryWriteRequest,
    ModelSpec,
    PlanRequest,
    PlanRequestMode,
    RetrieveRequest,
    Scope,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
    SummarizeAnswer,
    SummarizeCall,
    UsageCounts,
    UsageReport,
)
from ds4_core.wire import JsonObject

MsgId = Union[int, str]  # noqa: UP007 - a runtime type alias that cattrs dispatches on
"""A JSON-RPC message id."""

SummariesFormat = Literal["json", "dot"]


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
    `modelAwareness.overrides` and the table of well-known models. Units: tokens. `api`: the
    provider API the client calls (Pi's `api`; native continuation needs `openai-responses`)."""

    provider: str | None = None
    id: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    api: str | None = None

    def to_core(self) -> ModelSpec:
        """The core `ModelSpec`."""
        return ModelSpec(
            provider=self.provider,
            id=self.id,
            context_window=self.context_window,
            max_output_tokens=self.max_output_tokens,
            api=self.api,
        )


@attrs.define
class PlanParams:
    """`ds4/plan` params: plan the messages of the next model call.

    With `messages` absent, the messages are built from `session`'s active branch and
    `request` is appended as the new user message. `fixedTokens` is the size of the system
    prompt and tool schemas (tokens). `mode` overrides the `context.mode` setting.
    `messageRefs`: session messages sent unchanged are answered as `{"entryRef": id}`.
    `requestOptions`: the provider request body without `input` and `previous_response_id`
    (native continuation hashes it; never kept).
    """

    session: SessionParams | None = None
    messages: list[JsonObject] | None = None
    request: str | None = None
    model: ModelParams = attrs.Factory(ModelParams)
    fixed_tokens: int = 0
    mode: PlanRequestMode | None = None
    message_refs: bool = False
    request_options: JsonObject | None = None

    def to_core(self) -> PlanRequest:
        """The core `PlanRequest`."""
        return PlanRequest(
            session=self.session.to_core() if self.session else None,
            messages=self.messages,
            request=self.request,
            model=self.model.to_core(),
            fixed_tokens=self.fixed_tokens,
            mode=self.mode,
            message_refs=self.message_refs,
            request_options=self.request_options,
        )


@attrs.define
class RetrieveParams:
    """`ds4/retrieve` params: rank transcript evidence for a query.

    `query` defaults to the text of the last user message on the session's active branch;
    `scopes` defaults to `["history"]`; `maxResults` (1..100) and `maxTokens` (tokens, >= 1)
    default to the `retrieval.maxResults` and `context.maxRetrievedHistoryTokens` settings.
    `model` names the destination of the hits (docs/privacy.md): with a provider, hits are
    written for it (withheld ones left out, secrets redacted for a remote one); without,
    hits are only classified.
    """

    query: str | None = None
    session: SessionParams | None = None
    scopes: list[Scope] | None = None
    max_results: int | None = None
    max_tokens: int | None = None
    model: ModelParams | None = None

    def to_core(self) -> RetrieveRequest:
        """The core `RetrieveRequest`."""
        return RetrieveRequest(
            query=self.query,
            session=self.session.to_core() if self.session else None,
            scopes=tuple(self.scopes) if self.scopes is not None else ("history",),
            max_results=self.max_results,
            max_tokens=self.max_tokens,
            model=self.model.to_core() if self.model else None,
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
class MemoryParams:
    """`ds4/memory` params: list the items that apply to `session` (synced first), or all of
    them without it; `includeInactive` adds superseded, invalid, expired and deleted ones."""

    session: SessionParams | None = None
    include_inactive: bool = False


@attrs.define
class PinParams:
    """`ds4/pin` params: pin `content` (at most `memory.maxPinChars` characters) to the session
    (`scope` `session`, the default), its active branch (`branch`: through the leaf) or its
    project (`project`: the session's working directory); `supersedes` replaces an active pin."""

    session: SessionParams
    content: str
    scope: str | None = None
    classification: str | None = None
    source_entry_id: str | None = None
    source_file: str | None = None
    supersedes: str | None = None

    def to_core(self) -> MemoryWriteRequest:
        """The core `MemoryWriteRequest`."""
        return MemoryWriteRequest(
            session=self.session.to_core(),
            operation="pin",
            text=self.content,
            scope=self.scope,
            classification=self.classification,
            source_entry_id=self.source_entry_id,
            source_file=self.source_file,
            supersedes=self.supersedes,
        )


@attrs.define
class UnpinParams:
    """`ds4/unpin` params: delete the active pin `pinId`, with an optional `reason`."""

    session: SessionParams
    pin_id: str
    reason: str | None = None

    def to_core(self) -> MemoryWriteRequest:
        """The core `MemoryWriteRequest`."""
        return MemoryWriteRequest(
            session=self.session.to_core(),
            operation="unpin",
            target_id=self.pin_id,
            reason=self.reason,
        )


@attrs.define
class RememberParams:
    """`ds4/remember` params: remember `claim` (at most `memory.maxClaimChars` characters) for
    the project (`scope` `project`, the default) or the session; `key` replaces the automatic
    key; `supersedes` replaces an active memory item."""

    session: SessionParams
    claim: str
    scope: str | None = None
    key: str | None = None
    classification: str | None = None
    source_entry_ids: list[str] = attrs.Factory(list)
    supersedes: str | None = None

    def to_core(self) -> MemoryWriteRequest:
        """The core `MemoryWriteRequest`."""
        return MemoryWriteRequest(
            session=self.session.to_core(),
            operation="remember",
            text=self.claim,
            scope=self.scope,
            key=self.key,
            classification=self.classification,
            source_entry_ids=tuple(self.source_entry_ids),
            supersedes=self.supersedes,
        )


@attrs.define
class ForgetParams:
    """`ds4/forget` params: mark the active memory item `memoryId` `invalid` (the default) or
    `expired`, with an optional `reason`."""

    session: SessionParams
    memory_id: str
    status: str | None = None
    reason: str | None = None

    def to_core(self) -> MemoryWriteRequest:
        """The core `MemoryWriteRequest`."""
        return MemoryWriteRequest(
            session=self.session.to_core(),
            operation="forget",
            target_id=self.memory_id,
            status=self.status,
            reason=self.reason,
        )


@attrs.define
class SessionOpenParams:
    """`ds4/sessionOpen` params: create a server-owned session, or reopen one by `sessionId`
    (docs/sessions.md). `cwd` is recorded in the header (default: the first workspace folder,
    else the server's working directory); `title` (<= 200 characters) is its Pi
    `session_info` name."""

    cwd: str | None = None
    title: str | None = None
    session_id: str | None = None

    def to_core(self, default_cwd: str | None) -> SessionOpenRequest:
        """The core `SessionOpenRequest` (`cwd` absent: a new session records `default_cwd`,
        a reopened one keeps its own)."""
        return SessionOpenRequest(
            cwd=self.cwd, title=self.title, session_id=self.session_id, default_cwd=default_cwd
        )


@attrs.define
class SessionAppendParams:
    """`ds4/sessionAppend` params: append Pi messages (user, assistant, toolResult; 1..1000,
    each checked by the engine) to the server-owned session `session.file`, the first as a
    child of `parentId`, else of `session.leafId`, else of the file's last entry."""

    session: SessionParams
    messages: list[JsonObject]
    parent_id: str | None = None

    def to_core(self) -> SessionAppendRequest:
        """The core `SessionAppendRequest`."""
        return SessionAppendRequest(
            session=self.session.to_core(), messages=self.messages, parent_id=self.parent_id
        )


@attrs.define
class ArtifactSearchParams:
    """`ds4/artifactSearch` params: a literal, case-insensitive `query` (1..1000 characters)
    in the artifact `artifactId` (64 lower-case hex digits) or in the artifacts referenced on
    `session`'s active branch; `maxMatches` 1..100 (default `artifacts.maxSearchMatches`).
    One of `artifactId` and `session` is required (the engine checks the ranges)."""

    query: str
    artifact_id: str | None = None
    session: SessionParams | None = None
    max_matches: int | None = None

    def to_core(self) -> ArtifactSearchRequest:
        """The core `ArtifactSearchRequest`."""
        return ArtifactSearchRequest(
            query=self.query,
            artifact_id=self.artifact_id,
            session=self.session.to_core() if self.session else None,
            max_matches=self.max_matches,
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
class UsageCountsParams:
    """A provider's counts for one call in Pi's `Usage` shape (tokens, integers >= 0): `input`
    not served from a cache, `output`, `cacheRead` from the prompt cache, `cacheWrite` into it.
    Other keys of Pi's object (`totalTokens`, `cost`) are ignored, so it can be sent as is."""

    input: int
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def to_core(self) -> UsageCounts:
        """The core `UsageCounts`."""
        return UsageCounts(self.input, self.output, self.cache_read, self.cache_write)


@attrs.define
class UsageParams:
    """`ds4/usage` params (a notification, after each provider response): the usage of the
    call planned as `manifestId`, answered by `provider`/`model`; Pi's `stopReason` when known
    (`error` and `aborted` do not calibrate). `outputItems` (the response as Pi messages) or
    `outputItemHashes`, and `hasResponseId`, feed native continuation (docs/model-awareness.md).
    """

    manifest_id: str
    provider: str
    model: str
    usage: UsageCountsParams
    stop_reason: str | None = None
    output_items: list[JsonObject] | None = None
    output_item_hashes: list[str] | None = None
    has_response_id: bool | None = None

    def to_core(self) -> UsageReport:
        """The core `UsageReport`."""
        return UsageReport(
            manifest_id=self.manifest_id,
            provider=self.provider,
            model=self.model,
            usage=self.usage.to_core(),
            stop_reason=self.stop_reason,
            output_items=tuple(self.output_items) if self.output_items is not None else None,
            output_item_hashes=(
                tuple(self.output_item_hashes) if self.output_item_hashes is not None else None
            ),
            has_response_id=self.has_response_id,
        )


@attrs.define
class CompactParams:
    """`ds4/compact` params: summarize the older part of a session's active branch.

    `firstKeptEntryId` chooses the span (the entries before it, after the branch's latest
    compaction); absent, the most recent `compaction.keepRecentTokens` tokens are kept.
    `previousSummaryId`, when given, must be the branch's current root (it is checked).
    `customInstructions` are passed on to the summarizer's prompt (docs/compaction.md).
    `model` names the model that answers `ds4/summarize`: its provider is the destination of
    the summary prompt (docs/privacy.md); absent, the session's current model.
    """

    session: SessionParams
    reason: CompactionReason | None = None
    first_kept_entry_id: str | None = None
    previous_summary_id: str | None = None
    custom_instructions: str | None = None
    model: ModelParams | None = None

    def to_core(self) -> CompactRequest:
        """The core `CompactRequest` (`reason` absent or null: `manual`)."""
        return CompactRequest(
            session=self.session.to_core(),
            reason=self.reason or "manual",
            first_kept_entry_id=self.first_kept_entry_id,
            previous_summary_id=self.previous_summary_id,
            custom_instructions=self.custom_instructions,
            model=self.model.to_core() if self.model else None,
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
class ContinuationSessionParams:
    """The session of `ds4/continuationFailed`: `file` as in every method; `path` is accepted
    as its other name."""

    file: str | None = None
    path: str | None = None

    def to_core(self) -> SessionRef:
        """The core `SessionRef` (an empty `file` when neither is given: the engine names it)."""
        return SessionRef(file=self.file or self.path or "")


@attrs.define
class ContinuationFailedParams:
    """`ds4/continuationFailed` params (a notification): the provider rejected the
    `previous_response_id` of a native-continuation call (a stale handle). The session's
    continuation states (of `provider`/`model` when given) are dropped, so the next plan is
    `full`. `reason` (the client's words, or the provider's error object: any JSON) is
    never read, stored or logged, so no shape of it can make the notification fail."""

    session: ContinuationSessionParams
    provider: str | None = None
    model: str | None = None
    reason: Any = None


@attrs.define
class SummariesArguments:
    """The one argument object of the `ds4.summaries` command: the session (and leaf) whose
    summary graph to show, and `format` (`dot` adds the Graphviz text as `dot`)."""

    session: SessionParams
    format: SummariesFormat = "json"


@attrs.define
class GcArtifactsArguments:
    """The optional argument object of the `ds4.gcArtifacts` command: `dryRun` counts what
    would be removed and removes nothing; `force` collects even when the index holds no
    session while objects exist (refused otherwise)."""

    dry_run: bool = False
    force: bool = False


@attrs.define
class PrivacyArguments:
    """The optional argument object of the `ds4.privacy` command: the destination to explain,
    as `model` (`provider/id`, or a bare provider id) or `provider`. Neither: an unnamed
    provider (treated as remote)."""

    model: str | None = None
    provider: str | None = None

    def provider_id(self) -> str | None:
        """The provider asked about (`provider`, else the part of `model` before `/`)."""
        if self.provider:
            return self.provider
        if self.model:
            return self.model.split("/", 1)[0] or None
        return None


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


def settings_section(raw: Any) -> Mapping[str, Any] | None:
    """The ds4 settings inside a client's settings object (`initializationOptions.settings`,
    `workspace/didChangeConfiguration`, `workspace/configuration`), or None when there are none.

    Clients send either `{"ds4": {...}}` (VS Code's section layout) or the settings at the top
    level; both are accepted. Anything that is not an object gives None.
    """
    if not isinstance(raw, Mapping):
        return None
    section = raw.get("ds4")
    return section if isinstance(section, Mapping) else raw
