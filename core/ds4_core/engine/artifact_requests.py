"""Artifact requests: `ds4/artifactSearch` (one artifact, or those referenced on a session's
active branch) and garbage collection (`ds4.gcArtifacts`, `ds4 artifacts gc`);
docs/artifacts.md "Search" and "Garbage collection".

Search reads objects only through `artifacts.search.search_artifact`, which re-hashes every
object before it is searched. An artifact that cannot be searched is reported in `searched`
with its status (`missing`, `corrupt`, `too-large`), never as a request error: a request
error is only for bad params (naming the field).
"""

from __future__ import annotations

import logging
from typing import Any

from ..artifacts.gc import GcOutcome, collect_garbage
from ..artifacts.search import (
    MAX_QUERY_CHARS,
    ArtifactTooLargeError,
    search_artifact,
)
from ..artifacts.store import (
    ARTIFACT_ID,
    ArtifactCorruptError,
    ArtifactMissingError,
    ArtifactStore,
    artifact_root,
)
from ..logs import describe_failure
from ..requests import ArtifactSearchRequest, RequestError
from ..results import ArtifactGcResult, ArtifactSearchResult
from ..sessions.owned import data_directory, is_owned, sessions_directory
from ..store import artifacts as artifact_repo
from .context import EngineContext
from .convert import from_attributes
from .indexing import Indexer
from .sessions import SessionCache

log = logging.getLogger("ds4_core.engine")

MAX_MATCHES = 100
"""Most matches one request may ask for (`maxMatches`)."""


class ArtifactRequests:
    """`ds4/artifactSearch` and artifact garbage collection over the engine's store."""

    def __init__(self, context: EngineContext, sessions: SessionCache, indexer: Indexer) -> None:
        self._context = context
        self._sessions = sessions
        self._indexer = indexer

    def _store(self) -> ArtifactStore | None:
        """The store beside the database; None for an in-memory database (no data
        directory: nothing is stored, nothing collected)."""
        path = self._context.store().path
        if str(path) == ":memory:":
            return None
        return ArtifactStore(artifact_root(path))

    def search(self, request: ArtifactSearchRequest) -> ArtifactSearchResult:
        """Search one artifact, or each distinct artifact referenced on the session's active
        branch (synced first) in the order of the entries, until `max_matches` matches are
        found (`truncated` then says more may exist, and the artifacts after are not
        searched). A match's `sourceId` is the first branch entry referencing its artifact
        (None when searched by id alone).

        Raises:
            RequestError: naming the field: `query` empty or too long, `artifactId` not 64
                lower-case hex digits, neither `artifactId` nor `session`, `maxMatches` out
                of 1..100, a missing or non-Pi `session.file`, an unknown `session.leafId`.
        """
        query, artifact_id = request.query, request.artifact_id
        if not isinstance(query, str) or not 1 <= len(query) <= MAX_QUERY_CHARS:
            raise RequestError(
                f"query: expected a string of 1..{MAX_QUERY_CHARS} characters", "query"
            )
        if artifact_id is not None and not ARTIFACT_ID.fullmatch(artifact_id):
            raise RequestError(
                "artifactId: expected 64 lower-case hex digits (the `Artifact ID` of a "
                "condensed block)",
                "artifactId",
            )
        if artifact_id is None and request.session is None:
            raise RequestError(
                "artifactId: give artifactId (one artifact) or session (the artifacts of its "
                "active branch)",
                "artifactId",
            )
        max_matches = request.max_matches
        if max_matches is None:
            max_matches = self._context.config().artifacts.max_search_matches
        elif not 1 <= max_matches <= MAX_MATCHES:
            raise RequestError(f"maxMatches: expected an integer in 1..{MAX_MATCHES}", "maxMatches")
        targets: list[tuple[str, str | None]]  # (artifact id, source entry id)
        if request.session is None:
            targets = [(artifact_id or "", None)]
        else:
            targets = self._branch_artifacts(request)
            if artifact_id is not None:
                targets = [t for t in targets if t[0] == artifact_id]
                if not targets:
                    raise RequestError(
                        f"artifactId: artifact {artifact_id} is not referenced on the "
                        "session's active branch; leave out session to search it by id",
                        "artifactId",
                    )
        return self._search(query, targets, max_matches)

    def _branch_artifacts(self, request: ArtifactSearchRequest) -> list[tuple[str, str | None]]:
        """(artifact id, first entry id) of the artifacts the active branch references, in
        entry order, each id once."""
        assert request.session is not None
        cached, built, path = self._sessions.built_context(request.session)
        if cached.file.header is None:
            return []
        session_id = self._indexer.sync(path, force=False, progress=None).session_id
        if session_id is None:
            return []
        branch = built.branch()
        seen: set[str] = set()
        targets: list[tuple[str, str | None]] = []
        for ref in artifact_repo.session_references(self._context.store(), session_id):
            if ref.entry_id in branch and ref.artifact_id not in seen:
                seen.add(ref.artifact_id)
                targets.append((ref.artifact_id, ref.entry_id))
        return targets

    def _search(
        self, query: str, targets: list[tuple[str, str | None]], max_matches: int
    ) -> ArtifactSearchResult:
        store = self._store()
        config = self._context.config()
        max_bytes = config.artifacts.max_search_bytes
        # excerpts show what a remote provider may see by default, never local-only text
        allowed = [x for x in config.privacy.remote_default_allowed if x != "local-only"]
        matches: list[dict[str, Any]] = []
        searched: list[dict[str, Any]] = []
        truncated = False
        for artifact_id, source_id in targets:
            left = max_matches - len(matches)
            if left <= 0:
                truncated = True
                break
            status = "ok"
            try:
                if store is None:
                    raise ArtifactMissingError(f"artifact {artifact_id}: no store")
                found = search_artifact(
                    store,
                    artifact_id,
                    query,
                    max_matches=left,
                    max_search_bytes=max_bytes,
                    allowed=allowed,
                    default=config.privacy.default_classification,
                )
            except ArtifactTooLargeError:
                status = "too-large"
            except ArtifactCorruptError:
                status = "corrupt"
                log.warning("artifact corrupt, quarantined: artifact=%s", artifact_id)
            except ArtifactMissingError:
                status = "missing"
            except OSError as exc:  # unreadable: reported as missing, logged
                status = "missing"
                log.warning(
                    "artifact unreadable: artifact=%s error=%s", artifact_id, describe_failure(exc)
                )
            searched.append({"artifactId": artifact_id, "status": status})
            if status != "ok":
                continue
            truncated = truncated or found.truncated
            matches += [
                {
                    "artifactId": artifact_id,
                    "sourceId": source_id,
                    "line": match.line,
                    "column": match.column,
                    "excerpt": match.excerpt,
                }
                for match in found.matches
            ]
        return ArtifactSearchResult(query, tuple(matches), tuple(searched), truncated)

    def gc(self, *, dry_run: bool, force: bool = False) -> ArtifactGcResult:
        """Remove the objects no indexed session references (written over an hour ago) and
        quarantined files over 7 days old (`artifacts.gc.collect_garbage`); with `dry_run`,
        only count them. The owned sessions (`<data dir>/sessions/`, docs/sessions.md) are
        synced first, so their artifacts are referenced even after the database was lost.

        Raises:
            RequestError: naming `force`: a real run (not `dry_run`, not `force`) while the
                index holds no session at all and the store holds objects (the database was
                probably deleted: every object would go).
            OSError: a file cannot be listed or removed (`ArtifactStoreRefusedError`: a
                store directory is a symbolic link); sqlite3.Error: the index cannot be read.
        """
        store = self._store()
        if store is not None:
            self._sync_owned()
        database = self._context.store()
        referenced = artifact_repo.referenced_ids(database)
        if store is not None and not dry_run and not force:
            if artifact_repo.indexed_sessions(database) == 0 and store.artifact_ids():
                raise RequestError(
                    "force: the index holds no session while the artifact store holds objects "
                    "(was the database deleted?), so every object would be removed; sync or "
                    "plan the sessions first (`ds4 index FILE`), or pass force to collect "
                    "anyway (a later plan writes an object again from its session file)",
                    "force",
                )
        outcome = (
            collect_garbage(store, referenced, dry_run=dry_run)
            if store is not None
            else GcOutcome(0, 0, 0, 0, 0, dry_run)
        )
        log.info(
            "artifact gc: removed=%d removed_bytes=%d kept=%d young=%d dry_run=%s",
            outcome.removed,
            outcome.removed_bytes,
            outcome.kept,
            outcome.young,
            dry_run,
        )
        return from_attributes(ArtifactGcResult, outcome)

    def _sync_owned(self) -> None:
        """Sync every owned session file (`sessions.owned.is_owned`) of the data directory, so
        garbage collection sees their references. A file that cannot be synced is logged and
        skipped: its objects then count as unreferenced, as before."""
        data_dir = data_directory(self._context.store().path)
        folder = sessions_directory(data_dir)
        try:
            files = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
        except OSError as exc:
            log.warning("owned sessions not listed: error=%s", describe_failure(exc))
            return
        for path in files:
            if not is_owned(data_dir, path):
                continue
            try:
                self._indexer.sync(path, force=False, progress=None)
            except Exception as exc:  # fail open: the other sessions still count
                log.warning(
                    "owned session not synced before gc: file=%s error=%s",
                    path.name,
                    describe_failure(exc),
                )
