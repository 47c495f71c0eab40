"""`ds4/memory`."""

from __future__ import annotations

from typing import Any

from ds4_lsp.methods import DS4_MEMORY
from ds4_lsp.params import MemoryParams
from ds4_lsp.server import Ds4Server


async def memory(ls: Ds4Server, params: MemoryParams) -> dict[str, Any]:
    """`ds4/memory`: the memory items and pins with their provenance (docs/memory.md), those
    that apply to `session` (synced first) or all of them.

    Errors: InvalidParams naming `session.file` for a missing, unreadable or non-Pi file.
    """
    session = params.session.to_core() if params.session else None
    result = await ls.run_engine(
        lambda: ls.engine.memory(session, include_inactive=params.include_inactive).to_wire(),
        method=DS4_MEMORY,
    )
    ls.log_request(
        DS4_MEMORY,
        f"session={result.get('sessionId')} memory={len(result['memory'])} "
        f"pins={len(result['pins'])}",
    )
    return result
