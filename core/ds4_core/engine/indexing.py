"""Indexing: syncing Pi session files into the SQLite index (`ds4 index`, before each plan,
retrieval and compaction), rebuilding every known session (`ds4.rebuildIndex`, `ds4 rebuild`),
and importing the summary nodes that sessions' compaction entries carry into the summary graph.

The sync itself (incremental append, rewrite detection, FTS) is `ds4_core.sessions.sync`; this
module adds the engine's rules around it: session-file errors become `RequestError`
(`sessions.session_file_errors`), logs carry counts and ids only, and one odd compaction entry
never fails a sync. Memory and pin custom entries are stored and replayed into their
projection in the same write transaction (`store.memory`; docs/memory.md), and so are the
artifact references of large tool results (`store.artifacts`; docs/artifacts.md).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from ..artifacts.references import ArtifactReference, reference_of
from ..compaction.nodes import SummaryNode
from ..compaction.records import nodes_from_compaction_entry, unverified_nodes
from ..logs import describe_failure
from ..memory.events import MutationError
from ..requests import RequestError
from ..results import ProjectSyncResult, RebuildFailure, RebuildResult, SyncReport
from ..sessions.reader import SessionEntry
from ..sessions.sync import RowHook, SyncResult, sync_session
from ..store import artifacts as artifact_repo
from ..store import memory as memory_repo
from ..store import sessions as session_repo
from ..store import summaries as summary_repo
from .context import EngineContext, ProgressCallback
from .convert import from_attributes
from .project import ProjectService
from .sessions import SESSION_FILE, resolve_session_path, session_file_errors

log = logging.getLogger("ds4_core.engine")


class Indexer:
    """Session syncs, rebuilds and compaction-entry imports over the engine's store."""

    def __init__(self, context: EngineContext, project: ProjectService) -> None:
        self._context = context
        self._project = project

    def index_session(
        self,
        path: str | os.PathLike[str],
        *,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> SyncReport:
        """Sync one Pi session file into the index (`ContextEngine.index_session`).

        Raises:
            RequestError: the file is missing, unreadable or not a Pi session (field `file`).
            OSError, sqlite3.Error: the database cannot be opened or written.
        """
        resolved = resolve_session_path(str(path), "file")
        return sync_report(self.sync(resolved, force=force, progress=progress, field="file"))

    def rebuild(self, progress: ProgressCallback | None = None) -> RebuildResult:
        """Force a rebuild of every session the database knows, and (in a trusted workspace)
        rescan the project (`ContextEngine.rebuild`). `progress(done, 100, message)` is one
        rising percentage: the sessions, then (with a project) the sessions as 0-50 % and the
        project as 50-100 %."""
        started = time.perf_counter()
        known = session_repo.list_sessions(self._context.store())
        results: list[SyncReport] = []
        failed: list[RebuildFailure] = []
        total = len(known)
        with_project = self._project.active()
        session_share = 50 if with_project else 100

        def session_progress(done: int, message: str) -> None:
            if progress:
                progress((session_share * done) // max(1, total), 100, message)

        def project_progress(done: int, whole: int, message: str) -> None:
            if progress:
                progress(
                    session_share + ((100 - session_share) * done) // max(1, whole), 100, message
                )

        session_progress(0, f"rebuilding {total} session(s)")
        for done, row in enumerate(known, start=1):
            session_file = row["session_file"]
            if not Path(session_file).is_file():
                failed.append(
                    RebuildFailure(
                        session_file,
                        "the session file no longer exists; restore it to index it "
                        "again (the old index of this session is kept until then)",
                    )
                )
            else:
                try:
                    synced = self.sync(Path(session_file), force=True, progress=None)
                    results.append(sync_report(synced))
                except RequestError as exc:  # unreadable, or no longer a Pi session
                    failed.append(RebuildFailure(session_file, str(exc)))
            session_progress(done, f"{done}/{total} sessions")
        project: ProjectSyncResult | None = None
        if with_project:
            try:
                project = self._project.sync(force=True, progress=project_progress)
            except Exception as exc:  # the session rebuild stands; report the project part
                log.warning("project rescan failed: error=%s", describe_failure(exc))
                root = self._project.workspace.root if self._project.workspace else None
                project = ProjectSyncResult(
                    status="error",
                    project_path=str(root) if root else None,
                    error=type(exc).__name__,
                )
        duration_ms = (time.perf_counter() - started) * 1000
        log.info(
            "rebuild: sessions=%d failed=%d duration_ms=%.1f",
            len(results),
            len(failed),
            duration_ms,
        )
        return RebuildResult(
            sessions=len(results),
            entries=sum(r.entries_total for r in results),
            failed=tuple(failed),
            duration_ms=round(duration_ms, 3),
            results=tuple(results),
            project=project,
        )

    def sync(
        self,
        path: Path,
        *,
        force: bool,
        progress: ProgressCallback | None,
        field: str = SESSION_FILE,
    ) -> SyncResult:
        """Sync `path` (resolved) into the index, importing its compaction entries.

        Raises:
            RequestError: the file cannot be read or is not a Pi session (naming `field`).
            OSError, sqlite3.Error: the database cannot be opened or written.
        """

        def bytes_progress(done: int, total: int) -> None:
            if progress:
                progress(done, total, "indexing session")

        store = self._context.store()  # opened first, so an OSError below is about the file
        with session_file_errors(path, field):
            result = sync_session(
                store,
                path,
                force=force,
                progress=bytes_progress if progress else None,
                on_compactions=self._import_compactions,
                on_custom=self._import_mutations,
                on_rows=self._reference_hook(),
            )
        log.info(
            "sync: session=%s outcome=%s added=%d total=%d malformed=%d duration_ms=%.1f",
            result.session_id,
            result.outcome,
            result.entries_added,
            result.entries_total,
            result.malformed_lines,
            result.duration_ms,
        )
        if result.warnings:  # (paths stay out of the log; the result and health name them)
            log.warning(
                "sync: session=%s warnings=%d (another file has this session id)",
                result.session_id,
                len(result.warnings),
            )
        return result

    def _reference_hook(self) -> RowHook:
        """Sync hook: the artifact reference of each large tool result (docs/artifacts.md
        "References"), by the settings at the start of the sync. The id is the hash of the
        text, so the rows are the same whether or not a plan stored the object yet."""
        settings = self._context.config().artifacts
        max_inline, max_bytes = settings.max_inline_tool_result_chars, settings.max_artifact_bytes

        def take(entry: SessionEntry) -> ArtifactReference | None:
            return reference_of(entry, max_inline_chars=max_inline, max_artifact_bytes=max_bytes)

        def record(session_id: str, rows: list[ArtifactReference], whole: bool) -> None:
            artifact_repo.record_references(self._context.store(), session_id, rows, whole=whole)

        return RowHook(take, record)

    def _import_compactions(self, session_id: str, entries: list[SessionEntry]) -> None:
        """Sync hook: record the summary nodes the session's compaction entries carry (ours
        become `committed`; Pi-native ones become `branch` nodes). One bad entry is logged and
        skipped; it never fails the sync."""
        for entry in entries:
            try:
                self.import_entry(session_id, entry)
            except Exception as exc:  # one odd entry must never block the session's index
                log.warning(
                    "compaction entry not imported: session=%s entry=%s error=%s",
                    session_id,
                    entry.entry_id,
                    describe_failure(exc),
                )

    def _import_mutations(self, session_id: str, entries: list[SessionEntry], whole: bool) -> None:
        """Sync hook: store the memory and pin mutations among the session's custom entries and
        replay them all into the projection (docs/memory.md). An invalid entry is stored with
        its error and counted, never applied; it never fails the sync."""
        store = self._context.store()
        changed, invalid = memory_repo.record_mutations(store, session_id, entries, whole=whole)
        if invalid:
            log.warning(
                "memory entries skipped: session=%s invalid=%d (ds4/memory lists them)",
                session_id,
                invalid,
            )
        if changed:
            try:
                memory, pins = memory_repo.project(store)
            except MutationError as exc:  # a row written by another version: rebuild rewrites it
                log.warning("memory replay failed: session=%s field=%s", session_id, exc.field)
                return
            log.info(
                "memory replay: session=%s memory=%d pins=%d rejected=%d",
                session_id,
                len(memory.items),
                len(pins.items),
                len(memory.rejected) + len(pins.rejected),
            )

    def import_entry(self, session_id: str, entry: SessionEntry) -> SummaryNode | None:
        """Store the nodes compaction `entry` carries; returns its root node (None for an
        entry with no summary).

        A ds4 record is trusted only when it fits the graph: when its summary id already holds
        another text in this session, or its children exist nowhere, the entry is imported as
        a Pi-native `branch` node instead (`metadata.untrustedDs4Record` says why), so the
        graph always holds the text the model saw.

        Raises:
            sqlite3.Error, ValueError: not even the Pi-native node could be stored (callers
                that must not fail, like the sync hook, log it and go on).
        """
        store = self._context.store()
        nodes = nodes_from_compaction_entry(session_id, entry)
        if not nodes:
            return None
        try:
            summary_repo.import_committed(store, nodes)
        except (ValueError, sqlite3.IntegrityError) as exc:
            log.warning(
                "compaction entry imported unverified: session=%s entry=%s error=%s",
                session_id,
                entry.entry_id,
                describe_failure(exc),
            )
            nodes = unverified_nodes(session_id, entry, f"not a valid graph record: {exc}")
            summary_repo.import_committed(store, nodes)
        return summary_repo.get_node(store, session_id, nodes[-1].summary_id)


def sync_report(result: SyncResult) -> SyncReport:
    """The `SyncReport` of one sync (`duration_ms` rounded to 3 decimals)."""
    return from_attributes(
        SyncReport,
        result,
        duration_ms=round(result.duration_ms, 3),
        warnings=tuple(result.warnings),
    )
