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
    # the changed line only (the last line holds non-ASCII text: its end differs by encoding)
    assert diagnostic.range == types.Range(types.Position(4, 0), types.Position(4, 29))
    assert diagnostic.message == (
        f"The model was sent an older version of lines 1-8 (plan {first['manifestId']}); "
        "since then, line 5 changed."
    )

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

    # an edit to the last line widens the range to lines 5..8, in the negotiated encoding
    change_document(client, uri, 3, (7, 11), (7, 16), "floor")
    (wider,) = stale(await wait_diagnostics(client, uri, lambda d: stale(d)[0].range.end.line == 7))
    assert wider.range == types.Range(
        types.Position(4, 0), types.Position(7, units(LAST_LINE, encoding))
    )

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


def long_module() -> str:
    """420 lines whose only mentions of `compute_shipping_rate` sit at lines 300 and 380: a
    plan for it sends the windows 273-352 and 341-420 (they overlap at lines 341-352)."""
    lines = [f"setting_{n} = {n}" for n in range(1, 421)]
    lines[299] = "def compute_shipping_rate(parcel, zone):  # heavy parcels pay more"
    lines[303] = "    surcharge = 0.8"
    lines[379] = "RATE = compute_shipping_rate  # heavy parcels, alias"
    lines[399] = "    limit = 20"
    return "\n".join(lines) + "\n"


def edit_line(client: LanguageClient, uri: str, version: int, line: int, text: str) -> None:
    """Replace the whole text of 1-based `line` (ASCII lines only) with `text`."""
    change_document(client, uri, version, (line - 1, 0), (line - 1, 400), text)


async def test_every_changed_window_of_one_plan_is_marked_over_its_changed_lines(
    project_servers: Servers, project_dir: Path, pi_session_copy: Callable[[str], Path]
) -> None:
    """Two overlapping windows of one plan: an edit in each gets its own diagnostic, over
    the changed line only, naming the window; health counts both."""
    source = project_dir / "shipping.py"
    text = long_module()
    source.write_text(text)
    session = pi_session_copy(SMALL_SESSION)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    uri = open_document(client, source, text)

    planned = await plan(client, session)
    manifest = await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    windows = sorted(tuple(s["lines"]) for s in manifest["projectSnippets"])
    assert windows == [(273, 352), (341, 420)]

    edit_line(client, uri, 2, 304, "    surcharge = 0.9")
    edit_line(client, uri, 3, 400, "    limit = 25")
    diagnostics = await wait_diagnostics(client, uri, lambda d: len(stale(d)) == 2)
    by_line = {d.range.start.line: d for d in stale(diagnostics)}
    assert sorted(by_line) == [303, 399]
    assert by_line[303].range == types.Range(types.Position(303, 0), types.Position(303, 19))
    assert "lines 273-352" in by_line[303].message
    assert by_line[399].range == types.Range(types.Position(399, 0), types.Position(399, 14))
    assert "lines 341-420" in by_line[399].message
    health = await execute(client, "ds4.health")
    assert health["project"]["staleSnippets"] == 2
    assert health["server"]["staleSnippetDiagnostics"] == 2


async def test_a_plan_without_a_stored_manifest_still_marks_changed_lines(
    project_servers: Servers, project_dir: Path
) -> None:
    """No session: the manifest is kept in memory only, and so are the windows it sent; an
    edit to them is still marked."""
    source = project_dir / "src" / "shipping.py"
    source.parent.mkdir()
    source.write_text(SHIPPING)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    uri = open_document(client, source, SHIPPING)

    planned = await request(
        client,
        "ds4/plan",
        {
            "messages": [
                {
                    "role": "user",
                    "content": "How does compute_shipping_rate handle heavy parcels?",
                    "timestamp": 1767225600000,
                }
            ],
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "contextWindow": 200000},
        },
    )
    manifest = await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    assert [s["path"] for s in manifest["projectSnippets"]] == ["src/shipping.py"]

    change_document(client, uri, 2, (4, 25), (4, 27), "25")
    (diagnostic,) = stale(await wait_diagnostics(client, uri, lambda d: bool(stale(d))))
    assert diagnostic.range == types.Range(types.Position(4, 0), types.Position(4, 29))
    assert planned["manifestId"] in diagnostic.message
