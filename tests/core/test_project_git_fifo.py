"""A FIFO (or socket, or device) planted in a trusted folder cannot make discovery wait: Git
opens its repository and ignore files with a blocking `open`, so discovery checks them first
and lists the folder with the walk, which never opens a FIFO; and a Git command that timed
out once is not run again for that root until the repository's index or HEAD changes.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from git_repos import git, isolate_git

import ds4_core.project.discovery as discovery_module
import ds4_core.project.git as git_module
from ds4_core.project.discovery import Discovery, discover_project


@pytest.fixture(autouse=True)
def isolated_git(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private HOME; Git reads no system or global configuration; commits need no setup."""
    getattr(discovery_module, "_TIMED_OUT", {}).clear()
    return isolate_git(tmp_path_factory.mktemp("home"), monkeypatch)


@pytest.fixture
def git_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every Git command discovery runs, recorded before it runs."""
    calls: list[tuple[str, ...]] = []
    real = discovery_module.run_git

    def recording(root: Path, *args: str) -> bytes:
        calls.append(args)
        return real(root, *args)

    monkeypatch.setattr(discovery_module, "run_git", recording)
    return calls


def release(fifo: Path) -> None:
    """Let a reader blocked on `fifo` go (it reads end of file)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waits


def discover_in_thread(root: Path, fifo: Path) -> Discovery | None:
    """Run discovery in a thread; give it up to 60 s (Git is given 600 s), then release the
    FIFO so that a blocked Git ends, and return the result (None when it did not finish)."""
    result: list[Discovery] = []
    worker = threading.Thread(target=lambda: result.append(discover_project(root)), daemon=True)
    worker.start()
    worker.join(60)
    finished = not worker.is_alive()
    while worker.is_alive():
        release(fifo)
        worker.join(1)
    return result[0] if finished else None


@pytest.mark.parametrize("where", [".gitignore", "deep/er/.gitignore", ".git/HEAD", ".git"])
def test_a_fifo_git_would_open_never_stalls_discovery(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    git_calls: list[tuple[str, ...]],
    where: str,
) -> None:
    """A FIFO as the top `.gitignore`, one in a subdirectory, as `.git/HEAD` or as `.git`:
    Git is never run (it would block until its timeout), the walk lists the files without
    opening the FIFO, and a warning names the file."""
    monkeypatch.setattr(git_module, "GIT_TIMEOUT_S", 600.0)
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.py").write_text("def tapir(): pass\n")
    (root / "deep" / "er").mkdir(parents=True)
    (root / "deep" / "er" / "b.py").write_text("x = 1\n")
    fifo = root / where
    if where == ".git":
        subprocess.run(["rm", "-rf", str(fifo)], check=True)
    elif fifo.exists():
        fifo.unlink()
    os.mkfifo(fifo)

    discovery = discover_in_thread(root, fifo)

    assert discovery is not None, "discovery waited on the FIFO"
    assert git_calls == []
    assert {f.rel_path for f in discovery.files} == {"a.py", "deep/er/b.py"}
    assert discovery.git is None
    assert any(
        str(fifo) in warning and "not a regular file" in warning for warning in discovery.warnings
    )


def test_after_a_git_timeout_later_syncs_use_the_walk_until_the_index_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, git_calls: list[tuple[str, ...]]
) -> None:
    """A Git command that times out (here: a FIFO the pre-check does not reach) is not run
    again at the next discovery of the root, which says why; once the repository's index
    changes, Git is tried again."""
    monkeypatch.setattr(git_module, "GIT_TIMEOUT_S", 1.0)
    monkeypatch.setattr(discovery_module, "MAX_PRECHECK_DIRECTORIES", 0, raising=False)
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "a.py").write_text("def tapir(): pass\n")
    fifo = root / "sub" / ".gitignore"
    os.mkfifo(fifo)

    first = discover_project(root)
    assert first.git is None
    assert any("timed out" in warning for warning in first.warnings)
    assert git_calls

    git_calls.clear()
    second = discover_project(root)
    assert git_calls == []
    assert [f.rel_path for f in second.files] == ["a.py"]
    assert any("timed out in" in w and "earlier sync" in w for w in second.warnings)

    fifo.unlink()
    git(root, "add", "a.py")
    third = discover_project(root)
    assert git_calls
    assert third.git is not None
    assert [f.rel_path for f in third.files] == ["a.py"]


def test_the_reported_sync_duration_includes_discovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`durationMs` of a full sync covers discovery (a slow Git shows): on a clock that only
    discovery advances, by 7 s, the sync reports at least 7,000 ms."""
    from ds4_core.config import Config
    from ds4_core.project import workspace as workspace_module
    from ds4_core.project.workspace import ProjectWorkspace
    from ds4_core.store import open_store

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.py").write_text("def tapir(): pass\n")
    clock = [1000.0]
    monkeypatch.setattr(workspace_module.time, "perf_counter", lambda: clock[0])
    real_discover = workspace_module.discover_project

    def slow_discovery(*args: object, **kwargs: object) -> Discovery:
        clock[0] += 7.0
        return real_discover(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(workspace_module, "discover_project", slow_discovery)
    with open_store(tmp_path / "db" / "context.db") as store:
        workspace = ProjectWorkspace(lambda: store, Config)
        workspace.set_workspace(root, trusted=True)
        result = workspace.sync().to_wire()
    assert result["status"] == "ready"
    assert result["durationMs"] >= 7000
