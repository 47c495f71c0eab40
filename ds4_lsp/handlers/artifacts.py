"""`ds4/artifactSearch` and the `ds4.gcArtifacts` command (docs/artifacts.md)."""

from __future__ import annotations

from typing import Any

from ds4_lsp.converter import ARGUMENT_ROOT, command_argument
from ds4_lsp.handlers.commands import expect_no_arguments
from ds4_lsp.methods import DS4_ARTIFACT_SEARCH, GC_ARTIFACTS
from ds4_lsp.params import ArtifactSearchParams, GcArtifactsArguments
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


async def gc_artifacts(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.gcArtifacts`: remove the artifact objects no indexed session references (written
    over an hour ago) and quarantined files over 7 days old.

    Takes no argument or one `{dryRun?: bool}` (count only). Returns {removed, removedBytes,
    kept, keptBytes, dryRun, young}. Errors: InvalidParams naming the field
    (`params.arguments[0].dryRun`).
    """
    if not arguments or arguments[0] is None or arguments[0] == {}:
        expect_no_arguments(GC_ARTIFACTS, arguments)
        dry_run = False
    else:
        dry_run = command_argument(GC_ARTIFACTS, arguments, GcArtifactsArguments).dry_run
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.gc_artifacts(dry_run=dry_run)),
        method=GC_ARTIFACTS,
        field_root=ARGUMENT_ROOT,
    )
    ls.log_request(
        GC_ARTIFACTS,
        f"removed={result.removed} removed_bytes={result.removed_bytes} kept={result.kept} "
        f"dry_run={result.dry_run}",
    )
    return answer
