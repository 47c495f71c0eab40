"""The trust boundary: an untrusted workspace is never listed, read, or run through git; a
later trust grant starts indexing without a restart. The workspace is a git repository and
the server's `git` is a wrapper that logs every invocation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import Servers, execute, request
from lsprotocol import types
from project_helpers import (
    change_document,
    git_commit_all,
    hits_in,
    open_document,
    project_rows,
    recording_git,
    retrieve_project,
    start_project_client,
)

SMALL_SESSION = "openclaw-v3-single-turn-6a5d2a19.jsonl"


@pytest.fixture
def git_project(project_dir: Path) -> Path:
    """A committed git repository whose files any listing would find."""
    (project_dir / "src").mkdir()
    (project_dir / "src" / "billing.py").write_text(
        "def compute_invoice_total(lines):\n    return sum(line.amount for line in lines)\n"
    )
    (project_dir / "README.md").write_text("# Billing\n\nInvoices and totals.\n")
    git_commit_all(project_dir)
    return project_dir


async def test_an_untrusted_workspace_is_never_listed_read_or_run_through_git(
    project_servers: Servers,
    git_project: Path,
    tmp_path: Path,
    database_path: Path,
    pi_session_copy: Callable[[str], Path],
) -> None:
    """With the default `trusted: false`, opening and editing a buffer, retrieving, planning,
    reporting a tool run, rebuilding and asking for status never run git, never index a
    file and store no project rows; health, ds4/retrieve and the manifest say `untrusted`."""
    env, git_log = recording_git(tmp_path)
    project = await start_project_client(project_servers, trusted=False, env=env)
    client = project.lsp

    source = git_project / "src" / "billing.py"
    uri = open_document(client, source, source.read_text())
    change_document(client, uri, 2, (0, 4), (0, 4), "x")
    client.protocol.notify("ds4/toolExecuted", {"tool": "bash", "paths": []})
    retrieved = await retrieve_project(client, "compute_invoice_total")
    assert retrieved["project"] == [] and retrieved["projectStatus"] == "untrusted"

    session = pi_session_copy(SMALL_SESSION)
    planned = await request(
        client,
        "ds4/plan",
        {"session": {"file": str(session)}, "request": "where is compute_invoice_total?"},
    )
    manifest = await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    assert manifest["project"]["status"] == "untrusted"
    assert manifest["projectSnippets"] == []

    rebuilt = await execute(client, "ds4.rebuildIndex")
    assert rebuilt["project"] is None
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "untrusted" and status["trusted"] is False
    assert status.get("files", 0) == 0
    health = await execute(client, "ds4.health")
    assert health["project"]["status"] == "untrusted" and health["server"]["trusted"] is False

    await project_servers.stop(client)
    assert not git_log.exists(), git_log.read_text()
    assert project_rows(database_path) == {
        "project_states": 0,
        "project_files": 0,
        "project_snippets": 0,
    }
    assert project.index_updates == []
    assert client.diagnostics.get(uri, []) == []


async def test_a_trust_grant_starts_indexing_without_a_restart(
    project_servers: Servers, git_project: Path, tmp_path: Path
) -> None:
    """`trusted: true` sent with didChangeConfiguration makes the same server index the
    workspace in the background (with $/progress) and search it; git now runs."""
    env, git_log = recording_git(tmp_path)
    project = await start_project_client(project_servers, trusted=False, env=env)
    client = project.lsp
    assert (await retrieve_project(client, "compute_invoice_total"))["project"] == []

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"ds4": {"trusted": True}})
    )
    update = await project.wait_index(lambda u: u["reason"] == "trust")
    assert update["status"] == "ready" and update["filesIndexed"] == 2

    assert hits_in(await retrieve_project(client, "compute_invoice_total"), "src/billing.py")
    assert "ls-files" in git_log.read_text()
    first_reports: list[Any] = [
        reports[0] for reports in client.progress_reports.values() if reports
    ]
    titles = [r.title for r in first_reports if isinstance(r, types.WorkDoneProgressBegin)]
    assert "ds4: indexing the project" in titles
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "ready" and status["files"] == 2
    assert status["git"]["head"] is not None


async def test_withdrawing_trust_stops_project_answers(
    project_servers: Servers, git_project: Path
) -> None:
    """After `trusted: false`, ds4/retrieve returns no project hits and says `untrusted`."""
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    await project.wait_index(lambda u: u["reason"] == "initial")
    assert hits_in(await retrieve_project(client, "compute_invoice_total"), "src/billing.py")

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"trusted": False})
    )
    health = await execute(client, "ds4.health")
    assert health["server"]["trusted"] is False
    retrieved = await retrieve_project(client, "compute_invoice_total")
    assert retrieved["project"] == [] and retrieved["projectStatus"] == "untrusted"
