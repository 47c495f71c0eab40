"""Real Git repositories for tests: a Git that reads no user or system configuration, and a
runner for setting repositories up."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest


def isolate_git(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make `home` the private HOME: Git then reads no system or global configuration, and
    commits need no identity set up. Returns `home`."""
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "Test")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "test@example.invalid")
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name, raising=False)
    return home


def git(root: Path, *args: str) -> str:
    """Run `git -C root ARGS` (default branch `main`) and return its standard output.

    Raises:
        subprocess.CalledProcessError: Git failed.
    """
    completed = subprocess.run(
        ["git", "-C", str(root), "-c", "init.defaultBranch=main", *args],
        capture_output=True,
        check=True,
    )
    return completed.stdout.decode()


def commit_file(root: Path, path: str, text: str, message: str) -> str:
    """Write `text` to `root/path` (directories made), commit everything with `message` and
    return the new HEAD's hash.

    Raises:
        subprocess.CalledProcessError: Git failed.
    """
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()
