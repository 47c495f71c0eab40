"""Typed results of `ContextEngine`: one frozen dataclass per answer (docs/protocol.md).

Every result has `to_wire()` (`ds4_core.wire`), the camelCase JSON object that `ds4 ... --json`
prints and the LSP server answers, so the two are equal by construction. Field names are the
wire names in snake_case; units are tokens (chars-v2 estimates unless named otherwise),
milliseconds (`duration_ms`, `latency_ms`, rounded to 3 decimals), 1-based inclusive lines, and
ISO-8601 UTC timestamps.

JSON documents the engine passes through rather than builds field by field stay mappings
(`JsonObject`): Pi messages (their shape is Pi's), a stored manifest (a versioned document kept
in SQLite and answered in one of several views), the summary graph's node and root rows and
counts, the planner's statistics and the compaction entry's `details`.

One module: it is the catalog of the protocol's answers, one small declaration each, read side
by side with docs/protocol.md; split, the catalog would be scattered without any module
gaining a responsibility of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .wire import JsonObject, WireResult, omit_if_none, to_wire

# --------------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class Budget(WireResult):
    """The token budget of a plan (docs/reference.md §3.4; the adaptive ceilings of the tail,
    history, project and summary caps: §3.5). All values are tokens, except
    `calibration_ratio` (the provider's actual / estimated tokens the limits were divided by;
    1.0 uncalibrated) and `auto_tuned` (`autoTune` raised the target; docs/model-awareness.md)."""

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
    calibration_ratio: float = 1.0
    auto_tuned: bool = False


@dataclass(frozen=True, slots=True)
class ModelInfo(WireResult):
    """The model a plan was made for (wire key `id` is the model id). `source` says where the
    window came from: `request`, `override`, `table:<key>` or `default`. Tokens; None when the
    output limit is unknown."""

    provider: str
    id: str
    context_window: int
    max_output_tokens: int | None
    source: str


@dataclass(frozen=True, slots=True)
class SessionInfo(WireResult):
    """The session an answer was built from: Pi session id, resolved file path, active leaf."""

    id: str
    file: str
    leaf_id: str | None


@dataclass(frozen=True, slots=True)
class PlanResult(WireResult):
    """`ds4/plan` and `ds4 plan`.

    `mode` is `managed`, `observer` or `fallback` (messages unchanged; `fallback_reason` says
    why). `messages` are the planned Pi messages. `manifest_stored` is False when the manifest
    was kept in memory only. `over_hard_limit` is True when `fixed_tokens` +
    `current_turn_tokens` exceed `hard_input_limit`. `stats` holds the planner's counters in
    camelCase plus `included`, `excluded` (item counts) and `durationMs`. `privacy` is what
    the sanitizer did for the plan's destination (`privacy.sanitizer.PrivacyCounters.to_wire`,
    the manifest's `privacy`; docs/privacy.md).
    """

    mode: str
    messages: tuple[JsonObject, ...]
    manifest_id: str
    manifest_stored: bool
    estimated_tokens: int
    estimator_version: str
    over_hard_limit: bool
    current_turn_tokens: int
    fixed_tokens: int
    hard_input_limit: int
    budget: Budget
    model: ModelInfo
    warnings: tuple[str, ...]
    stats: JsonObject
    fallback_reason: str | None = omit_if_none()
    session: SessionInfo | None = omit_if_none()
    privacy: JsonObject | None = omit_if_none()
    continuation: JsonObject | None = None
    """`{strategy, mode, deltaStart, reason}` of native continuation, None when it is off
    (`ds4_core.continuation.Decision.to_wire`; docs/protocol.md)."""

    def log_summary(self) -> str:
        """One log line: counts, ids and timings only (never content)."""
        return (
            f"mode={self.mode} messages={len(self.messages)} tokens={self.estimated_tokens} "
            f"manifest={self.manifest_id} warnings={len(self.warnings)}"
        )


# --------------------------------------------------------------------------- retrieve


@dataclass(frozen=True, slots=True)
class HistoryHit(WireResult):
    """A transcript entry that matched. `entry_key` is `<sessionId>:<entryId>`; `excerpt` is
    the quoted text and `tokens` its size; `score` the ranking score, which history retrieval
    keeps to 6 decimals and `ds4/retrieve` rounds to 3 (`Retriever`). A plan's manifest
    (`retrieved[].score`) keeps the 6. `classification` is the excerpt's privacy level
    (docs/privacy.md)."""

    entry_key: str
    entry_id: str
    role: str | None
    created_at: str | None
    score: float
    reason: str
    excerpt: str
    tokens: int
    classification: str = "normal"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectHit(WireResult):
    """A project snippet of a trusted workspace, re-validated against the live text. `path`
    is relative to the folder `folder_path` (named `folder`; both absent with no folder name);
    lines 1-based inclusive; `file_hash` the sha256 of the file's text; `score` rounded to 3
    decimals; `modified` whether the file differs from Git's HEAD. Keyword-only, so the
    optional `folder` and `folder_path` come first on the wire, as the engine always sent."""

    folder: str | None = omit_if_none()
    folder_path: str | None = omit_if_none()
    path: str
    start_line: int
    end_line: int
    file_hash: str
    score: float
    reason: str
    text: str
    snippet_id: str
    tokens: int
    modified: bool | None
    classification: str = "normal"


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitHit(WireResult):
    """A commit of a trusted workspace's Git history that answers the request (scope `git`).
    `hash` is the full commit id; `committed_at` the committer date (ISO-8601 UTC); `files`
    the changed paths relative to the folder (at most 20; `files_total` counts all Git
    listed); `score` the git scope's relevance (0..1.25, 3 decimals; docs/retrieval.md "The
    git scope"); `withheld` the secret detector's reason when the message was withheld (then
    `subject` is empty); `quoted` the quoted git-commit block sent as data (the message as a
    JSON string between BEGIN/END markers) and `tokens` its `chars-v2` size. `folder` and
    `folder_path` name the workspace folder when it has a name."""

    folder: str | None = omit_if_none()
    folder_path: str | None = omit_if_none()
    hash: str
    committed_at: str
    subject: str
    files: tuple[str, ...]
    files_total: int
    score: float
    reason: str
    withheld: str | None = omit_if_none()
    quoted: str
    tokens: int
    classification: str = "normal"


@dataclass(frozen=True, slots=True)
class RetrievalStats(WireResult):
    """Counters of one history retrieval; `latency_ms` in milliseconds (3 decimals)."""

    candidates: int = 0
    duplicates: int = 0
    alternate_branch_candidates: int = 0
    already_in_context: int = 0
    latency_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class RetrieveResult(WireResult):
    """`ds4/retrieve` and `ds4 retrieve`. `status` is `ok`, `no-query`, `disabled`,
    `no-session` or the history search status; `query` is the query used (the last user
    message when none was given); `project_status` is None when the project scope was not
    asked for, else `untrusted`, `no-workspace`, `disabled`, `error` or the search status.
    `relevance` has, per scope searched (`history`, `project`, `git`), `{status, sent,
    belowFloor, floor, best, why}` (`engine/relevance.py`): `why` says why nothing was sent
    (e.g. no candidate reached the relevance floor), None when something was. `git` and
    `git_status` are present only when the `git` scope was asked for: the commits, best
    first, and `untrusted`, `no-workspace`, `disabled`, `no-git`, `no-index`, `no-query`,
    `error` or `ok` (docs/protocol.md). `privacy` is what the sanitizer did for the request's
    destination (`destination` null when the request named no model: hits classified only;
    docs/privacy.md)."""

    status: str
    query: str | None
    history: tuple[HistoryHit, ...]
    project: tuple[ProjectHit, ...]
    project_status: str | None
    stats: RetrievalStats
    warnings: tuple[str, ...]
    relevance: dict[str, Any] = field(default_factory=dict)
    git: tuple[CommitHit, ...] | None = omit_if_none()
    git_status: str | None = omit_if_none()
    privacy: JsonObject | None = omit_if_none()

    def log_summary(self) -> str:
        """One log line: counts and timings only."""
        return (
            f"status={self.status} history={len(self.history)} project={len(self.project)} "
            f"candidates={self.stats.candidates} latency_ms={self.stats.latency_ms:.1f}"
        )


# --------------------------------------------------------------------------- manifest


@dataclass(frozen=True, slots=True)
class ManifestResult(WireResult):
    """`ds4/manifest` and `ds4 manifest`: a stored manifest document in the requested view
    (`summary`, `full`, ...; docs/protocol.md). The document is versioned and kept in SQLite
    as JSON, so it is answered as the mapping it is; `to_wire()` returns a copy of it."""

    view: str
    document: JsonObject

    def to_wire(self) -> dict[str, Any]:
        """The manifest document itself (its keys are already the wire names)."""
        wire = to_wire(self.document)
        assert isinstance(wire, dict)
        return wire


# --------------------------------------------------------------------------- compaction


@dataclass(frozen=True, slots=True)
class CompactionEntry(WireResult):
    """The Pi compaction entry for the client to append (without `type`, `id`, `parentId`,
    `timestamp`, which the client's session writer sets). `tokens_before` in tokens;
    `details` holds `readFiles`, `modifiedFiles` and the `ds4ContextEngine` record."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: JsonObject


@dataclass(frozen=True, slots=True)
class CompactValidation(WireResult):
    """How the summary fared against the contract: `status` valid | warning | invalid,
    `issue_codes` found before repairs, `repairs` applied (names, in order)."""

    status: str
    issue_codes: tuple[str, ...]
    repairs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CompactSpan(WireResult):
    """What was summarized: `message_count` messages of `tokens` tokens before
    `first_kept_entry_id`, `kept_tokens` kept after it; `is_split_turn` when the cut falls
    inside a turn; `previous_summary_id` the branch's root before (None for the first)."""

    message_count: int
    tokens: int
    kept_tokens: int
    is_split_turn: bool
    first_kept_entry_id: str
    previous_summary_id: str | None
    source_entry_count: int


@dataclass(frozen=True, slots=True)
class SummaryTokens(WireResult):
    """The new root's size (`summary`, tokens) and the limit it was written for."""

    summary: int
    limit: int


@dataclass(frozen=True, slots=True)
class CompactResult(WireResult):
    """`ds4/compact` and `ds4 compact`: the new root `summary_id` (its text is
    `compaction.summary`), the new segment, and who wrote it (`summarizer`: `client` or
    `offline`, with `fallback_reason` when offline was a fallback; None otherwise).
    `appended`: the session is server-owned and the server appended the compaction entry
    itself (its id `entry_id`) and committed it; false (and None) for a Pi session, whose
    client appends `compaction`."""

    compaction: CompactionEntry
    summary_id: str
    segment_summary_id: str
    operation_id: str
    summary_kind: str
    graph_level: int
    summarizer: str
    fallback_reason: str | None
    validation: CompactValidation
    span: CompactSpan
    tokens: SummaryTokens
    warnings: tuple[str, ...]
    session: SessionInfo
    duration_ms: float
    appended: bool = False
    entry_id: str | None = None

    def log_summary(self) -> str:
        """One log line: ids and counts only."""
        return (
            f"summary={self.summary_id} kind={self.summary_kind} level={self.graph_level} "
            f"summarizer={self.summarizer} validation={self.validation.status} "
            f"messages={self.span.message_count} tokens={self.span.tokens} "
            f"warnings={len(self.warnings)}"
        )


@dataclass(frozen=True, slots=True)
class LifecycleResult(WireResult):
    """`ds4/compactCommitted` / `ds4/compactFailed`: the sessions changed and the summary ids
    whose lifecycle moved (empty for an unknown id or an operation already settled)."""

    summary_id: str
    sessions: tuple[str, ...]
    changed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UsageResult(WireResult):
    """`ds4 usage` (the LSP `ds4/usage` notification logs it): the manifest the report was
    recorded on, its `actual_tokens` (input + cacheRead + cacheWrite), the `cache_share`
    (cacheRead over that; None when 0), whether it became a calibration `sample` and if not
    `why_not`, and the reporting profile's `calibration` after it
    (`ds4_core.calibration.Calibration.to_wire`)."""

    manifest_id: str
    provider: str
    model: str
    estimated_tokens: int | None
    actual_tokens: int
    cache_share: float | None
    sample: bool
    why_not: str | None
    calibration: JsonObject


@dataclass(frozen=True, slots=True)
class SummariesResult(WireResult):
    """`ds4.summaries` and `ds4 summaries`: the summary graph seen from the leaf (no node
    content). `nodes`, `roots` and `counts` are the rows of `compaction.render.graph_view`;
    `tree` the text tree; `dot` the same graph as Graphviz DOT text when it was asked for
    (`ds4.summaries` format `dot`, `ds4 summaries --dot`), else None (left out)."""

    session_id: str
    session_file: str | None
    leaf_id: str | None
    active_root_id: str | None
    nodes: tuple[JsonObject, ...]
    roots: tuple[JsonObject, ...]
    counts: JsonObject
    tree: str
    dot: str | None = omit_if_none()


# --------------------------------------------------------------------------- memory


@dataclass(frozen=True, slots=True)
class MemoryResult(WireResult):
    """`ds4/memory`: the memory items and pins (docs/memory.md), each with its provenance
    (origin session, mutation keys, source entries); times in ms since the epoch. `session_id`
    is the session they were filtered for (None: all of them). `counts` are the stored
    mutation entries by fate (`applied`, `rejected`, `invalid`), `problems` the newest of the
    rejected and invalid ones with the reason."""

    session_id: str | None
    memory: tuple[JsonObject, ...]
    pins: tuple[JsonObject, ...]
    counts: JsonObject
    problems: tuple[JsonObject, ...]


@dataclass(frozen=True, slots=True)
class MemoryWriteResult(WireResult):
    """`ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget`: the custom entry of the write
    (`custom_type`, `data`) for the session's writer to append, the item it creates or
    changes, whether the server appended it itself (`appended`, with the new `entry_id`:
    only for a session the server owns; else False and None), and `entry`, the complete
    session line `{type: "custom", id, parentId, timestamp, customType, data}` (as appended,
    or for a client that appends raw lines: a fresh 8-hex id, the file's last entry as
    parent, the ISO time now)."""

    custom_type: str
    data: JsonObject
    item_id: str
    appended: bool
    entry_id: str | None
    entry: JsonObject = field(default_factory=dict)


# --------------------------------------------------------------------------- owned sessions


@dataclass(frozen=True, slots=True)
class SessionOpenResult(WireResult):
    """`ds4/sessionOpen`: the owned session's id, its file (absolute), the id of its last
    entry (None while it has none), whether this call `created` it and the working directory
    its header records (`cwd`; None when a hand-edited header holds none) (docs/sessions.md)."""

    session_id: str
    file: str
    leaf_id: str | None
    created: bool
    cwd: str | None


@dataclass(frozen=True, slots=True)
class SessionAppendResult(WireResult):
    """`ds4/sessionAppend`: the new entries' ids in the order of the messages, and the new
    leaf (the last of them)."""

    session_id: str
    file: str
    entry_ids: tuple[str, ...]
    leaf_id: str

    def log_summary(self) -> str:
        """One log line: ids and counts only."""
        return f"session={self.session_id} appended={len(self.entry_ids)} leaf={self.leaf_id}"


# --------------------------------------------------------------------------- artifacts


@dataclass(frozen=True, slots=True)
class ArtifactSearchResult(WireResult):
    """`ds4/artifactSearch` and `ds4 artifacts search --json` (docs/artifacts.md "Search"):
    `matches` are `{artifactId, sourceId, line, column, excerpt}` (1-based line; 1-based
    column in UTF-16 code units; a redacted excerpt of at most 240 characters of the line,
    plus `...` marks and redaction markers), in artifact order then text order; `searched`
    is `{artifactId, status}` for each artifact looked at (`ok`, `missing`, `corrupt`,
    `too-large`); `truncated` says more matches may exist."""

    query: str
    matches: tuple[JsonObject, ...]
    searched: tuple[JsonObject, ...]
    truncated: bool


@dataclass(frozen=True, slots=True)
class ArtifactGcResult(WireResult):
    """`ds4.gcArtifacts` and `ds4 artifacts gc --json` (docs/artifacts.md "Garbage
    collection"): objects and quarantined files removed (or, with `dry_run`, that would be)
    and the objects kept, with their bytes; `young` the unreferenced objects kept because they
    were written within the last hour."""

    removed: int
    removed_bytes: int
    kept: int
    kept_bytes: int
    dry_run: bool
    young: int


# --------------------------------------------------------------------------- index


@dataclass(frozen=True, slots=True)
class SyncReport(WireResult):
    """`ds4 index` and one item of a rebuild: how one session file was synced. `outcome` is
    `noop`, `incremental`, `rebuild` or `skipped` (an empty file; `sessions.sync.Outcome`),
    with `reason` for a rebuild or a skip; bytes read; `duration_ms` in ms;
    `rewritten_at` the byte offset of the first block found rewritten in place (else None)."""

    session_id: str | None
    session_file: str
    outcome: str
    reason: str | None
    entries_added: int
    entries_total: int
    malformed_lines: int
    bytes_read: int
    duration_ms: float
    rewritten_at: int | None
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RebuildFailure(WireResult):
    """A session a rebuild could not index, and why."""

    session_file: str
    error: str


@dataclass(frozen=True, slots=True)
class RebuildResult(WireResult):
    """`ds4.rebuildIndex` and `ds4 rebuild`: sessions rebuilt, their entries, the failures,
    each session's report and (in a trusted workspace) the project sync result."""

    sessions: int
    entries: int
    failed: tuple[RebuildFailure, ...]
    duration_ms: float
    results: tuple[SyncReport, ...]
    project: ProjectSyncResult | None


# --------------------------------------------------------------------------- project sync


@dataclass(frozen=True, slots=True)
class LongLineFile(WireResult):
    """A file a project sync windowed with lines over the cut length (`path` relative to its
    folder) and how many of its lines the index holds cut."""

    path: str
    lines_cut: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FolderSync(WireResult):
    """One workspace folder of `ProjectSyncResult.folders`. The counts, `truncated` and
    `duration_ms` (ms, 3 decimals) are absent when the folder's sync did not run (status
    `error`, `untrusted`, ...); `only` the paths synced (relative to the folder) of a partial
    sync; `error` what went wrong while the status is `error`."""

    name: str
    project_path: str | None
    status: str
    files_indexed: int | None = omit_if_none()
    files_unchanged: int | None = omit_if_none()
    files_deleted: int | None = omit_if_none()
    files_skipped: int | None = omit_if_none()
    snippets: int | None = omit_if_none()
    error: str | None = omit_if_none()
    only: tuple[str, ...] | None = omit_if_none()
    truncated: bool | None = omit_if_none()
    duration_ms: float | None = omit_if_none()
    commits_indexed: int | None = omit_if_none()
    commits: int | None = omit_if_none()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectSyncResult(WireResult):
    """`engine.project.sync()`: the project part of `ds4.rebuildIndex` and the body of
    `ds4/indexUpdated` (docs/protocol.md). `status` is `ready` when the sync ran, `error`
    (with `error`; `locked` True when another connection held the database's write lock),
    `untrusted`, `no-workspace` or `disabled` (nothing read: only `status` and
    `project_path`, the first folder's canonical root or None). A sync that ran has the counts
    (summed over folders), `duration_ms` (ms, 3 decimals), `truncated`, `partial_files`,
    `long_line_files`, `warnings` and `folders`, one `FolderSync` per folder synced; with
    several folders the counts are summed even when one failed, and `partial_files` and
    `warnings` are prefixed with the folder's name. In a Git folder (with
    `project.maxCommits` > 0) a full sync also brings the commit-history index up to HEAD:
    `commits_indexed` is how many commits it read, `commits` how many the index holds (both
    absent when no history was indexed: no Git, untrusted, a partial sync)."""

    status: str
    project_path: str | None
    files_indexed: int | None = omit_if_none()
    files_unchanged: int | None = omit_if_none()
    files_deleted: int | None = omit_if_none()
    files_skipped: int | None = omit_if_none()
    snippets: int | None = omit_if_none()
    duration_ms: float | None = omit_if_none()
    truncated: bool | None = omit_if_none()
    partial_files: tuple[str, ...] | None = omit_if_none()
    long_line_files: tuple[LongLineFile, ...] | None = omit_if_none()
    warnings: tuple[str, ...] | None = omit_if_none()
    folders: tuple[FolderSync, ...] | None = omit_if_none()
    error: str | None = omit_if_none()
    locked: bool | None = omit_if_none()
    commits_indexed: int | None = omit_if_none()
    commits: int | None = omit_if_none()

    def log_summary(self) -> str:
        """One log line: the status and counts only."""
        return (
            f"status={self.status} indexed={self.files_indexed or 0} "
            f"unchanged={self.files_unchanged or 0} deleted={self.files_deleted or 0} "
            f"snippets={self.snippets or 0}"
        )


# --------------------------------------------------------------------------- project


@dataclass(frozen=True, slots=True)
class GitState(WireResult):
    """A folder's Git state: branch, HEAD commit and whether the worktree differs (None when
    unknown or not a Git repository)."""

    branch: str | None
    head: str | None
    dirty: bool | None


@dataclass(frozen=True, slots=True)
class FolderStatus(WireResult):
    """One workspace folder of `ProjectStatus.folders`."""

    name: str | None
    project_path: str
    status: str
    files: int
    snippets: int
    stale_snippets: int
    git: GitState
    indexed_at: str | None
    error: str | None = omit_if_none()
    commits: int | None = omit_if_none()


@dataclass(frozen=True, slots=True)
class RefusedFolder(WireResult):
    """A workspace folder that was not accepted, and why."""

    error: str


@dataclass(frozen=True, slots=True)
class ProjectStatus(WireResult):
    """`ds4.projectStatus`: `status` (`ready`, `indexing`, `untrusted`, `no-workspace`,
    `disabled`, `error`, ...), the first folder's path, whether trusted; with an active
    workspace, counts summed over folders, the first folder's `git` and `indexed_at`, and each
    folder's status; `error` while the status is `error`; `refused` folders after a set;
    `commits` the commits of the Git history index, summed over folders (absent when none is
    indexed)."""

    status: str
    project_path: str | None
    trusted: bool | None = omit_if_none()
    error: str | None = omit_if_none()
    files: int | None = omit_if_none()
    snippets: int | None = omit_if_none()
    stale_snippets: int | None = omit_if_none()
    git: GitState | None = omit_if_none()
    indexed_at: str | None = omit_if_none()
    folders: tuple[FolderStatus, ...] | None = omit_if_none()
    refused: tuple[RefusedFolder, ...] | None = omit_if_none()
    commits: int | None = omit_if_none()


@dataclass(frozen=True, slots=True)
class StaleSnippet(WireResult):
    """A window of a file a plan sent whose lines no longer match the live text: the window
    `start_line`..`end_line` and its changed lines `change_start_line`..`change_end_line`
    (1-based inclusive), the manifest that sent it and when."""

    snippet_id: str
    start_line: int
    end_line: int
    manifest_id: str
    sent_at: str
    change: str
    change_start_line: int
    change_end_line: int


# --------------------------------------------------------------------------- health


@dataclass(frozen=True, slots=True)
class HealthResult(WireResult):
    """`ds4.health` and `ds4 health`: `status` `ok`, or `warning` when notices, settings
    warnings, stale snippets or session copies exist; versions, counts and the project status.
    `privacy` is the active policy: `{enabled, defaultClassification, localProviders,
    remoteDefaultAllowed, remoteProviders, redactSecrets}` (docs/privacy.md). `calibration`
    holds each profile with usage samples, the most recently reported first: its calibration
    (`Calibration.to_wire`) and `lastReportedAt` (docs/model-awareness.md); a critical drift
    warning makes the status `warning`."""

    status: str
    version: str
    schema_version: int
    database_path: str
    sqlite_version: str
    fts5: bool
    sessions: int
    entries: int
    manifests: int
    summaries: JsonObject
    ephemeral_manifests: int
    estimator: str
    notices: tuple[str, ...]
    config_warnings: tuple[str, ...]
    project: ProjectStatus
    warnings: tuple[str, ...] = field(default=())
    privacy: JsonObject = field(default_factory=dict)
    calibration: tuple[JsonObject, ...] = field(default=())
    artifacts: JsonObject = field(default_factory=dict)
    """The artifact store beside the database (docs/artifacts.md): `{objects, bytes,
    quarantined, quarantinedBytes, lastGc}` (`lastGc`: `{at, removed, removedBytes}` of the
    last garbage collection, `at` in ms since the epoch; null when none ran)."""


@dataclass(frozen=True, slots=True)
class PrivacyResult(WireResult):
    """`ds4.privacy` and `ds4 privacy`: what one destination may see (docs/privacy.md).

    `provider` is the provider asked about (None: an unnamed one, treated as remote); `kind`
    is `local` or `remote` (the destination's class); `allowed` and `withheld` the levels it may and
    may not see, lowest first; `rule` the setting that decided; `redact_secrets` whether secrets
    are redacted for it; `explanation` one paragraph for a person; `policy` the active policy
    (as in `ds4.health`)."""

    enabled: bool
    provider: str | None
    kind: str
    allowed: tuple[str, ...]
    withheld: tuple[str, ...]
    rule: str
    redact_secrets: bool
    explanation: str
    policy: JsonObject
