"""Project knowledge in the LSP session: start-up indexing and agent tool runs.

The scheduling itself lives in `ds4_lsp.services.project_sync.ProjectSync` (`ls.project`).
"""

from __future__ import annotations

import logging

from lsprotocol import types

from ds4_lsp.methods import DS4_TOOL_EXECUTED
from ds4_lsp.params import ToolExecutedParams
from ds4_lsp.server import Ds4Server
from ds4_lsp.services.project_sync import folder_paths

log = logging.getLogger("ds4_lsp.project")


async def initialized(ls: Ds4Server, params: types.InitializedParams) -> None:
    """`initialized`: in a trusted workspace, register the file watcher (where the client
    supports it) and index the project in the background with `$/progress`."""
    if ls.project.active:
        await ls.project.watch_files()
        ls.project.start("initial")


async def did_change_workspace_folders(
    ls: Ds4Server, params: types.DidChangeWorkspaceFoldersParams
) -> None:
    """`workspace/didChangeWorkspaceFolders`: pygls has already applied the change to
    `ls.workspace.folders`; every remaining `file:` folder is a project folder. The folders
    are given to the engine with the current trust and, when trusted, indexed in the
    background (`ds4/indexUpdated` reason `workspace`)."""
    folders = folder_paths(ls.workspace.folders.values())
    log.info("workspace folders changed: %d folder(s)", len(folders))
    await ls.project.folders_changed(folders)


def tool_executed(ls: Ds4Server, params: ToolExecutedParams) -> None:
    """`ds4/toolExecuted` (notification): an agent tool ran.

    `write`, `edit`, `bash` and unknown tools schedule a sync (the reported paths re-read,
    then the whole project, skipping unchanged files) that finishes before the next
    `ds4/plan` or `ds4/retrieve`; `read`, `grep`, `find` and `ls` do not. Ignored while
    untrusted. Handled on the event loop, in message order (the engine call only sets an
    in-memory flag), so a plan sent right after the notification waits for its sync.
    """
    if not ls.project.active:
        ls.log_request(DS4_TOOL_EXECUTED, f"paths={len(params.paths)} sync=no (untrusted)")
        return
    due = ls.engine.project.note_tool_executed(params.tool, params.paths)
    if due:
        ls.project.tool_ran(params.paths)
    ls.log_request(DS4_TOOL_EXECUTED, f"paths={len(params.paths)} sync={'yes' if due else 'no'}")
