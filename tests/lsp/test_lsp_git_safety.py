"""Trusted means "may be read", never "may run programs": a trusted workspace whose Git
configuration tries every way to run a command (`tests/hostile_git.py`: fsmonitor, filters,
hooks, pagers, SSH, helpers, aliases, includes; armed, since plain `git status` fires it) is
indexed, edited and synced over stdio, and the marker file those commands write never
appears. The CLI's `ds4 retrieve --workspace DIR --trust` is held to the same rule."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hostile_git import make_trapped_repository
from lsp_helpers import Servers, execute
from lsprotocol import types
from project_helpers import (
    change_document,
    hits_in,
    open_document,
    retrieve_project,
    start_project_client,
)

TAX = "def compute_sales_tax(amount):\n    return amount * 0.2\n"


async def test_a_trusted_workspace_never_runs_its_git_configuration(
    project_servers: Servers, project_dir: Path, tmp_path: Path
) -> None:
    """Initial index, a buffer edit, a tool-written file, a rebuild and the status: all run
    git, none runs a program the repository names; the same-size edit of a tracked file and
    the new untracked files are still reported as modified."""
    marker = tmp_path / "PWNED"
    make_trapped_repository(project_dir, marker)
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    update = await project.wait_index(lambda u: u["reason"] == "initial")
    assert update["status"] == "ready"

    (hit,) = hits_in(await retrieve_project(client, "compute_invoice_total"), "src/billing.py")
    assert hit["modified"] is True  # same size as committed: found by content, not by size

    source = project_dir / "src" / "billing.py"
    uri = open_document(client, source, source.read_text())
    change_document(client, uri, 2, (0, 0), (0, 0), "# edited\n")
    tax = project_dir / "src" / "tax.py"
    tax.write_text(TAX)
    client.protocol.notify("ds4/toolExecuted", {"tool": "write", "paths": [str(tax)]})
    (tax_hit,) = hits_in(await retrieve_project(client, "compute_sales_tax"), "src/tax.py")
    assert tax_hit["modified"] is True  # untracked

    await execute(client, "ds4.rebuildIndex")
    status = await execute(client, "ds4.projectStatus")
    assert status["status"] == "ready" and status["git"]["dirty"] is True
    assert status["git"]["head"] is not None

    await project_servers.stop(client)
    assert not marker.exists(), marker.read_text()


async def test_trust_granted_later_never_runs_the_git_configuration_a_git_file_points_to(
    project_servers: Servers, project_dir: Path, tmp_path: Path
) -> None:
    """`.git` is a file (`gitdir: ...`) pointing at the trapped repository; trust arrives by
    didChangeConfiguration; indexing starts and the marker never appears."""
    marker = tmp_path / "PWNED"
    make_trapped_repository(project_dir, marker, layout="gitfile")
    project = await start_project_client(project_servers, trusted=False)
    client = project.lsp
    assert (await retrieve_project(client, "compute_invoice_total"))["project"] == []

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"ds4": {"trusted": True}})
    )
    update = await project.wait_index(lambda u: u["reason"] == "trust")
    assert update["status"] == "ready"
    (hit,) = hits_in(await retrieve_project(client, "compute_invoice_total"), "src/billing.py")
    assert hit["modified"] is True
    status = await execute(client, "ds4.projectStatus")
    assert status["git"]["dirty"] is True

    await project_servers.stop(client)
    assert not marker.exists(), marker.read_text()


def test_ds4_retrieve_with_trust_never_runs_the_git_configuration(
    project_dir: Path, tmp_path: Path, database_path: Path
) -> None:
    """`ds4 retrieve --workspace DIR --trust` (a real subprocess) indexes the trapped
    repository and finds the modified file; the marker never appears."""
    marker = tmp_path / "PWNED"
    make_trapped_repository(project_dir, marker)
    database_path.parent.mkdir(parents=True, exist_ok=True)
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "ds4_core.cli",
            "retrieve",
            "--scope",
            "project",
            "--workspace",
            str(project_dir),
            "--trust",
            "--json",
            "compute_invoice_total",
        ],
        capture_output=True,
        env={**os.environ, "DS4_DB": str(database_path)},
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    assert not marker.exists(), marker.read_text()
    result = json.loads(completed.stdout)
    (hit,) = hits_in(result, "src/billing.py")
    assert hit["modified"] is True
