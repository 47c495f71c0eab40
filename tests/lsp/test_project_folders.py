"""Workspace folders: every folder is its own project (multi-root), and
`workspace/didChangeWorkspaceFolders` adds and removes them."""

from __future__ import annotations

import os
from pathlib import Path

from lsp_helpers import Servers, execute
from lsprotocol import types
from project_helpers import (
    ProjectClient,
    change_document,
    git_commit_all,
    hits_in,
    open_document,
    retrieve_project,
    start_project_client,
)


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


def folder(path: Path, name: str) -> types.WorkspaceFolder:
    return types.WorkspaceFolder(uri=path.as_uri(), name=name)


async def start_with_folders(
    servers: Servers, folders: list[types.WorkspaceFolder]
) -> ProjectClient:
    """A trusted server whose workspace is `folders`."""
    recorder = ProjectClient()
    recorder.client = await servers.start(
        initialization_options={"trusted": True},
        client_features=recorder.features(),
        workspace_folders=folders,
    )
    return recorder


async def test_every_workspace_folder_is_its_own_indexed_project(
    project_servers: Servers, tmp_path: Path, client_name: str
) -> None:
    """Two folders, each with `src/ledger.py` (the same relative path): both are indexed,
    each with its own discovery (alpha's `.gitignore` hides a file; beta has no git) and git
    state; a hit names its folder and its path is relative to it; an edit in the second
    folder is found; `ds4.projectStatus` lists both; removing a folder drops its hits."""
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    for root, word in ((alpha, "apricot"), (beta, "bilberry")):
        (root / "src").mkdir(parents=True)
        (root / "src" / "ledger.py").write_text(
            f"def reconcile_ledger_{word}(entries):\n    return sorted(entries)\n"
        )
    (alpha / ".gitignore").write_text("hidden.py\n")
    (alpha / "hidden.py").write_text("def reconcile_ledger_hidden():\n    pass\n")
    git_commit_all(alpha)
    (beta / "hidden.py").write_text("def reconcile_ledger_visible():\n    pass\n")
    project = await start_with_folders(
        project_servers, [folder(alpha, "alpha"), folder(beta, "beta")]
    )
    client = project.lsp
    initial = await project.wait_index(lambda u: u["reason"] == "initial")
    assert initial["status"] == "ready" and initial["filesIndexed"] == 4
    assert [(f["name"], f["filesIndexed"]) for f in initial["folders"]] == [
        ("alpha", 2),  # .gitignore and src/ledger.py
        ("beta", 2),  # hidden.py and src/ledger.py
    ]

    found = await retrieve_project(client, "reconcile_ledger")
    where = {(h["folder"], h["path"]) for h in found["project"]}
    assert {("alpha", "src/ledger.py"), ("beta", "src/ledger.py"), ("beta", "hidden.py")} <= where
    assert ("alpha", "hidden.py") not in where
    for hit in found["project"]:
        expected = alpha if hit["folder"] == "alpha" else beta
        assert hit["folderPath"] == str(expected.resolve())

    uri = open_document(client, beta / "src" / "ledger.py", "")
    change_document(client, uri, 2, (0, 0), (0, 0), "CARAMBOLA_MARKER = 1\n")
    edit = await project.wait_index(lambda u: u["reason"] == "edit")
    assert edit["status"] == "ready" and edit["only"] == ["src/ledger.py"]
    assert [(f["name"], f["only"]) for f in edit["folders"]] == [("beta", ["src/ledger.py"])]
    edited = await retrieve_project(client, "CARAMBOLA_MARKER")
    assert [(h["folder"], h["path"]) for h in edited["project"]] == [("beta", "src/ledger.py")]

    status = await execute(client, "ds4.projectStatus")
    assert status["files"] == 4
    by_name = {f["name"]: f for f in status["folders"]}
    assert by_name.keys() == {"alpha", "beta"}
    assert by_name["alpha"]["files"] == 2 and by_name["alpha"]["git"]["head"]
    assert by_name["beta"]["files"] == 2 and by_name["beta"]["git"]["head"] is None
    assert by_name["beta"]["projectPath"] == str(beta.resolve())

    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(added=[], removed=[folder(alpha, "alpha")])
        )
    )
    moved = await project.wait_index(lambda u: u["reason"] == "workspace")
    assert [f["name"] for f in moved["folders"]] == ["beta"]
    after = await retrieve_project(client, "reconcile_ledger")
    assert {h["folder"] for h in after["project"]} == {"beta"}


async def test_a_file_of_a_nested_folder_belongs_to_the_nested_folder(
    project_servers: Servers, tmp_path: Path
) -> None:
    """`outer` contains the folder `outer/inner`: inner's file is indexed once, by inner
    (the deepest folder wins), with its path relative to inner, and an edit to it is routed
    there too; a folder added later is indexed with reason `workspace`."""
    outer = tmp_path / "outer"
    inner = outer / "inner"
    inner.mkdir(parents=True)
    (outer / "top.py").write_text("def durian_top():\n    pass\n")
    (inner / "deep.py").write_text("def durian_deep():\n    pass\n")
    project = await start_with_folders(
        project_servers, [folder(outer, "outer"), folder(inner, "inner")]
    )
    client = project.lsp
    initial = await project.wait_index(lambda u: u["reason"] == "initial")
    found = await retrieve_project(client, "durian_top durian_deep")
    assert sorted((h.get("folder"), h["path"]) for h in found["project"]) == [
        ("inner", "deep.py"),
        ("outer", "top.py"),
    ]
    assert [(f["name"], f["filesIndexed"]) for f in initial["folders"]] == [
        ("outer", 1),
        ("inner", 1),
    ]

    uri = open_document(client, inner / "deep.py", "def durian_deep():\n    pass\n")
    change_document(client, uri, 2, (1, 4), (1, 8), "return 'elderberry_nested'")
    edit = await project.wait_index(lambda u: u["reason"] == "edit")
    assert [(f["name"], f["only"]) for f in edit["folders"]] == [("inner", ["deep.py"])]
    assert edit["only"] == ["deep.py"]
    hits = (await retrieve_project(client, "elderberry_nested"))["project"]
    assert [(h["folder"], h["path"]) for h in hits] == [("inner", "deep.py")]

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "more.py").write_text("def durian_extra():\n    pass\n")
    client.workspace_did_change_workspace_folders(
        types.DidChangeWorkspaceFoldersParams(
            event=types.WorkspaceFoldersChangeEvent(added=[folder(extra, "extra")], removed=[])
        )
    )
    added = await project.wait_index(lambda u: u["reason"] == "workspace")
    assert [f["name"] for f in added["folders"]] == ["outer", "inner", "extra"]
    assert added["filesIndexed"] == 1  # only the new folder's file is read
    found = await retrieve_project(client, "durian_extra")
    assert [(h["folder"], h["path"]) for h in found["project"]] == [("extra", "more.py")]


async def test_a_relative_tool_path_is_re_read_in_every_folder_that_has_it(
    project_servers: Servers, tmp_path: Path
) -> None:
    """Folders m1 and m2 both hold `src/app.py`. An agent rewrites m2's copy keeping its size
    and mtime, then reports `{"tool": "edit", "paths": ["src/app.py"]}`: the relative path is
    re-read in both folders, so m2's new text is indexed and found (a stat check alone would
    call it unchanged)."""
    old = 2_000_000_000 * 10**9  # 2033-05-18: far outside the racy-clean window
    roots = [tmp_path / "m1", tmp_path / "m2"]
    for root, word in zip(roots, ("apple_one", "apple_two"), strict=True):
        (root / "src").mkdir(parents=True)
        (root / "src" / "app.py").write_text(f"def app():\n    return '{word}'\n")
        os.utime(root / "src" / "app.py", ns=(old, old))
    recorder = await start_with_folders(
        project_servers, [folder(roots[0], "m1"), folder(roots[1], "m2")]
    )
    client = recorder.lsp
    initial = await recorder.wait_index(lambda u: u["reason"] == "initial")
    assert initial["status"] == "ready" and initial["filesIndexed"] == 2

    target = roots[1] / "src" / "app.py"
    target.write_text("def app():\n    return 'zebra_two'\n")  # the same size
    os.utime(target, ns=(old, old))
    client.protocol.notify("ds4/toolExecuted", {"tool": "edit", "paths": ["src/app.py"]})
    synced = await recorder.wait_index(lambda u: u["reason"] == "tool" and u["only"] is not None)
    assert synced["status"] == "ready"
    assert [(f["name"], f["only"]) for f in synced["folders"]] == [
        ("m1", ["src/app.py"]),
        ("m2", ["src/app.py"]),
    ]
    found = await retrieve_project(client, "zebra_two")
    assert [(hit["folder"], hit["path"]) for hit in found["project"]] == [("m2", "src/app.py")]
