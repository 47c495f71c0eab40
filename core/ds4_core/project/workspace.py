"""`ProjectWorkspace`: the trusted workspace of one engine, kept in sync and searched safely.

One module: `ProjectWorkspace` is one object whose locks guard the trust decision, the live buffers
and the sync-due flag that its sync, search and live validation all read and write.

Holds the project root, the trust decision, the live text of open editor buffers and whether a
sync is due (after a tool run or a watched-file event). Every public method is a no-op that
reports `untrusted` while the workspace is untrusted: nothing is enumerated, no git runs, no
stored project index is read (issue 3, "Trust boundary").

Before a snippet is injected its live text (open buffer, else the file on disk) is hashed
again (docs/reference.md §3.10): a changed file is re-indexed and the query rerun once; a
deleted, binary, newly sensitive, symlinked or oversized file is dropped. A file whose `lstat`
shows the indexed size and mtime is not read again unless its mtime is under 2 s old
(`ProjectWorkspace._disk_hash`, Git's racy-clean rule).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from stat import S_ISREG
from typing import Any

from ..config import Config
from ..lines import split_lines
from ..results import LongLineFile, ProjectSyncResult
from ..retrieval.descriptor import TaskDescriptor
from ..store import Store
from ..store.database import is_database_locked
from .commit_hits import CommitRetrieval
from .commit_index import CommitSync, clear_commits, commit_count, indexed_head, sync_commits
from .commit_search import commit_file_scores, search_commits
from .discovery import DiscoveredFile, Discovery, ProjectRootError, discover_project
from .filters import path_exclusion, read_indexable
from .git import GitError
from .index import (
    MAX_PARTIAL_FILES_LISTED,
    IndexSync,
    index_counts,
    indexed_lines,
    live_hash,
    project_state,
    sync_project,
)
from .query import request_words
from .search import ProjectHit, ProjectRetrieval, render_project_snippet, search_project
from .sent import (
    SentWindowMemory,
    record_sent_snippets,
    sent_paths,
    sent_windows,
    stale_snippets_for,
    stale_windows,
    stored_windows,
)
from .windows import (
    MAX_LINE_CHARS,
    MAX_WINDOWS_PER_FILE,
    SNIPPET_LINES,
    SNIPPET_OVERLAP,
    cut_line,
)

log = logging.getLogger("ds4_core.project")

READ_ONLY_TOOLS = frozenset({"read", "grep", "find", "ls"})
"""Pi's built-in tools that never change files (issue 3: they schedule no sync)."""

ProgressCallback = Callable[[int, int, str], None]

RACY_WINDOW_NS = 2_000_000_000
"""A file modified less than this long ago (ns) is always re-read to validate a hit (Git's
racy-clean rule: a rewrite within one timestamp tick can keep size and mtime)."""
_UNKNOWN_LINE = "\x00 a line the index does not hold"
"""Stands for a line of a skipped blank window in `stale_count` (equal to no sent line)."""
HASH_CACHE_SIZE = 4096
"""Disk hashes (by path, size and mtime) `ProjectWorkspace` keeps between searches."""


@dataclass(frozen=True)
class ValidatedSearch:
    """Project hits whose text matches the live file, plus what validation did."""

    retrieval: ProjectRetrieval
    dropped: list[tuple[str, str]]  # (path, reason)
    reindexed: list[str]
    git_head: str | None
    folder_heads: dict[str, str | None] = field(default_factory=dict)
    """Git HEAD of each workspace folder (by name) when the hits come from several folders."""

    def head_of(self, hit: ProjectHit) -> str | None:
        """The Git HEAD to quote with `hit`: its folder's, else `git_head`."""
        if hit.folder is not None and hit.folder in self.folder_heads:
            return self.folder_heads[hit.folder]
        return self.git_head


class ProjectWorkspace:
    """Project knowledge for one workspace root. Thread-safe; one sync runs at a time."""

    def __init__(
        self, store_provider: Callable[[], Store], config_provider: Callable[[], Config]
    ) -> None:
        self._store = store_provider
        self._config = config_provider
        self.root: Path | None = None
        self.trusted = False
        self._live: dict[str, str] = {}
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._sync_due = True
        self._indexing = False
        self._last: IndexSync | None = None
        self._last_discovery: Discovery | None = None
        self._problem: str | None = None
        self._hash_cache: dict[str, tuple[int, int, str]] = {}  # rel -> (size, mtime_ns, hash)
        self._rejected: set[str] = set()  # edited paths the last full discovery did not list
        self.nested: tuple[str, ...] = ()
        """Relative paths of other workspace folders inside this one: their files belong to
        them (the deepest folder wins), so this folder does not index them."""
        self._sent_memory = SentWindowMemory()  # windows sent by plans not stored

    # ----------------------------------------------------------------- state

    def set_workspace(
        self,
        root: str | os.PathLike[str] | None,
        trusted: bool,
        nested: Sequence[str] = (),
    ) -> None:
        """Set the root (canonicalised), trust and `nested` (POSIX paths relative to the root of
        other workspace folders inside it, left to them); a change makes a full sync due."""
        canonical = Path(root).expanduser().resolve() if root else None
        nested = tuple(sorted(set(nested)))
        with self._lock:
            if canonical != self.root or trusted != self.trusted or nested != self.nested:
                self._sync_due = True
                self._last_discovery = None
                self._rejected.clear()
            if canonical != self.root:
                # Buffers and hashes are keyed by paths relative to the old root: drop them,
                # so an old buffer's text can never stand for a file of the new root.
                self._live.clear()
                self._hash_cache.clear()
            self.root, self.trusted, self.nested = canonical, bool(trusted), nested
            self._problem = None

    @property
    def problem(self) -> str | None:
        """Why the status is `error` (a bad root, a locked database), or None."""
        return self._problem

    def status_word(self) -> str:
        """`disabled`, `no-workspace`, `untrusted`, `indexing`, `error` or `ready`."""
        if not self._config().project.enabled:
            return "disabled"
        if self.root is None:
            return "no-workspace"
        if not self.trusted:
            return "untrusted"
        if self._indexing:
            return "indexing"
        if self._problem:
            return "error"
        return "ready"

    def active(self) -> bool:
        """True when project knowledge may be used: enabled, a root, trusted."""
        return self.status_word() not in ("disabled", "no-workspace", "untrusted")

    def relative(self, path: str) -> str | None:
        """`path` (absolute, or relative to the root) as a POSIX path relative to the root, or
        None when it lies outside the root (symlinks are not resolved: the path itself must
        be inside)."""
        if self.root is None:
            return None
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            rel = Path(os.path.normpath(candidate)).relative_to(self.root)
        except ValueError:
            return None
        text = rel.as_posix()
        return None if text in ("", ".") or text.startswith("../") else text

    def set_live_text(self, path: str, text: str | None) -> str | None:
        """Record (or, with None, forget) an open buffer's text. Returns its relative path, or
        None when it is outside the workspace (then nothing is kept)."""
        rel = self.relative(path)
        if rel is None:
            return None
        with self._lock:
            if text is None:
                self._live.pop(rel, None)
            else:
                self._live[rel] = text
        return rel

    def live_text(self, rel: str) -> str | None:
        """The open buffer's text of `rel`, or None."""
        with self._lock:
            return self._live.get(rel)

    def note_tool_executed(self, tool: str) -> bool:
        """Mark a sync due unless `tool` is read-only; returns whether it did."""
        if tool.strip().lower() in READ_ONLY_TOOLS:
            return False
        with self._lock:
            self._sync_due = True
        return True

    def mark_sync_due(self) -> None:
        """Something outside the editor changed files (a watched-file event, for example)."""
        with self._lock:
            self._sync_due = True

    # ----------------------------------------------------------------- sync

    def sync(
        self,
        *,
        only: Sequence[str] | None = None,
        force: bool = False,
        progress: ProgressCallback | None = None,
    ) -> ProjectSyncResult:
        """Bring the index up to date; returns what the sync did (`ProjectSyncResult`,
        without `folders`): status `ready` with the counts, or `error` (not raised), or the
        status word with nothing read (`untrusted`, `no-workspace`, `disabled`).

        `only` restricts the work to those paths (editor edits); a full sync runs discovery
        (git or the ignore-aware walk) first.
        """
        config = self._config()
        with self._sync_lock:
            with self._lock:  # one consistent view of the root for the whole sync
                root = self.root
                status = self.status_word()
                if status in ("disabled", "no-workspace", "untrusted") or root is None:
                    return ProjectSyncResult(
                        status=status, project_path=str(root) if root else None
                    )
                if only is None:
                    self._sync_due = False  # events arriving from now on make it due again
            self._indexing = True
            started = time.perf_counter()
            history_warnings: list[str] = []
            try:
                # One rising percentage: discovery 0-5 %, indexing files 5-100 %.
                if progress:
                    progress(0, 100, "discovering project files")
                if only is not None:
                    rels = [r for r in (self.relative(p) for p in only) if r is not None]
                    discovery = self._partial_discovery(rels)
                else:
                    discovery = self._without_nested(
                        discover_project(
                            root,
                            max_files=config.project.max_files,
                            max_file_bytes=config.project.max_file_bytes,
                            max_total_bytes=config.project.max_total_bytes,
                        )
                    )
                    rels = None
                if progress:
                    progress(5, 100, f"indexing {len(discovery.files)} files")
                result = sync_project(
                    self._store(),
                    discovery,
                    live_text=self.live_text,
                    force=force,
                    only=rels,
                    max_file_bytes=config.project.max_file_bytes,
                    progress=(
                        (
                            lambda done, total: progress(
                                5 + (95 * done) // max(1, total), 100, "indexing project files"
                            )
                        )
                        if progress
                        else None
                    ),
                )
                history: CommitSync | None = None
                if only is None:  # after the files (their progress already reached 100)
                    history = self._sync_history(
                        root, discovery, config, history_warnings, force=force
                    )
                # durationMs covers discovery too, so a slow discovery (Git) shows.
                result = replace(result, duration_ms=(time.perf_counter() - started) * 1000.0)
                with self._lock:
                    if self.root == root:  # not re-rooted meanwhile
                        if only is None:
                            self._last_discovery = discovery
                            self._rejected.clear()
                        self._last = result
                        self._problem = None
                if progress:
                    progress(100, 100, "project index ready")
            except ProjectRootError as exc:
                self._problem = str(exc)
                return ProjectSyncResult(status="error", project_path=str(root), error=str(exc))
            except Exception as exc:
                if not is_database_locked(exc):
                    # A defect or a damaged store: the batch rolled back, the index keeps its
                    # previous state. Reported as `error` (a sync result, `problem`), never
                    # raised, so one bad sync cannot stop project knowledge for the server.
                    problem = sync_failure_message(exc)
                    log.warning(
                        "project sync failed: %s", problem, exc_info=log.isEnabledFor(logging.DEBUG)
                    )
                    with self._lock:
                        if only is None:
                            self._sync_due = True  # it did not happen: still due
                        self._problem = problem
                    return ProjectSyncResult(status="error", project_path=str(root), error=problem)
                # Another connection holds the write lock: nothing was written. Whatever this
                # sync was for stays due (a full sync covers edited buffers too, through
                # their live text), and the caller may retry.
                problem = (
                    "the index database is locked by another connection (waited "
                    f"{self._store().busy_timeout_ms} ms, storage.busyTimeoutMs); retrying"
                )
                with self._lock:
                    self._sync_due = True
                    self._problem = problem
                log.debug("project sync: database locked")
                return ProjectSyncResult(
                    status="error", project_path=str(root), error=problem, locked=True
                )
            except BaseException:
                if only is None:
                    with self._lock:
                        self._sync_due = True  # it did not happen: still due
                raise
            finally:
                self._indexing = False
        log.info(
            "project sync: files=%d unchanged=%d deleted=%d skipped=%d snippets=%d duration_ms=%.1f",
            result.files_indexed,
            result.files_unchanged,
            result.files_deleted,
            result.files_skipped,
            result.snippets,
            (time.perf_counter() - started) * 1000,
        )
        warnings = list(discovery.warnings) + history_warnings
        if result.partial_files:
            warnings.append(partial_files_warning(result.partial_files))
        if result.long_line_files:
            warnings.append(long_lines_warning(result.long_line_files))
        return ProjectSyncResult(
            status="ready",
            project_path=result.project_path,
            files_indexed=result.files_indexed,
            files_unchanged=result.files_unchanged,
            files_deleted=result.files_deleted,
            files_skipped=result.files_skipped,
            snippets=result.snippets,
            duration_ms=round(result.duration_ms, 3),
            truncated=result.truncated,
            partial_files=tuple(result.partial_files),
            long_line_files=tuple(LongLineFile(p, n) for p, n in result.long_line_files),
            warnings=tuple(warnings),
            commits_indexed=history.indexed if history is not None else None,
            commits=history.total if history is not None else None,
        )

    def _sync_history(
        self,
        root: Path,
        discovery: Discovery,
        config: Config,
        warnings: list[str],
        *,
        force: bool = False,
    ) -> CommitSync | None:
        """Bring the commit-history index up to HEAD after a full sync (`commit_index`; with
        `force`, read it all again):
        only in a Git folder with `project.maxCommits` > 0; otherwise an index left from
        before is forgotten. A Git failure is a warning (the file index stands); database
        errors propagate like the file sync's."""
        if discovery.git is None or config.project.max_commits == 0:
            if indexed_head(self._store(), str(root)) is not None:
                clear_commits(self._store(), str(root))
            return None
        try:
            history = sync_commits(
                self._store(),
                root,
                max_commits=config.project.max_commits,
                head=discovery.git.head,
                force=force,
            )
        except GitError as error:
            warnings.append(f"the Git history was not indexed: {error}")
            return None
        if not history.complete:
            warnings.append(
                f"the Git history was read only in part (a size or time bound); "
                f"{history.total} commits are indexed"
            )
        if history.withheld:
            warnings.append(
                f"{history.withheld} commit message(s) look like they hold a secret; they are "
                "indexed without their text"
            )
        return history

    def search_commits(
        self, text: str, *, max_results: int, max_tokens: int, folder: str | None = None
    ) -> CommitRetrieval:
        """The commits of this folder's Git history that answer `text` (`search_commits`),
        after a due sync. Status `no-git` when the last full discovery found no Git work tree,
        `disabled` with `project.maxCommits` 0; callers check `active()` first.

        Raises:
            sqlite3.Error: from the commit tables.
        """
        self.ensure_fresh()
        root = self.root
        assert root is not None
        if self._config().project.max_commits == 0:
            return CommitRetrieval("disabled")
        discovery = self._last_discovery
        if discovery is None or discovery.git is None:
            return CommitRetrieval("no-git")
        return search_commits(
            self._store().connection(),
            str(root),
            text,
            max_results=max_results,
            max_tokens=max_tokens,
            folder=folder,
        )

    def commit_total(self) -> int | None:
        """Commits of this folder's history index, or None when it has none."""
        if self.root is None or indexed_head(self._store(), str(self.root)) is None:
            return None
        return commit_count(self._store(), str(self.root))

    def ensure_fresh(self) -> None:
        """Run a full sync when one is due (trust just granted, a tool wrote files, a watched
        file changed, or never synced). Cheap when nothing changed: unchanged files are skipped
        by size, mtime, modified state and git HEAD."""
        if self.active() and self._sync_due:
            with self._sync_lock:  # another request may have just run it
                due = self._sync_due
            if due:
                self.sync()

    def _without_nested(self, discovery: Discovery) -> Discovery:
        """`discovery` without the files under `nested` folders (listed once in `skipped`)."""
        nested = self.nested
        if not nested:
            return discovery

        def inside(rel: str) -> bool:
            return any(rel.startswith(f"{folder}/") for folder in nested)

        discovery.files = [f for f in discovery.files if not inside(f.rel_path)]
        discovery.skipped = sorted(
            [(rel, reason) for rel, reason in discovery.skipped if not inside(rel)]
            + [(f"{folder}/", "another workspace folder") for folder in nested]
        )
        return discovery

    def _partial_discovery(self, rels: Sequence[str]) -> Discovery:
        """A Discovery of just `rels`, statted now, keeping the git facts of the last full one.

        Only files the last full discovery listed may be indexed here: they passed the
        exclusions and the ignore rules (`.gitignore`, `.git/info/exclude`), which cannot be
        judged for one path alone. A path it did not list (a new file, or an ignored, excluded
        or secret one) is left out now and a full sync is marked due, so a new file is indexed
        by the next full discovery and an excluded one never is.
        """
        assert self.root is not None
        previous = self._last_discovery
        known = {f.rel_path: f for f in previous.files} if previous else {}
        files: list[DiscoveredFile] = []
        skipped: list[tuple[str, str]] = []
        for rel in sorted(set(rels)):
            if rel not in known or path_exclusion(rel) is not None:
                skipped.append((rel, path_exclusion(rel) or "not in the last full discovery"))
                with self._lock:
                    if rel not in self._rejected:  # once per path until the next full sync
                        self._rejected.add(rel)
                        self._sync_due = True
                continue
            path = self.root / rel
            try:
                stat = path.lstat()
            except OSError:
                continue  # gone: sync marks it deleted
            if not path.is_file() or path.is_symlink():
                skipped.append((rel, "symlink" if path.is_symlink() else "not a file"))
                continue
            before = known.get(rel)
            files.append(
                DiscoveredFile(
                    rel_path=rel,
                    size_bytes=stat.st_size,
                    mtime_ns=stat.st_mtime_ns,
                    tracked=before.tracked if before else False,
                    # an edited tracked file differs from HEAD until the next full sync says
                    # otherwise; an untracked file keeps what the last discovery said
                    modified=bool(before and (before.modified or before.tracked)),
                )
            )
        return Discovery(
            root=self.root,
            files=files,
            skipped=skipped,
            git=previous.git if previous else None,
            warnings=[],
            truncated=False,
        )

    # ----------------------------------------------------------------- search

    def _commit_prior(self, store: Store, descriptor: TaskDescriptor) -> dict[str, float] | None:
        """The git-history prior of the file ranking (`commit_file_scores`: files whose past
        commits match the request's words, best 1.0), or None without words, history or a
        match. A failure to read the commit index is logged and ranks without it."""
        words = request_words(descriptor.objective)
        if not words:
            return None
        assert self.root is not None
        try:
            return commit_file_scores(store.connection(), str(self.root), words) or None
        except sqlite3.Error as exc:
            log.warning("commit prior skipped: error=%s", type(exc).__name__)
            return None

    def search(
        self,
        descriptor: TaskDescriptor,
        *,
        max_results: int,
        max_tokens: int,
        folder: str | None = None,
    ) -> ValidatedSearch:
        """Project hits for `descriptor`, each re-validated against the live text; `folder`
        names this workspace folder in every hit (`search_project`).

        A hit whose file changed since indexing triggers an incremental sync of that file and
        one rerun of the query; a file that is gone, binary, sensitive, a symlink or oversized
        is dropped (its path and reason are reported, never its text).
        """
        self.ensure_fresh()
        behind = self._problem  # the sync before the search failed: the index is older
        store = self._store()
        assert self.root is not None
        prior = self._commit_prior(store, descriptor)
        retrieval = search_project(
            store,
            str(self.root),
            descriptor,
            max_results=max_results,
            max_tokens=max_tokens,
            folder=folder,
            file_prior=prior,
        )
        valid, changed, dropped = self._validate(retrieval.hits)
        reindexed: list[str] = []
        if changed:
            self.sync(only=changed)
            reindexed = list(changed)
            retrieval = search_project(
                store,
                str(self.root),
                descriptor,
                max_results=max_results,
                max_tokens=max_tokens,
                folder=folder,
                file_prior=prior,
            )
            valid, _changed_again, dropped_again = self._validate(retrieval.hits)
            dropped += dropped_again + [
                (p, "changed again while searching") for p in _changed_again
            ]
        head = (
            self._last_discovery.git.head
            if self._last_discovery and self._last_discovery.git
            else None
        )
        warnings = list(retrieval.warnings)
        if behind is not None:
            warnings.append(f"the project index may be behind the files: {behind}")
        return ValidatedSearch(
            replace(retrieval, hits=valid, warnings=warnings), dropped, reindexed, head
        )

    def _validate(
        self, hits: Sequence[ProjectHit]
    ) -> tuple[list[ProjectHit], list[str], list[tuple[str, str]]]:
        assert self.root is not None
        config = self._config()
        valid: list[ProjectHit] = []
        changed: list[str] = []
        dropped: list[tuple[str, str]] = []
        hashes: dict[str, str | None] = {}
        reasons: dict[str, str | None] = {}
        stored = self._stored_stats({hit.path for hit in hits})
        for hit in hits:
            if hit.path not in hashes:
                live = self.live_text(hit.path)
                if live is not None:
                    hashes[hit.path], reasons[hit.path] = live_hash(live), None
                else:
                    hashes[hit.path], reasons[hit.path] = self._disk_hash(
                        hit.path, stored.get(hit.path), config.project.max_file_bytes
                    )
            if hashes[hit.path] is None:
                if hit.path not in (p for p, _ in dropped):
                    dropped.append((hit.path, reasons[hit.path] or "unreadable"))
            elif hashes[hit.path] != hit.file_hash:
                if hit.path not in changed:
                    changed.append(hit.path)
            else:
                valid.append(hit)
        return valid, changed, dropped

    def _stored_stats(self, paths: set[str]) -> dict[str, tuple[int, int, str]]:
        """`{path: (size_bytes, mtime_ns, content_hash)}` of the current indexed rows of
        `paths` (one statement)."""
        if not paths:
            return {}
        ordered = sorted(paths)
        marks = ", ".join("?" * len(ordered))
        rows = (
            self._store()
            .connection()
            .execute(
                "SELECT file_path, size_bytes, mtime_ns, content_hash FROM project_files "
                f"WHERE project_path = ? AND status = 'current' AND file_path IN ({marks})",
                (str(self.root), *ordered),
            )
        )
        return {path: (int(size), int(mtime), str(digest)) for path, size, mtime, digest in rows}

    def _disk_hash(
        self, rel: str, stored: tuple[int, int, str] | None, max_file_bytes: int
    ) -> tuple[str | None, str | None]:
        """`(live hash, None)` of the file `rel` on disk, or `(None, reason)`.

        The file is not read when its `lstat` (a regular file, not oversized) shows the size
        and `mtime_ns` of the indexed row (`stored`; a row indexed from an open buffer has
        `mtime_ns` -1 and never matches) or of the last hash computed here (`_hash_cache`):
        that row's (or hash's) text is the file's. Like Git's racy-clean rule, a file whose
        mtime lies within `RACY_WINDOW_NS` of now is always read, so a rewrite that keeps size
        and mtime (possible within one timestamp tick) is still caught: once the window has
        passed, a further rewrite gets a new mtime.
        """
        assert self.root is not None
        path = self.root / rel
        try:
            info = os.lstat(path)
        except (OSError, ValueError):
            info = None
        trusted_stat = (
            info is not None
            and S_ISREG(info.st_mode)
            and info.st_size <= max_file_bytes
            and time.time_ns() - info.st_mtime_ns >= RACY_WINDOW_NS
        )
        if trusted_stat:
            assert info is not None
            key = (info.st_size, info.st_mtime_ns)
            if stored is not None and stored[:2] == key:
                return stored[2], None
            with self._lock:
                cached = self._hash_cache.get(rel)
            if cached is not None and cached[:2] == key:
                return cached[2], None
        text, reason = read_indexable(path, max_file_bytes=max_file_bytes)
        if text is None:
            return None, reason
        digest = live_hash(text)
        if trusted_stat:
            assert info is not None
            with self._lock:
                if len(self._hash_cache) >= HASH_CACHE_SIZE:
                    self._hash_cache.clear()
                self._hash_cache[rel] = (info.st_size, info.st_mtime_ns, digest)
        return digest, None

    def render(self, hit: ProjectHit, git_head: str | None) -> dict[str, Any]:
        """The quoted project-source message of `hit` (docs/reference.md §3.10)."""
        return render_project_snippet(hit, git_head)

    # ----------------------------------------------------------------- provenance

    def record_sent(
        self, manifest_id: str, sent_at: str, hits: Sequence[ProjectHit], *, stored: bool = True
    ) -> None:
        """Remember which snippets a plan sent, for stale-snippet diagnostics: in the database
        when its manifest is `stored`, else in memory for the life of this workspace
        (`sent.SentWindowMemory`, the newest `sent.MEMORY_WINDOWS` windows)."""
        if not hits or self.root is None:
            return
        if stored:
            record_sent_snippets(self._store(), manifest_id, str(self.root), sent_at, hits)
        else:
            self._sent_memory.add(sent_windows(manifest_id, str(self.root), sent_at, hits))

    def stale_snippets(self, path: str, live_text: str | None = None) -> list[dict[str, Any]]:
        """Sent snippets of `path` whose lines no longer match its live text (open buffer, the
        given text, or the disk). Empty when untrusted or outside the workspace."""
        if not self.active():
            return []
        rel = self.relative(path)
        if rel is None or self.root is None:
            return []
        text = live_text if live_text is not None else self.live_text(rel)
        if text is None:
            text, _reason = read_indexable(
                self.root / rel, max_file_bytes=self._config().project.max_file_bytes
            )
        return stale_snippets_for(
            self._store(), str(self.root), rel, text, self._sent_memory, line_view=cut_line
        )

    def stale_count(self) -> int:
        """How many sent windows are stale, without reading any file: each file's open buffer
        when there is one, else what the project index holds of it (its content hash first:
        windows sent from the indexed content are current; else the lines of its current
        windows). 0 when untrusted. As fresh as the index (a sync runs before each plan)."""
        if not self.active() or self.root is None:
            return 0
        store, project = self._store(), str(self.root)
        total = 0
        for rel in sent_paths(store, project, self._sent_memory):
            windows = stored_windows(store, project, rel) + self._sent_memory.of_file(project, rel)
            live = self.live_text(rel)
            if live is not None:
                total += len(stale_windows(windows, split_lines(live), cut_line))
                continue
            indexed = indexed_lines(store, project, rel)
            if indexed is None:  # deleted, or no longer indexable
                total += len(stale_windows(windows, None))
                continue
            digest, held = indexed
            if all(w.file_hash == digest for w in windows):
                continue  # every window was sent from the content the index holds
            current = {w.snippet_id for w in windows if w.file_hash == digest}
            lines = [held.get(n, _UNKNOWN_LINE) for n in range(1, max(held, default=0) + 1)]
            total += sum(1 for r in stale_windows(windows, lines) if r["snippetId"] not in current)
        return total

    def counts(self) -> dict[str, Any]:
        """{files (current), snippets (not stale), indexedAt} of this workspace's index."""
        if self.root is None:
            return {}
        store, project = self._store(), str(self.root)
        counts = index_counts(store, project)
        return {
            "files": counts.files,
            "snippets": counts.snippets,
            "indexedAt": self._indexed_at(),
        }

    def _indexed_at(self) -> str | None:
        if self.root is None:
            return None
        state = project_state(self._store(), str(self.root))
        return state.indexed_at if state is not None else None

    def revision(self) -> dict[str, Any] | None:
        """`projectRevision` of the manifest: branch, HEAD, dirty, changed paths, index time."""
        discovery = self._last_discovery
        if discovery is None:
            return None
        git = discovery.git
        return {
            "branch": git.branch if git else None,
            "head": git.head if git else None,
            "dirty": git.dirty if git else None,
            "changedPaths": list(git.changed_paths)[:200] if git else [],
            "indexedAt": self._indexed_at(),
        }


def sync_failure_message(exc: BaseException) -> str:
    """The `error` of a project sync that failed with `exc` (not a locked database): its type
    and message (at most 300 characters, any lone surrogate escaped)."""
    detail = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    if len(detail) > 300:
        detail = detail[:300] + "..."
    return (
        f"project sync failed ({type(exc).__name__}: {detail}); the index keeps its previous state"
    )


def partial_files_warning(paths: Sequence[str]) -> str:
    """The sync warning for files whose end is not indexed (`IndexSync.partial_files`)."""
    lines = (MAX_WINDOWS_PER_FILE - 1) * (SNIPPET_LINES - SNIPPET_OVERLAP) + SNIPPET_LINES
    count = f"{len(paths)}+" if len(paths) >= MAX_PARTIAL_FILES_LISTED else str(len(paths))
    return (
        f"{count} file(s) are longer than {MAX_WINDOWS_PER_FILE} windows of {SNIPPET_LINES} "
        f"lines; only their first ~{round(lines, -2):,} lines are searched: {', '.join(paths)}"
    )


def long_lines_warning(files: Sequence[tuple[str, int]]) -> str:
    """The sync warning for files indexed with overlong lines cut
    (`IndexSync.long_line_files`)."""
    count = f"{len(files)}+" if len(files) >= MAX_PARTIAL_FILES_LISTED else str(len(files))
    listed = ", ".join(f"{path} ({cut} line{'s' if cut != 1 else ''} cut)" for path, cut in files)
    return (
        f"{count} file(s) have lines over {MAX_LINE_CHARS:,} characters; the index holds "
        f"them cut to their first {MAX_LINE_CHARS:,} characters: {listed}"
    )
