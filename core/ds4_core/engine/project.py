"""`engine.project`: the workspace folders and their project knowledge, as the engine's callers
see them (docs/project-knowledge.md).

`ProjectService` is `ContextEngine.project`; the CLI and the LSP server call it directly:

    engine.project.set_root(root, trusted)        a workspace of one folder (or none)
    engine.project.set_folders(folders, trusted)  the LSP `workspaceFolders`
    engine.project.sync(only=..., force=...)      sync the project index
    engine.project.set_live_text(path, text)      an open buffer's text (None when it closes)
    engine.project.note_tool_executed(tool)       an agent tool ran: is a sync due?
    engine.project.mark_changed()                 files changed outside the editor
    engine.project.status()                       the typed project status (`ds4.projectStatus`)
    engine.project.stale_snippets(path, text)     windows a plan sent that no longer match

It owns the engine's `ProjectFolders` (created on the first `set_folders`). The other services
read the folders through `workspace` (None until a workspace is set). Untrusted workspaces are
never enumerated, read or queried.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..json_bounds import echo
from ..requests import RequestError
from ..results import GitState, ProjectStatus, ProjectSyncResult, RefusedFolder, StaleSnippet
from .context import EngineContext, ProgressCallback
from .convert import from_record

if TYPE_CHECKING:
    from ..project.folders import ProjectFolders

log = logging.getLogger("ds4_core.engine")


class ProjectService:
    """The workspace folders of one engine (see the module docstring). Thread-safe."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._workspace: ProjectFolders | None = None
        self._lock = threading.Lock()

    @property
    def workspace(self) -> ProjectFolders | None:
        """The workspace folders, or None before a workspace was set."""
        return self._workspace

    def active(self) -> bool:
        """Whether project knowledge is in use: a workspace, trusted, enabled."""
        workspace = self._workspace
        return workspace is not None and workspace.active()

    def status_word(self) -> str:
        """`no-workspace` before a workspace was set, else `ProjectFolders.status_word`."""
        workspace = self._workspace
        return workspace.status_word() if workspace is not None else "no-workspace"

    def set_root(self, root: str | os.PathLike[str] | None, trusted: bool) -> ProjectStatus:
        """Set the workspace root and whether it is trusted (`ds4 ... --workspace`): a
        workspace of one folder, `set_folders([(None, root)], trusted)`, or of none (None).
        Returns `status()`.

        Raises:
            RequestError: `root` is the filesystem root, the home directory itself, or not a
                directory (field `workspace`).
        """
        return self.set_folders([] if root is None else [(None, root)], trusted)

    def set_folders(
        self, folders: Sequence[tuple[str | None, str | os.PathLike[str]]], trusted: bool
    ) -> ProjectStatus:
        """Set the workspace folders, `(name or None, root)` in the client's order (LSP
        `workspaceFolders`), and whether they are trusted. Each folder is its own project
        (root, discovery, Git state, index); a file belongs to the deepest folder containing
        it.

        Returns `status()`, plus `refused` (each with its `error`) for folders left out. A
        newly trusted or changed folder makes its full sync due: call `sync()` (the
        LSP server does it in the background with progress). Root paths may be relative or start
        with `~`; they are resolved.

        Raises:
            RequestError: every folder given is the filesystem root, the home directory
                itself, or not a directory (field `workspace`; the first folder's problem).
        """
        accepted: list[tuple[str | None, Path]] = []
        refused: list[RequestError] = []
        for name, root in folders:
            resolved = Path(root).expanduser().resolve()
            if not resolved.is_dir():
                refused.append(
                    RequestError(f"workspace: {echo(str(root))} is not a directory", "workspace")
                )
            elif resolved == Path(resolved.anchor) or resolved == Path.home().resolve():
                refused.append(
                    RequestError(
                        f"workspace: refusing to index {echo(str(resolved))} (the filesystem root "
                        "or your home directory); open a project folder instead",
                        "workspace",
                    )
                )
            else:
                accepted.append((name, resolved))
        if refused and not accepted:
            raise refused[0]
        with self._lock:
            if self._workspace is None:
                from ..project.folders import ProjectFolders

                self._workspace = ProjectFolders(self._context.store, self._context.config)
            workspace = self._workspace
        workspace.set_folders(accepted, trusted)
        status = self.status()
        if refused:
            status = replace(status, refused=tuple(RefusedFolder(str(error)) for error in refused))
        return status

    def sync(
        self,
        *,
        only: Sequence[str] | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ProjectSyncResult:
        """Sync the project index (all files, or `only` those paths, absolute or relative to
        the workspace; `force` re-reads unchanged files) and return what it did
        (`ProjectFolders.sync`: `status`, `project_path`, counts summed over the folders,
        `duration_ms` in ms, one `FolderSync` per folder). With status `untrusted` /
        `no-workspace` / `disabled` nothing is read.
        `progress(done, 100, message)` is one rising percentage. A failed sync (a bad root, a
        locked or damaged database) is reported as status `error` with `error` (and `locked:
        true` for a lock), not raised."""
        if self._workspace is None:
            return ProjectSyncResult(status="no-workspace", project_path=None)
        return self._workspace.sync(only=only, force=force, progress=progress)

    def set_live_text(self, path: str, text: str | None) -> str | None:
        """Record an open editor buffer's text (None when it closes); returns its path relative
        to the workspace, or None when it is outside it (then it is ignored)."""
        if self._workspace is None:
            return None
        return self._workspace.set_live_text(path, text)

    def note_tool_executed(self, tool: str, paths: Sequence[str] = ()) -> bool:
        """An agent tool ran: True (a project sync is due before the next plan) unless the tool
        is read-only (`read`, `grep`, `find`, `ls`). `paths` are accepted for the future
        and only counted in the log."""
        if self._workspace is None:
            return False
        due = self._workspace.note_tool_executed(tool)
        log.info("tool executed: read_only=%s paths=%d", not due, len(paths))
        return due

    def mark_changed(self) -> None:
        """Files changed outside the editor (a watched-file event): sync before the next use."""
        if self._workspace is not None:
            self._workspace.mark_sync_due()

    def status(self) -> ProjectStatus:
        """The project status: status word, first folder's path, trust; with an active
        workspace the counts summed over the folders, the first folder's `git` and
        `indexed_at`, each folder's status (`ProjectFolders.folder_statuses`), `commits` (the
        Git history index, summed; None when no folder has one), and `error` (what went
        wrong, e.g. a locked database) while the status is `error`."""
        workspace = self._workspace
        if workspace is None:
            return ProjectStatus("no-workspace", None, trusted=False)
        status = workspace.status_word()
        project_path = str(workspace.root) if workspace.root else None
        if status in ("untrusted", "no-workspace", "disabled"):
            return ProjectStatus(status, project_path, trusted=workspace.trusted)
        folders = workspace.folder_statuses()
        first = folders[0] if folders else None
        return ProjectStatus(
            status,
            project_path,
            trusted=workspace.trusted,
            error=workspace.problem if status == "error" else None,
            files=sum(folder.files for folder in folders),
            snippets=sum(folder.snippets for folder in folders),
            stale_snippets=sum(folder.stale_snippets for folder in folders),
            git=first.git if first else GitState(None, None, None),
            indexed_at=first.indexed_at if first else None,
            folders=folders,
            commits=(
                sum(folder.commits or 0 for folder in folders)
                if any(folder.commits is not None for folder in folders)
                else None
            ),
        )

    def stale_snippets(self, path: str, live_text: str | None = None) -> list[StaleSnippet]:
        """Windows of `path` a plan sent (stored, or remembered in memory) whose lines no
        longer match its live text (1-based lines; `change_start_line`..`change_end_line` the
        changed lines of the window `start_line`..`end_line`)."""
        if self._workspace is None:
            return []
        return [
            from_record(StaleSnippet, record)
            for record in self._workspace.stale_snippets(path, live_text)
        ]
