"""Retrieving: `ds4/retrieve` and `ds4 retrieve`, ranked transcript evidence of the active
branch, live-validated project snippets of a trusted workspace and the commits of its Git
history (scope `git`) for a query.

History hits come from `Planner.history_evidence` over the session prepared as for a plan, so
entries the planned context already holds verbatim (the recent tail and the current turn) are
left out, as a plan would; project hits from the workspace's validated search. A failure of the
project search is a warning and status `error` (fail open): the history part stands.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import Config
from ..logs import describe_failure
from ..privacy.policy import destination
from ..privacy.sanitizer import Sanitizer
from ..project.commit_hits import commit_text
from ..requests import ModelSpec, RequestError, RetrieveRequest
from ..results import CommitHit, HistoryHit, ProjectHit, RetrievalStats, RetrieveResult
from ..retrieval import describe_task, last_user_text
from .context import EngineContext
from .convert import from_attributes
from .planning import Planner, retrieval_stats
from .preparing import Prepared
from .profiles import check_model
from .project import ProjectService
from .relevance import scope_relevance
from .sanitizing import (
    SNIPPET_LEVELS,
    sanitize_hits,
    source_levels,
    source_secrets,
    visible_text,
)

log = logging.getLogger("ds4_core.engine")


class Retriever:
    """Retrievals of one engine (see the module docstring)."""

    def __init__(self, context: EngineContext, planner: Planner, project: ProjectService) -> None:
        self._context = context
        self._planner = planner
        self._project = project

    def retrieve(self, request: RetrieveRequest) -> RetrieveResult:
        """Rank transcript and project evidence for a query (`ContextEngine.retrieve`).

        Raises:
            RequestError: bad `maxResults`/`maxTokens`, or a bad session reference.
        """
        if request.max_results is not None and not 1 <= request.max_results <= 100:
            raise RequestError("maxResults: expected an integer in 1..100", "maxResults")
        if request.max_tokens is not None and request.max_tokens < 1:
            raise RequestError("maxTokens: expected a positive integer", "maxTokens")
        if request.model is not None:
            check_model(request.model)
        config = self._context.config()  # one snapshot: settings may change on another thread
        warnings: list[str] = []
        query = request.query
        if not config.enabled:
            warnings.append("ds4 is disabled by the `enabled` setting")
            return RetrieveResult(
                "disabled", query, (), (), None, RetrievalStats(), tuple(warnings)
            )
        status = "ok"
        history: tuple[HistoryHit, ...] = ()
        stats = RetrievalStats()
        project: tuple[ProjectHit, ...] = ()
        project_status: str | None = None
        prepared = None
        if request.session is not None:
            model = request.model or ModelSpec()  # its window decides what the tail holds
            prepared = self._planner.preparer.prepare(request.session, None, None, model, config)
            warnings.extend(prepared.warnings)
            if request.query is None:
                query = last_user_text(prepared.messages)
        named = request.model is not None  # a destination, else hits for the editor's display
        target = destination(config, request.model.provider if request.model else None)
        text = visible_text(target if named else None, query or "")  # withheld words never search
        relevance: dict[str, Any] = {}
        floors: dict[str, str] = {}  # the level of the text each hit was cut from
        secrets: dict[str, tuple[str, ...]] = {}  # and the secret lines of that text
        if "history" in request.scopes:
            if prepared is None or prepared.session_id is None:
                status = "no-session"
            else:
                status, history, stats = self._history(
                    prepared, text, request, config, warnings, relevance, floors, secrets
                )
        if "project" in request.scopes:
            project_status, project = self._project_hits(
                text, request, config, warnings, relevance, floors
            )
        git: tuple[CommitHit, ...] | None = None
        git_status: str | None = None
        if "git" in request.scopes:
            git_status, git = self._git_hits(text, request, config, warnings, relevance)
        # a named model (with or without its provider: then an unnamed remote one) is the
        # destination; without one, hits are for the editor's own display: classified only
        sanitizer = Sanitizer(target)
        history = sanitize_hits(
            sanitizer, history, rewrite=named, key=_entry_key, floors=floors, secrets=secrets
        )
        project = sanitize_hits(sanitizer, project, rewrite=named, key=_snippet_id, floors=floors)
        if git is not None:
            git = sanitize_hits(sanitizer, git, rewrite=named)
        for scope, hits in (("history", history), ("project", project), ("git", git or ())):
            entry = relevance.get(scope)
            if isinstance(entry, dict) and entry.get("sent", 0) > len(hits):  # privacy dropped
                relevance[scope] = {
                    **entry,
                    "sent": len(hits),
                    "why": entry.get("why") or (None if hits else PRIVACY_WHY),
                }
        if named and query is not None:
            query = sanitizer.text(query)  # echoed back to whoever reads the hits
        privacy = sanitizer.counters.to_wire(sanitizer.target)
        if not named:
            privacy["destination"] = None
        return RetrieveResult(
            status,
            query,
            history,
            project,
            project_status,
            stats,
            tuple(warnings),
            relevance,
            git=git,
            git_status=git_status,
            privacy=privacy,
        )

    def _git_hits(
        self,
        query: str,
        request: RetrieveRequest,
        config: Config,
        warnings: list[str],
        relevance: dict[str, Any],
    ) -> tuple[str, tuple[CommitHit, ...]]:
        """The git status and commits of `retrieve` (warnings appended, and `relevance["git"]`
        set when the search ran): the project's status word while it is not active
        (`untrusted`, `no-workspace`, `disabled`: no Git runs, no commit is read), else the
        commit search's status. A failure of the search becomes status `error` and a warning
        (fail open)."""
        workspace = self._project.workspace
        if workspace is None or not workspace.active():
            return self._project.status_word(), ()
        try:
            found = workspace.search_commits(
                query,
                max_results=request.max_results or config.project.max_results,
                max_tokens=request.max_tokens or config.context.max_project_tokens,
            )
        except Exception as exc:  # fail open: the other scopes stand, the failure is named
            log.warning("retrieve git failed: error=%s", describe_failure(exc))
            warnings.append(f"the Git history search failed ({type(exc).__name__})")
            return "error", ()
        warnings.extend(found.warnings)
        relevance["git"] = scope_relevance(found.status, len(found.hits), found.below_floor)
        hits = []
        for hit in found.hits:
            folder = next((f for f in workspace.folders if f.name == hit.folder), None)
            hits.append(
                from_attributes(
                    CommitHit,
                    hit,
                    folder_path=str(folder.root) if folder is not None else None,
                    score=round(hit.score, 3),
                    quoted=commit_text(hit),
                )
            )
        log.info(
            "retrieve git: status=%s hits=%d below_floor=%d latency_ms=%.2f",
            found.status,
            len(found.hits),
            len(found.below_floor),
            found.latency_ms,
        )
        return found.status, tuple(hits)

    def _history(
        self,
        prepared: Prepared,
        query: str,
        request: RetrieveRequest,
        config: Config,
        warnings: list[str],
        relevance: dict[str, Any],
        floors: dict[str, str],
        secrets: dict[str, tuple[str, ...]],
    ) -> tuple[str, tuple[HistoryHit, ...], RetrievalStats]:
        """The history search status, hits and stats of `retrieve` (warnings appended,
        `relevance["history"]` set: `relevance.scope_relevance`, and the level and secret lines
        of each hit's whole source text in `floors` and `secrets`, by entry key)."""
        _, in_context = self._planner.kept_verbatim(prepared, 0, config)
        retrieval = self._planner.history_evidence(
            prepared,
            in_context,
            config,
            query=query,
            max_results=request.max_results,
            max_tokens=request.max_tokens,
        )
        warnings.extend(retrieval.warnings)
        log.info(
            "retrieve: session=%s status=%s hits=%d latency_ms=%.2f",
            prepared.session_id,
            retrieval.status,
            len(retrieval.hits),
            retrieval.stats.latency_ms,
        )
        relevance["history"] = scope_relevance(
            retrieval.status,
            len(retrieval.hits),
            retrieval.below_floor,
            retrieval.stats.already_in_context,
        )
        floors.update(source_levels(retrieval.hits))
        secrets.update(source_secrets(retrieval.hits))
        hits = tuple(
            from_attributes(HistoryHit, h, score=round(h.score, 3)) for h in retrieval.hits
        )
        return retrieval.status, hits, retrieval_stats(retrieval)

    def _project_hits(
        self,
        query: str,
        request: RetrieveRequest,
        config: Config,
        warnings: list[str],
        relevance: dict[str, Any],
        floors: dict[str, str],
    ) -> tuple[str, tuple[ProjectHit, ...]]:
        """The project status and hits of `retrieve` (warnings appended, `relevance["project"]`
        set when the search ran, and the level of each snippet judged on its whole file in
        `floors`, by snippet id). A failure of the search becomes status `error` and a warning
        (fail open)."""
        workspace = self._project.workspace
        status = self._project.status_word()
        if workspace is None or not workspace.active():
            return status, ()
        try:
            found = workspace.search(
                describe_task(query),
                max_results=request.max_results or config.project.max_results,
                max_tokens=request.max_tokens or config.context.max_project_tokens,
            )
        except Exception as exc:  # fail open: the history part stands, the failure is named
            log.warning("retrieve project failed: error=%s", describe_failure(exc))
            warnings.append(
                f"project knowledge failed ({type(exc).__name__}); no project source was searched"
            )
            return "error", ()
        warnings.extend(found.retrieval.warnings)
        relevance["project"] = scope_relevance(
            found.retrieval.status, len(found.retrieval.hits), found.retrieval.below_floor
        )
        warnings.extend(
            f"project file '{path}' was left out: {reason}" for path, reason in found.dropped
        )
        if config.privacy.enabled:
            floors.update(
                SNIPPET_LEVELS.levels(
                    found.retrieval.hits,
                    workspace.quoted_text,
                    config.privacy.default_classification,
                )
            )
        hits = []
        for h in found.retrieval.hits:
            folder = workspace.folder_of(h)  # the workspace folder `path` is relative to
            hits.append(
                from_attributes(
                    ProjectHit,
                    h,
                    folder=folder.name if folder is not None else None,
                    folder_path=str(folder.root) if folder is not None else None,
                    score=round(h.score, 3),
                )
            )
        log.info(
            "retrieve project: status=%s hits=%d reindexed=%d dropped=%d",
            found.retrieval.status,
            len(found.retrieval.hits),
            len(found.reindexed),
            len(found.dropped),
        )
        return found.retrieval.status, tuple(hits)


PRIVACY_WHY = "every match was left out by the privacy policy (its level is withheld)"
"""`relevance.<scope>.why` when privacy left out every hit the search sent."""


def _entry_key(hit: HistoryHit) -> str:
    return hit.entry_key


def _snippet_id(hit: ProjectHit) -> str:
    return hit.snippet_id
