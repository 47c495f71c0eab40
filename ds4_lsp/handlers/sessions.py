"""`ds4/sessionOpen` and `ds4/sessionAppend`: sessions the server owns (docs/sessions.md)."""

from __future__ import annotations

from ds4_core.wire import JsonObject
from ds4_lsp.methods import DS4_SESSION_APPEND, DS4_SESSION_OPEN
from ds4_lsp.params import SessionAppendParams, SessionOpenParams
from ds4_lsp.server import Ds4Server, with_wire


async def session_open(ls: Ds4Server, params: SessionOpenParams) -> JsonObject:
    """`ds4/sessionOpen`: create a server-owned Pi session file under the data directory, or
    reopen `sessionId`; `cwd` defaults to the first workspace folder, else the server's.

    Errors: InvalidParams naming `params.title` or `params.sessionId`; RequestFailed when the
    data directory cannot hold sessions (an in-memory database, a symbolic link).
    """
    folders = ls.project.folders
    request = params.to_core(default_cwd=folders[0][1] if folders else None)
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.session_open(request)), method=DS4_SESSION_OPEN
    )
    ls.log_request(DS4_SESSION_OPEN, f"session={result.session_id} created={result.created}")
    return answer


async def session_append(ls: Ds4Server, params: SessionAppendParams) -> JsonObject:
    """`ds4/sessionAppend`: append Pi messages to a server-owned session, in one locked,
    fsynced write; answers their entry ids and the new leaf.

    Errors: InvalidParams naming `params.session.file` (not a session this server owns),
    `params.messages` (count), `params.messages[i]...` (a bad shape), `params.parentId` or
    `params.session.leafId` (no such entry); RequestFailed when the file cannot be written.
    """
    request = params.to_core()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.session_append(request)), method=DS4_SESSION_APPEND
    )
    ls.log_request(DS4_SESSION_APPEND, result.log_summary())
    return answer
