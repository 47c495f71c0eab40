"""Manifests: keeping a plan's manifest (stored in SQLite, or in the bounded in-memory window of
ephemeral manifests), the project provenance a manifest records, and finding a manifest again
(`ds4/manifest`, `ds4 manifest`).

A manifest is stored when the plan has a session and `diagnostics.storeContextManifest` is on;
otherwise, or when it is over 1 MiB even rolled up, or the database fails, it is kept only in
memory (`ManifestWindow`, the latest `EPHEMERAL_MANIFESTS`) and the plan is still answered (fail
open). The document's shape is `ds4_core.manifest` (docs/protocol.md).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..json_bounds import echo
from ..logs import describe_failure
from ..manifest import VIEWS, ManifestWindow, encode_manifest, view_manifest
from ..planner import ContextPlan
from ..requests import ManifestRequest, RequestError, UsageCounts
from ..results import ManifestResult
from ..store import manifests as manifest_repo
from .context import EngineContext
from .project import ProjectService
from .sessions import SESSION_FILE, SessionCache, resolve_session_path

if TYPE_CHECKING:
    from ..project.search import ProjectHit
    from ..project.workspace import ValidatedSearch

log = logging.getLogger("ds4_core.engine")

EPHEMERAL_MANIFESTS = 64
"""Manifests kept in memory (plans without a session, or with storage off)."""


class Manifests:
    """The manifests of one engine: where a plan's manifest is kept and how it is found."""

    def __init__(
        self, context: EngineContext, sessions: SessionCache, project: ProjectService
    ) -> None:
        self._context = context
        self._sessions = sessions
        self._project = project
        self._ephemeral = ManifestWindow(capacity=EPHEMERAL_MANIFESTS)

    def ephemeral_count(self) -> int:
        """How many manifests are kept in memory only."""
        return len(self._ephemeral)

    def record(
        self,
        manifest: dict[str, Any],
        plan: ContextPlan,
        project: ValidatedSearch | None,
        session_id: str | None,
        config: Config,
        warnings: list[str],
    ) -> bool:
        """Add the project provenance to `manifest` (`add_project_provenance`), keep it
        (`keep`), and record the project snippets the plan sent so stale-snippet checks find
        them. Returns whether the manifest was stored. Never raises for storage or provenance
        (a warning or a log line instead): the plan is still answered."""
        sent = self.add_project_provenance(manifest, plan, project)
        stored = self.keep(manifest, session_id, config, warnings)
        workspace = self._project.workspace
        if sent and workspace is not None:
            try:
                workspace.record_sent(manifest["id"], manifest["createdAt"], sent, stored=stored)
            except Exception as exc:  # provenance is best effort; the plan stands
                log.warning("sent snippets not recorded: error=%s", describe_failure(exc))
        return stored

    def keep(
        self,
        manifest: dict[str, Any],
        session_id: str | None,
        config: Config,
        warnings: list[str],
    ) -> bool:
        """Store the manifest, or keep it only in memory (no session, storage off, over 1 MiB,
        or the database failing; a warning says why for the last two). Returns whether it was
        stored. Never raises for storage: the plan is still answered (fail open)."""
        encoded, _rolled_up = encode_manifest(manifest)

        def bounded() -> dict[str, Any]:
            # Memory holds what the database would: the rolled-up form, or the summary alone.
            return json.loads(encoded) if encoded is not None else view_manifest(manifest)

        if session_id is None or not config.diagnostics.store_context_manifest:
            self._ephemeral.put(bounded())
            return False
        if encoded is None:
            log.warning("manifest too large to store: manifest=%s", manifest["id"])
            warnings.append("manifest over 1 MiB even rolled up: its summary is kept in memory")
            self._ephemeral.put(bounded())
            return False
        try:
            manifest_repo.save_manifest(self._context.store(), manifest, encoded)
        except Exception as exc:
            log.warning(
                "manifest not stored: manifest=%s error=%s", manifest["id"], describe_failure(exc)
            )
            warnings.append(
                f"manifest could not be stored ({type(exc).__name__}); kept in memory only"
            )
            self._ephemeral.put(bounded())
            return False
        return True

    def update_usage(
        self,
        manifest_id: str,
        change: Callable[[dict[str, Any]], None],
        counts: UsageCounts,
    ) -> dict[str, Any] | None:
        """Apply `change` to the manifest `manifest_id`, kept in memory or stored (with its
        usage columns: `store.manifests.update_usage`). Returns a copy of the changed
        manifest, or None when no manifest has that id.

        Raises:
            sqlite3.Error: the database failed.
        """
        kept = self._ephemeral.update(manifest_id, change)
        if kept is not None:
            return kept
        return manifest_repo.update_usage(
            self._context.store(),
            manifest_id,
            change,
            counts.actual_input,
            (counts.input, counts.output, counts.cache_read, counts.cache_write),
        )

    def add_project_provenance(
        self, manifest: dict[str, Any], plan: ContextPlan, project: ValidatedSearch | None
    ) -> list[ProjectHit]:
        """Add `project`, `projectSnippets` and `projectRevision` to `manifest` (metadata only:
        ids, paths, hashes, lines, scores; never source text). Returns the hits sent."""
        workspace = self._project.workspace
        manifest["project"] = {"status": self._project.status_word()}
        manifest["projectSnippets"] = []
        manifest["projectRevision"] = None
        if project is None or workspace is None:
            return []
        included = {item.source_id for item in plan.included if item.kind == "project"}
        sent = [h for h in project.retrieval.hits if h.snippet_id in included]
        where = {h.snippet_id: h for h in project.retrieval.hits}
        for item in (*manifest.get("included", []), *manifest.get("excluded", [])):
            hit = where.get(item.get("sourceId")) if item.get("kind") == "project" else None
            if hit is not None:  # a readable label for editors; metadata, never source text
                item["path"], item["lines"] = hit.path, [hit.start_line, hit.end_line]
                if hit.folder is not None:
                    item["folder"] = hit.folder
        manifest["project"].update(
            {
                "dropped": [{"path": p, "reason": r} for p, r in project.dropped],
                "reindexed": list(project.reindexed),
            }
        )
        manifest["projectSnippets"] = [
            {
                "snippetId": h.snippet_id,
                **({"folder": h.folder} if h.folder is not None else {}),
                "path": h.path,
                "fileHash": h.file_hash,
                "lines": [h.start_line, h.end_line],
                "score": h.score,
                "reason": h.reason,
                "modified": h.modified,
                "gitCommit": h.git_commit,
            }
            for h in sent
        ]
        manifest["projectRevision"] = workspace.revision()
        return sent

    def manifest(self, request: ManifestRequest) -> ManifestResult:
        """A plan's manifest, by id or the latest of a session, in the requested view
        (`ContextEngine.manifest`).

        Looks in the in-memory window of ephemeral manifests and in the database; for
        `latest`, the newer of the two wins.

        Raises:
            RequestError: neither `id` nor `session` + `latest`, no such manifest, or an
                unknown `view`.
        """
        if request.view not in VIEWS:
            raise RequestError(f"view: expected one of {', '.join(repr(v) for v in VIEWS)}", "view")
        if request.id:
            found = self._ephemeral.get(request.id)
            if found is not None:
                found = copy.deepcopy(found)  # callers must not change the kept manifest
            else:
                found = manifest_repo.get_manifest(self._context.store(), request.id)
            if found is None:
                raise RequestError(
                    f"id: no manifest with id {echo(request.id)}; it was never recorded by this "
                    "database or was evicted (the latest 128 stored and 64 in-memory manifests "
                    "are kept); plan again for a new id, or ask for the latest manifest of the "
                    "session",
                    "id",
                )
            return ManifestResult(request.view, view_manifest(found, request.view))
        if request.session is None or not request.latest:
            raise RequestError("ds4/manifest needs `id`, or `session` with `latest: true`", "id")
        path = resolve_session_path(request.session.file, SESSION_FILE)
        parsed = self._sessions.load(path)
        if parsed.header is None:
            raise RequestError(
                f"session.file: '{path}' is an empty session; it has no manifests", SESSION_FILE
            )
        session_id = parsed.header.session_id
        candidates = [
            m
            for m in (
                copy.deepcopy(self._ephemeral.latest(session_id)),
                manifest_repo.latest_manifest(self._context.store(), session_id),
            )
            if m is not None
        ]
        if not candidates:
            raise RequestError(
                f"session.file: no manifest recorded for session '{session_id}'; plan a call "
                "for this session first (`ds4 plan --session FILE REQUEST`)",
                SESSION_FILE,
            )
        newest = max(candidates, key=lambda m: (str(m.get("createdAt")), str(m.get("id"))))
        return ManifestResult(request.view, view_manifest(newest, request.view))
