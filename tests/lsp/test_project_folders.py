"""`workspace/didChangeWorkspaceFolders`: the project root follows the client's folders."""

from __future__ import annotations

from pathlib import Path

from lsp_helpers import Servers
from lsprotocol import types
from project_helpers import hits_in, retrieve_project, start_project_client


async def test_changing_workspace_folders_moves_the_project_root(
    project_servers: Servers, project_dir: Path, tmp_path: Path
) -> None:
    """Trusted on folder A, the client replaces A by B: B is indexed (a `ds4/indexUpdated`
    of reason `workspace`) and project retrieval finds B's file, no longer A's."""
    (project_dir / "alpha.py").write_text(
        "def reconcile_ledger_entries(entries):\n    return sorted(entries)\n"
    )
    other = tmp_path / "other"
    other.mkdir()
    (other / "beta.py").write_text(
        "def reconcile_ledger_entries_again(entries):\n    return list(entries)\n"
    )
    project = await start_project_client(project_servers, trusted=True)
    client = project.lsp
    first = await project.wait_index(lambda u: u["reason"] == "initial")
    assert first["status"] == "ready" and first["filesIndexed"] == 1
    before = await retrieve_project(client, "reconcile_ledger_entries")
    assert hits_in(before, "alpha.py") and not hits_in(before, "beta.py")

    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(
                added=[types.WorkspaceFolder(uri=other.as_uri(), name="other")],
                removed=[types.WorkspaceFolder(uri=project_dir.as_uri(), name="ws")],
            )
        )
    )
    moved = await project.wait_index(lambda u: u["reason"] == "workspace")
    assert moved["status"] == "ready"
    assert moved["projectPath"] == str(other.resolve()) and moved["filesIndexed"] == 1

    after = await retrieve_project(client, "reconcile_ledger_entries")
    assert hits_in(after, "beta.py") and not hits_in(after, "alpha.py")
    assert after["projectStatus"] == "ok"
