"""`ProjectFolders`: the project knowledge of a workspace of one or more folders.

An LSP client may open several workspace folders at once (LSP 3.17 `workspaceFolders`). Each
folder is its own project: its own root, discovery, ignore rules, Git state and rows in the
project tables (which are keyed by the canonical root, `project_path`), held by one
`ProjectWorkspace`. This module routes to them and merges what they answer:

* A path belongs to the deepest folder that contains it (a folder nested in another owns its
  files; the outer folder leaves them out). A relative path (e.g. one an agent's tool
  reported) is synced in every folder that holds a file at that path (`owners`), or in every
  folder when none does (it may have been deleted); elsewhere (live text, stale snippets) it
  is taken as relative to the first folder, as with a single folder.
* A search asks every folder and merges the hits by score within the one result and token
  budget. With several folders each hit names its folder (`ProjectHit.folder`, also quoted to
  the model) and its path stays relative to that folder.
* A sync syncs every folder (a full sync) or the folders the paths belong to (`only`), and
  reports the sum plus one `FolderSync` per folder (`ds4_core.results.ProjectSyncResult`).

With one folder everything is answered exactly as `ProjectWorkspace` answers, plus the
`folders` lists.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import Config
from ..results import FolderStatus, FolderSync, GitState, ProjectSyncResult
from ..retrieval.descriptor import TaskDescriptor
from ..retrieval.floor import MAX_BELOW_FLOOR
from ..store import Store
from .commit_hits import CommitHit, CommitRetrieval
from .filters import read_indexable
from .search import ProjectHit, ProjectRetrieval, ProjectStats, render_project_snippet
from .workspace import READ_ONLY_TOOLS, ProgressCallback, ProjectWorkspace, ValidatedSearch


@dataclass(frozen=True)
class Folder:
    """One workspace folder: its `name` (unique in the workspace) and its project."""

    name: str
    workspace: ProjectWorkspace

    @property
    def root(self) -> Path:
        assert self.workspace.root is not None
        return self.workspace.root


def folder_names(roots: Sequence[Path], names: Sequence[str | None]) -> list[str]:
    """A unique name for each folder: the client's name, else the folder's base name; a name
    taken by an earlier folder gets ` (2)`, ` (3)`, ... appended."""
    taken: set[str] = set()
    unique = []
    for root, name in zip(roots, names, strict=True):
        base = (name or "").strip() or root.name or str(root)
        candidate, number = base, 1
        while candidate in taken:
            number += 1
            candidate = f"{base} ({number})"
        taken.add(candidate)
        unique.append(candidate)
    return unique


class ProjectFolders:
    """Project knowledge over the workspace folders of one engine (module docstring).

    Thread-safe: the folder list is replaced as a whole; each `ProjectWorkspace` is itself
    thread-safe. The public methods mirror `ProjectWorkspace`'s.
    """

    def __init__(
        self, store_provider: Callable[[], Store], config_provider: Callable[[], Config]
    ) -> None:
        self._store = store_provider
        self._config = config_provider
        self._folders: tuple[Folder, ...] = ()
        self.trusted = False
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- folders

    def set_folders(self, folders: Sequence[tuple[str | None, Path]], trusted: bool) -> None:
        """Set the workspace folders, as `(name or None, root)` in the client's order, and the
        trust. Roots are canonicalised; a root given twice counts once. A folder kept from
        before keeps its state (live text, last discovery); a change of its nested folders or
        trust makes its full sync due."""
        roots: list[Path] = []
        names: list[str | None] = []
        for name, root in folders:
            canonical = Path(root).expanduser().resolve()
            if canonical not in roots:
                roots.append(canonical)
                names.append(name)
        with self._lock:
            old = {folder.root: folder.workspace for folder in self._folders}
            new = []
            for name, root in zip(folder_names(roots, names), roots, strict=True):
                workspace = old.pop(root, None) or ProjectWorkspace(self._store, self._config)
                nested = [
                    other.relative_to(root).as_posix()
                    for other in roots
                    if other != root and other.is_relative_to(root)
                ]
                workspace.set_workspace(root, trusted, nested)
                new.append(Folder(name, workspace))
            self._folders = tuple(new)
            self.trusted = bool(trusted)

    @property
    def folders(self) -> tuple[Folder, ...]:
        """The folders, in the client's order."""
        return self._folders

    @property
    def root(self) -> Path | None:
        """The first folder's canonical root (the `projectPath` of single-folder answers)."""
        folders = self._folders
        return folders[0].root if folders else None

    @property
    def problem(self) -> str | None:
        """The first folder's problem (`ProjectWorkspace.problem`), by folder when several."""
        folders = self._folders
        for folder in folders:
            if folder.workspace.problem:
                prefix = f"{folder.name}: " if len(folders) > 1 else ""
                return prefix + folder.workspace.problem
        return None

    def owner(self, path: str) -> Folder | None:
        """The folder `path` belongs to: the deepest one containing it (an absolute path), or
        the first folder (a relative path); None when no folder contains it."""
        folders = self._folders
        if not folders:
            return None
        if not Path(path).is_absolute():
            return folders[0]
        best: Folder | None = None
        for folder in folders:
            if folder.workspace.relative(path) is not None:
                if best is None or len(folder.root.parts) > len(best.root.parts):
                    best = folder
        return best

    def owners(self, path: str) -> list[Folder]:
        """The folders a sync of `path` concerns: for an absolute path its owner (`owner`);
        for a relative one, every folder with a file (or link) at that path, outside the
        folders nested in it, in the client's order; when no folder has one, every folder (a
        deleted file is looked for in each). Empty when an absolute path is in no folder."""
        folders = self._folders
        if Path(path).is_absolute():
            owner = self.owner(path)
            return [owner] if owner is not None else []
        holding = []
        for folder in folders:
            rel = folder.workspace.relative(path)
            if rel is None or any(rel.startswith(f"{n}/") for n in folder.workspace.nested):
                continue
            if os.path.lexists(folder.root / rel):
                holding.append(folder)
        return holding or list(folders)

    def _named(self, name: str | None) -> Folder | None:
        folders = self._folders
        if name is None:
            return folders[0] if folders else None
        return next((f for f in folders if f.name == name), None)

    # ----------------------------------------------------------------- state

    def status_word(self) -> str:
        """`disabled`, `no-workspace`, `untrusted`, `indexing`, `error` or `ready` (the first
        of `indexing`, `error` any folder is in)."""
        folders = self._folders
        if not folders:
            return "disabled" if not self._config().project.enabled else "no-workspace"
        words = [folder.workspace.status_word() for folder in folders]
        for word in ("disabled", "untrusted", "indexing", "error"):
            if word in words:
                return word
        return "ready"

    def active(self) -> bool:
        """True when project knowledge may be used: enabled, a folder, trusted."""
        return self.status_word() not in ("disabled", "no-workspace", "untrusted")

    def set_live_text(self, path: str, text: str | None) -> str | None:
        """Record (or forget) an open buffer's text in the folder it belongs to; returns its
        path relative to that folder, or None when no folder contains it."""
        folder = self.owner(path)
        return folder.workspace.set_live_text(path, text) if folder else None

    def live_text(self, path: str) -> str | None:
        """The open buffer's text of `path` (relative to the first folder, or absolute), or
        None."""
        folder = self.owner(path)
        if folder is None:
            return None
        rel = folder.workspace.relative(path)
        return folder.workspace.live_text(rel) if rel is not None else None

    def note_tool_executed(self, tool: str) -> bool:
        """Mark a sync due in every folder unless `tool` is read-only; returns whether it did."""
        for folder in self._folders:
            folder.workspace.note_tool_executed(tool)
        return tool.strip().lower() not in READ_ONLY_TOOLS

    def mark_sync_due(self) -> None:
        """Something outside the editor changed files: every folder syncs before its next use."""
        for folder in self._folders:
            folder.workspace.mark_sync_due()

    # ----------------------------------------------------------------- sync

    def sync(
        self,
        *,
        only: Sequence[str] | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ProjectSyncResult:
        """Sync every folder (or, with `only`, the folders those paths belong to, `owners`: a
        relative path in each folder that has it; paths in no folder are ignored), in order.
        Returns the first folder's result with the counts summed, one `FolderSync` per folder
        synced in `folders`, and status `error` when a folder failed (then `error` names it).
        A folder that finds the database locked ends the sync there (`locked`): the rest would
        wait on the same lock, and the caller retries the whole sync."""
        folders = self._folders
        if not folders:
            return ProjectSyncResult(status=self.status_word(), project_path=None)
        work: list[tuple[Folder, list[str] | None]] = []
        if only is None:
            work = [(folder, None) for folder in folders]
        else:
            groups: dict[str, list[str]] = {}
            for path in only:
                for owner in self.owners(path):
                    groups.setdefault(owner.name, []).append(path)
            work = [(f, groups[f.name]) for f in folders if f.name in groups]
            if not work:
                work = [(folders[0], list(only))]
        results: list[tuple[Folder, ProjectSyncResult, tuple[str, ...] | None]] = []
        for position, (folder, paths) in enumerate(work):
            share = _progress_share(progress, position, len(work))
            result = folder.workspace.sync(only=paths, force=force, progress=share)
            only = None if paths is None else tuple(_relative_to(folder, paths))
            results.append((folder, result, only))
            if result.locked:
                break
        return _combine(results, several=len(folders) > 1)

    def ensure_fresh(self) -> None:
        """Run the full sync of every folder that has one due."""
        for folder in self._folders:
            folder.workspace.ensure_fresh()

    # ----------------------------------------------------------------- search

    def search(
        self, descriptor: TaskDescriptor, *, max_results: int, max_tokens: int
    ) -> ValidatedSearch:
        """Live-validated hits of every folder, merged by score (ties: folder order) within
        `max_results` and `max_tokens` (`chars-v2` tokens); a window whose text a better hit
        already has is left out; the folders' below-floor candidates are merged by score (the
        best `MAX_BELOW_FLOOR`). With several folders each hit names its folder and dropped
        and re-indexed paths read `<folder>/<path>`. With one folder: that folder's answer.

        Raises:
            RuntimeError: there is no folder (callers check `active()` first).
            sqlite3.Error: from the project tables (`search_project`).
        """
        folders = self._folders
        if not folders:
            raise RuntimeError("project search without a workspace folder")  # callers check
        if len(folders) == 1:
            return folders[0].workspace.search(
                descriptor, max_results=max_results, max_tokens=max_tokens
            )
        found = [
            (
                folder,
                folder.workspace.search(
                    descriptor, max_results=max_results, max_tokens=max_tokens, folder=folder.name
                ),
            )
            for folder in folders
        ]
        ranked = sorted(
            (
                (hit, position)
                for position, (_folder, result) in enumerate(found)
                for hit in result.retrieval.hits
            ),
            key=lambda pair: (-pair[0].score, pair[1]),
        )
        hits: list[ProjectHit] = []
        seen: set[str] = set()
        used = duplicates = 0
        for hit, _position in ranked:
            if len(hits) >= max_results or used + hit.tokens > max_tokens:
                break
            if hit.text in seen:
                duplicates += 1
                continue
            seen.add(hit.text)
            used += hit.tokens
            hits.append(hit)
        retrievals = [result.retrieval for _folder, result in found]
        statuses = [r.status for r in retrievals]
        stats = ProjectStats(
            candidates=sum(r.stats.candidates for r in retrievals),
            files=sum(r.stats.files for r in retrievals),
            duplicates=sum(r.stats.duplicates for r in retrievals) + duplicates,
            overlapping=sum(r.stats.overlapping for r in retrievals),
            per_file_capped=sum(r.stats.per_file_capped for r in retrievals),
            concepts=max(r.stats.concepts for r in retrievals),
            latency_ms=sum(r.stats.latency_ms for r in retrievals),
        )
        retrieval = ProjectRetrieval(
            status="ok" if "ok" in statuses else statuses[0],
            hits=hits,
            stats=stats,
            warnings=[w for r in retrievals for w in r.warnings],
            git_head=retrievals[0].git_head,
            below_floor=tuple(
                sorted((b for r in retrievals for b in r.below_floor), key=lambda b: -b.score)[
                    :MAX_BELOW_FLOOR
                ]
            ),
        )
        return ValidatedSearch(
            retrieval=retrieval,
            dropped=[
                (f"{folder.name}/{path}", reason)
                for folder, result in found
                for path, reason in result.dropped
            ],
            reindexed=[
                f"{folder.name}/{path}" for folder, result in found for path in result.reindexed
            ],
            git_head=found[0][1].git_head,
            folder_heads={folder.name: result.git_head for folder, result in found},
        )

    def render(self, hit: ProjectHit, git_head: str | None) -> dict[str, Any]:
        """The quoted project-source message of `hit` (docs/reference.md §3.10)."""
        return render_project_snippet(hit, git_head)

    def search_commits(self, text: str, *, max_results: int, max_tokens: int) -> CommitRetrieval:
        """The commits of every folder's Git history that answer `text`, merged by score
        (ties: newer first, then folder order) within `max_results` and `max_tokens`
        (`chars-v2` tokens of the quoted blocks). With several folders each hit names its
        folder. Status `ok` when any folder was searched, else the first folder's status;
        `below_floor` merged best first (at most `MAX_BELOW_FLOOR`).

        Raises:
            RuntimeError: there is no folder (callers check `active()` first).
            sqlite3.Error: from the commit tables.
        """
        folders = self._folders
        if not folders:
            raise RuntimeError("git search without a workspace folder")  # callers check
        several = len(folders) > 1
        found = [
            folder.workspace.search_commits(
                text,
                max_results=max_results,
                max_tokens=max_tokens,
                folder=folder.name if several else None,
            )
            for folder in folders
        ]
        if not several:
            return found[0]
        ranked = sorted(
            ((hit, position) for position, result in enumerate(found) for hit in result.hits),
            key=lambda pair: (-pair[0].score, -_date_key(pair[0].committed_at), pair[1]),
        )
        hits: list[CommitHit] = []
        used = 0
        for hit, _position in ranked:
            if len(hits) < max_results and used + hit.tokens <= max_tokens:
                used += hit.tokens
                hits.append(hit)
        statuses = [result.status for result in found]
        below = sorted(
            (item for result in found for item in result.below_floor), key=lambda b: -b.score
        )
        return CommitRetrieval(
            "ok" if "ok" in statuses else statuses[0],
            hits,
            tuple(below[:MAX_BELOW_FLOOR]),
            candidates=sum(result.candidates for result in found),
            latency_ms=round(sum(result.latency_ms for result in found), 3),
            warnings=[warning for result in found for warning in result.warnings],
        )

    def folder_of(self, hit: ProjectHit) -> Folder | None:
        """The folder `hit` came from (its `folder`, else the first folder)."""
        return self._named(hit.folder)

    def quoted_text(self, hit: ProjectHit) -> str | None:
        """The whole live text of the file `hit` quotes: its open buffer, else the file read
        from disk by the index's rules (`filters.read_indexable`); None when it cannot be read
        (privacy then withholds the snippet)."""
        folder = self.folder_of(hit)
        if folder is None or not self.trusted:
            return None
        live = folder.workspace.live_text(hit.path)
        if live is not None:
            return live
        limit = self._config().project.max_file_bytes
        text, _ = read_indexable(folder.root / hit.path, max_file_bytes=limit)
        return text

    # ----------------------------------------------------------------- provenance

    def record_sent(
        self, manifest_id: str, sent_at: str, hits: Sequence[ProjectHit], *, stored: bool = True
    ) -> None:
        """Remember, per folder, which snippets a plan sent: in the database when its manifest
        is `stored`, else in that folder's memory (`ProjectWorkspace.record_sent`)."""
        for folder in self._folders:
            mine = [h for h in hits if self._named(h.folder) is folder]
            folder.workspace.record_sent(manifest_id, sent_at, mine, stored=stored)

    def stale_snippets(self, path: str, live_text: str | None = None) -> list[dict[str, Any]]:
        """Sent snippets of `path` (in the folder it belongs to) whose lines changed."""
        folder = self.owner(path)
        return folder.workspace.stale_snippets(path, live_text) if folder else []

    def folder_statuses(self) -> tuple[FolderStatus, ...]:
        """Each folder's status, in the client's order: its name, canonical root, status word,
        counts of its index (files, snippets, stale snippets), Git state, when it was indexed
        and `error` while it has a problem."""
        statuses = []
        for folder in self._folders:
            workspace = folder.workspace
            counts = workspace.counts()
            revision = workspace.revision() or {}
            statuses.append(
                FolderStatus(
                    name=folder.name,
                    project_path=str(folder.root),
                    status=workspace.status_word(),
                    files=counts.get("files", 0),
                    snippets=counts.get("snippets", 0),
                    stale_snippets=workspace.stale_count(),
                    git=GitState(
                        revision.get("branch"), revision.get("head"), revision.get("dirty")
                    ),
                    indexed_at=counts.get("indexedAt"),
                    error=workspace.problem or None,
                    commits=workspace.commit_total(),
                )
            )
        return tuple(statuses)

    def revision(self) -> dict[str, Any] | None:
        """`projectRevision` of the manifest: the first folder's, plus (with several folders)
        `folders: [{name, projectPath, branch, head, dirty, indexedAt}]`."""
        folders = self._folders
        if not folders:
            return None
        first = folders[0].workspace.revision()
        if len(folders) == 1 or first is None:
            return first
        entries = []
        for folder in folders:
            revision = folder.workspace.revision() or {}
            entries.append(
                {
                    "name": folder.name,
                    "projectPath": str(folder.root),
                    **{k: revision.get(k) for k in ("branch", "head", "dirty", "indexedAt")},
                }
            )
        return {**first, "folders": entries}


def _date_key(committed_at: str) -> int:
    """An ISO-8601 `YYYY-MM-DDTHH:MM:SSZ` date as a sortable number (0 when unknown)."""
    digits = "".join(ch for ch in committed_at if ch.isdigit())
    return int(digits) if digits else 0


def _progress_share(
    progress: ProgressCallback | None, position: int, count: int
) -> ProgressCallback | None:
    """`progress` for folder `position` of `count`: its 0-100 % mapped onto its share of one
    rising percentage."""
    if progress is None or count <= 1:
        return progress

    def report(done: int, whole: int, message: str) -> None:
        part = (100 * done) // max(1, whole)
        progress((100 * position + part) // count, 100, message)

    return report


def _relative_to(folder: Folder, paths: Sequence[str]) -> list[str]:
    """`paths` as POSIX paths relative to `folder` where they lie inside it."""
    relative = []
    for path in paths:
        rel = folder.workspace.relative(path)
        relative.append(rel if rel is not None else Path(path).as_posix())
    return relative


def _combine(
    results: list[tuple[Folder, ProjectSyncResult, tuple[str, ...] | None]], *, several: bool
) -> ProjectSyncResult:
    """One sync result from the folders' (`ProjectFolders.sync`): each folder's own, with
    the paths it synced (`only`, relative to it; None for a full sync)."""
    entries = tuple(
        FolderSync(
            name=folder.name,
            project_path=result.project_path,
            status=result.status,
            files_indexed=result.files_indexed,
            files_unchanged=result.files_unchanged,
            files_deleted=result.files_deleted,
            files_skipped=result.files_skipped,
            snippets=result.snippets,
            error=result.error,
            only=only,
            truncated=result.truncated,
            duration_ms=result.duration_ms,
            commits_indexed=result.commits_indexed,
            commits=result.commits,
        )
        for folder, result, only in results
    )
    combined = replace(results[0][1], folders=entries)
    if not several:
        return combined
    synced = [(folder, result) for folder, result, _only in results]
    failed = next(((f, r) for f, r in synced if r.status == "error"), None)
    if failed is not None:
        folder, result = failed
        combined = replace(
            combined,
            status=result.status,
            locked=True if any(r.locked for _f, r in synced) else None,  # any lock retries
            error=f"{folder.name}: {result.error}",
        )
    durations = [r.duration_ms for _f, r in synced if r.duration_ms is not None]
    return replace(
        combined,
        files_indexed=sum(r.files_indexed or 0 for _f, r in synced),
        files_unchanged=sum(r.files_unchanged or 0 for _f, r in synced),
        files_deleted=sum(r.files_deleted or 0 for _f, r in synced),
        files_skipped=sum(r.files_skipped or 0 for _f, r in synced),
        snippets=sum(r.snippets or 0 for _f, r in synced),
        duration_ms=round(sum(durations), 3) if durations else combined.duration_ms,
        truncated=any(r.truncated for _f, r in synced),
        partial_files=tuple(
            f"{f.name}/{path}" for f, r in synced for path in r.partial_files or ()
        ),
        warnings=tuple(f"{f.name}: {warning}" for f, r in synced for warning in r.warnings or ()),
        commits_indexed=_sum_present(r.commits_indexed for _f, r in synced),
        commits=_sum_present(r.commits for _f, r in synced),
    )


def _sum_present(values: Iterable[int | None]) -> int | None:
    """The sum of the values that are not None, or None when all are."""
    present = [value for value in values if value is not None]
    return sum(present) if present else None


__all__ = ["Folder", "ProjectFolders", "folder_names"]
