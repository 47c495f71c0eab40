"""`ds4/plan`."""

from __future__ import annotations

import dataclasses

from ds4_core.wire import JsonObject
from ds4_lsp.methods import DS4_PLAN
from ds4_lsp.params import PlanParams
from ds4_lsp.server import Ds4Server, with_wire
from ds4_lsp.services.diagnostics import publish_stale_snippets


async def plan(ls: Ds4Server, params: PlanParams) -> JsonObject:
    """`ds4/plan`: plan the messages of the next model call within the model's token budget;
    answers the `PlanResult`'s wire JSON (docs/protocol.md).

    Errors: InvalidParams naming the field (bad session file, leaf id, ...); planning failures
    are not errors but mode `fallback` with the caller's messages (docs/architecture.md
    "Fail open, except privacy").
    Pending project syncs run first; afterwards the open documents' stale-snippet
    diagnostics are republished.
    """
    await ls.project.before_request()  # pending edits and tool runs are indexed first
    request = params.to_core()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.plan(request)), method=DS4_PLAN
    )  # the wire JSON built off the event loop too
    behind = ls.project.lag_warning()  # pending edits that a locked database held back
    if behind is not None:
        result = dataclasses.replace(result, warnings=(*result.warnings, behind))
        answer["warnings"] = [*answer["warnings"], behind]  # the same, on the wire
    ls.log_request(DS4_PLAN, result.log_summary())
    if ls.project.active:  # this plan may have sent, or superseded, snippets of open files
        ls.project.spawn(publish_stale_snippets(ls, ls.project.open_uris()))
    return answer
