"""A booby-trapped Git repository for the "trusted means read, never run" tests.

Every place a repository's configuration can name a program (fsmonitor, filters, textconv,
external diff, pagers, editors, SSH, askpass, credential helpers, GPG, aliases, hooks in
`core.hooksPath` and in the hooks directory, an `include.path` / `includeIf` file) points
at a command that appends a word to a marker file. Nothing that reads the repository may
ever make the marker appear. `make_trapped_repository` checks that the trap is armed: plain
`git status` must write the marker (it runs the fsmonitor and the clean filter).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Literal

BILLING = "def compute_invoice_total(lines):\n    return sum(line.amount for line in lines)\n"
BILLING_SAME_SIZE = (
    "def compute_invoice_total(items):\n    return sum(line.amount for line in items)\n"
)
"""The tracked file's new text: different bytes, same size (Git must look at the content)."""

HOOK_NAMES = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-receive", "update", "proc-receive", "post-receive",
    "post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
    "post-rewrite", "sendemail-validate", "fsmonitor-watchman", "p4-changelist",
    "p4-prepare-changelist", "p4-post-changelist", "p4-pre-submit", "post-index-change",
)  # fmt: skip


def _setup_git(root: Path, *args: str) -> None:
    """Git for building the fixture, with every program hook of the repository disabled."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    subprocess.run(
        ["git", "-c", f"core.hooksPath={os.devnull}", "-C", str(root), *args],
        check=True,
        env=env,
        capture_output=True,
    )


def _trap_script(path: Path, word: str, marker: Path) -> Path:
    path.write_text(f"#!/bin/sh\necho '{word}' >> '{marker}'\ncat\n")
    path.chmod(0o755)
    return path


def make_trapped_repository(
    root: Path, marker: Path, *, layout: Literal["dir", "gitfile"] = "dir"
) -> Path:
    """Make `root` a committed repository whose configuration tries every way to run a
    program; then change `src/billing.py` (same size) and add an untracked `notes.py`.

    With `layout="gitfile"`, `root/.git` is a file (`gitdir: ...`) pointing at a repository
    elsewhere, whose configuration holds the traps. Returns the repository directory.
    """
    traps = root.parent / f"{root.name}-traps"
    traps.mkdir()
    (root / "src").mkdir(parents=True, exist_ok=True)
    (root / "src" / "billing.py").write_text(BILLING)
    (root / "README.md").write_text("# Billing\n\nInvoices and totals.\n")
    (root / ".gitattributes").write_text("* filter=trap diff=trap\n")
    if layout == "gitfile":
        git_dir = root.parent / f"{root.name}-elsewhere.git"
        _setup_git(root, "init", "-q", f"--separate-git-dir={git_dir}")
        assert (root / ".git").is_file()
    else:
        git_dir = root / ".git"
        _setup_git(root, "init", "-q")
    _setup_git(root, "add", "-A")
    _setup_git(root, "commit", "-q", "-m", "init")

    def run(word: str) -> str:
        return f"echo {word} >> '{marker}'; exit 1"

    def script(word: str) -> str:
        return str(_trap_script(traps / f"{word}.sh", word, marker))

    settings = {
        "core.fsmonitor": run("fsmonitor"),
        "core.pager": run("core.pager"),
        "pager.status": run("pager.status"),
        "pager.ls-files": run("pager.ls-files"),
        "core.editor": run("core.editor"),
        "sequence.editor": run("sequence.editor"),
        "core.sshCommand": run("core.sshCommand"),
        "core.askPass": script("core.askPass"),
        "core.gitProxy": script("core.gitProxy"),
        "core.alternateRefsCommand": run("core.alternateRefsCommand"),
        "credential.helper": f"!{run('credential.helper')}",
        "diff.external": script("diff.external"),
        "diff.trap.textconv": f"echo textconv >> '{marker}'; cat",
        "filter.trap.clean": f"echo filter.clean >> '{marker}'; cat",
        "filter.trap.smudge": f"echo filter.smudge >> '{marker}'; cat",
        "gpg.program": script("gpg.program"),
        "log.showSignature": "true",
        "alias.status": f"!{run('alias')}",
        "alias.ls-files": f"!{run('alias')}",
        "alias.ls-tree": f"!{run('alias')}",
        "remote.origin.url": "ssh://git.invalid/project.git",
        "include.path": str(traps / "included.config"),
        "includeIf.gitdir:/.path": str(traps / "included.config"),
    }
    (traps / "included.config").write_text(
        f'[core]\n\tfsmonitor = "{run("included.fsmonitor")}"\n'
        f'\tuntrackedCache = true\n[uploadpack]\n\tpackObjectsHook = "{run("packObjectsHook")}"\n'
    )
    hooks = traps / "hooks"
    hooks.mkdir()
    for directory in (hooks, git_dir / "hooks"):
        directory.mkdir(exist_ok=True)
        for name in HOOK_NAMES:
            _trap_script(directory / name, f"hook {name}", marker)
    if layout == "dir":
        settings["core.hooksPath"] = str(hooks)
    config = git_dir / "config"
    for key, value in settings.items():
        subprocess.run(["git", "config", "--file", str(config), key, value], check=True)

    (root / "src" / "billing.py").write_text(BILLING_SAME_SIZE)
    (root / "notes.py").write_text("# scratch notes\n")
    _assert_armed(root, marker)
    return git_dir


def _assert_armed(root: Path, marker: Path) -> None:
    """Plain `git status` in the trapped repository must run its programs (else the tests
    that look for the marker could not fail); the marker is removed afterwards."""
    subprocess.run(["git", "-C", str(root), "status"], capture_output=True, check=False)
    written = marker.read_text() if marker.exists() else ""
    assert "fsmonitor" in written and "filter.clean" in written, written
    marker.unlink()
