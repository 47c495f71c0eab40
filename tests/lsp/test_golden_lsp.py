"""Golden LSP answers (issue 10: recorded before the engine, CLI and LSP layers are
restructured; after it they must be identical, ids and times normalised).

One real `ds4-lsp` process (VS Code's captured capabilities, no `ds4/summarize` offer) over the
trusted workspace, on its own temp database, answers the same scenario as
`tests/core/test_golden_outputs.py`: the first `ds4/indexUpdated`, `ds4/plan`, `ds4/retrieve`
(history, project, both), `ds4/manifest` (every view, and `latest`), `ds4/compact`,
`ds4.summaries`, `ds4.projectStatus`, `ds4.health`, `ds4.rebuildIndex`. Each step records its
params and its result; the whole recording, normalised (see `tests/golden_outputs.py`), must
equal `tests/golden/lsp.json`.

Record again (only when the change of behaviour is wanted): `DS4_UPDATE_GOLDEN=1` (see
`tests/golden_outputs.py`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import golden_outputs as golden
import pytest
from git_repos import isolate_git
from lsp_helpers import Servers, execute, request
from project_helpers import start_project_client

CLIENT = "visual-studio-code"


async def record_lsp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the scenario against a real server; returns the raw recording (step name ->
    {method, params, result})."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv("DS4_DB", raising=False)
    isolate_git(tmp_path / "home", monkeypatch)
    session, workspace = golden.make_inputs(tmp_path)
    assert workspace.name == golden.WORKSPACE_NAME
    servers = Servers(CLIENT, workspace, tmp_path / "state" / "context.db")
    steps: dict[str, Any] = {}
    try:
        project = await start_project_client(servers, trusted=True)
        client = project.lsp
        steps["indexUpdated"] = {
            "method": "ds4/indexUpdated",
            "params": await project.wait_index(lambda u: u["status"] == "ready"),
        }

        async def ask(name: str, method: str, params: Any) -> Any:
            result = await request(client, method, params)
            steps[name] = {"method": method, "params": params, "result": result}
            return result

        async def command(name: str, command: str, arguments: Any = None) -> Any:
            result = await execute(client, command, arguments)
            steps[name] = {"command": command, "arguments": arguments, "result": result}
            return result

        ref = {"file": str(session)}
        plan = await ask("plan", "ds4/plan", {"session": ref, "request": golden.QUERY})
        await ask(
            "retrieve-history",
            "ds4/retrieve",
            {"session": ref, "query": golden.QUERY, "scopes": ["history"]},
        )
        await ask(
            "retrieve-project", "ds4/retrieve", {"query": golden.QUERY, "scopes": ["project"]}
        )
        await ask(
            "retrieve-both",
            "ds4/retrieve",
            {"session": ref, "query": golden.QUERY, "scopes": ["history", "project"]},
        )
        for view in golden.MANIFEST_VIEWS:
            await ask(f"manifest-{view}", "ds4/manifest", {"id": plan["manifestId"], "view": view})
        await ask("manifest-latest", "ds4/manifest", {"session": ref, "latest": True})
        await ask("compact", "ds4/compact", {"session": ref})
        await command("summaries", "ds4.summaries", [{"session": ref}])
        await command("projectStatus", "ds4.projectStatus")
        await command("health", "ds4.health")
        await command("rebuild", "ds4.rebuildIndex")
    finally:
        await servers.stop_all()
    return steps


async def test_lsp_answers_match_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.time()
    steps = await record_lsp(tmp_path, monkeypatch)
    hashes = {golden.prompt_hash(steps["plan"]["result"]["messages"])}
    normalised = golden.Normaliser(tmp_path, started, time.time(), hashes).normalise(steps)
    golden.check_golden("lsp", normalised, tmp_path)
