"""`ds4/plan`."""

from __future__ import annotations

from ds4_lsp.handlers.diagnostics import publish_stale_snippets
from ds4_lsp.protocol import DS4_PLAN, PlanParams, PlanResult
from ds4_lsp.server import Ds4Server


async def plan(ls: Ds4Server, params: PlanParams) -> PlanResult:
    """`ds4/plan`: plan the messages of the next model call within the model's token budget.

    Errors: InvalidParams naming the field (bad session file, leaf id, ...); planning failures
    are not errors but mode `fallback` with the caller's messages (docs/architecture.md
    "Fail open, except privacy").
    Pending project syncs run first; afterwards the open documents' stale-snippet
    diagnostics are republished.
    """
    await ls.project.before_request()  # pending edits and tool runs are indexed first
    request = params.to_core()
    answer = await ls.run_engine(  # the wire conversion of a large plan runs off the loop too
        lambda: PlanResult.from_core(ls.engine.plan(request), DS4_PLAN), method=DS4_PLAN
    )
    behind = ls.project.lag_warning()  # pending edits that a locked database held back
    if behind is not None:
        answer.warnings.append(behind)
    ls.log_request(DS4_PLAN, answer.log_summary())
    if ls.project.active:  # this plan may have sent, or superseded, snippets of open files
        ls.project.spawn(publish_stale_snippets(ls, ls.project.open_uris()))
    return answer
