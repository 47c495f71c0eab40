"""Stale-snippet diagnostics: a plan sent project lines to the model, the open buffer then
changed them; an Information diagnostic marks those lines, its hover names the plan, and a
newer plan that sends the current text clears it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_helpers import Servers, execute, request
from lsprotocol import types
from project_helpers import (
    ENCODINGS,
    change_document,
    open_document,
    start_project_client,
    units,
    wait_diagnostics,
)
from pytest_lsp import LanguageClient

SMALL_SESSION = "openclaw-v3-single-turn-6a5d2a19.jsonl"

SHIPPING = """\
def compute_shipping_rate(parcel, zone):
    \"\"\"Rate for one parcel: base by zone, plus a surcharge over 20 kg.\"\"\"
    base = {"domestic": 4.5, "eu": 9.0, "world": 17.0}[zone]
    surcharge = 0.0
    if parcel.weight_kg > 20:
        surcharge = (parcel.weight_kg - 20) * 0.8
    rate = base + surcharge
    return round(rate, 2)  # ≈ euros 💶
"""
LAST_LINE = SHIPPING.splitlines()[-1]


def stale(diagnostics: Sequence[types.Diagnostic]) -> list[types.Diagnostic]:
    """The stale-snippet diagnostics among `diagnostics`."""
    return [d for d in diagnostics if d.code == "stale-snippet"]


async def plan(client: LanguageClient, session: Path) -> dict[str, Any]:
    """A stored plan for the shipping question (a session makes the manifest stored)."""
    return await request(
        client,
        "ds4/plan",
        {
            "session": {"file": str(session)},
            "request": "How does compute_shipping_rate handle heavy parcels?",
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "contextWindow": 200000},
        },
    )


async def test_a_changed_snippet_is_marked_explained_and_cleared_by_a_newer_plan(
    project_servers: Servers,
    project_dir: Path,
    client_name: str,
    pi_session_copy: Callable[[str], Path],
) -> None:
    """The whole lifecycle, with ranges in the negotiated encoding (the last line holds
    non-ASCII text, so its end differs between UTF-8 and UTF-16)."""
    encoding = ENCODINGS[client_name]
    source = project_dir / "src" / "shipping.py"
    source.parent.mkdir()
    source.write_text(SHIPPING)
    session = pi_session_copy(SMALL_SESSION)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    uri = open_document(client, source, SHIPPING)

    first = await plan(client, session)
    manifest = await request(client, "ds4/manifest", {"id": first["manifestId"]})
    sent = [s for s in manifest["projectSnippets"] if s["path"] == "src/shipping.py"]
    assert sent, "the plan did not send the shipping snippet"
    assert stale(client.diagnostics.get(uri, [])) == []

    # raise the threshold on line 5 ("    if parcel.weight_kg > 20:")
    change_document(client, uri, 2, (4, 25), (4, 27), "25")
    diagnostics = stale(await wait_diagnostics(client, uri, lambda d: bool(stale(d))))
    (diagnostic,) = diagnostics
    assert diagnostic.severity == types.DiagnosticSeverity.Information
    assert diagnostic.source == "ds4"
    assert diagnostic.range == types.Range(
        types.Position(0, 0), types.Position(7, units(LAST_LINE, encoding))
    )
    assert first["manifestId"] in diagnostic.message

    hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(4, 8)
        )
    )
    assert hover is not None
    assert isinstance(hover.contents, types.MarkupContent)
    text = hover.contents.value
    assert first["manifestId"] in text
    assert "line 5 changed" in text
    assert manifest["createdAt"] in text
    health = await execute(client, "ds4.health")
    assert health["status"] == "warning"
    assert health["server"]["staleSnippetDiagnostics"] == 1

    second = await plan(client, session)
    assert second["manifestId"] != first["manifestId"]
    await wait_diagnostics(client, uri, lambda d: not stale(d))
    no_hover = await client.text_document_hover_async(
        types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(4, 8)
        )
    )
    assert no_hover is None
    assert (await execute(client, "ds4.health"))["server"]["staleSnippetDiagnostics"] == 0
