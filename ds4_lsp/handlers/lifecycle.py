"""`initialize` and `shutdown`: the engine's lifetime."""

from __future__ import annotations

from lsprotocol import types
from pygls.uris import to_fs_path

from ds4_lsp.converter import parse_initialization_options
from ds4_lsp.logs import send_to_client
from ds4_lsp.server import Ds4Server
from ds4_lsp.services.project_sync import folder_paths


async def initialize(ls: Ds4Server, params: types.InitializeParams) -> None:
    """`initialize`: read `initializationOptions`, start the engine and open its database,
    then give it the workspace root and trust (nothing is read yet: indexing a trusted
    workspace starts after `initialized`).

    Invalid options and settings are ignored and each is shown with `window/showMessage`
    (Warning), as are database notices (a corrupt file moved aside); none of them is fatal.
    """
    send_to_client(ls.window_log_message)  # INFO/DEBUG lines as window/logMessage from now on
    options, warnings = parse_initialization_options(params.initialization_options)
    warnings += await ls.open_engine(options)
    for warning in warnings:
        ls.show_message(warning)
    ls.project.folders = workspace_folders(params)
    if ls.has_engine:
        await ls.project.set_workspace()


def workspace_folders(params: types.InitializeParams) -> list[tuple[str | None, str]]:
    """The workspace folders as `(name, path)`: every `file:` workspace folder, else
    `rootUri` (then `rootPath`) as one folder without a name; empty when the client opened
    no folder. Non-`file:` folders are left out."""
    if params.workspace_folders:
        return folder_paths(params.workspace_folders)
    root = to_fs_path(params.root_uri) if params.root_uri else params.root_path
    return [(None, root)] if root else []


async def shutdown(ls: Ds4Server, params: None) -> None:
    """`shutdown`: let engine calls in flight finish (briefly), then close the database."""
    await ls.close_engine()
