"""Compacting: `ds4/compact` and `ds4 compact` (prepare one compaction of a session's active
branch; on a server-owned session also append its entry and commit it), the lifecycle
notifications `ds4/compactCommitted` / `ds4/compactFailed`, and the
summary graph seen from a leaf (`ds4.summaries`, `ds4 summaries`); docs/compaction.md.

The span, summary, validation and the prepared batch are `ds4_core.compaction`; this module
resolves the session and the branch's current root (from the branch's own latest compaction
entry, importing it when the store lacks it), and marks operations committed or failed in the
sessions they belong to.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from ..compaction.nodes import SummaryNode
from ..compaction.render import entry_spans, graph_view, render_dot
from ..compaction.service import prepare_compaction
from ..compaction.span import SpanError, latest_compaction, prepare_span
from ..json_bounds import echo
from ..requests import (
    COMPACTION_REASONS,
    CompactRequest,
    RequestError,
    RequestFailedError,
    SessionRef,
    Summarizer,
)
from ..results import CompactResult, LifecycleResult, SessionInfo, SummariesResult
from ..sessions import SessionContext
from ..store import Store
from ..store import summaries as summary_repo
from .context import EngineContext
from .indexing import Indexer
from .owning import append_owned, owned_file
from .sanitizing import summary_privacy
from .sessions import SESSION_FILE, SessionCache, read_session_header, resolve_session_path

log = logging.getLogger("ds4_core.engine")


class Compactor:
    """Compactions and the summary graph of one engine (see the module docstring)."""

    def __init__(self, context: EngineContext, sessions: SessionCache, indexer: Indexer) -> None:
        self._context = context
        self._sessions = sessions
        self._indexer = indexer

    def compact(
        self,
        request: CompactRequest,
        summarizer: Summarizer | None = None,
        *,
        after_insert: Callable[[SummaryNode], None] | None = None,
    ) -> CompactResult:
        """Prepare one compaction of the session's active branch (`ContextEngine.compact`).

        Raises:
            RequestError: an unknown reason, a missing or unreadable session file, an unknown
                leaf, a bad `firstKeptEntryId`, or a `previousSummaryId` that is not the
                branch's root (the field is named).
            RequestFailedError: compaction is turned off, or there is nothing to compact.
        """
        config = self._context.config()
        if not config.compaction.enabled:
            raise RequestFailedError(
                "compaction is turned off by the compaction.enabled setting; turn it on, or let "
                "Pi compact natively"
            )
        if request.reason not in COMPACTION_REASONS:
            raise RequestError(
                "reason: expected one of " + ", ".join(repr(r) for r in COMPACTION_REASONS),
                "reason",
            )
        started = time.perf_counter()
        session_id, context, tokens, path = self._synced_session(
            request.session, "there is nothing to compact"
        )
        try:
            span = prepare_span(
                context,
                tokens,
                first_kept_entry_id=request.first_kept_entry_id,
                keep_recent_tokens=int(config.compaction.keep_recent_tokens),
            )
        except SpanError as exc:
            if exc.field is None:
                raise RequestFailedError(str(exc)) from exc
            raise RequestError(str(exc), exc.field) from exc
        previous_root = self._branch_root(session_id, path, span.previous_compaction_entry_id)
        previous_id = previous_root.summary_id if previous_root else None
        if request.previous_summary_id is not None and request.previous_summary_id != previous_id:
            raise RequestError(
                f"previousSummaryId: {echo(request.previous_summary_id)} is not the current root of "
                "this branch ("
                + (f"which is '{previous_id}'" if previous_id else "the branch has no summary yet")
                + "); the previous summary comes from the branch's own latest compaction",
                "previousSummaryId",
            )
        provider = request.model.provider if request.model is not None else None
        if not provider and context.model is not None:
            provider = context.model[0]  # the session's current model answers the summary
        privacy = summary_privacy(config, provider, span, request.custom_instructions)
        if privacy.failed:
            summarizer = None  # privacy fails closed: nothing goes out, the offline summary
        prepared = prepare_compaction(
            self._context.store(),
            session_id=session_id,
            span=span,
            reason=request.reason,
            previous_root=previous_root,
            config=config,
            summarizer=summarizer,
            custom_instructions=privacy.instructions,
            after_insert=after_insert,
            prompt_span=privacy.prompt_span,
            prompt_files=privacy.prompt_files,
            privacy_level=privacy.level,
            client_level=privacy.client_level,
        )
        result = prepared.result(SessionInfo(session_id, str(path), context.leaf_id), 0.0)
        if owned_file(self._context, path):
            result = self._append_to_owned(result, path, request.session.leaf_id, context.leaf_id)
        duration_ms = (time.perf_counter() - started) * 1000
        result = replace(result, duration_ms=round(duration_ms, 3))
        log.info(
            "compact: session=%s summary=%s kind=%s level=%d messages=%d summarizer=%s "
            "duration_ms=%.1f",
            session_id,
            prepared.root.summary_id,
            prepared.root.kind,
            prepared.root.graph_level,
            span.message_count,
            result.summarizer,
            duration_ms,
        )
        return result

    def _append_to_owned(
        self, result: CompactResult, path: Path, leaf_id: str | None, computed_for: str | None
    ) -> CompactResult:
        """Append the compaction entry to the server-owned session `path` and commit it
        (docs/sessions.md): as a child of the requested `leaf_id`; else of the file's last
        entry when that is the leaf `computed_for` (the branch summarised) or descends from it
        (messages appended meanwhile on that branch stay before it), else of `computed_for`
        (the last entry is on another branch, which the summary does not describe). A failed
        append marks the operation failed.

        Raises:
            RequestFailedError: the entry could not be appended.
        """
        entry = {"type": "compaction", **result.compaction.to_wire()}
        ref = SessionRef(str(path))
        try:
            (entry_id,) = append_owned(
                path, [entry], leaf_id, SESSION_FILE, descendant_of=computed_for
            )
        except RequestError as exc:
            self.compact_failed(result.summary_id, "the server could not append the entry", ref)
            raise RequestFailedError(
                f"the compaction entry could not be appended to the owned session: {exc}"
            ) from None
        self.compact_committed(result.summary_id, entry_id, ref)
        return replace(result, appended=True, entry_id=entry_id)

    def compact_committed(
        self, summary_id: str, entry_id: str | None = None, session: SessionRef | None = None
    ) -> LifecycleResult:
        """Mark the operation holding `summary_id` committed (`ContextEngine.compact_committed`):
        in `session` when given, else in every session where it is `prepared` or `failed`.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._mark("committed", summary_id, session, summary_repo.mark_committed, entry_id)

    def compact_failed(
        self, summary_id: str, reason: str | None = None, session: SessionRef | None = None
    ) -> LifecycleResult:
        """Mark the prepared operation holding `summary_id` failed
        (`ContextEngine.compact_failed`): in `session` when given, else in every session where
        it is `prepared`.

        Raises:
            RequestError: `session` names a missing or unreadable session file.
        """
        return self._mark("failed", summary_id, session, summary_repo.mark_failed, reason)

    def summaries(self, session: SessionRef, *, dot: bool = False) -> SummariesResult:
        """The session's summary graph as seen from the leaf (`ContextEngine.summaries`); with
        `dot`, also as Graphviz DOT text (`render_dot` of the same view, with `entry_spans`).

        Raises:
            RequestError: a missing or unreadable session file, or an unknown leaf.
        """
        session_id, context, _tokens, path = self._synced_session(session, "it has no summaries")
        _start, compaction_entry, _summary = latest_compaction(context)
        root = self._branch_root(session_id, path, compaction_entry)
        nodes = summary_repo.session_nodes(self._context.store(), session_id)
        view = graph_view(
            nodes,
            active_root_id=root.summary_id if root else None,
            active_path_entry_ids=set(context.path_entry_ids),
            session_id=session_id,
            session_file=str(path),
            leaf_id=context.leaf_id,
        )
        result = SummariesResult(
            session_id=view["sessionId"],
            session_file=view["sessionFile"],
            leaf_id=view["leafId"],
            active_root_id=view["activeRootId"],
            nodes=tuple(view["nodes"]),
            roots=tuple(view["roots"]),
            counts=view["counts"],
            tree=view["tree"],
        )
        if not dot:
            return result
        return replace(result, dot=render_dot(result.to_wire(), entry_spans(nodes)))

    def _synced_session(
        self, ref: SessionRef, empty: str
    ) -> tuple[str, SessionContext, list[int], Path]:
        """(session id, leaf context, its message tokens, path) of `ref`, with the index (and
        so the summary graph) synced first.

        Raises:
            RequestError: a missing or unreadable file, an unknown leaf, or a file with no
                session header yet (the message ends with `empty`).
        """
        parsed, context, tokens, path = self._sessions.context(ref)
        if parsed.header is None:
            raise RequestError(
                f"session.file: '{path}' holds no Pi session yet; {empty}", SESSION_FILE
            )
        self._indexer.sync(path, force=False, progress=None)
        return parsed.header.session_id, context, tokens, path

    def _branch_root(
        self, session_id: str, path: Path, compaction_entry_id: str | None
    ) -> SummaryNode | None:
        """The summary node carried by the branch's latest compaction entry (never the
        session-wide newest), importing it from the entry when the store lacks it."""
        if compaction_entry_id is None:
            return None
        node = summary_repo.node_for_entry(self._context.store(), session_id, compaction_entry_id)
        if node is not None:
            return node
        entry = self._sessions.cached(path).entry(compaction_entry_id)
        # None for an empty summary: Pi sends nothing, so there is nothing to extend.
        return self._indexer.import_entry(session_id, entry) if entry else None

    def _lifecycle_sessions(
        self, summary_id: str, session: SessionRef | None, *, include_failed: bool
    ) -> list[str]:
        """The sessions a `ds4/compactCommitted` / `ds4/compactFailed` applies to: the one
        `session` names (its header's id; the file is not synced), else every session where
        node `summary_id` is `prepared` (or `failed`, with `include_failed`).

        Raises:
            RequestError: `session` names a missing or unreadable file, or one without a Pi
                session header.
        """
        if session is None:
            return summary_repo.sessions_with_pending(
                self._context.store(), summary_id, include_failed=include_failed
            )
        path = resolve_session_path(session.file, SESSION_FILE)
        header = read_session_header(path)
        if header is None:
            raise RequestError(
                f"session.file: '{path}' holds no Pi session yet; it has no summaries",
                SESSION_FILE,
            )
        return [header.session_id]

    def _mark(
        self,
        lifecycle: str,
        summary_id: str,
        session: SessionRef | None,
        mark: Callable[[Store, str, str, str | None], list[str]],
        detail: str | None,
    ) -> LifecycleResult:
        """Apply `mark(store, session_id, summary_id, detail)` (`summary_repo.mark_committed`
        with the entry id, or `mark_failed` with the reason) in each session where
        `summary_id` can move to `lifecycle` (committed: from prepared or failed; failed: from
        prepared)."""
        changed: list[str] = []
        sessions: list[str] = []
        pending = self._lifecycle_sessions(
            summary_id, session, include_failed=lifecycle == "committed"
        )
        store = self._context.store()
        for session_id in pending:
            ids = mark(store, session_id, summary_id, detail)
            if ids:
                sessions.append(session_id)
                changed.extend(ids)
        log.info(
            "compact %s: summary=%s sessions=%d changed=%d",
            lifecycle,
            summary_id,
            len(sessions),
            len(changed),
        )
        return LifecycleResult(summary_id, tuple(sessions), tuple(changed))
