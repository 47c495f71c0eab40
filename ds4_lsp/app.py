"""`create_server()`: the ds4 language server with the one table that maps every LSP method,
ds4/* method and workspace command to its handler (`ds4_lsp.handlers`).

The only module that imports the handlers: they import the server (`ds4_lsp.server`) and the
services (`ds4_lsp.services`), never this module, so the layers have no import circle
(tests/lsp/test_import_graph.py).
"""

from __future__ import annotations

from lsprotocol import types

from ds4_lsp import __version__
from ds4_lsp.converter import server_converter
from ds4_lsp.handlers import (
    artifacts,
    commands,
    compaction,
    continuation,
    documents,
    hover,
    lifecycle,
    manifest,
    memory,
    plan,
    project,
    retrieve,
    sessions,
    settings,
    usage,
)
from ds4_lsp.methods import (
    DS4_ARTIFACT_SEARCH,
    DS4_COMPACT,
    DS4_COMPACT_COMMITTED,
    DS4_COMPACT_FAILED,
    DS4_CONTINUATION_FAILED,
    DS4_FORGET,
    DS4_MANIFEST,
    DS4_MEMORY,
    DS4_PIN,
    DS4_PLAN,
    DS4_REMEMBER,
    DS4_RETRIEVE,
    DS4_SESSION_APPEND,
    DS4_SESSION_OPEN,
    DS4_TOOL_EXECUTED,
    DS4_UNPIN,
    DS4_USAGE,
    GC_ARTIFACTS,
    HEALTH,
    PRIVACY,
    PROJECT_STATUS,
    REBUILD_INDEX,
    SUMMARIES,
)
from ds4_lsp.rpc import Ds4Protocol
from ds4_lsp.server import Ds4Server


def create_server() -> Ds4Server:
    """A new server with every LSP method and command registered (the whole protocol surface).

    A factory rather than a module-global server, so each test gets a fresh one.
    """
    server = Ds4Server(
        "ds4-lsp", __version__, protocol_cls=Ds4Protocol, converter_factory=server_converter
    )
    # lifecycle
    server.feature(types.INITIALIZE)(lifecycle.initialize)
    server.feature(types.INITIALIZED)(project.initialized)
    server.feature(types.SHUTDOWN)(lifecycle.shutdown)
    server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(settings.did_change_configuration)
    server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)(
        project.did_change_workspace_folders
    )
    # documents: an open buffer is the live text of its file
    server.feature(types.TEXT_DOCUMENT_DID_OPEN)(documents.did_open)
    server.feature(types.TEXT_DOCUMENT_DID_CHANGE)(documents.did_change)
    server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))(
        documents.did_save
    )
    server.feature(types.TEXT_DOCUMENT_DID_CLOSE)(documents.did_close)
    server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(documents.did_change_watched_files)
    server.feature(types.TEXT_DOCUMENT_HOVER)(hover.hover)
    # custom requests and notifications
    server.feature(DS4_PLAN)(plan.plan)
    server.feature(DS4_RETRIEVE)(retrieve.retrieve)
    server.feature(DS4_MANIFEST)(manifest.manifest)
    server.feature(DS4_TOOL_EXECUTED)(project.tool_executed)
    # memory and pins (read-only; docs/memory.md)
    server.feature(DS4_MEMORY)(memory.memory)
    server.feature(DS4_PIN)(memory.pin)
    server.feature(DS4_UNPIN)(memory.unpin)
    server.feature(DS4_REMEMBER)(memory.remember)
    server.feature(DS4_FORGET)(memory.forget)
    # server-owned sessions (docs/sessions.md)
    server.feature(DS4_SESSION_OPEN)(sessions.session_open)
    server.feature(DS4_SESSION_APPEND)(sessions.session_append)
    # artifacts: large tool results kept aside (docs/artifacts.md)
    server.feature(DS4_ARTIFACT_SEARCH)(artifacts.artifact_search)
    server.command(GC_ARTIFACTS)(commands.gc_artifacts)
    # compaction; the server asks the client with ds4/summarize (handlers.compaction)
    server.feature(DS4_COMPACT)(compaction.compact)
    server.feature(DS4_COMPACT_COMMITTED)(compaction.compact_committed)
    server.feature(DS4_COMPACT_FAILED)(compaction.compact_failed)
    # model awareness: what the provider counted (handlers.usage)
    server.feature(DS4_USAGE)(usage.usage)
    # native continuation: the client reports a rejected previous_response_id
    server.feature(DS4_CONTINUATION_FAILED)(continuation.continuation_failed)
    # workspace/executeCommand
    server.command(REBUILD_INDEX)(commands.rebuild_index)
    server.command(HEALTH)(commands.health)
    server.command(PROJECT_STATUS)(commands.project_status)
    server.command(SUMMARIES)(commands.summaries)
    server.command(PRIVACY)(commands.privacy)
    return server
