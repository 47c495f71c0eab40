"""Long lines over the wire: a file with one data-URI line is indexed with that line cut (and
the sync says so); a file of wide lines is searchable to its last line; a plan's window of it
goes stale only where the buffer changed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lsp_helpers import Servers, request
from project_helpers import (
    change_document,
    hits_in,
    open_document,
    retrieve_project,
    start_project_client,
    wait_diagnostics,
)

SMALL_SESSION = "openclaw-v3-single-turn-6a5d2a19.jsonl"

ICONS = (
    "".join(f"export const iconGlyph{n} = 'glyph_{n}';\n" for n in range(1, 11))
    + "export const LOGO = 'data:image/png;base64," + "Q" * 60_000 + "';\n"
    + "".join(f"export const iconGlyph{n} = 'glyph_{n}';\n" for n in range(11, 21))
    + "export function renderBrandLogo(size) { return LOGO; }\n"
)  # fmt: skip
"""icons.ts: 20 ordinary lines, a 60,000-character data URI on line 11, and a function."""


async def test_a_data_uri_line_is_cut_and_the_rest_is_searchable(
    project_servers: Servers, project_dir: Path
) -> None:
    (project_dir / "icons.ts").write_text(ICONS)
    wide = "".join(f"wide_marker_{n:03d} = '" + "w" * 880 + "'\n" for n in range(1, 201))
    (project_dir / "wide.py").write_text(wide)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    initial = await project.wait_index(lambda u: u["reason"] == "initial")
    assert initial["longLineFiles"] == [{"path": "icons.ts", "linesCut": 1}]
    assert any("icons.ts (1 line cut)" in w for w in initial["warnings"])

    (hit,) = hits_in(await retrieve_project(client, "glyph_20"), "icons.ts")
    assert "[DS4 line cut: 60,045 characters]" in hit["text"]
    assert len(hit["text"]) < 10_000
    wide_hits = hits_in(await retrieve_project(client, "wide_marker_150"), "wide.py")
    assert wide_hits and all(len(h["text"]) <= 20_000 for h in wide_hits)
    assert any(h["startLine"] <= 150 <= h["endLine"] for h in wide_hits)


async def test_a_window_with_a_cut_line_is_stale_only_where_the_buffer_changed(
    project_servers: Servers, project_dir: Path, pi_session_copy: Callable[[str], Path]
) -> None:
    source = project_dir / "icons.ts"
    source.write_text(ICONS)
    session = pi_session_copy(SMALL_SESSION)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    uri = open_document(client, source, ICONS)
    planned = await request(
        client,
        "ds4/plan",
        {
            "session": {"file": str(session)},
            "request": "How does renderBrandLogo draw the logo?",
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5", "contextWindow": 200000},
        },
    )
    manifest = await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    assert [s["path"] for s in manifest["projectSnippets"]] == ["icons.ts"]

    change_document(client, uri, 2, (21, 0), (21, 6), "      ")  # line 22: drop `export`
    diagnostics = await wait_diagnostics(
        client, uri, lambda d: any(x.code == "stale-snippet" for x in d)
    )
    (diagnostic,) = [d for d in diagnostics if d.code == "stale-snippet"]
    assert (diagnostic.range.start.line, diagnostic.range.end.line) == (21, 21)


async def test_a_small_file_with_one_data_uri_line_is_indexed_with_that_line_cut(
    project_servers: Servers, project_dir: Path
) -> None:
    """icons.ts of 9 lines, one of them a 60,000-character data URI (more than one line in
    ten): indexed with that line cut and reported, its other lines searchable; a one-line
    bundle beside it is still skipped as minified."""
    small = (
        "".join(f"export const iconGlyph{n} = 'glyph_{n}';\n" for n in range(1, 8))
        + "export const LOGO = 'data:image/png;base64," + "Q" * 60_000 + "';\n"
        + "export function renderBrandLogo(size) { return LOGO; }\n"
    )  # fmt: skip
    (project_dir / "icons.ts").write_text(small)
    (project_dir / "bundle.js").write_text("!function(e){return e};" * 3000)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    initial = await project.wait_index(lambda u: u["reason"] == "initial")
    assert initial["filesIndexed"] == 1 and initial["filesSkipped"] == 1, initial
    assert initial["longLineFiles"] == [{"path": "icons.ts", "linesCut": 1}]
    assert any("icons.ts (1 line cut)" in w for w in initial["warnings"])
    (hit,) = hits_in(await retrieve_project(client, "renderBrandLogo"), "icons.ts")
    assert "glyph_7" in hit["text"] and "[DS4 line cut:" in hit["text"]
