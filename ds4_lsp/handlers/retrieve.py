"""`ds4/retrieve`."""

from __future__ import annotations

from ds4_lsp.methods import DS4_RETRIEVE
from ds4_lsp.params import RetrieveParams
from ds4_lsp.results import RetrieveResult
from ds4_lsp.server import Ds4Server


async def retrieve(ls: Ds4Server, params: RetrieveParams) -> RetrieveResult:
    """`ds4/retrieve`: rank transcript and project evidence for a query (default: the last
    user message). Pending project syncs run first when the project scope is asked for; a
    history-only request never waits for project indexing.

    Errors: InvalidParams naming the field (`maxResults` out of 1..100, bad session file).
    """
    if "project" in (params.scopes or ()):
        await ls.project.before_request()  # pending edits and tool runs are indexed first
    request = params.to_core()
    answer = await ls.run_engine(  # the wire conversion runs off the loop too
        lambda: RetrieveResult.from_core(ls.engine.retrieve(request).to_wire(), DS4_RETRIEVE),
        method=DS4_RETRIEVE,
    )
    project_scope = "project" in (params.scopes or ())
    behind = ls.project.lag_warning() if project_scope else None  # held back by a lock
    if behind is not None:
        answer.warnings.append(behind)
    ls.log_request(DS4_RETRIEVE, answer.log_summary())
    return answer
