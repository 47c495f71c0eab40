"""`ContextEngine`: the one facade the `ds4` CLI and the `ds4_lsp` server call.

It owns the engine's lifecycle (opening the store lazily, closing it, its notices), the
settings (`update_settings`) and the store lock, and delegates every request to one service
(`ds4_core.engine`'s modules), which share an `EngineContext` of store and settings providers.
Project knowledge (workspace folders, project sync, live text, status, stale snippets) lives in
`engine.project` (`ds4_core.engine.project.ProjectService`), which callers use directly.
Each public method takes a typed request (`ds4_core.requests`) and returns a typed result
(`ds4_core.results`) whose `to_wire()` is the wire shape of the matching LSP request
(camelCase; docs/protocol.md), so the CLI's `--json` and the server print the same objects.
Methods block (SQLite, files): the LSP layer runs them off its event loop. They are safe to call
from several threads at once.

Failure rules: input the caller can fix raises `RequestError` naming the field; any failure
while indexing, retrieving or planning returns the caller's messages unchanged (mode `fallback`
with a reason). Logs carry counts, ids and timings only.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import peewee

from ..compaction.nodes import SummaryNode
from ..config import DEFAULT_CONFIG, Config
from ..json_bounds import echo
from ..logs import describe_failure
from ..privacy.levels import LEVELS
from ..privacy.policy import destination, explain, policy_summary
from ..requests import (
    ArtifactSearchRequest,
    CompactRequest,
    DatabaseUnavailableError,
    ManifestRequest,
    MemoryWriteRequest,
    PlanRequest,
    RetrieveRequest,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
    Summarizer,
    UsageReport,
)
from ..results import (
    ArtifactGcResult,
    ArtifactSearchResult,
    CompactResult,
    HealthResult,
    LifecycleResult,
    ManifestResult,
    MemoryResult,
    MemoryWriteResult,
    PlanResult,
    PrivacyResult,
    RebuildResult,
    RetrieveResult,
    SessionAppendResult,
    SessionOpenResult,
    SummariesResult,
    SyncReport,
    UsageResult,
)
from ..store import Store, open_store, resolve_database_path
from ..store import summaries as summary_repo
from ..store.database import ForeignDatabaseError, database_locked_message, is_database_locked
from .artifact_requests import ArtifactRequests
from .compacting import Compactor
from .context import EngineContext, ProgressCallback
from .continuing import Continuations
from .health import check_health
from .indexing import Indexer
from .manifests import Manifests
from .memories import Memories
from .memory_writes import MemoryWriter
from .owning import OwnedSessions
from .planning import Planner
from .project import ProjectService
from .retrieving import Retriever
from .sessions import SessionCache
from .usage import FAILED_STOPS, UsageReports, check_report

log = logging.getLogger("ds4_core.engine")


class ContextEngine:
    """The DS4 context engine over one SQLite database.

    Args:
        database_path: database file; None resolves `DS4_DB`, the `storage.databasePath`
            setting, then the per-user default (`ds4_core.store.default_database_path`).
        settings: settings in the key names of docs/reference.md §2 (nested or dotted). Invalid
            values are ignored and listed in `config_warnings`.

    The database is opened lazily on first use, so constructing an engine never touches disk.
    Project knowledge is not on the facade: `project` is the workspace service
    (`ds4_core.engine.project.ProjectService`), called directly, e.g.
    `engine.project.set_folders(...)`, `engine.project.sync()`, `engine.project.status()`,
    `engine.project.stale_snippets(path, text)`.
    """

    def __init__(
        self,
        *,
        database_path: str | os.PathLike[str] | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.config: Config
        self.config, self.config_warnings = DEFAULT_CONFIG.with_settings(settings)
        self._explicit_db = str(database_path) if database_path is not None else None
        self.database_path: Path = resolve_database_path(
            self._explicit_db, None, os.environ, self.config.storage.database_path
        )
        self._store: Store | None = None
        self._store_lock = threading.Lock()
        context = EngineContext(store=lambda: self.store, config=lambda: self.config)
        self._sessions = SessionCache()
        self.project = ProjectService(context)
        self._indexer = Indexer(context, self.project)
        self._manifests = Manifests(context, self._sessions, self.project)
        self._usage = UsageReports(context, self._manifests)
        self._continuations = Continuations(context)
        self._planner = Planner(
            context,
            self._sessions,
            self._indexer,
            self.project,
            self._manifests,
            self._usage.calibration,
            self._continuations,
        )
        self._retriever = Retriever(context, self._planner, self.project)
        self._compactor = Compactor(context, self._sessions, self._indexer)
        self._memories = Memories(context, self._indexer)
        self._memory_writer = MemoryWriter(context, self._indexer)
        self._owned = OwnedSessions(context)
        self._artifacts = ArtifactRequests(context, self._sessions, self._indexer)

    # ----------------------------------------------------------------- lifecycle

    @property
    def store(self) -> Store:
        """The open store (opened, migrated, or moved aside and rebuilt, on first use)."""
        with self._store_lock:
            if self._store is None:
                self._store = self._open_store()
            return self._store

    def _open_store(self) -> Store:
        """Open the store, logging its notices.

        Raises:
            DatabaseUnavailableError: it cannot be opened or created; the message names the
                path, the reason and the settings that choose another location.
        """
        try:
            store = open_store(
                self.database_path, busy_timeout_ms=self.config.storage.busy_timeout_ms
            )
        except ForeignDatabaseError as exc:
            raise DatabaseUnavailableError(str(exc)) from exc
        except (OSError, sqlite3.Error, peewee.PeeweeException) as exc:
            if is_database_locked(exc):
                raise DatabaseUnavailableError(
                    database_locked_message(self.database_path, self.config.storage.busy_timeout_ms)
                ) from exc
            reason = getattr(exc, "strerror", None) or exc
            raise DatabaseUnavailableError(
                f"cannot open the database '{self.database_path}': {reason}; choose a writable "
                "location with --db, initializationOptions.databasePath or DS4_DB"
            ) from exc
        if store.notices:
            log.warning("database notices: %d (shown to the user)", len(store.notices))
        return store

    def fail_leftover_compactions(self) -> int:
        """Mark compaction batches still `prepared` as `failed` (a server calls this once at
        startup: nobody is left to report their commit). Returns how many nodes changed. A
        batch whose entry later appears in its session file still becomes `committed` at the
        next sync. The CLI does not call it: its batches wait for the entry to be appended.
        """
        failed = summary_repo.fail_leftover_prepared(self.store)
        if failed:
            log.info("compaction: %d prepared summary node(s) left over marked failed", failed)
        return failed

    @property
    def notices(self) -> list[str]:
        """Messages about the database a user should see (e.g. a corrupt file moved aside)."""
        return list(self._store.notices) if self._store is not None else []

    def update_settings(self, raw: Mapping[str, Any] | None) -> list[str]:
        """Apply settings on top of the current ones; returns warnings for ignored values."""
        with self._store_lock:
            config, warnings = self.config.with_settings(raw)
            self.config, self.config_warnings = config, warnings
        return warnings

    def close(self) -> None:
        """Close the database (the engine reopens it if used again) and forget every native
        continuation state (shutdown: the next plans are `full`)."""
        self._continuations.clear()
        with self._store_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # ----------------------------------------------------------------- indexing (indexing.py)

    def index_session(
        self,
        path: str | os.PathLike[str],
        *,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> SyncReport:
        """Sync one Pi session file into the index (docs/reference.md §3.12; `ds4 index`).

        Returns how the file was synced: outcome, entries added and in total, malformed
        lines, bytes read, duration in ms.

        Raises:
            RequestError: the file is missing, unreadable or not a Pi session (field `file`).
            OSError, sqlite3.Error: the database cannot be opened or written.
        """
        return self._indexer.index_session(path, force=force, progress=progress)

    def rebuild(self, progress: ProgressCallback | None = None) -> RebuildResult:
        """Force a rebuild of every session the database knows (`ds4.rebuildIndex`).

        Returns the sessions and entries rebuilt, the failures and each session's report. A
        session whose file disappeared or became unreadable is listed in `failed` and the
        others still rebuild. In a trusted workspace the whole project is rescanned too
        (`project`). `progress(done, 100, message)` is one rising percentage.
        """
        return self._indexer.rebuild(progress)

    # ----------------------------------------------------------------- planning (planning.py)

    def plan(self, request: PlanRequest) -> PlanResult:
        """Plan the messages of the next model call (`ds4/plan`; docs/reference.md §3.7).

        Returns the planned messages, the manifest id, token counts (`estimatorVersion`
        estimates), budget, model, warnings and stats (docs/protocol.md). `over_hard_limit`
        is True when `fixed_tokens` + `current_turn_tokens` exceed `hard_input_limit` (a
        fallback no trimming could avoid). Managed plans keep the current turn, a recent tail
        of whole turns, and historical evidence (JSON-quoted user messages) for older turns
        that the tail leaves out; everything else is recorded as excluded in the manifest. Any
        failure while indexing, retrieving or planning gives mode `fallback` with the input
        messages (plus `request`, when given) and a `fallback_reason`; the manifest is still
        recorded. Without a session, or with `diagnostics.storeContextManifest` off, nothing of
        the plan is written to disk: the manifest is kept in a bounded in-memory window.

        Raises:
            RequestError: no session and no messages, a missing or unreadable session file,
                an unknown leaf, a negative `fixedTokens`, or impossible model limits.
        """
        return self._planner.plan(request)

    # ----------------------------------------------------------------- continuing (continuing.py)

    def continuation_response(
        self,
        manifest_id: str,
        provider: str,
        model: str,
        output_items: Sequence[Mapping[str, Any]] | None,
        output_item_hashes: Sequence[str] | None,
        has_response_id: bool | None,
        stop_reason: str | None = None,
    ) -> None:
        """Attach a provider response to the native-continuation state of the plan
        `manifest_id` (from `ds4/usage`; docs/model-awareness.md "Native continuation").

        `output_items`: the response's output as Pi messages (hashed here; preferred over
        `output_item_hashes`, their item hashes: 64 lower-case hex digits each);
        `has_response_id` False: the provider gave no response id, so the next plan is `full`
        (`provider-response-id-missing`); `stop_reason` `error` or `aborted` (Pi's, of a call
        that did not complete): the next plan is `full` (`provider-call-failed`). Ignored
        (logged by count) when the manifest is not its key's latest plan, was answered by
        another `provider`/`model`, or the hashes are malformed. Never raises on the report's
        content; nothing is stored on disk. Memory only: safe on the LSP event loop.
        """
        taken = self._continuations.report_output(
            manifest_id,
            provider,
            model,
            output_items,
            output_item_hashes,
            has_response_id,
            stop_reason,
        )
        if not taken:
            log.info("continuation: response for manifest %s not attached", echo(manifest_id))

    def continuation_failed(
        self, session: SessionRef, provider: str | None = None, model: str | None = None
    ) -> int:
        """The client's previous response id was rejected (`ds4/continuationFailed`): drop
        the continuation states of `session` (of `provider`/`model` when given), so the next
        plan is `full` (`continuation-handle-rejected`). Returns how many were dropped.

        Raises:
            RequestError: `session.file` is missing or not a usable file.
        """
        return self._continuations.failed(session, provider, model)

    # ----------------------------------------------------------------- retrieving (retrieving.py)

    def retrieve(self, request: RetrieveRequest) -> RetrieveResult:
        """Rank transcript and project evidence for a query (`ds4/retrieve`;
        docs/reference.md §3.2 and §3.10).

        History entries the planned context already holds verbatim (the recent tail and
        current turn) are not returned (`stats.already_in_context`); entries on other branches
        are counted in `stats.alternate_branch_candidates`. Project hits are re-validated
        against the live text; `project_status` is `untrusted` (nothing read),
        `no-workspace`, `disabled` or the search status.

        Raises:
            RequestError: bad `maxResults`/`maxTokens`, or a bad session reference.
        """
        return self._retriever.retrieve(request)

    # ----------------------------------------------------------------- manifests (manifests.py)

    def manifest(self, request: ManifestRequest) -> ManifestResult:
        """A plan's manifest, by id or the latest of a session, in the requested view
        (`ds4/manifest`). Looks in the in-memory window of ephemeral manifests and in the
        database; for `latest`, the newer of the two wins.

        Raises:
            RequestError: neither `id` nor `session` + `latest`, no such manifest, or an
                unknown `view`.
        """
        return self._manifests.manifest(request)

    # ----------------------------------------------------------------- usage (usage.py)

    def record_usage(self, report: UsageReport) -> UsageResult:
        """Record a provider's usage of a planned call (`ds4/usage`, `ds4 usage`;
        docs/model-awareness.md): on its manifest (`actualTokens`, `usage`) and, when the call
        completed with input counted, as a calibration sample of the reporting provider/model,
        whose later budgets are divided by the calibrated ratio. Returns the recorded usage and
        the profile's calibration after it. The response's output is not looked at here:
        `note_response` gives it to native continuation.

        Raises:
            RequestError: a bad field (named), or a `manifestId` no manifest has.
            sqlite3.Error: the database failed.
        """
        return self._usage.record(report)

    def note_response(self, report: UsageReport) -> None:
        """Give the response of a usage report (`output_items` / `output_item_hashes`,
        `has_response_id`, a failed call's `stop_reason`) to native continuation at once. In
        memory only, no I/O, bounded (`continuation.MAX_ITEMS` items): the LSP layer calls it
        on its event loop as `ds4/usage` arrives, before recording the report on a worker
        thread, so the `ds4/plan` a client sends after its report always sees the response.
        A failure inside continuation is logged and ignored (a `full` call is always right).

        Raises:
            RequestError: a bad field of the report (`engine.usage.check_report`).
        """
        check_report(report)
        if (
            report.output_items is None
            and report.output_item_hashes is None
            and report.has_response_id is None
            and report.stop_reason not in FAILED_STOPS
        ):
            return
        try:
            self.continuation_response(
                report.manifest_id,
                report.provider,
                report.model,
                report.output_items,
                report.output_item_hashes,
                report.has_response_id,
                stop_reason=report.stop_reason,
            )
        except Exception as exc:  # fail open: the next plan is `full`, which is always right
            log.warning("continuation: response not taken: error=%s", describe_failure(exc))

    # ----------------------------------------------------------------- compacting (compacting.py)

    def compact(
        self,
        request: CompactRequest,
        summarizer: Summarizer | None = None,
        *,
        after_insert: Callable[[SummaryNode], None] | None = None,
    ) -> CompactResult:
        """Prepare one compaction of the session's active branch (`ds4/compact`;
        docs/compaction.md).

        Syncs the session (importing the summary nodes its compaction entries carry), prepares
        the span, resolves the branch's current root from the branch's own latest compaction
        entry, obtains the summary (`summarizer`, else offline), and stores the new segment
        (and aggregate) as `prepared`. `summarizer` is called at most once, on this thread.
        Returns the compaction entry for the client to append, the new root and segment ids,
        who wrote the summary, its validation, the span and the session.

        Raises:
            RequestError: an unknown reason, a missing or unreadable session file, an unknown
                leaf, a bad `firstKeptEntryId`, or a `previousSummaryId` that is not the
                branch's root (the field is named).
            RequestFailedError: compaction is turned off, or there is nothing to compact.
        """
        result = self._compactor.compact(request, summarizer, after_insert=after_insert)
        self._continuations.compacted(result.session.id)  # the branch's context is rewritten
        return result

    def compact_committed(
        self, summary_id: str, entry_id: str | None = None, session: SessionRef | None = None
    ) -> LifecycleResult:
        """Mark the operation holding `summary_id` committed (`ds4/compactCommitted`).

        Summary ids are unique per session only (a forked session holds copies), and the
        notification may name no session: without `session` it applies to every session where
        the node is `prepared` or `failed`; with it, to that session only. `changed` is empty
        for an unknown id or an operation already committed.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._compactor.compact_committed(summary_id, entry_id, session)

    def compact_failed(
        self, summary_id: str, reason: str | None = None, session: SessionRef | None = None
    ) -> LifecycleResult:
        """Mark the prepared operation holding `summary_id` failed (`ds4/compactFailed`):
        in `session` when given, else in every session where the node is `prepared`.
        Committed nodes are never changed.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._compactor.compact_failed(summary_id, reason, session)

    def summaries(self, session: SessionRef, *, dot: bool = False) -> SummariesResult:
        """The session's summary graph as seen from the leaf (`ds4.summaries`,
        `ds4 summaries`): the view of `compaction.render.graph_view` with the active root and
        its transitive children marked, and the text tree; with `dot`, also the graph as
        Graphviz DOT text (`SummariesResult.dot`, from the same view).

        Raises:
            RequestError: a missing or unreadable session file, or an unknown leaf.
        """
        return self._compactor.summaries(session, dot=dot)

    # ----------------------------------------------------------------- memory (memories.py)

    def memory(self, session: SessionRef | None, *, include_inactive: bool = False) -> MemoryResult:
        """The memory items and pins with their provenance (`ds4/memory`, docs/memory.md): all
        of them, or those that apply to `session` (synced first); active ones only unless
        `include_inactive`.

        Raises:
            RequestError: naming `session.file`, for a missing, unreadable or non-Pi file.
        """
        return self._memories.list(session, include_inactive=include_inactive)

    def write_memory(self, request: MemoryWriteRequest) -> MemoryWriteResult:
        """The custom entry of one memory or pin write (`ds4/pin`, `ds4/unpin`,
        `ds4/remember`, `ds4/forget`; docs/memory.md "Writes"), checked against the current
        items of the synced session, for its writer to append.

        Raises:
            RequestError: a missing or unreadable session file, an unknown leaf, a param out
                of range (named).
            RequestFailedError: the current items refuse the write (message says what to do).
        """
        return self._memory_writer.write(request)

    # ----------------------------------------------------------------- owned sessions (owning.py)

    def session_open(self, request: SessionOpenRequest) -> SessionOpenResult:
        """Create a server-owned session file, or reopen one by id (`ds4/sessionOpen`;
        docs/sessions.md).

        Raises:
            RequestError: a bad `title` or `sessionId` (named).
            RequestFailedError: no data directory (in-memory database) or an unusable one.
        """
        return self._owned.open(request)

    def session_append(self, request: SessionAppendRequest) -> SessionAppendResult:
        """Append Pi messages to a server-owned session (`ds4/sessionAppend`;
        docs/sessions.md): checked, chained, written in one locked, fsynced write.

        Raises:
            RequestError: not an owned session (`session.file`), a bad count or message
                (`messages[i]...`), an unknown `parentId` / `session.leafId`.
            RequestFailedError: the file cannot be written.
        """
        return self._owned.append(request)

    # ----------------------------------------------------------------- artifacts

    def artifact_search(self, request: ArtifactSearchRequest) -> ArtifactSearchResult:
        """Search one artifact or the artifacts of a session's active branch
        (`ds4/artifactSearch`, docs/artifacts.md "Search"); an artifact that cannot be read
        is reported in `searched` with its status.

        Raises:
            RequestError: naming the bad field (`artifact_requests.ArtifactRequests.search`).
        """
        return self._artifacts.search(request)

    def gc_artifacts(self, *, dry_run: bool = False, force: bool = False) -> ArtifactGcResult:
        """Remove the artifact objects no indexed session references, written over an hour
        ago, and quarantined files over 7 days old (`ds4.gcArtifacts`, `ds4 artifacts gc`);
        `dry_run` only counts them. The owned sessions are synced first.

        Raises:
            RequestError: naming `force`: the index holds no session while objects exist (a
                real run without `force`).
            OSError: a file cannot be listed or removed.
        """
        return self._artifacts.gc(dry_run=dry_run, force=force)

    # ----------------------------------------------------------------- health (health.py)

    def health(self) -> HealthResult:
        """Engine and index health (`ds4.health`): versions, the database, counts, notices,
        settings warnings and the project status. `status` is `ok`, or `warning` when notices,
        settings warnings, stale snippets or session copies exist.
        """
        store = self.store
        return check_health(
            store,
            database_path=str(self.database_path),
            notices=self.notices,
            config_warnings=self.config_warnings,
            project=self.project.status(),
            ephemeral_manifests=self._manifests.ephemeral_count(),
            privacy=policy_summary(self.config),
            calibration=self._usage.profiles(),
        )

    def privacy(self, provider: str | None) -> PrivacyResult:
        """What a destination may see (`ds4.privacy`, `ds4 privacy`): `provider` is a model's
        provider id (None: an unnamed provider, treated as remote). Never raises."""
        config = self.config
        target = destination(config, provider)
        return PrivacyResult(
            enabled=target.enabled,
            provider=target.provider,
            kind=target.kind,
            allowed=target.allowed if target.enabled else LEVELS,
            withheld=target.withheld,
            rule=target.rule if target.enabled else "privacy.enabled",
            redact_secrets=target.enabled and target.redact,
            explanation=explain(target),
            policy=policy_summary(config),
        )
