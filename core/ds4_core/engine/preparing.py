"""Preparing a session (or caller messages) for planning or retrieval: the session read and its
index synced, the messages built or matched, the request appended, the model and budget
resolved, and what is kept per session revision handed on (`engine/sessions.py`: the planner's
structure, the dry-plan results, the messages' object ids for the privacy cache).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from ..calibration import Calibration
from ..config import Config
from ..logs import describe_failure
from ..planner import ContextBudget, ContextPlan, ModelProfile, Supplement, plan_context
from ..planner.structure import MessageStructure, StructureError
from ..requests import ModelSpec, SessionRef
from ..sessions import SessionContext
from ..sessions.context import match_messages
from ..sessions.reader import SessionEntry
from ..store import summaries as summary_repo
from ..tokens import estimate_message_tokens
from .context import EngineContext
from .indexing import Indexer
from .profiles import CalibrationOf, profile_and_budget
from .sessions import SessionCache

log = logging.getLogger("ds4_core.engine")


@dataclass
class Prepared:
    """A session (or caller messages) made ready for planning or retrieval."""

    messages: list[dict[str, Any]]
    message_tokens: list[int]
    source_ids: list[str | None]
    session_id: str | None
    session_file: str | None
    leaf_id: str | None
    branch_entry_ids: AbstractSet[str]
    session_model: tuple[str, str] | None
    profile: ModelProfile
    budget: ContextBudget
    warnings: list[str]
    summary_ids: dict[str, str] = field(default_factory=dict)
    native_ids: AbstractSet[int] = frozenset()
    """Object ids of the session's own messages among `messages` (`BuiltContext.native_ids`)."""
    structure: MessageStructure | None = None
    """The planner's structure of `messages` with these tokens and source ids (kept per
    session revision, `sessions.BuiltContext`); None for caller messages (built per plan)."""
    verbatim: dict[Any, tuple[bool, frozenset[str]]] | None = None
    """The session context's kept dry-plan results (`BuiltContext.verbatim`); None: none kept."""
    entry_of: Callable[[str], SessionEntry | None] | None = None
    """The session's entry with an id (`CachedSession.entry`); None without a session."""
    calibration: Calibration | None = None
    """The profile's calibration the budget used (`engine/usage.py`); None: not looked up."""
    base_structure: MessageStructure | None = None
    """The kept structure of the session's messages before the request was appended; None for
    caller messages."""
    revision_memo: dict[Any, Any] | None = None
    """The session context's memo of condensed messages (`BuiltContext.artifacts`)."""

    def summary_indices(self) -> list[int] | None:
        """Indices of the summary messages (from the structure), or None without one."""
        return self.structure.summary_indices() if self.structure is not None else None

    def plan(
        self,
        fixed_tokens: int,
        config: Config,
        supplements: Sequence[Supplement] = (),
        withheld: Mapping[int, tuple[str, str]] | None = None,
    ) -> ContextPlan:
        """`plan_context` over these messages (their source ids and token counts reused);
        `withheld`: summary messages privacy leaves out (`sanitizing.withheld_summaries`)."""
        return plan_context(
            self.messages,
            fixed_tokens=fixed_tokens,
            budget=self.budget,
            config=config,
            supplements=supplements,
            message_source_ids=self.source_ids,
            message_tokens=self.message_tokens,
            withheld=withheld,
            structure=self.structure,
        )


class Preparer:
    """Prepares sessions for one engine's planner and retriever (see the module docstring)."""

    def __init__(
        self,
        context: EngineContext,
        sessions: SessionCache,
        indexer: Indexer,
        calibration_of: CalibrationOf | None = None,
    ) -> None:
        self._context = context
        self._sessions = sessions
        self._indexer = indexer
        self._calibration_of = calibration_of

    def prepare(
        self,
        session: SessionRef | None,
        messages: list[dict[str, Any]] | None,
        request: str | None,
        model: ModelSpec,
        config: Config,
        *,
        sync: bool = True,
    ) -> Prepared:
        """Read the session (and sync its index unless `sync` is false), build or match the
        messages, append `request`, and resolve the model and budget.

        A failure to update the index is not an error: it becomes a warning; so do the sync's
        own warnings (`SyncResult.warnings`: another file carries this session id).

        Raises:
            RequestError: a missing or unreadable session file, or an unknown leaf.
        """
        warnings: list[str] = []
        session_id = session_file = leaf_id = None
        branch: AbstractSet[str] = frozenset()
        summary_ids: dict[str, str] = {}
        session_model = None
        tokens: list[int] | None = None
        structure: MessageStructure | None = None
        native: AbstractSet[int] = frozenset()
        verbatim: dict[Any, tuple[bool, frozenset[str]]] | None = None
        entry_of: Callable[[str], SessionEntry | None] | None = None
        base: MessageStructure | None = None
        memo: dict[Any, Any] | None = None
        if session is not None:
            cached, kept, path = self._sessions.built_context(session)
            parsed = cached.file
            index = cached.index()
            if (
                parsed.header is not None
                and parsed.header.version >= 3
                and len(index.by_id) == len(parsed.entries)  # no id used twice
            ):
                entry_of = cached.entry  # ids and messages as the file holds them, each once
            context, context_tokens = kept.context, kept.tokens
            session_file = str(path)
            session_id = parsed.header.session_id if parsed.header else None
            if parsed.header is None:
                warnings.append(
                    f"session file '{path}' holds no Pi session yet (empty, or its header is "
                    "still being written); there is no history to use"
                )
            leaf_id = context.leaf_id
            branch = kept.branch()
            session_model = context.model
            if session_id is not None and sync:
                try:
                    # e.g. that a copy of this file shares its session id (and so its index)
                    warnings.extend(self._indexer.sync(path, force=False, progress=None).warnings)
                except Exception as exc:  # fail open: planning works without the index
                    log.warning(
                        "sync failed: session=%s error=%s", session_id, describe_failure(exc)
                    )
                    warnings.append(
                        f"session index could not be updated ({type(exc).__name__}); "
                        "history retrieval may be incomplete"
                    )
            if messages is None:
                built = list(context.messages)
                source_ids: list[str | None] = list(context.message_entry_ids)
                tokens = list(context_tokens)
                structure = base = kept.structure()
                memo = kept.artifacts
                native = kept.native_ids()
                verbatim = kept.verbatim
            else:
                built, source_ids = match_messages(messages, context)
            if session_id is not None:
                summary_ids = self._context_summary_ids(
                    session_id, context, structure.summary_indices() if structure else None
                )
        else:
            built = list(messages or [])
            source_ids = [None] * len(built)
        _append_request(built, source_ids, request)
        if tokens is None:
            tokens = [estimate_message_tokens(m) for m in built]
        else:
            tokens.extend(estimate_message_tokens(m) for m in built[len(tokens) :])
        if structure is not None and len(built) > structure.n:
            try:  # the new request: one more group, no walk over the session
                structure = structure.appended(built[-1], tokens[-1], source_ids[-1])
            except StructureError:
                structure = verbatim = None  # the planner builds it from the messages
        profile, budget, calibration = profile_and_budget(
            model, session_model, config, warnings, self._calibration_of
        )
        return Prepared(
            built,
            tokens,
            source_ids,
            session_id,
            session_file,
            leaf_id,
            branch,
            session_model,
            profile,
            budget,
            warnings,
            summary_ids,
            native,
            structure,
            verbatim if structure is not None else None,
            entry_of,
            calibration,
            base if structure is not None else None,
            memo if structure is not None else None,
        )

    def _context_summary_ids(
        self, session_id: str, context: SessionContext, indices: Sequence[int] | None = None
    ) -> dict[str, str]:
        """Summary node id of each compaction entry whose summary is in `context`, as the sync
        stored it (ours: the record's `summaryId`; Pi-native or untrusted: a `branch` node).
        Empty when the index is unavailable: the manifest then names the entry ids. With
        `indices` (the context's summary messages, `MessageStructure.summary_indices`), only
        those messages are looked at."""
        found: dict[str, str] = {}
        if indices is None:
            indices = range(len(context.messages))
        for index in indices:
            message, entry_id = context.messages[index], context.message_entry_ids[index]
            if message.get("role") != "compactionSummary" or entry_id is None:
                continue
            try:
                node = summary_repo.node_for_entry(self._context.store(), session_id, entry_id)
            except Exception as exc:  # provenance is best effort; the plan stands
                log.warning("summary ids not resolved: error=%s", describe_failure(exc))
                return found
            if node is not None:
                found[entry_id] = node.summary_id
        return found


def _append_request(
    messages: list[dict[str, Any]], source_ids: list[str | None], request: str | None
) -> None:
    """Append `request` (when non-empty) as the new user message, with no source entry."""
    if request:
        messages.append(
            {
                "role": "user",
                "content": [{"type": "text", "text": request}],
                "timestamp": int(time.time() * 1000),
            }
        )
        source_ids.append(None)
