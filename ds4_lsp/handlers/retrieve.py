"""`ds4/retrieve`."""

from __future__ import annotations

import dataclasses

from ds4_core.wire import JsonObject
from ds4_lsp.methods import DS4_RETRIEVE
from ds4_lsp.params import RetrieveParams
from ds4_lsp.server import Ds4Server, with_wire


async def retrieve(ls: Ds4Server, params: RetrieveParams) -> JsonObject:
    """`ds4/retrieve`: rank transcript and project evidence for a query (default: the last
    user message); answers the `RetrieveResult`'s wire JSON. Pending project syncs run first
    when the project or git scope is asked for (a full sync also brings the Git history
    index up to HEAD); a history-only request never waits for project indexing.

    Errors: InvalidParams naming the field (`maxResults` out of 1..100, bad session file).
    """
    workspace_scopes = {"project", "git"} & set(params.scopes or ())
    if workspace_scopes:
        await ls.project.before_request()  # pending edits and tool runs are indexed first
    request = params.to_core()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.retrieve(request)), method=DS4_RETRIEVE
    )  # the wire JSON built off the event loop too
    behind = ls.project.lag_warning() if workspace_scopes else None  # held back by a lock
    if behind is not None:
        result = dataclasses.replace(result, warnings=(*result.warnings, behind))
        answer["warnings"] = [*answer["warnings"], behind]  # the same, on the wire
    ls.log_request(DS4_RETRIEVE, result.log_summary())
    return answer
