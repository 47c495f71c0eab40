"""`textDocument/hover` over a stale snippet: which plan sent it, when, and what changed."""

from __future__ import annotations

from lsprotocol import types

from ds4_lsp.server import Ds4Server
from ds4_lsp.services.diagnostics import StaleSnippet
from ds4_lsp.services.documents import document_key


def hover(ls: Ds4Server, params: types.HoverParams) -> types.Hover | None:
    """`textDocument/hover`: explain the stale-snippet diagnostics on the hovered line.

    Uses the diagnostics last published for the document (no engine call); None elsewhere.
    """
    published = ls.stale_snippets.get(document_key(params.text_document.uri), [])
    line = params.position.line
    here = [s for s in published if s.range.start.line <= line <= s.range.end.line]
    if not here:
        return None
    markdown = _supports_markdown(ls)
    text = "\n\n".join(describe(snippet, markdown) for snippet in here)
    return types.Hover(
        contents=types.MarkupContent(
            kind=types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText,
            value=text,
        ),
        range=here[0].range,
    )


def describe(snippet: StaleSnippet, markdown: bool) -> str:
    """What the user should know about one stale snippet, in Markdown or plain text."""
    record = snippet.record
    code = "`" if markdown else ""
    title = "**ds4: stale snippet**" if markdown else "ds4: stale snippet"
    return (
        f"{title}\n\n"
        f"Plan {code}{record.manifest_id}{code} sent lines {record.start_line}-"
        f"{record.end_line} of this file to the model at {record.sent_at}. "
        f"Since then: {record.change}.\n\n"
        "The model may still rely on the old text. A newer plan that sends the current "
        "text clears this."
    )


def _supports_markdown(ls: Ds4Server) -> bool:
    text_document = ls.client_capabilities.text_document
    hover_capability = text_document.hover if text_document else None
    formats = (hover_capability.content_format if hover_capability else None) or []
    return types.MarkupKind.Markdown in formats
