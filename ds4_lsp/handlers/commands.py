"""Workspace commands (`workspace/executeCommand`): `ds4.rebuildIndex`, `ds4.health`.

Both take no arguments, return JSON, and report `$/progress` (see `ds4_lsp.progress`).
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from ds4_lsp.progress import WorkDoneProgress
from ds4_lsp.protocol import HEALTH, REBUILD_INDEX
from ds4_lsp.server import Ds4Server


async def rebuild_index(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.rebuildIndex`: re-read every session the database knows, from scratch.

    Returns {sessions, entries, failed: [{sessionFile, error}], durationMs, results}. Reports
    the percentage of sessions done. Errors: InvalidParams when given arguments.
    """
    _expect_no_arguments(REBUILD_INDEX, arguments)
    async with WorkDoneProgress(ls, "ds4: rebuilding the index") as progress:
        result = await ls.run_engine(ls.engine.rebuild, progress.report, method=REBUILD_INDEX)
        progress.end_message = (
            f"{result['sessions']} session(s), {result['entries']} entries, "
            f"{len(result['failed'])} failed"
        )
    ls.log_request(
        REBUILD_INDEX,
        f"sessions={result['sessions']} entries={result['entries']} "
        f"failed={len(result['failed'])} duration_ms={result['durationMs']:.1f}",
    )
    return result


async def health(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.health`: engine and index health plus this LSP session's facts.

    Returns the engine's {status, version, schemaVersion, databasePath, sessions, entries,
    manifests, notices, configWarnings, ...} and `server: {name, version, positionEncoding,
    trusted}`. Errors: InvalidParams when given arguments.
    """
    _expect_no_arguments(HEALTH, arguments)
    async with WorkDoneProgress(ls, "ds4: checking health") as progress:
        result = await ls.run_engine(ls.engine.health, method=HEALTH)
        progress.end_message = f"status {result['status']}"
    encoding = ls.workspace.position_encoding  # an enum or a plain str, by pygls version
    result["server"] = {
        "name": ls.name,
        "version": ls.version,
        "positionEncoding": str(getattr(encoding, "value", encoding)),
        "trusted": ls.options.trusted,
    }
    ls.log_request(HEALTH, f"status={result['status']} sessions={result['sessions']}")
    return result


def _expect_no_arguments(command: str, arguments: tuple[Any, ...]) -> None:
    """Accept `[]` or `[{}]`/`[null]` (what some clients send); refuse anything else."""
    if all(argument in (None, {}) for argument in arguments) and len(arguments) <= 1:
        return
    raise JsonRpcInvalidParams(f"{command}: takes no arguments (got {len(arguments)})")
