"""Workspace commands (`workspace/executeCommand`): `ds4.rebuildIndex`, `ds4.health`,
`ds4.projectStatus`, `ds4.summaries`, `ds4.privacy`, `ds4.gcArtifacts`.

All return JSON. `ds4.summaries` takes one argument object, `ds4.privacy` and
`ds4.gcArtifacts` one or none; the others take none.
`ds4.rebuildIndex` and `ds4.health` report `$/progress` (see `ds4_lsp.services.progress`).
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from ds4_core.json_bounds import describe_type
from ds4_lsp.converter import ARGUMENT_ROOT, command_argument
from ds4_lsp.methods import GC_ARTIFACTS, HEALTH, PRIVACY, PROJECT_STATUS, REBUILD_INDEX, SUMMARIES
from ds4_lsp.params import GcArtifactsArguments, PrivacyArguments, SummariesArguments
from ds4_lsp.server import Ds4Server, with_wire
from ds4_lsp.services.diagnostics import publish_stale_snippets
from ds4_lsp.services.progress import WorkDoneProgress


async def rebuild_index(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.rebuildIndex`: re-read every session the database knows, from scratch, and (in a
    trusted workspace) rescan the whole project, re-reading every file.

    Returns {sessions, entries, failed: [{sessionFile, error}], durationMs, results, project}
    (`project`: the project sync, or null when untrusted). Reports the percentage done; the
    project part is also reported with `ds4/indexUpdated` (reason `rebuild`). Errors:
    InvalidParams when given arguments.
    """
    expect_no_arguments(REBUILD_INDEX, arguments)
    await ls.project.flush()  # edits still in the debounce become live text first
    async with WorkDoneProgress(ls, "ds4: rebuilding the index") as progress:
        result, answer = await ls.run_engine(
            lambda: with_wire(ls.engine.rebuild(progress.report)), method=REBUILD_INDEX
        )
        progress.end_message = (
            f"{result.sessions} session(s), {result.entries} entries, {len(result.failed)} failed"
        )
    if result.project is not None:
        ls.project.report("rebuild", result.project, None)
        await publish_stale_snippets(ls, ls.project.open_uris())
    ls.log_request(
        REBUILD_INDEX,
        f"sessions={result.sessions} entries={result.entries} "
        f"failed={len(result.failed)} duration_ms={result.duration_ms:.1f}",
    )
    return answer


async def health(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.health`: engine and index health plus this LSP session's facts.

    Returns the engine's {status, version, schemaVersion, databasePath, sessions, entries,
    manifests, notices, configWarnings, ...} and `server: {name, version, positionEncoding,
    trusted}`. Errors: InvalidParams when given arguments.
    """
    expect_no_arguments(HEALTH, arguments)
    async with WorkDoneProgress(ls, "ds4: checking health") as progress:
        result, answer = await ls.run_engine(lambda: with_wire(ls.engine.health()), method=HEALTH)
        progress.end_message = f"status {result.status}"
    encoding = ls.workspace.position_encoding  # an enum or a plain str, by pygls version
    answer["server"] = {
        "name": ls.name,
        "version": ls.version,
        "positionEncoding": str(getattr(encoding, "value", encoding)),
        "trusted": ls.options.trusted,
        **editor_facts(ls),
    }
    ls.log_request(HEALTH, f"status={result.status} sessions={result.sessions}")
    return answer


async def project_status(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.projectStatus`: the engine's project status plus this session's editor facts.

    Returns {status, projectPath, trusted, files, snippets, staleSnippets, git, indexedAt}
    (counts only when trusted) and `editor: {watchingFiles, openDocuments,
    staleSnippetDiagnostics}`. Pending edits are indexed first, unless a sync is running: then
    it answers at once (status `indexing`). Errors: InvalidParams when given arguments.
    """
    expect_no_arguments(PROJECT_STATUS, arguments)
    if not ls.project.busy:  # while a batch runs, answer now: the status says `indexing`
        await ls.project.flush()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.project.status()), method=PROJECT_STATUS
    )
    answer["editor"] = editor_facts(ls)
    ls.log_request(
        PROJECT_STATUS,
        f"status={result.status} files={result.files or 0} snippets={result.snippets or 0}",
    )
    return answer


async def summaries(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.summaries`: the summary graph of a session as seen from a leaf.

    Takes one argument `{session: {file, leafId?}, format?: "json" | "dot"}`. The session is
    synced first (a compaction entry written since marks its batch committed). Returns the
    engine's view {sessionId, sessionFile, leafId, activeRootId, nodes, roots, counts, tree};
    with format `dot` also `dot`, the graph as Graphviz text. Errors: InvalidParams naming the
    field (`params.arguments[0].session.file`, ...), also for a session file or leaf the engine
    cannot use.
    """
    args = command_argument(SUMMARIES, arguments, SummariesArguments)
    session = args.session.to_core()

    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.summaries(session, dot=args.format == "dot")),
        method=SUMMARIES,
        field_root=ARGUMENT_ROOT,
    )
    ls.log_request(
        SUMMARIES,
        f"session={result.session_id} nodes={len(result.nodes)} "
        f"root={result.active_root_id} format={args.format}",
    )
    return answer


async def privacy(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.privacy`: what one destination may see under the active policy (docs/privacy.md).

    Takes no argument (an unnamed provider, treated as remote) or one `{model: "provider/id"}`
    or `{provider: "id"}`. Returns {enabled, provider, kind, allowed, withheld, rule,
    redactSecrets, explanation, policy}. Errors: InvalidParams naming the field.
    """
    if not arguments or arguments[0] is None or arguments[0] == {}:
        expect_no_arguments(PRIVACY, arguments)
        provider = None
    else:
        provider = command_argument(PRIVACY, arguments, PrivacyArguments).provider_id()
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.privacy(provider)), method=PRIVACY
    )
    ls.log_request(PRIVACY, f"kind={result.kind} enabled={result.enabled}")
    return answer


async def gc_artifacts(ls: Ds4Server, *arguments: Any) -> dict[str, Any]:
    """`ds4.gcArtifacts`: remove the artifact objects no indexed session references (written
    over an hour ago) and quarantined files over 7 days old.

    Takes no argument or one `{dryRun?: bool, force?: bool}` (count only; collect even when
    the index holds no session). Returns {removed, removedBytes, kept, keptBytes, dryRun,
    young}. Errors: InvalidParams naming the field (`params.arguments[0].dryRun`; `.force`
    when the index holds no session while objects exist and `force` is not given).
    """
    if not arguments or arguments[0] is None or arguments[0] == {}:
        expect_no_arguments(GC_ARTIFACTS, arguments)
        given = GcArtifactsArguments()
    else:
        given = command_argument(GC_ARTIFACTS, arguments, GcArtifactsArguments)
    result, answer = await ls.run_engine(
        lambda: with_wire(ls.engine.gc_artifacts(dry_run=given.dry_run, force=given.force)),
        method=GC_ARTIFACTS,
        field_root=ARGUMENT_ROOT,
    )
    ls.log_request(
        GC_ARTIFACTS,
        f"removed={result.removed} removed_bytes={result.removed_bytes} kept={result.kept} "
        f"dry_run={result.dry_run}",
    )
    return answer


def editor_facts(ls: Ds4Server) -> dict[str, Any]:
    """{watchingFiles, openDocuments, staleSnippetDiagnostics} of this LSP session."""
    return {
        "watchingFiles": ls.project.watching,
        "openDocuments": len(ls.workspace.text_documents),
        "staleSnippetDiagnostics": sum(len(s) for s in ls.stale_snippets.values()),
    }


def expect_no_arguments(command: str, arguments: tuple[Any, ...]) -> None:
    """Accept `[]` or `[{}]`/`[null]` (what some clients send); refuse anything else.

    Raises:
        JsonRpcInvalidParams: naming the field in the message and `data.fields`
            (`params.arguments` for more than one, else `params.arguments[0]`), and describing
            the value by
            its type (`got an object`), never by its content.
    """
    if len(arguments) > 1:
        raise JsonRpcInvalidParams(
            message=f"{command}: params.arguments: takes no arguments (got {len(arguments)})",
            data={"fields": ["params.arguments"]},
        )
    if arguments and not (arguments[0] is None or arguments[0] == {}):
        raise JsonRpcInvalidParams(
            message=f"{command}: {ARGUMENT_ROOT}: takes no arguments "
            f"(got {describe_type(arguments[0])})",
            data={"fields": [ARGUMENT_ROOT]},
        )
