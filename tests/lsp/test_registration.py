"""`create_server()` builds the whole protocol surface, fresh each time."""

from __future__ import annotations

from lsprotocol import types

from ds4_lsp.app import create_server
from ds4_lsp.rpc import Ds4Protocol


def test_every_method_and_command_is_registered_on_a_fresh_server() -> None:
    """Two servers can be built in one process (no module-global state), each complete."""
    first, second = create_server(), create_server()
    assert first is not second
    for server in (first, second):
        assert isinstance(server.protocol, Ds4Protocol)
        assert {
            "ds4/plan",
            "ds4/retrieve",
            "ds4/manifest",
            "ds4/toolExecuted",
            "ds4/continuationFailed",
            "ds4/sessionOpen",
            "ds4/sessionAppend",
            "ds4/artifactSearch",
        } <= set(server.protocol.fm.features)
        assert {
            types.INITIALIZE,
            types.INITIALIZED,
            types.SHUTDOWN,
            types.WORKSPACE_DID_CHANGE_CONFIGURATION,
            types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            types.TEXT_DOCUMENT_DID_OPEN,
            types.TEXT_DOCUMENT_DID_CHANGE,
            types.TEXT_DOCUMENT_DID_SAVE,
            types.TEXT_DOCUMENT_DID_CLOSE,
            types.TEXT_DOCUMENT_HOVER,
        } <= set(server.protocol.fm.features)
        assert set(server.protocol.fm.commands) == {
            "ds4.rebuildIndex",
            "ds4.health",
            "ds4.projectStatus",
            "ds4.summaries",
            "ds4.privacy",
            "ds4.gcArtifacts",
        }
