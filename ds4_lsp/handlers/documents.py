"""Text document sync and watched files: an open buffer is the live text of its file.

pygls has already applied each notification to `ls.workspace` (an `LspWorkspace`, so edits
follow LSP line rules) when these handlers run; they only tell `ProjectSync` what changed.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from ds4_core.json_bounds import echo
from ds4_lsp.server import Ds4Server
from ds4_lsp.services.diagnostics import clear_stale_snippets
from ds4_lsp.services.documents import LspWorkspace

log = logging.getLogger("ds4_lsp")

IGNORED_EVENT_DIRS = (".git", ".hg", ".svn")
"""Watched-file events under these are not project changes (and git's own index writes
during discovery must not trigger another sync)."""


def did_open(ls: Ds4Server, params: types.DidOpenTextDocumentParams) -> None:
    """`textDocument/didOpen`: the buffer's text becomes the file's live text (debounced)."""
    ls.project.buffer_changed(params.text_document.uri)


def did_change(ls: Ds4Server, params: types.DidChangeTextDocumentParams) -> None:
    """`textDocument/didChange`: re-index the buffer at most `EDIT_DEBOUNCE_S` after the
    last change, then republish its stale-snippet diagnostics.

    A change to a document that was never opened (or already closed) changes nothing: a
    warning naming its URI (`json_bounds.echo`: at most 80 characters and the length) goes to
    the log and to `window/logMessage`."""
    uri = params.text_document.uri
    workspace = ls.workspace
    if isinstance(workspace, LspWorkspace) and workspace.open_document(uri) is None:
        line = f"textDocument/didChange: {echo(uri)} is not open (no didOpen); change ignored"
        log.warning("%s", line)
        ls.window_log_message(types.LogMessageParams(type=types.MessageType.Warning, message=line))
        return
    ls.project.buffer_changed(uri)


def did_save(ls: Ds4Server, params: types.DidSaveTextDocumentParams) -> None:
    """`textDocument/didSave`: the file on disk changed too (size, mtime); re-index it."""
    ls.project.buffer_changed(params.text_document.uri)


def did_close(ls: Ds4Server, params: types.DidCloseTextDocumentParams) -> None:
    """`textDocument/didClose`: the disk is the truth again; withdraw its diagnostics."""
    clear_stale_snippets(ls, [params.text_document.uri])
    ls.project.buffer_changed(params.text_document.uri)


def did_change_watched_files(ls: Ds4Server, params: types.DidChangeWatchedFilesParams) -> None:
    """`workspace/didChangeWatchedFiles`: files changed outside the editor; a full sync
    (cheap: unchanged files are skipped) runs after a short debounce."""
    if any(not _in_ignored_dir(change.uri) for change in params.changes):
        ls.project.files_changed()


def _in_ignored_dir(uri: str) -> bool:
    parts = uri.split("/")
    return any(name in parts for name in IGNORED_EVENT_DIRS)
