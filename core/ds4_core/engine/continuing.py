"""Continuing: the native-continuation decision of each plan and what changes it (DS4 M12).

`Continuations` holds the engine's in-memory `continuation.ContinuationStates` and applies the
settings (`nativeContinuation.*`): `Planner.plan` asks `decide` on its final messages (after
privacy); `ds4/usage` attaches the response's output (`report_output`); a compaction, a
`ds4/continuationFailed` and the engine's close drop states. Nothing here is written to the
store or logged besides the decision (mode, reason, counts); response ids never reach the server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ..config import Config
from ..continuation import (
    COMPACTED,
    FAILED,
    HANDLE_REJECTED,
    ContinuationStates,
    Decision,
    ItemHashCache,
    full,
    ineligible_reason,
    is_item_hash,
    item_hashes,
    options_hash,
)
from ..logs import describe_failure
from ..planner import ContextPlan
from ..requests import PlanRequest, SessionRef
from .context import EngineContext
from .preparing import Prepared
from .sessions import resolve_session_path
from .usage import FAILED_STOPS

log = logging.getLogger("ds4_core.engine")


class Continuations:
    """The continuation decisions of one engine (see the module docstring). Thread-safe."""

    def __init__(self, context: EngineContext, clock_ms: Any = None) -> None:
        self._context = context
        self.states = ContinuationStates()
        self._hashes = ItemHashCache()
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000)

    def decide(
        self,
        request: PlanRequest,
        prepared: Prepared,
        plan: ContextPlan,
        manifest_id: str,
        config: Config,
    ) -> Decision | None:
        """The continuation of the plan `manifest_id` whose final messages are `plan.messages`:
        None when `nativeContinuation` is off (not both `enabled` and `allowProviderStorage`);
        `full` with an `ineligible-*` reason when the plan cannot be continued (its session's
        states are dropped: the client sends that call in full); else the states' decision,
        the plan kept as its key's new state. Fails open: an internal error drops the
        session's states and answers `full` (`continuation-failed`), never a failed plan."""
        try:
            settings = config.native_continuation
            session_id = prepared.session_id
            if not settings.active:
                if session_id is not None and len(self.states):
                    self.states.forget_session(session_id)
                return None
            provider, model = prepared.profile.provider, prepared.profile.model_id
            why = ineligible_reason(
                plan_mode=plan.mode,
                session_id=session_id,
                provider=provider,
                model=model,
                api=request.model.api,
                profiles=settings.profiles,
            )
            if why is not None:
                if session_id is not None:
                    self.states.forget_session(session_id)
                decision = full(why)
            else:
                assert session_id is not None  # ineligible_reason: ineligible-no-session
                decision = self.states.plan(
                    (session_id, provider, model),
                    manifest_id=manifest_id,
                    items=self._hashes.hashes(plan.messages),
                    options=options_hash(request.request_options),
                    now_ms=self._clock_ms(),
                    max_age_ms=settings.max_state_age_ms,
                    leaf_id=prepared.leaf_id,
                    branch=prepared.branch_entry_ids,
                    session_file=prepared.session_file,
                )
            log.info(
                "continuation: manifest=%s mode=%s delta_start=%d reason=%s",
                manifest_id,
                decision.mode,
                decision.delta_start,
                decision.reason,
            )
            return decision
        except Exception as exc:  # fail open: a full replay is always correct
            log.warning("continuation failed: error=%s", describe_failure(exc))
            if prepared.session_id is not None:
                self.states.forget_session(prepared.session_id)
            return full(FAILED)

    def report_output(
        self,
        manifest_id: str,
        provider: str,
        model: str,
        output_items: Sequence[Mapping[str, Any]] | None,
        output_item_hashes: Sequence[str] | None,
        has_response_id: bool | None,
        stop_reason: str | None = None,
    ) -> bool:
        """Attach the response to the plan `manifest_id` (`ContextEngine.continuation_response`):
        its output as Pi messages (`output_items`, hashed here; preferred) or their item hashes
        (`output_item_hashes`, each 64 lower-case hex digits: a report holding another value is
        ignored); a `stop_reason` of a failed call (`usage.FAILED_STOPS`: `error`, `aborted`)
        makes the next plan `full` (`provider-call-failed`). Returns whether a state took it
        (the output's length is bounded by `ContinuationStates.report_output`)."""
        output: tuple[str, ...] | None = None
        if output_items is not None:
            output = item_hashes(output_items)
        elif output_item_hashes is not None:
            if not all(is_item_hash(h) for h in output_item_hashes):
                return False
            output = tuple(output_item_hashes)
        return self.states.report_output(
            manifest_id, provider, model, output, has_response_id, stop_reason in FAILED_STOPS
        )

    def failed(self, session: SessionRef, provider: str | None, model: str | None) -> int:
        """`ds4/continuationFailed`: the client's previous response id was rejected; drop the
        states of `session` (for `provider`/`model` when given) so the next plan is `full`
        (`continuation-handle-rejected`). Returns how many were dropped.

        Raises:
            RequestError: `session.file` is missing or not a usable file.
        """
        path = resolve_session_path(session.file, "session.file")
        return self.states.invalidate_file(str(path), provider, model, HANDLE_REJECTED)

    def compacted(self, session_id: str) -> None:
        """A compaction of `session_id` was prepared: its states are dropped
        (`session-compacted`)."""
        self.states.invalidate_session(session_id, COMPACTED)

    def clear(self) -> None:
        """Drop every state (the engine closes: shutdown)."""
        self.states.clear()
