"""Discovery reads a repository through Git without ever running a program its configuration
names (fsmonitor, filters, hooks, pagers, SSH, helpers, aliases, includes), and still reports
what `git status` would: the oracle for "changed" is real `git status` on the same tree.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from git_repos import git, isolate_git
from hostile_git import BILLING_SAME_SIZE, make_trapped_repository
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ds4_core.project.git as git_module
from ds4_core.project.discovery import discover_project
from ds4_core.project.git import blob_id


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME; Git reads no system or global configuration; commits need no setup."""
    return isolate_git(tmp_path_factory.mktemp("home"), monkeypatch)


@pytest.mark.parametrize("layout", ["dir", "gitfile"])
def test_repository_configuration_never_runs_a_program(tmp_path: Path, layout: str) -> None:
    """Every trap of `make_trapped_repository` (armed: plain `git status` fires it) stays
    silent, and the listing is still Git's: tracked and untracked files, the same-size edit
    of a tracked file reported as changed, `.git` as a file pointing elsewhere included."""
    root = tmp_path / "project"
    root.mkdir()
    marker = tmp_path / "PWNED"
    make_trapped_repository(root, marker, layout="gitfile" if layout == "gitfile" else "dir")

    discovery = discover_project(root)
    discover_project(root / "src")  # a root below the repository's top, too

    assert not marker.exists(), marker.read_text()
    assert discovery.warnings == []
    assert discovery.git is not None and discovery.git.head is not None
    assert discovery.git.dirty
    assert discovery.git.changed_paths == ("notes.py", "src/billing.py")
    flags = {file.rel_path: (file.tracked, file.modified) for file in discovery.files}
    assert flags == {
        ".gitattributes": (True, False),
        "README.md": (True, False),
        "notes.py": (False, True),
        "src/billing.py": (True, True),
    }
    assert (root / "src" / "billing.py").read_text() == BILLING_SAME_SIZE


def test_a_partial_clone_never_fetches_a_missing_tree(tmp_path: Path) -> None:
    """A promisor remote whose `core.sshCommand` writes the marker: reading HEAD's tree when
    an object is missing would run it (plain `git ls-tree` does); discovery does not, and
    still lists the files with a warning that staged changes are not shown."""
    marker = tmp_path / "PWNED"
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.py").write_text("x = 1\n")
    (root / "b.py").write_text("y = 2\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    tree = git(root, "rev-parse", "HEAD:sub").strip()
    (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    for key, value in {
        "core.repositoryFormatVersion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.url": "ssh://git.invalid/project.git",
        "remote.origin.promisor": "true",
        "core.sshCommand": f"echo ssh >> '{marker}'; exit 1",
    }.items():
        git(root, "config", key, value)
    subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "HEAD"], capture_output=True)
    assert marker.exists(), "the trap is not armed"
    marker.unlink()

    discovery = discover_project(root)

    assert not marker.exists(), marker.read_text()
    assert {file.rel_path for file in discovery.files} == {"b.py", "sub/a.py"}
    assert discovery.git is not None and discovery.git.changed_paths == ()
    assert any("staged changes not shown" in warning for warning in discovery.warnings)


def test_a_partial_clone_never_fetches_even_where_git_ignores_no_lazy_fetch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Gits before 2.44 ignore GIT_NO_LAZY_FETCH, and a repository's
    `protocol.ext.allow=always` beats `-c protocol.allow=never`: an `ext::` promisor remote
    would then run its command when a missing tree is read. Discovery still runs nothing."""
    marker = tmp_path / "PWNED"
    script = tmp_path / "remote.sh"
    script.write_text(f"#!/bin/sh\necho ext >> '{marker}'\nexit 1\n")
    script.chmod(0o755)
    root = tmp_path / "project"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "a.py").write_text("x = 1\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    tree = git(root, "rev-parse", "HEAD:sub").strip()
    (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    for key, value in {
        "core.repositoryFormatVersion": "1",
        "extensions.partialClone": "origin",
        "remote.origin.url": f"ext::{script}",
        "remote.origin.promisor": "true",
        "protocol.ext.allow": "always",
    }.items():
        git(root, "config", key, value)
    subprocess.run(
        ["git", "-c", "protocol.allow=never", "-C", str(root), "ls-tree", "-r", "HEAD"],
        capture_output=True,
    )
    assert marker.exists(), "the trap is not armed"
    marker.unlink()
    real_run = subprocess.run

    def run_as_old_git(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in kwargs.pop("env").items() if k != "GIT_NO_LAZY_FETCH"}
        return real_run(command, env=env, **kwargs)

    monkeypatch.setattr(git_module.subprocess, "run", run_as_old_git)

    discovery = discover_project(root)

    assert not marker.exists(), marker.read_text()
    assert {file.rel_path for file in discovery.files} == {"sub/a.py"}


def test_a_bare_repository_planted_as_the_folder_is_never_used(tmp_path: Path) -> None:
    """The folder itself holds a bare repository's files whose config makes the folder its
    work tree and sets `core.fsmonitor` (plain `git ls-files` runs it); discovery refuses the
    implicit bare repository (`safe.bareRepository=explicit`) and walks the folder."""
    marker = tmp_path / "PWNED"
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "--bare", ".")
    git(root, "config", "core.bare", "false")
    git(root, "config", "core.worktree", str(root))
    git(root, "config", "core.fsmonitor", f"echo planted >> '{marker}'; exit 1")
    (root / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True)
    assert marker.exists(), "the trap is not armed"
    marker.unlink()

    discovery = discover_project(root)

    assert not marker.exists(), marker.read_text()
    assert discovery.git is None and "app.py" in {file.rel_path for file in discovery.files}


def test_blob_id_is_gits_object_id(tmp_path: Path) -> None:
    for data in (b"", b"hello\n", b"\x00\xff\r\n" * 1000):
        (tmp_path / "f").write_bytes(data)
        assert blob_id(data) == git(tmp_path, "hash-object", "--no-filters", "f").strip()


# --- "changed" agrees with git status ------------------------------------------------------

FILES = ("a.py", "b.txt", "dir/c.py", "dir/deep/d.md", "e.py")
ACTIONS = (
    "keep",
    "edit",  # new content, new size
    "edit-same-size",  # new content, same size (Git must compare content)
    "touch",  # same content, new mtime (stat data differs, content does not)
    "crlf",  # CRLF line endings (another size: changed, even with core.autocrlf=input)
    "delete",  # removed from the working tree
    "stage-edit",  # edited and staged
    "unstage",  # `git rm --cached`: staged deletion, file now untracked
    "skip-worktree",  # edited, but marked skip-worktree: Git does not look
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions=st.lists(st.sampled_from(ACTIONS), min_size=len(FILES), max_size=len(FILES)),
    new_files=st.lists(st.sampled_from(["n1.py", "dir/n2.py", "dir/new/n3.py"]), unique=True),
    autocrlf=st.booleans(),
)
def test_changed_paths_agree_with_git_status(
    actions: list[str], new_files: list[str], autocrlf: bool
) -> None:
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp).resolve()
        for number, rel_path in enumerate(FILES):
            path = root / rel_path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"line one %d\nline two\n" % number)
        git(root, "init", "-q")
        if autocrlf:
            git(root, "config", "core.autocrlf", "input")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "init")
        for rel_path, action in zip(FILES, actions, strict=True):
            path = root / rel_path
            data = path.read_bytes()
            if action == "edit":
                path.write_bytes(data + b"more\n")
            elif action == "edit-same-size":
                path.write_bytes(data.replace(b"one", b"ONE"))
            elif action == "touch":
                path.write_bytes(data)
            elif action == "crlf":
                path.write_bytes(data.replace(b"\n", b"\r\n"))
            elif action == "delete":
                path.unlink()
            elif action == "stage-edit":
                path.write_bytes(data + b"staged\n")
                git(root, "add", rel_path)
            elif action == "unstage":
                git(root, "rm", "-q", "--cached", rel_path)
            elif action == "skip-worktree":
                git(root, "update-index", "--skip-worktree", rel_path)
                path.write_bytes(data + b"hidden\n")
        for rel_path in new_files:
            (root / rel_path).parent.mkdir(parents=True, exist_ok=True)
            (root / rel_path).write_text("new\n")

        status = git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all")
        expected = {record[3:] for record in status.split("\0") if record}
        discovery = discover_project(root)
        assert discovery.git is not None
        assert set(discovery.git.changed_paths) == expected
        assert discovery.git.dirty == bool(expected)
