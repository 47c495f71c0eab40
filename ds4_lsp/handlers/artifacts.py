"""`ds4/artifactSearch` (docs/artifacts.md; the `ds4.gcArtifacts` command is in `commands`)."""

from __future__ import annotations

from typing import Any

from ds4_lsp.methods import DS4_ARTIFACT_SEARCH
from ds4_lsp.params import ArtifactSearchParams
from ds4_lsp.server import Ds4Server, with_wire


async def artifact_search(ls: Ds4Server, params: ArtifactSearchParams) -> dict[str, Any]:
    """`ds4/artifactSearch`: literal, case-insensitive matches of `query` in one artifact or
    in the artifacts of a session's active branch, with redacted excerpts; an artifact that
    is missing, corrupt (quarantined) or over `artifacts.maxSearchBytes` is listed in
    `searched` with that status.

    Errors: InvalidParams naming the field (`params.query` empty or over 1000 characters,
    `params.artifactId` not 64 lower-case hex digits or neither it nor `params.session`,
    `params.maxMatches` out of 1..100, a bad `params.session.file` or `params.session.leafId`).
    """
    request = params.to_core()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.artifact_search(request)), method=DS4_ARTIFACT_SEARCH
    )
    ls.log_request(
        DS4_ARTIFACT_SEARCH,
        f"searched={len(result.searched)} matches={len(result.matches)} "
        f"truncated={result.truncated}",
    )
    return answer
