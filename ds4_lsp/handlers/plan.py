"""`ds4/plan`."""

from __future__ import annotations

from ds4_lsp.protocol import DS4_PLAN, PlanParams, PlanResult
from ds4_lsp.server import Ds4Server


async def plan(ls: Ds4Server, params: PlanParams) -> PlanResult:
    """`ds4/plan`: plan the messages of the next model call within the model's token budget.

    Errors: InvalidParams naming the field (bad session file, leaf id, ...); planning failures
    are not errors but mode `fallback` with the caller's messages (DESIGN.md, fail open).
    """
    result = await ls.run_engine(ls.engine.plan, params.to_core(), method=DS4_PLAN)
    answer = PlanResult.from_core(result, DS4_PLAN)
    ls.log_request(DS4_PLAN, answer.log_summary())
    return answer
