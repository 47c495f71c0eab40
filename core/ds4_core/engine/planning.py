"""Planning: `ds4/plan` and `ds4 plan`.

`Planner.preparer` (`preparing.Preparer`) prepares the session (read, synced, messages built
or matched, request appended, model and budget resolved). `Planner.plan` makes a dry plan
(or reuses what one kept verbatim, `kept_verbatim`), adds the history evidence it leaves out
and live-validated project snippets (`managed_plan`), builds the manifest and keeps it
(`manifests.Manifests.record`). Any failure while indexing, retrieving or planning answers the
caller's messages unchanged (mode `fallback` with a reason); input the caller can fix raises
`RequestError` naming the field.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..artifacts.offload import Offloaded
from ..config import Config
from ..continuation import check_plan_inputs
from ..logs import describe_failure
from ..manifest import build_manifest, new_manifest_id, prompt_hash
from ..planner import (
    ContextPlan,
    Supplement,
    fallback_plan,
)
from ..planner.planner import item_count
from ..privacy.policy import Destination
from ..privacy.sanitizer import Sanitizer
from ..requests import (
    DatabaseUnavailableError,
    PlanRequest,
    RequestError,
)
from ..results import Budget, ModelInfo, PlanResult, RetrievalStats, SessionInfo
from ..retrieval import (
    HistoryRetrieval,
    describe_task,
    last_user_text,
    render_evidence,
    retrieve_history,
)
from ..retrieval.floor import BelowFloor
from ..store.database import utc_now_iso
from ..tokens import ESTIMATOR_VERSION, estimate_message_tokens
from ..wire import camel_case
from .artifacts import ArtifactOffloads, condensed_in_fallback, manifest_artifacts
from .context import EngineContext
from .continuing import Continuations
from .convert import from_attributes
from .indexing import Indexer
from .manifests import Manifests
from .memory_plan import memory_supplements
from .model_switch import ModelSwitches
from .preparing import Prepared, Preparer
from .privacy_cache import SANITIZED
from .profiles import CalibrationOf, check_model
from .project import ProjectService
from .relevance import below_floor_of, relevance_summary, with_floor_exclusions
from .sanitizing import (
    SNIPPET_LEVELS,
    QuotedRedaction,
    Screened,
    plan_destination,
    sanitize_plan,
    screen_supplements,
    sent_tokens,
    source_levels,
    source_secrets,
    visible_text,
    withheld_summaries,
)
from .sessions import SessionCache

if TYPE_CHECKING:
    from ..project.workspace import ValidatedSearch

log = logging.getLogger("ds4_core.engine")

VERBATIM_KEPT = 32
"""Dry-plan results kept per session context (`Planner.kept_verbatim`; cleared when full)."""


class Planner:
    """Plans of one engine (see the module docstring)."""

    def __init__(
        self,
        context: EngineContext,
        sessions: SessionCache,
        indexer: Indexer,
        project: ProjectService,
        manifests: Manifests,
        calibration_of: CalibrationOf | None = None,
        continuations: Continuations | None = None,
    ) -> None:
        self._context = context
        self.continuations = continuations or Continuations(context)
        """The native-continuation decisions (`continuing.Continuations`)."""
        self.preparer = Preparer(context, sessions, indexer, calibration_of)
        """Reads, syncs and prepares sessions (also for `retrieving.Retriever`)."""
        self._project = project
        self._manifests = manifests
        self._switches = ModelSwitches(context)
        self._artifacts = ArtifactOffloads(context)

    # ----------------------------------------------------------------- plan

    def plan(self, request: PlanRequest) -> PlanResult:
        """Plan the messages of the next model call (`ContextEngine.plan`).

        Raises:
            RequestError: no session and no messages, a missing or unreadable session file,
                an unknown leaf, a negative `fixedTokens`, or impossible model limits.
        """
        started = time.perf_counter()
        if request.session is None and request.messages is None:
            raise RequestError("ds4/plan needs `session` or `messages`", "session")
        if request.fixed_tokens < 0:
            raise RequestError("fixedTokens: expected a non-negative integer", "fixedTokens")
        check_model(request.model)
        check_plan_inputs(request.model.api, request.request_options)
        config = self._context.config()  # one snapshot: settings may change on another thread
        if request.mode is not None and request.mode != config.context.mode:
            config, _ = config.with_settings({"context.mode": request.mode})
        enabled = bool(config.enabled)
        failure: str | None = None
        try:
            prepared = self.preparer.prepare(
                request.session,
                request.messages,
                request.request,
                request.model,
                config,
                sync=enabled,
            )
        except RequestError:
            raise
        except Exception as exc:
            if request.messages is None:  # no messages of the caller's to fall back to
                raise
            log.warning("plan failed open reading the session: error=%s", describe_failure(exc))
            prepared = self.preparer.prepare(
                None, request.messages, request.request, request.model, config
            )
            failure = f"internal error while reading the session ({type(exc).__name__})"
        offloaded: list[Offloaded] = []
        if (
            failure is None
            and enabled
            and prepared.session_id is not None  # ephemeral plans never offload
            and config.context.mode == "managed"  # observer mode sends the messages as they are
        ):
            try:
                prepared, offloaded = self._artifacts.apply(prepared, config)
            except Exception as exc:  # fail open: the plan without offloading
                log.warning("artifact offload failed: error=%s", describe_failure(exc))
        retrieval: HistoryRetrieval | None = None
        project: ValidatedSearch | None = None
        target = plan_destination(config, prepared.profile)
        screened = Screened()
        if failure is None and not enabled:
            failure = "ds4 is disabled by the `enabled` setting"
        if failure is None:
            try:
                plan, retrieval, project = self.managed_plan(
                    prepared, request.fixed_tokens, config, target, screened
                )
            except Exception as exc:  # fail open (docs/architecture.md "Fail open, except privacy"): original messages, with a reason
                log.warning(
                    "plan failed open: session=%s error=%s",
                    prepared.session_id,
                    describe_failure(exc),
                )
                failure = (
                    str(exc)
                    if isinstance(exc, DatabaseUnavailableError)
                    else f"internal error while planning ({type(exc).__name__})"
                )
                retrieval = project = None
        warnings = list(prepared.warnings)  # after planning: project search adds its failure
        if failure is not None:
            plan = fallback_plan(  # the condensed copy: a large output never goes whole
                prepared.messages,
                failure,
                fixed_tokens=request.fixed_tokens,
                message_source_ids=prepared.source_ids,
                hard_input_limit=prepared.budget.hard_input_limit,
            )
        if retrieval is not None:
            warnings.extend(retrieval.warnings)
        plan = with_floor_exclusions(plan, below_floor_of(retrieval, project))
        sanitizer = Sanitizer(target)
        plan = sanitize_plan(
            plan,
            sanitizer,
            fixed_tokens=request.fixed_tokens,
            screened=screened,
            source_ids=prepared.source_ids,
            native_ids=prepared.native_ids,
        )
        if plan.mode == "managed" and plan.estimated_tokens > prepared.budget.hard_input_limit:
            # placeholders and redaction markers made the plan larger: plan again with the
            # sizes as sent (rare; `sanitizing.sent_tokens`)
            below = below_floor_of(retrieval, project)
            again = self._replan_as_sent(
                prepared, plan, request.fixed_tokens, config, target, below
            )
            if again is not None:
                plan, sanitizer = again
        plan = condensed_in_fallback(plan, offloaded, prepared.source_ids)
        privacy = sanitizer.counters.to_wire(sanitizer.target)
        manifest_id = new_manifest_id()
        continuation = self.continuations.decide(request, prepared, plan, manifest_id, config)
        retrieved = [
            {"entryKey": h.entry_key, "score": h.score, "reason": h.reason}
            for h in (retrieval.hits if retrieval else [])
        ]
        manifest = build_manifest(
            manifest_id=manifest_id,
            session_id=prepared.session_id,
            branch_leaf_id=prepared.leaf_id,
            profile=prepared.profile,
            budget=prepared.budget,
            plan=plan,
            retrieved=retrieved,
            prompt_hash=prompt_hash(None, None, plan.messages, SANITIZED.stable_json),
            created_at=utc_now_iso(),
            estimator_version=ESTIMATOR_VERSION,
            fixed_tokens=request.fixed_tokens,
            warnings=warnings,
            retrieval_stats=retrieval_stats(retrieval).to_wire() if retrieval else None,
            relevance=relevance_summary(retrieval, project),
            privacy=privacy,
            model_awareness=self._model_awareness(prepared),
        )
        manifest["continuation"] = continuation.to_wire() if continuation else None
        manifest["artifacts"] = manifest_artifacts(offloaded, prepared.source_ids, plan)
        manifest["summaryIds"] = [
            prepared.summary_ids.get(source_id, source_id) for source_id in manifest["summaryIds"]
        ]
        stored = self._manifests.record(
            manifest, plan, project, prepared.session_id, config, warnings
        )
        warnings = [*warnings, *plan.warnings]
        duration_ms = (time.perf_counter() - started) * 1000
        log.info(
            "plan: session=%s manifest=%s mode=%s messages=%d->%d tokens=%d history_hits=%d "
            "duration_ms=%.1f",
            prepared.session_id,
            manifest_id,
            plan.mode,
            len(prepared.messages),
            len(plan.messages),
            plan.estimated_tokens,
            len(retrieved),
            duration_ms,
        )
        return _plan_result(
            request,
            prepared,
            plan,
            manifest_id,
            stored,
            warnings,
            duration_ms,
            privacy,
            continuation=continuation.to_wire() if continuation else None,
        )

    def _model_awareness(self, prepared: Prepared) -> dict[str, Any]:
        """The manifest's `modelAwareness`: the estimator, the calibration the budget used and
        the model switch, if the session's previous plan was for another model."""
        profile = prepared.profile
        calibration = prepared.calibration
        return {
            "estimatorVersion": ESTIMATOR_VERSION,
            "calibration": calibration.to_wire() if calibration is not None else None,
            "modelSwitch": self._switches.planned(
                prepared.session_id, profile.provider, profile.model_id
            ),
        }

    def _replan_as_sent(
        self,
        prepared: Prepared,
        sanitized: ContextPlan,
        fixed_tokens: int,
        config: Config,
        target: Destination,
        below: Sequence[BelowFloor],
    ) -> tuple[ContextPlan, Sanitizer] | None:
        """The plan again, its native messages counted at their size as sent (after
        placeholders and redaction), sanitized; None when planning fails (the caller keeps
        the first plan)."""
        tokens = list(prepared.message_tokens)
        for index, size in sent_tokens(sanitized, prepared.source_ids).items():
            tokens[index] = size
        screened = Screened()
        try:
            resized = replace(prepared, message_tokens=tokens, structure=None, verbatim=None)
            plan, _, _ = self.managed_plan(resized, fixed_tokens, config, target, screened)
        except Exception as exc:  # fail open, as in `plan`: the first plan stands
            log.warning("replan failed: error=%s", describe_failure(exc))
            return None
        sanitizer = Sanitizer(target)
        plan = sanitize_plan(
            with_floor_exclusions(plan, below),
            sanitizer,
            fixed_tokens=fixed_tokens,
            screened=screened,
            source_ids=prepared.source_ids,
            native_ids=prepared.native_ids,
        )
        return plan, sanitizer

    def managed_plan(
        self,
        prepared: Prepared,
        fixed_tokens: int,
        config: Config,
        target: Destination | None = None,
        screened: Screened | None = None,
    ) -> tuple[ContextPlan, HistoryRetrieval | None, ValidatedSearch | None]:
        """A dry plan without supplements, then the plan with the session's pins and memory
        (`memory_plan`), the history evidence the dry plan leaves out (for a session) and
        live-validated project snippets (for a trusted workspace). May raise; `plan` turns
        that into a fallback.

        With a destination `target`, summaries and supplements holding content it may not see
        are left out whole, and the kept supplements are written for it (recorded in
        `screened`, `sanitizing.screen_supplements`)."""
        withheld = (
            withheld_summaries(target, prepared.messages, prepared.summary_indices())
            if target
            else {}
        )
        fell_back, in_context = self.kept_verbatim(prepared, fixed_tokens, config, withheld)
        if fell_back:
            return prepared.plan(fixed_tokens, config, withheld=withheld), None, None
        retrieval = None
        # what the request says that its destination may see: withheld words never pick (and
        # so never get named in the reasons of) the evidence sent with it
        request = visible_text(target, last_user_text(prepared.messages) or "")
        remembered = memory_supplements(self._context.store(), prepared, request, config, target)
        supplements: list[Supplement] = list(remembered.supplements)
        if prepared.session_id is not None:
            retrieval = self.history_evidence(prepared, in_context, config, query=request)
        project = self._project_search(prepared, config, prepared.warnings, request)
        workspace = self._project.workspace
        quoted = QuotedRedaction(target, source_secrets(retrieval.hits) if retrieval else {})
        if retrieval is not None:
            supplements += [
                _supplement(
                    "history",
                    h.entry_key,
                    render_evidence(replace(h, excerpt=quoted(h.entry_key, h.excerpt))),
                    h.score,
                )
                for h in retrieval.hits
            ]
        if project is not None and workspace is not None:
            render = workspace.render
            supplements += [
                _supplement(
                    "project",
                    h.snippet_id,
                    render(replace(h, text=quoted(h.snippet_id, h.text)), project.head_of(h)),
                    h.score,
                )
                for h in project.retrieval.hits
            ]
        if target is not None and target.enabled and supplements:
            floors = source_levels(retrieval.hits) if retrieval is not None else {}
            floors.update(remembered.floors)
            if project is not None and workspace is not None:
                floors.update(
                    SNIPPET_LEVELS.levels(
                        project.retrieval.hits, workspace.quoted_text, target.default_level
                    )
                )
            screened = screened if screened is not None else Screened()
            screened.found |= quoted.found
            supplements = screen_supplements(target, supplements, screened, floors, quoted.counted)
        plan = prepared.plan(fixed_tokens, config, supplements, withheld)
        return plan, retrieval, project

    def kept_verbatim(
        self,
        prepared: Prepared,
        fixed_tokens: int,
        config: Config,
        withheld: Mapping[int, tuple[str, str]] | None = None,
    ) -> tuple[bool, frozenset[str]]:
        """(fell back?, source ids of the messages kept verbatim) of the dry plan of
        `prepared` (no supplements): what history retrieval leaves out as already in context.

        Kept per session context revision (`Prepared.verbatim`) by everything the dry plan
        depends on besides the context: the request's size, `fixed_tokens`, the budget (model
        profile), the `enabled` and `context.*` settings and the withheld summaries; so a
        `ds4/retrieve` or a second plan of the same session does not plan it again."""
        key = None
        if prepared.verbatim is not None:
            key = (
                len(prepared.messages),
                prepared.message_tokens[-1] if prepared.message_tokens else 0,
                fixed_tokens,
                prepared.budget,
                config.enabled,
                config.context,
                frozenset((withheld or {}).items()),
            )
            found = prepared.verbatim.get(key)
            if found is not None:
                return found
        dry = prepared.plan(fixed_tokens, config, withheld=withheld)
        result = (
            dry.mode == "fallback",
            frozenset(item.source_id for item in dry.included if item.source_id)
            if dry.mode != "fallback"
            else frozenset(),
        )
        if key is not None and prepared.verbatim is not None:
            if len(prepared.verbatim) >= VERBATIM_KEPT:
                prepared.verbatim.clear()
            prepared.verbatim[key] = result
        return result

    def _project_search(
        self, prepared: Prepared, config: Config, warnings: list[str], request: str
    ) -> ValidatedSearch | None:
        """Live-validated project hits for `request` (the last user message as its destination
        may see it), or None when project knowledge is not in use (no workspace, untrusted,
        disabled). A failure becomes a warning: history evidence and the tail still go out
        (fail open)."""
        workspace = self._project.workspace
        if workspace is None or not workspace.active():
            return None
        try:
            found = workspace.search(
                describe_task(request),
                max_results=config.project.max_results,
                max_tokens=prepared.budget.max_project_tokens,
            )
            warnings.extend(found.retrieval.warnings)  # e.g. the index is behind the files
            return found
        except Exception as exc:
            log.warning("project search failed: error=%s", describe_failure(exc))
            warnings.append(f"project knowledge failed ({type(exc).__name__}); none was included")
            return None

    def history_evidence(
        self,
        prepared: Prepared,
        in_context: AbstractSet[str],
        config: Config,
        query: str | None = None,
        max_results: int | None = None,
        max_tokens: int | None = None,
    ) -> HistoryRetrieval:
        """History evidence for entries on the active branch other than `in_context` (the
        source ids the planned context holds verbatim: `kept_verbatim`), for `query` (default:
        the text of the last user message). Limits default to the settings and the budget."""
        text = query if query is not None else last_user_text(prepared.messages)
        return retrieve_history(
            self._context.store(),
            prepared.session_id or "",
            describe_task(text or ""),
            branch_entry_ids=prepared.branch_entry_ids,
            exclude_entry_ids=in_context,
            max_results=max_results or config.retrieval.max_results,
            max_tokens=max_tokens or prepared.budget.max_retrieved_history_tokens,
            exact=config.retrieval.exact,
            fts=config.retrieval.fts,
        )

    # ----------------------------------------------------------------- preparing


def retrieval_stats(retrieval: HistoryRetrieval) -> RetrievalStats:
    """The counters of one history retrieval (`latency_ms` rounded to 3 decimals)."""
    stats = retrieval.stats
    return from_attributes(RetrievalStats, stats, latency_ms=round(stats.latency_ms, 3))


def _plan_result(
    request: PlanRequest,
    prepared: Prepared,
    plan: ContextPlan,
    manifest_id: str,
    stored: bool,
    warnings: list[str],
    duration_ms: float,
    privacy: Mapping[str, Any],
    continuation: dict[str, Any] | None = None,
) -> PlanResult:
    """The `PlanResult` of a finished plan (stats: the planner's in camelCase, item counts and
    `durationMs`; `continuation`: the native-continuation decision's wire shape)."""
    stats = dict(plan.stats) if isinstance(plan.stats, Mapping) else {}
    budget, profile = prepared.budget, prepared.profile
    if request.message_refs:
        messages = tuple(_referenced(plan, prepared))
    else:
        messages = tuple(SANITIZED.wire(message) for message in plan.messages)
    return PlanResult(
        mode=plan.mode,
        messages=messages,
        manifest_id=manifest_id,
        manifest_stored=stored,
        estimated_tokens=plan.estimated_tokens,
        estimator_version=ESTIMATOR_VERSION,
        over_hard_limit=plan.over_hard_limit,
        current_turn_tokens=plan.current_turn_tokens,
        fixed_tokens=request.fixed_tokens,
        hard_input_limit=budget.hard_input_limit,
        budget=from_attributes(Budget, budget),
        model=from_attributes(ModelInfo, profile, id=profile.model_id),
        warnings=tuple(warnings),
        stats={
            **{camel_case(key): value for key, value in stats.items()},
            "included": len(plan.included),
            "excluded": item_count(plan.excluded),
            "durationMs": round(duration_ms, 3),
        },
        fallback_reason=plan.fallback_reason or None,
        privacy=dict(privacy),
        session=(
            SessionInfo(prepared.session_id, prepared.session_file or "", prepared.leaf_id)
            if prepared.session_id
            else None
        ),
        continuation=continuation,
    )


def _referenced(plan: ContextPlan, prepared: Prepared) -> list[dict[str, Any]]:
    """The plan's messages with every session message sent exactly as its `message` entry
    holds it (the same object the session's context built, untouched by privacy, equal to the
    entry's message: no `context_edit`, no filled-in content; the entry's id as the file
    spells it, in a current-format (v3) file whose ids are each used once: `Prepared.entry_of`
    is None otherwise; an id holding a backslash, which may be a lone surrogate's escape that
    another entry spells literally, is never referenced)
    answered as `{"entryRef": id}`; the others (the request, evidence, snippets, summaries,
    rewritten messages) in full."""
    if plan.mode == "managed":
        sources: Sequence[str | None] = [item.source_id for item in plan.included]
    else:
        sources = prepared.source_ids
    if len(sources) != len(plan.messages) or prepared.entry_of is None:
        return [SANITIZED.wire(message) for message in plan.messages]
    out: list[dict[str, Any]] = []
    for message, source in zip(plan.messages, sources, strict=True):
        entry = (
            prepared.entry_of(source)
            if source is not None and id(message) in prepared.native_ids
            else None
        )
        if (
            entry is not None
            and entry.entry_type == "message"
            and entry.data.get("id") == source
            and source is not None
            and "\\" not in source  # an id stored with an escape (`storable_id`) is not the file's
        ):
            if entry.data.get("message") == message:
                out.append({"entryRef": source})
                continue
        out.append(SANITIZED.wire(message))
    return out


def _supplement(kind: str, source_id: str, message: dict[str, Any], score: float) -> Supplement:
    """A planner supplement for a rendered evidence or project message (tokens: chars-v2)."""
    return Supplement(
        kind=kind,  # type: ignore[arg-type]
        source_id=source_id,
        message=message,
        tokens=estimate_message_tokens(message),
        score=score,
    )
