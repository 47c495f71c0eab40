"""When the project index is brought up to date, and telling the client (`ds4/indexUpdated`).

One `ProjectSync` per server. It holds the workspace folders and trust the engine was given,
collects what changed (editor buffers, watched files, agent tool runs) and runs the matching
`engine.project.sync` calls after a short debounce, one batch at a time, off the event
loop. Every sync it runs is reported with a `ds4/indexUpdated` notification (docs/protocol.md)
and followed by fresh stale-snippet diagnostics for the open documents it concerns.

Nothing here runs while the workspace is untrusted: no sync, no live text, no diagnostics
(issue 3, "Trust boundary"). The engine enforces the same rule on its side.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.uris import to_fs_path

from ds4_core.json_bounds import bounded_text
from ds4_core.results import ProjectStatus, ProjectSyncResult
from ds4_lsp.methods import DS4_INDEX_UPDATED
from ds4_lsp.services.diagnostics import clear_stale_snippets, publish_stale_snippets
from ds4_lsp.services.documents import document_key
from ds4_lsp.services.progress import WorkDoneProgress

if TYPE_CHECKING:
    from ds4_lsp.server import Ds4Server

Run = tuple[str, ProjectSyncResult, list[str] | None]
"""One sync of a batch: (reason, what it did, the paths it synced or None for a full sync)."""

log = logging.getLogger("ds4_lsp.project")

MESSAGE_CHARS = 400
"""Most characters of an engine problem shown to the user: it may quote a folder path the
client sent (`json_bounds.bounded_text` cuts it)."""

EDIT_DEBOUNCE_S = 0.15
"""Quiet time after the last buffer change before it is re-indexed (s). With the sync itself
(a few ms for one file) the edit is in the index well within 250 ms of the last keystroke,
unless a full sync is already running."""

WATCH_DEBOUNCE_S = 0.3
"""Quiet time after the last watched-file event before the full sync (s): a branch switch
sends hundreds of events and gets one sync."""

TOOL_DEBOUNCE_S = 0.05
"""Quiet time after an agent tool run before its sync (s): coalesces parallel tool calls."""

WATCHER_REGISTRATION_ID = "ds4-watched-files"
"""Id of the dynamic `workspace/didChangeWatchedFiles` registration."""

REGISTRATION_TIMEOUT_S = 10.0
"""How long to wait for the client to accept the watcher registration (s)."""

LOCKED_RETRY_FIRST_S = 0.05
"""Wait before the first retry of a sync that found the database locked (s); it doubles
after each further locked attempt up to `LOCKED_RETRY_MAX_S`. Retries go on while the
server lives (a shutdown, a trust withdrawal or a workspace change cancels them)."""

LOCKED_RETRY_MAX_S = 4.0
"""Longest wait between two attempts of a sync that keeps finding the database locked (s)."""


def locked_retry_delay_s(attempts: int) -> float:
    """Seconds to wait before the next try of a sync that found the database locked
    `attempts` times in a row (>= 0): `LOCKED_RETRY_FIRST_S` doubled per attempt, at most
    `LOCKED_RETRY_MAX_S`, for any number of attempts (a lock held for days still retries)."""
    return min(LOCKED_RETRY_MAX_S, LOCKED_RETRY_FIRST_S * 2 ** min(max(attempts, 0), 16))


def folder_paths(folders: Iterable[types.WorkspaceFolder]) -> list[tuple[str | None, str]]:
    """`(name, path)` of the `file:` folders among `folders`, in order (the form of
    `ProjectSync.folders`); a folder without a name gets None."""
    paths = []
    for folder in folders:
        path = to_fs_path(folder.uri)
        if path is not None:
            paths.append((folder.name or None, path))
    return paths


class ProjectSync:
    """Schedules project syncs for one server and reports them (see the module docstring).

    `active` is true while the engine has a trusted workspace root. Pending work is kept as
    three sets: buffers whose text changed (URIs), files a tool reported writing (paths, re-read
    even when their size and mtime look unchanged) and whether a full sync is due (and why).
    """

    def __init__(self, ls: Ds4Server) -> None:
        self._ls = ls
        self.folders: list[tuple[str | None, str]] = []
        """The folders the client opened, as `(name, path)` (its `file:` workspaceFolders,
        else rootUri); after `workspace/didChangeWorkspaceFolders`, those remaining."""
        self.project_path: str | None = None
        """The canonical root of the first folder the engine uses, while `active`."""
        self.folder_paths: list[str] = []
        """The canonical roots of every folder the engine uses, while `active`."""
        self.active = False
        self.watching = False
        """Whether the client sends `workspace/didChangeWatchedFiles` (dynamic registration
        succeeded). Without it every `ds4/plan` and `ds4/retrieve` sweeps the project."""
        self._buffers: set[str] = set()
        self._forced: set[str] = set()
        self._full_reason: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._locked_attempts = 0
        """Consecutive syncs that found the database locked (0: no outage)."""
        self._locked_since = 0.0
        self._outage_reasons: list[str] = []
        """Reasons of the syncs folded into the pending retry of a locked database, first
        the one that met the lock (empty: no outage)."""
        self._outage_edits = 0
        """Buffers and tool paths held back by the outage at its last attempt."""

    # ------------------------------------------------------------------ workspace and trust

    async def set_workspace(self) -> bool:
        """Give the engine the folders and the client's trust decision
        (`engine.project.set_folders`); returns whether project knowledge is now active (a folder,
        trusted).

        Called in `initialize`, after a trust change and after a workspace folder change. A
        folder the engine refuses (the home directory, the filesystem root, not a directory)
        is shown with `window/showMessage`; when it refuses them all, project knowledge stays
        off. Starts no sync: see `start` and `trust_changed`.
        """
        ls = self._ls
        trusted = ls.options.trusted
        if not ls.has_engine:
            return False
        async with self._lock:
            try:
                status = await ls.run_engine(
                    ls.engine.project.set_folders, self.folders, trusted, method="workspace"
                )
            except JsonRpcException as exc:  # a refused root, or an engine failure (logged)
                ls.show_message(
                    f"ds4: project knowledge is off: {bounded_text(exc.message, MESSAGE_CHARS)}"
                )
                status = ProjectStatus("no-workspace", None)
                try:
                    await ls.run_engine(
                        ls.engine.project.set_root, None, trusted, method="workspace"
                    )
                except JsonRpcException:
                    pass
            for refused in status.refused or ():
                ls.show_message(
                    "ds4: a workspace folder is left out: "
                    f"{bounded_text(refused.error, MESSAGE_CHARS)}"
                )
            self.project_path = status.project_path
            self.folder_paths = [
                folder.project_path for folder in status.folders or () if folder.project_path
            ] or ([self.project_path] if self.project_path else [])
            self.active = bool(trusted and self.project_path)
            log.info("workspace: status=%s trusted=%s", status.status, trusted)
        return self.active

    def start(self, reason: str) -> None:
        """Index the project in the background with `$/progress` (reason `initial` after
        `initialized`, `trust` after a grant); open buffers count as live text."""
        if self.active:
            self._buffers.update(self.open_uris())
            self.request_full(reason, delay=None)

    async def trust_changed(self) -> None:
        """Apply a new trust decision: a grant starts indexing without a restart; a
        withdrawal stops all project work and clears the stale-snippet diagnostics."""
        was_active = self.active
        if await self.set_workspace():
            if not was_active:
                await self.watch_files()
                self.start("trust")
        else:
            self._cancel_pending()
            clear_stale_snippets(self._ls, self.open_uris())

    async def folders_changed(self, folders: list[tuple[str | None, str]]) -> None:
        """The client changed its workspace folders; `folders` (`(name, path)`) remain. When
        they differ: pending work is dropped, stale-snippet diagnostics withdrawn, the engine
        gets the folders with the current trust (`engine.project.set_folders`), and trusted folders
        are synced in the background (reason `workspace`; folders kept from before find their
        files unchanged, so only new folders are read). Nothing happens otherwise."""
        if folders == self.folders:
            return
        self.folders = list(folders)
        self._cancel_pending()
        clear_stale_snippets(self._ls, self.open_uris())
        if await self.set_workspace():
            await self.watch_files()
            self.start("workspace")

    async def watch_files(self) -> None:
        """Ask the client to send `workspace/didChangeWatchedFiles` for every file (dynamic
        registration), when its capabilities allow it and not already done. Otherwise, or if
        the client refuses, `before_request` sweeps the project instead."""
        workspace = self._ls.client_capabilities.workspace
        watched = workspace.did_change_watched_files if workspace else None
        if self.watching or not (watched and watched.dynamic_registration):
            return
        registration = types.Registration(
            id=WATCHER_REGISTRATION_ID,
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern="**/*")]
            ),
        )
        try:
            await asyncio.wait_for(
                self._ls.client_register_capability_async(
                    types.RegistrationParams(registrations=[registration])
                ),
                REGISTRATION_TIMEOUT_S,
            )
        except Exception as exc:  # refused or unanswered: sweep before requests instead
            log.warning("watched files not registered: %s", type(exc).__name__)
            return
        self.watching = True

    # ------------------------------------------------------------------ what changed

    def buffer_changed(self, uri: str) -> None:
        """An editor buffer was opened, changed, saved or closed: re-index it after
        `EDIT_DEBOUNCE_S` (its live text, or the disk once closed)."""
        if self.active and to_fs_path(uri) is not None:
            self._buffers.add(uri)
            self._schedule(EDIT_DEBOUNCE_S)

    def files_changed(self) -> None:
        """The client reported changed files on disk: a full sync after `WATCH_DEBOUNCE_S`
        (unchanged files are skipped by size and mtime, so it stays cheap)."""
        if self.active:
            self.request_full("watched", delay=WATCH_DEBOUNCE_S)

    def tool_ran(self, paths: Iterable[str]) -> None:
        """An agent tool that may write ran: re-read the `paths` it reported (even with an
        unchanged size and mtime) and run a full sync, after `TOOL_DEBOUNCE_S`."""
        if self.active:
            self._forced.update(paths)
            self.request_full("tool", delay=TOOL_DEBOUNCE_S)

    def request_full(self, reason: str, *, delay: float | None) -> None:
        """Make a full sync due for `reason`; run it after `delay` seconds, or now in the
        background with `$/progress` when `delay` is None."""
        if not self.active:
            return
        self._full_reason = self._full_reason or reason
        if delay is None:
            self._cancel_timer()
            self.spawn(self.flush(progress_title="ds4: indexing the project"))
        else:
            self._schedule(delay)

    # ------------------------------------------------------------------ running syncs

    @property
    def busy(self) -> bool:
        """True while a sync batch runs (e.g. the first index of a large workspace)."""
        return self._lock.locked()

    async def before_request(self) -> None:
        """Bring the index up to date before `ds4/plan` or `ds4/retrieve`: pending edits and
        tool syncs run now. A client that cannot watch files gets a sweep instead: the engine
        syncs the whole project (skipping unchanged files by size and mtime) before it
        searches, so edits made outside the editor are found."""
        async with self._lock:  # a trust change or a batch in progress finishes first
            active = self.active
        if not active:
            return
        if not self.watching:
            await self._ls.run_engine(self._ls.engine.project.mark_changed, method="sweep")
        if self._buffers or self._forced or self._full_reason or self._lock.locked():
            await self.flush()

    async def flush(self, progress_title: str | None = None) -> None:
        """Run everything pending now (one batch), then report it and republish diagnostics.

        Batches never overlap: a flush waits for the one running. Engine failures are logged
        (by `run_engine`) and end the batch; the server keeps serving. A sync that finds the
        database locked by another connection stays due and is retried (`_retry_locked`).
        """
        self._cancel_timer()
        async with self._lock:
            if not self.active:
                return
            buffers, forced, full = self._buffers, self._forced, self._full_reason
            self._buffers, self._forced, self._full_reason = set(), set(), None
            if not (buffers or forced or full):
                return
            live = self._live_texts(buffers)
            if progress_title is None:
                runs = await self._run(live, forced, full, None)
            else:
                async with WorkDoneProgress(self._ls, progress_title) as progress:
                    runs = await self._run(live, forced, full, progress.report)
                    if runs:
                        last = runs[-1][1]
                        progress.end_message = (
                            f"{last.files_indexed or 0} file(s) indexed, "
                            f"{last.snippets or 0} snippet(s)"
                        )
        if runs and runs[-1][1].locked:
            self._retry_locked(runs, buffers, forced, full)
            return
        merged: list[str] | None = None  # the reasons a landing retry carries
        if self._locked_attempts:
            reasons, self._outage_reasons = self._outage_reasons, []
            landed = bool(runs) and runs[-1][1].status != "error"
            if landed:  # the sync that lands carries the reason(s) it was retried for
                reason, result, only = runs[-1]
                merged = list(dict.fromkeys([*reasons, reason]))
                runs[-1] = (merged[0], result, only)
                log.info(
                    "project sync: the database lock was released; synced after %d attempt(s) "
                    "over %.1f s",
                    self._locked_attempts + 1,
                    asyncio.get_running_loop().time() - self._locked_since,
                )
            else:  # no longer locked, but the sync failed otherwise: reported as it is
                log.warning("project sync: the database lock was released; the sync failed")
            self._locked_attempts = 0
        for position, (reason, result, only) in enumerate(runs, start=1):
            self.report(reason, result, only, reasons=merged if position == len(runs) else None)
        republish = self.open_uris() if full or forced else buffers
        await publish_stale_snippets(self._ls, republish)

    def _retry_locked(
        self,
        runs: list[Run],
        buffers: set[str],
        forced: set[str],
        full: str | None,
    ) -> None:
        """The last sync of a batch found the database locked by another connection (nothing
        of it was written): put back what did not land, so no due sync is forgotten, and retry
        after an exponential backoff (`LOCKED_RETRY_FIRST_S` doubling to `LOCKED_RETRY_MAX_S`).

        Everything of the batch is folded into the pending retry: the syncs of it that did
        land are not reported on their own (a `ready` in the middle of an outage would claim
        an index that is behind), their reasons join the outage's (`_outage_reasons`). The
        first locked attempt of an outage is reported with `ds4/indexUpdated` (status
        `error`, the reason of the sync that met the lock, `error` naming the lock,
        `retryInMs`) and logged once; later attempts are silent until one lands (`ready`,
        with the first reason asked for and every folded one, in order, in `reasons`).
        """
        landed = runs[:-1]
        reason, failed, only = runs[-1]
        self._outage_reasons = list(  # in the order the syncs were asked for
            dict.fromkeys([*self._outage_reasons, *(r for r, _, _ in landed), reason])
        )
        if forced and not any(r == "tool" for r, _, _ in landed):
            self._forced |= forced
        if full:  # the full sync runs last: it never landed
            self._full_reason = self._full_reason or full
        self._buffers |= buffers  # cheap when already indexed: unchanged text is skipped
        self._outage_edits = len(self._buffers) + len(self._forced)
        delay = locked_retry_delay_s(self._locked_attempts)
        self._locked_attempts += 1
        if self._locked_attempts == 1:
            self._locked_since = asyncio.get_running_loop().time()
            log.warning("project sync: the database is locked by another connection; retrying")
            self.report(reason, failed, only, retry_in_ms=round(delay * 1000))
        self._schedule(delay)

    async def _run(
        self,
        live: dict[str, str | None],
        forced: set[str],
        full: str | None,
        progress: Callable[[int, int, str], None] | None,
    ) -> list[Run]:
        """Set the live texts, then sync: the forced paths, then everything (when `full`) or
        just the changed buffers. Returns (reason, result, only) per sync."""
        engine = self._ls.engine

        def work() -> list[Run]:
            for path, text in live.items():
                engine.project.set_live_text(path, text)
            runs: list[Run] = []
            if forced:
                only = sorted(forced)
                runs.append(("tool", engine.project.sync(only=only, force=True), only))
                if runs[-1][1].locked:
                    return runs  # the rest would wait on the same lock: retried together
            if full:
                runs.append((full, engine.project.sync(progress=progress), None))
            elif live:
                only = sorted(live)
                runs.append(("edit", engine.project.sync(only=only), only))
            return runs

        try:
            return await self._ls.run_engine(work, method="project sync")
        except JsonRpcException as exc:  # logged by run_engine with its type and frames
            only = None if full else sorted({*forced, *live})
            reason = full or ("tool" if forced else "edit")
            failure = ProjectSyncResult(
                status="error",
                project_path=self.project_path,
                error=f"project sync failed: {bounded_text(exc.message, MESSAGE_CHARS)}",
            )
            return [(reason, failure, only)]

    def report(
        self,
        reason: str,
        result: ProjectSyncResult,
        only: list[str] | None,
        *,
        retry_in_ms: int | None = None,
        reasons: list[str] | None = None,
    ) -> None:
        """`ds4/indexUpdated` for one sync: `result`'s wire JSON plus `reason`, `only`
        (relative to the folders), and `retryInMs` (the first locked attempt of an outage) or
        `reasons` (the sync that ends one) when given; and a log line (counts only)."""
        params = {**result.to_wire(), "reason": reason, "only": self._relative(only)}
        if retry_in_ms is not None:
            params["retryInMs"] = retry_in_ms
        if reasons is not None:
            params["reasons"] = reasons
        self._ls.protocol.notify(DS4_INDEX_UPDATED, params)
        self._ls.log_request(DS4_INDEX_UPDATED, f"reason={reason} {result.log_summary()}")

    # ------------------------------------------------------------------ helpers

    def _live_texts(self, uris: Iterable[str]) -> dict[str, str | None]:
        """path -> the buffer's text now, or None when it is no longer open."""
        documents = self._ls.workspace.text_documents
        live: dict[str, str | None] = {}
        for uri in uris:
            path = to_fs_path(uri)
            if path is not None:
                document = documents.get(document_key(uri))
                live[path] = document.source if document is not None else None
        return live

    def open_uris(self) -> list[str]:
        """URIs of the open text documents (file: URIs only)."""
        return [
            document.uri
            for document in self._ls.workspace.text_documents.values()
            if to_fs_path(document.uri) is not None
        ]

    def _relative(self, paths: list[str] | None) -> list[str] | None:
        """`paths` relative to the workspace folder they lie in (POSIX form; the deepest
        folder, under its canonical root or the root as the client named it); others
        unchanged. With several folders, `ds4/indexUpdated` `folders[].only` says which."""
        if paths is None:
            return None
        named = [Path(path) for _name, path in self.folders]
        canonical = [Path(r) for r in self.folder_paths]
        roots = sorted({*canonical, *named}, key=lambda root: len(root.parts), reverse=True)
        relative = []
        for path in paths:
            for root in roots:
                try:
                    relative.append(Path(path).relative_to(root).as_posix())
                    break
                except ValueError:
                    continue
            else:
                relative.append(Path(path).as_posix())
        return relative

    def _schedule(self, delay: float) -> None:
        """(Re)start the debounce timer: `flush` runs `delay` seconds after the last call."""
        self._cancel_timer()
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(delay, lambda: self.spawn(self.flush()))

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancel_pending(self) -> None:
        self._cancel_timer()
        self._buffers, self._forced, self._full_reason = set(), set(), None
        self._locked_attempts = 0
        self._outage_reasons = []

    def lag_warning(self) -> str | None:
        """A warning for a `ds4/plan` or `ds4/retrieve` answered while a sync waits on a
        locked database (its pending edits are not in the index yet), else None."""
        if not (self.active and self._locked_attempts):
            return None
        pending = self._outage_edits  # the sets may be out with a retry in flight
        what = f"{pending} pending edit(s)" if pending else "pending changes"
        return (
            f"the project index is behind: {what} could not be indexed because another "
            "connection holds the database lock; the server keeps retrying"
        )

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        """Run `coroutine` as a tracked background task in a fresh context (so it does not
        inherit a command's `workDoneToken`); its failure is logged by type."""
        task = asyncio.get_running_loop().create_task(coroutine, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.error("background project task failed: %s", type(error).__name__)

    async def stop(self) -> None:
        """Cancel the debounce timer and every background task (at `shutdown`)."""
        self._cancel_pending()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
