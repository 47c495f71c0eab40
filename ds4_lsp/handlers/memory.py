"""`ds4/memory` (list) and the writes `ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget`."""

from __future__ import annotations

from typing import Any

from ds4_lsp.methods import DS4_FORGET, DS4_MEMORY, DS4_PIN, DS4_REMEMBER, DS4_UNPIN
from ds4_lsp.params import ForgetParams, MemoryParams, PinParams, RememberParams, UnpinParams
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


async def _write(
    ls: Ds4Server, method: str, params: PinParams | UnpinParams | RememberParams | ForgetParams
) -> dict[str, Any]:
    """One write: the custom entry for the client to append, also as a complete line
    (`entry`), or appended by the server on an owned session (docs/memory.md "Writes").

    Errors: InvalidParams naming the field (`params.session.file`, `params.content`,
    `params.scope`, ...); RequestFailed (-32803) when the current items refuse the write,
    with `data.kind` (`conflict` or `repeat` with `data.conflictsWith`; `unknown`,
    `elsewhere`, `inactive`, `no-entries`, `refused`).
    """
    request = params.to_core()
    result = await ls.run_engine(lambda: ls.engine.write_memory(request).to_wire(), method=method)
    ls.log_request(method, f"item={result['itemId']} appended={result['appended']}")
    return result


async def pin(ls: Ds4Server, params: PinParams) -> dict[str, Any]:
    """`ds4/pin`: the `ds4-context-pin-v1` entry adding (or superseding with) a pin."""
    return await _write(ls, DS4_PIN, params)


async def unpin(ls: Ds4Server, params: UnpinParams) -> dict[str, Any]:
    """`ds4/unpin`: the `ds4-context-pin-v1` entry deleting an active pin."""
    return await _write(ls, DS4_UNPIN, params)


async def remember(ls: Ds4Server, params: RememberParams) -> dict[str, Any]:
    """`ds4/remember`: the `ds4-context-memory-v1` entry adding (or superseding with) a claim."""
    return await _write(ls, DS4_REMEMBER, params)


async def forget(ls: Ds4Server, params: ForgetParams) -> dict[str, Any]:
    """`ds4/forget`: the `ds4-context-memory-v1` entry marking a memory item invalid or expired."""
    return await _write(ls, DS4_FORGET, params)
