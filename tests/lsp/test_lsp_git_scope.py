"""`ds4/retrieve` with `scopes: ["git"]` over stdio: a trusted Git workspace's commits answer
"why was this changed?" (alone and with the project scope), an unrelated request gets none,
the index follows HEAD, an untrusted workspace never runs Git, and a repository whose
configuration names programs (GPG, external diff, textconv, filters, hooks, ...) runs none."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from hostile_git import make_trapped_repository
from lsp_helpers import Servers, execute, request, request_error
from project_helpers import recording_git, start_project_client
from pytest_lsp import LanguageClient

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def commit(root: Path, path: str, text: str, message: str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=ENV, capture_output=True)


def make_history(root: Path) -> None:
    subprocess.run(["git", "-C", str(root), "init", "-q"], check=True, env=ENV)
    commit(root, "src/pool.py", "POOL = 10\n", "Add a connection pool")
    commit(
        root,
        "src/timeouts.py",
        "DEFAULT_TIMEOUT = 5.0\n",
        "Raise the default timeout to 5 seconds\n\nSlow proxies timed out after 1 second.",
    )
    commit(root, "docs/index.md", "# Docs\n", "Document the quickstart")


async def retrieve_git(client: LanguageClient, query: str, *scopes: str) -> dict[str, Any]:
    return await request(client, "ds4/retrieve", {"query": query, "scopes": list(scopes)})


async def test_the_git_scope_answers_why_over_stdio(
    project_servers: Servers, project_dir: Path
) -> None:
    make_history(project_dir)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    update = await project.wait_index(lambda u: u["reason"] == "initial")
    assert update["status"] == "ready" and update.get("commitsIndexed") == 3

    answer = await retrieve_git(client, "why was the default timeout raised?", "git")
    assert answer["gitStatus"] == "ok" and "projectStatus" in answer
    best = answer["git"][0]
    assert best["subject"] == "Raise the default timeout to 5 seconds"
    assert best["files"] == ["src/timeouts.py"] and best["filesTotal"] == 1
    assert len(best["hash"]) == 40 and best["committedAt"].endswith("Z")
    assert best["quoted"].startswith("[DS4 GIT COMMIT") and "Slow proxies" in best["quoted"]
    assert best["tokens"] > 0 and 0 < best["score"] <= 1.25

    both = await retrieve_git(client, "default timeout", "git", "project")
    assert both["gitStatus"] == "ok" and both["projectStatus"] == "ok"
    assert both["git"] and any(hit["path"] == "src/timeouts.py" for hit in both["project"])

    unrelated = await retrieve_git(client, "Write a haiku about the sea, please.", "git")
    assert unrelated["git"] == [] and unrelated["gitStatus"] == "ok"

    commit(project_dir, "src/cache.py", "CACHE = {}\n", "Cache DNS lookups between requests")
    client.protocol.notify("ds4/toolExecuted", {"tool": "bash", "paths": []})
    moved = await retrieve_git(client, "dns lookups cache", "git")
    assert moved["git"][0]["subject"] == "Cache DNS lookups between requests"
    status = await execute(client, "ds4.projectStatus")
    assert status["commits"] == 4

    bad = await request_error(client, "ds4/retrieve", {"query": "x", "scopes": ["gut"]})
    assert "scopes" in str(bad)
    await project_servers.stop(client)


async def test_an_untrusted_workspace_runs_no_git_for_the_git_scope(
    project_servers: Servers, project_dir: Path, tmp_path: Path
) -> None:
    make_history(project_dir)
    env, git_log = recording_git(tmp_path)
    project = await start_project_client(project_servers, trusted=False, env=env)
    client = project.lsp
    answer = await retrieve_git(client, "why was the default timeout raised?", "git")
    assert (answer["gitStatus"], answer["git"]) == ("untrusted", [])
    await project_servers.stop(client)
    assert not git_log.exists(), git_log.read_text()


async def test_a_hostile_repository_is_indexed_without_running_a_program(
    project_servers: Servers, project_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "PWNED"
    make_trapped_repository(project_dir, marker)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    update = await project.wait_index(lambda u: u["reason"] == "initial")
    assert update["status"] == "ready" and update.get("commitsIndexed") == 1
    answer = await retrieve_git(client, "init", "git")
    assert answer["gitStatus"] == "ok" and answer["git"][0]["subject"] == "init"
    await project_servers.stop(client)
    assert not marker.exists(), marker.read_text()
