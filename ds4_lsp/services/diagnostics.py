"""Stale-snippet diagnostics: project lines the model saw that the open buffer no longer has.

For each open document, `engine.project.stale_snippets(path, live_text)` lists the snippets a
plan sent whose lines changed since. Each changed window becomes one Information diagnostic
(source `ds4`, code `stale-snippet`) over its first to last changed line, in the session's
position encoding, its message naming the window's lines; the hover
(`ds4_lsp.handlers.hover`) explains it. Published after each project sync that concerns the document
and after each `ds4/plan`; a newer plan that sends the current text clears it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import to_fs_path

from ds4_core import results
from ds4_lsp.services.documents import as_lsp_document, document_key

if TYPE_CHECKING:
    from ds4_lsp.server import Ds4Server

SOURCE = "ds4"
CODE = "stale-snippet"


@dataclass(frozen=True)
class StaleSnippet:
    """One published stale snippet: its range (client units: the changed lines) and the
    engine's record (`ds4_core.results.StaleSnippet`: 1-based lines, `start_line`..`end_line`
    the window, `change_start_line`..`change_end_line` the changed lines)."""

    range: types.Range
    record: results.StaleSnippet
    uri: str = ""
    """The URI the diagnostic was published under (the one the document was opened with)."""


def diagnostic(snippet: StaleSnippet) -> types.Diagnostic:
    """The Information diagnostic of `snippet`."""
    record = snippet.record
    return types.Diagnostic(
        range=snippet.range,
        severity=types.DiagnosticSeverity.Information,
        source=SOURCE,
        code=CODE,
        message=(
            f"The model was sent an older version of lines {record.start_line}-"
            f"{record.end_line} (plan {record.manifest_id}); since then, {record.change}."
        ),
        data={"snippetId": record.snippet_id, "manifestId": record.manifest_id},
    )


async def publish_stale_snippets(ls: Ds4Server, uris: Iterable[str]) -> None:
    """Recompute and publish the stale-snippet diagnostics of each open document in `uris`.

    A document edited while its snippets were computed is skipped (the edit's own sync
    republishes it). Only changed diagnostics are sent. Engine failures are logged and leave
    the last published diagnostics in place.
    """
    if not ls.project.active:
        return
    for uri in dict.fromkeys(uris):
        document = ls.workspace.text_documents.get(document_key(uri))
        path = to_fs_path(uri)
        if document is None or path is None:
            continue
        version, text = document.version, document.source
        try:
            records = await ls.run_engine(ls.engine.project.stale_snippets, path, text, method=CODE)
        except JsonRpcException:  # logged by run_engine
            continue
        current = ls.workspace.text_documents.get(document_key(uri))
        if current is None or current.version != version or not ls.project.active:
            continue
        lsp_document = as_lsp_document(current)
        snippets = [
            StaleSnippet(
                lsp_document.line_range(r.change_start_line, r.change_end_line), r, current.uri
            )
            for r in records
        ]
        _publish(ls, current.uri, version, snippets)  # the URI the document was opened with


def clear_stale_snippets(ls: Ds4Server, uris: Iterable[str]) -> None:
    """Withdraw the stale-snippet diagnostics of `uris` (document closed, trust revoked)."""
    for uri in uris:
        published = ls.stale_snippets.pop(document_key(uri), None)
        if published:  # withdrawn under the URI they were published under
            ls.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=published[0].uri or uri, diagnostics=[])
            )


def _publish(ls: Ds4Server, uri: str, version: int | None, snippets: list[StaleSnippet]) -> None:
    key = document_key(uri)
    previous = ls.stale_snippets.get(key)
    if previous is not None and previous == snippets:
        return
    if previous is None and not snippets:
        ls.stale_snippets[key] = snippets
        return
    ls.stale_snippets[key] = snippets
    ls.text_document_publish_diagnostics(
        types.PublishDiagnosticsParams(
            uri=uri,
            version=version if _supports_version(ls) else None,
            diagnostics=[diagnostic(s) for s in snippets],
        )
    )


def _supports_version(ls: Ds4Server) -> bool:
    """Whether the client accepts `version` in publishDiagnostics."""
    text_document = ls.client_capabilities.text_document
    publish = text_document.publish_diagnostics if text_document else None
    return bool(publish and publish.version_support)
