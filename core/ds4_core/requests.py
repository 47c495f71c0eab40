"""Typed requests accepted by `ContextEngine` (the core side of the ds4/* protocol).

The LSP adapter converts its attrs params into these; the CLI builds them from arguments.
Results are returned as JSON-ready dicts in the wire shape (camelCase), so the CLI's `--json`
prints exactly what the matching LSP request returns (see docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ds4_core.sessions.reader import storable_id

Scope = Literal["history", "project", "git"]
"""Where `ds4/retrieve` looks: the session transcript, the trusted project's files, its Git
history (commit messages and changed paths)."""
ManifestView = Literal["summary", "included", "excluded", "full"]
"""How much of a manifest's item lists `ds4/manifest` returns."""
PlanRequestMode = Literal["managed", "observer"]
"""The mode a plan is asked for (`context.mode`); a result's mode may also be `fallback`."""


class RequestError(ValueError):
    """A request the engine cannot serve because of its input.

    `field` names the offending parameter in wire spelling (e.g. `session.file`), so the LSP
    layer can answer with JSON-RPC InvalidParams naming it and the CLI can print it.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class RequestFailedError(RequestError):
    """Well-formed input the engine cannot serve in the current state (nothing to compact,
    compaction turned off, a memory write the current items refuse). The LSP answers
    RequestFailed (-32803, LSP 3.17 "ErrorCodes") rather than InvalidParams, with `data` (a
    JSON object, e.g. `{"conflictsWith": "m1"}`) when given; the CLI treats it like any
    `RequestError`."""

    def __init__(
        self,
        message: str,
        field: str | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, field)
        self.data = dict(data) if data is not None else None


@dataclass(frozen=True)
class SessionRef:
    """A Pi session file and optionally the leaf entry id whose branch is active.

    `leaf_id` goes through `storable_id`, as the entry ids read from the file do: an entry
    whose id holds a lone surrogate is named by its escaped text (`a\\ud800`) or the original.
    """

    file: str
    leaf_id: str | None = None

    def __post_init__(self) -> None:
        if self.leaf_id is not None:
            object.__setattr__(self, "leaf_id", storable_id(self.leaf_id))


@dataclass(frozen=True)
class ModelSpec:
    """The model of the call being planned. Missing parts are filled from the session's current
    model, `modelAwareness.overrides` and the table of well-known models (ds4_core.models)."""

    provider: str | None = None
    id: str | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    api: str | None = None
    """The provider API the client calls (Pi's `api`, e.g. `openai-responses`); native
    continuation needs `openai-responses` (`ds4_core.continuation`)."""


@dataclass(frozen=True)
class PlanRequest:
    """Inputs of `ContextEngine.plan` (`ds4/plan`).

    With `messages` absent the messages are built from the session's active branch and
    `request` is appended as the new user message. `fixed_tokens` is the size of the system
    prompt and tool schemas in tokens. `message_refs`: a session message sent exactly as its
    session entry holds it is answered as a reference `{"entryRef": <entry id>}` (issue 13;
    docs/protocol.md, `ds4/plan`). `request_options`: the provider request body without
    `input` and `previous_response_id`, hashed for native continuation and never kept.
    """

    session: SessionRef | None = None
    messages: list[dict[str, Any]] | None = None
    request: str | None = None
    model: ModelSpec = field(default_factory=ModelSpec)
    fixed_tokens: int = 0
    mode: PlanRequestMode | None = None
    message_refs: bool = False
    request_options: dict[str, Any] | None = None


@dataclass(frozen=True)
class RetrieveRequest:
    """Inputs of `ContextEngine.retrieve` (`ds4/retrieve`). `query` defaults to the text of the
    last user message on the session's active branch. `max_tokens` bounds the excerpts.
    `model` names the destination of the hits (docs/privacy.md); None: hits are classified,
    not rewritten."""

    query: str | None = None
    session: SessionRef | None = None
    scopes: tuple[Scope, ...] = ("history",)
    max_results: int | None = None
    max_tokens: int | None = None
    model: ModelSpec | None = None


@dataclass(frozen=True)
class ManifestRequest:
    """Inputs of `ContextEngine.manifest` (`ds4/manifest`): an id, or a session with latest."""

    id: str | None = None
    session: SessionRef | None = None
    latest: bool = False
    view: ManifestView = "summary"


@dataclass(frozen=True)
class UsageCounts:
    """What a provider counted for one call, in Pi's `Usage` shape (docs/model-awareness.md):
    `input` tokens not served from a cache, `output` tokens, `cache_read` tokens served from
    the prompt cache and `cache_write` tokens written to it. All integers >= 0 (tokens)."""

    input: int
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    @property
    def actual_input(self) -> int:
        """input + cache_read + cache_write: every input token the provider counted."""
        return self.input + self.cache_read + self.cache_write


@dataclass(frozen=True)
class UsageReport:
    """Inputs of `ContextEngine.record_usage` (`ds4/usage`, `ds4 usage`): the provider's usage
    of the call planned as `manifest_id`, answered by `provider`/`model`, with Pi's
    `stop_reason` when known. `output_items` / `output_item_hashes` and `has_response_id`
    describe the response for native continuation (docs/model-awareness.md)."""

    manifest_id: str
    provider: str
    model: str
    usage: UsageCounts
    stop_reason: str | None = None
    output_items: tuple[Mapping[str, Any], ...] | None = None
    output_item_hashes: tuple[str, ...] | None = None
    has_response_id: bool | None = None


CompactionReason = Literal["manual", "threshold", "overflow"]
COMPACTION_REASONS: tuple[str, ...] = get_args(CompactionReason)
"""Pi's compaction reasons (docs/reference.md §P9, `session_before_compact`)."""


@dataclass(frozen=True)
class CompactRequest:
    """Inputs of `ContextEngine.compact` (`ds4/compact`; docs/compaction.md).

    `first_kept_entry_id` chooses the span (the entries before it on the active branch, after
    the branch's latest compaction, are summarized); absent, the server keeps the most recent
    `compaction.keepRecentTokens` tokens. `previous_summary_id`, when given, must be the
    branch's current root (it is checked, never trusted). `model` is the summarizer's model:
    its provider is the destination of the summary prompt (None: the session's current
    model; docs/privacy.md).
    """

    session: SessionRef
    reason: CompactionReason = "manual"
    first_kept_entry_id: str | None = None
    previous_summary_id: str | None = None
    custom_instructions: str | None = None
    model: ModelSpec | None = None

    def __post_init__(self) -> None:
        if self.first_kept_entry_id is not None:  # escaped like the ids read from the file
            object.__setattr__(self, "first_kept_entry_id", storable_id(self.first_kept_entry_id))


@dataclass(frozen=True)
class SessionOpenRequest:
    """Inputs of `ContextEngine.session_open` (`ds4/sessionOpen`; docs/sessions.md): the
    working directory the caller asked for (None: not asked; a reopened session must record
    the same), the one a new session records when none was asked (`default_cwd`; None: the
    server's), an optional title (a Pi `session_info` name, <= 200 characters) and the id of
    an owned session to reopen."""

    cwd: str | None = None
    title: str | None = None
    session_id: str | None = None
    default_cwd: str | None = None


@dataclass(frozen=True)
class SessionAppendRequest:
    """Inputs of `ContextEngine.session_append` (`ds4/sessionAppend`; docs/sessions.md): Pi
    messages (roles user, assistant, toolResult; 1..1000) appended in order to the owned
    session `session.file`, the first as a child of `parent_id`, else of `session.leaf_id`,
    else of the file's last entry."""

    session: SessionRef
    messages: list[Any]
    parent_id: str | None = None


@dataclass(frozen=True)
class SummarizeCall:
    """What the engine asks a summarizer for: the `ds4/summarize` params (server to client).

    Attributes:
        summary_kind: "segment" (the node the text becomes).
        prompt: the full prompt (contract, file lists, previous summary, conversation source).
        source_hash: the segment's source hash (docs/compaction.md), hex sha256.
        token_limit: the most tokens the summary may have (chars-v2 estimate).
        session_id: the Pi session id.
        source_entry_ids: the span's entry ids, in order.
        read_files / modified_files: the known file inventories of the span.
    """

    summary_kind: str
    prompt: str
    source_hash: str
    token_limit: int
    session_id: str
    source_entry_ids: tuple[str, ...]
    read_files: tuple[str, ...]
    modified_files: tuple[str, ...]


@dataclass(frozen=True)
class SummarizeAnswer:
    """A summarizer's answer: the summary text and, when known, who wrote it."""

    summary: str
    provider: str | None = None
    model: str | None = None


@dataclass(frozen=True)
class ArtifactSearchRequest:
    """`ds4/artifactSearch`: a literal, case-insensitive `query` (1..1000 characters) in one
    artifact (`artifact_id`, 64 lower-case hex digits) or in the artifacts referenced on
    `session`'s active branch; at most `max_matches` (1..100; None: the
    `artifacts.maxSearchMatches` setting) matches. One of `artifact_id` and `session` is
    required (docs/artifacts.md "Search")."""

    query: str
    artifact_id: str | None = None
    session: SessionRef | None = None
    max_matches: int | None = None


class SummarizerUnavailable(RuntimeError):
    """The summarizer could not answer (not offered, failed, timed out, bad shape). The message
    becomes the compaction's `fallbackReason`, and the offline summarizer is used instead."""


class DatabaseUnavailableError(RuntimeError):
    """The database cannot be opened or created; the message names the path and what to do.

    Not a bug and not the request's fault: callers show the message as is (the CLI exits 2,
    the LSP answers an error with this text, without a stack trace).
    """


Summarizer = Callable[[SummarizeCall], SummarizeAnswer]
"""Obtains a summary (e.g. the editor's model over `ds4/summarize`). Raises
`SummarizerUnavailable` (or anything else) to make the engine fall back to the offline summary."""


MemoryOperation = Literal["pin", "unpin", "remember", "forget"]
"""The memory and pin writes (`ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget`)."""


@dataclass(frozen=True)
class MemoryWriteRequest:
    """One memory or pin write (docs/memory.md "Writes"; the params of docs/protocol.md).

    `text` is the pin's `content` or the claim; `target_id` the `pinId` (unpin) or `memoryId`
    (forget); `status` the new memory status (forget: `invalid` or `expired`); `supersedes`
    the active item a pin or claim replaces. `scope` None means the operation's default
    (`session` for a pin, `project` for a claim)."""

    session: SessionRef
    operation: MemoryOperation
    text: str | None = None
    scope: str | None = None
    classification: str | None = None
    key: str | None = None
    source_entry_ids: tuple[str, ...] = ()
    source_entry_id: str | None = None
    source_file: str | None = None
    supersedes: str | None = None
    target_id: str | None = None
    status: str | None = None
    reason: str | None = None
