"""Provenance of project snippets sent to a model, and which of them have gone stale.

When a plan injects project snippets, their lines and text are remembered: for a stored plan
in `project_sent_snippets` (deleted with the manifest when it is pruned), for a plan whose
manifest is not stored (no session, `diagnostics.storeContextManifest` off, too large, storage
failing) in a bounded in-memory `SentWindowMemory` for the life of the engine (nothing of such
a plan is written to disk). A snippet is *stale* when the live text of its file no longer has
those lines; the LSP layer shows it as an Information diagnostic (code `stale-snippet`) over
the changed lines, with a hover naming the plan.

Every window a plan sent is checked on its own, also when two windows of one plan overlap
(lines 273-352 and 341-420). A newer plan supersedes the lines it sent: a changed line of an
older window that a newer plan's window also covers does not count, so sending the current
text clears the diagnostic.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..lines import split_lines
from ..store import Store

TRUNCATION_MARKER = "[DS4 snippet truncated]"

MEMORY_WINDOWS = 512
"""Sent windows of unstored plans kept in memory (`SentWindowMemory`), newest first; with
windows bounded to `windows.MAX_SNIPPET_CHARS` characters that is at most about 8 M
characters."""


class SentSnippet(Protocol):
    """What is recorded of a sent project hit (a `ProjectHit` satisfies it)."""

    @property
    def snippet_id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def file_hash(self) -> str: ...
    @property
    def start_line(self) -> int: ...
    @property
    def end_line(self) -> int: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class SentWindow:
    """One window a plan sent: lines `start_line`..`end_line` (1-based, inclusive) of
    `file_path` (relative to `project_path`) whose text was `content`, hashed `file_hash`."""

    manifest_id: str
    snippet_id: str
    project_path: str
    file_path: str
    file_hash: str
    start_line: int
    end_line: int
    content: str
    sent_at: str


def sent_windows(
    manifest_id: str, project_path: str, sent_at: str, hits: Sequence[SentSnippet]
) -> list[SentWindow]:
    """The `SentWindow` of each hit a plan sent."""
    return [
        SentWindow(
            manifest_id,
            h.snippet_id,
            project_path,
            h.path,
            h.file_hash,
            h.start_line,
            h.end_line,
            h.text,
            sent_at,
        )
        for h in hits
    ]


def record_sent_snippets(
    store: Store, manifest_id: str, project_path: str, sent_at: str, hits: Sequence[SentSnippet]
) -> None:
    """Record that the stored manifest `manifest_id` sent `hits` (one write transaction).

    The manifest row must exist (foreign key; the rows go when the manifest is pruned).
    """
    rows = [
        (
            w.manifest_id,
            w.snippet_id,
            w.project_path,
            w.file_path,
            w.file_hash,
            w.start_line,
            w.end_line,
            w.content,
            w.sent_at,
        )
        for w in sent_windows(manifest_id, project_path, sent_at, hits)
    ]
    with store.write() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO project_sent_snippets (manifest_id, snippet_id, project_path, "
            "file_path, file_hash, start_line, end_line, content, sent_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


class SentWindowMemory:
    """Thread-safe memory of the windows sent by plans whose manifest is not stored.

    Holds at most `capacity` windows; adding more forgets the oldest (least recently sent)
    first. Lives as long as its engine: a restarted server forgets them.

    Raises:
        ValueError: from the constructor if `capacity < 1`.
    """

    def __init__(self, capacity: int = MEMORY_WINDOWS) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity!r} must be at least 1")
        self.capacity = capacity
        self._lock = threading.Lock()
        self._windows: OrderedDict[tuple[str, str], SentWindow] = OrderedDict()

    def add(self, windows: Iterable[SentWindow]) -> None:
        """Remember `windows` (a window sent again by the same plan replaces itself)."""
        with self._lock:
            for window in windows:
                key = (window.manifest_id, window.snippet_id)
                self._windows.pop(key, None)
                self._windows[key] = window
            while len(self._windows) > self.capacity:
                self._windows.popitem(last=False)

    def of_file(self, project_path: str, file_path: str) -> list[SentWindow]:
        """The remembered windows of one file."""
        with self._lock:
            return [
                w
                for w in self._windows.values()
                if w.project_path == project_path and w.file_path == file_path
            ]

    def paths(self, project_path: str) -> list[str]:
        """Files of `project_path` with remembered windows."""
        with self._lock:
            found = (w.file_path for w in self._windows.values() if w.project_path == project_path)
            return list(dict.fromkeys(found))

    def __len__(self) -> int:
        with self._lock:
            return len(self._windows)


def sent_paths(
    store: Store, project_path: str, memory: SentWindowMemory | None = None
) -> list[str]:
    """Files of `project_path` that plans sent snippets of (stored, then remembered ones)."""
    rows = store.connection().execute(
        "SELECT DISTINCT file_path FROM project_sent_snippets WHERE project_path = ?",
        (project_path,),
    )
    paths = [row[0] for row in rows]
    if memory is not None:
        paths.extend(p for p in memory.paths(project_path) if p not in paths)
    return paths


def stored_windows(store: Store, project_path: str, file_path: str) -> list[SentWindow]:
    """The windows stored plans sent of one file."""
    rows = store.connection().execute(
        "SELECT manifest_id, snippet_id, file_hash, start_line, end_line, content, sent_at "
        "FROM project_sent_snippets WHERE project_path = ? AND file_path = ?",
        (project_path, file_path),
    )
    return [
        SentWindow(m, s, project_path, file_path, h, start, end, content, at)
        for m, s, h, start, end, content, at in rows
    ]


def _sent_lines(content: str) -> list[str]:
    """The whole lines of a sent window's text (a truncated last line left out)."""
    truncated = content.endswith(TRUNCATION_MARKER)
    body = content[: -len(TRUNCATION_MARKER)] if truncated else content
    lines = split_lines(body.rstrip("\r\n") if body.endswith(("\n", "\r")) else body)
    return lines[:-1] if truncated else lines


def stale_windows(
    windows: Iterable[SentWindow],
    live_lines: list[str] | None,
    line_view: Callable[[str], str] = lambda line: line,
) -> list[dict[str, Any]]:
    """The stale ones of `windows` (all of one file) against its live lines, newest plan first.

    `live_lines` None means the file is gone or no longer indexable: every window not
    superseded is stale. `line_view` maps a live line to the form it has in a sent window
    (the project index cuts overlong lines). Each item: {snippetId, startLine, endLine,
    manifestId, sentAt, change, changeStartLine, changeEndLine}; `startLine`/`endLine` are the
    window, `changeStartLine`..`changeEndLine` the changed lines of it that no newer plan sent
    again (1-based, inclusive, in the file as it was sent).
    """
    ordered = sorted(windows, key=lambda w: (w.sent_at, w.manifest_id), reverse=True)
    stale: list[dict[str, Any]] = []
    newer: list[tuple[int, int]] = []  # lines sent by plans newer than the current one
    plan_lines: list[tuple[int, int]] = []
    current_plan: tuple[str, str] | None = None
    for window in ordered:
        plan = (window.sent_at, window.manifest_id)
        if plan != current_plan:
            newer.extend(plan_lines)
            plan_lines, current_plan = [], plan
        plan_lines.append((window.start_line, window.end_line))
        start = window.start_line
        sent = _sent_lines(window.content)
        live = (
            None
            if live_lines is None
            else [line_view(line) for line in live_lines[start - 1 : start - 1 + len(sent)]]
        )
        changed = [
            start + i
            for i in range(len(sent))
            if live is None or i >= len(live) or sent[i] != live[i]
        ]
        # Lines a newer plan sent again are not stale here (that plan's window says if they are).
        remaining = [n for n in changed if not any(a <= n <= b for a, b in newer)]
        if not remaining:
            continue
        first, last = remaining[0], remaining[-1]
        if live is None:
            change = "the file was deleted or can no longer be indexed"
        elif not live:
            change = f"lines {first}-{last} no longer exist"
        else:
            change = f"line {first} changed" if first == last else f"lines {first}-{last} changed"
        stale.append(
            {
                "snippetId": window.snippet_id,
                "startLine": window.start_line,
                "endLine": window.end_line,
                "manifestId": window.manifest_id,
                "sentAt": window.sent_at,
                "change": change,
                "changeStartLine": first,
                "changeEndLine": last,
            }
        )
    return stale


def stale_snippets_for(
    store: Store,
    project_path: str,
    file_path: str,
    live_text: str | None,
    memory: SentWindowMemory | None = None,
    line_view: Callable[[str], str] = lambda line: line,
) -> list[dict[str, Any]]:
    """Windows sent of `file_path` (by stored plans and, with `memory`, unstored ones) whose
    lines differ from `live_text`, newest plan first (`stale_windows` gives the items).

    `live_text` None means the file is gone or no longer indexable.
    """
    windows = stored_windows(store, project_path, file_path)
    if memory is not None:
        windows.extend(memory.of_file(project_path, file_path))
    if not windows:
        return []  # nothing was sent from this file: no need to split its text
    live = split_lines(live_text) if live_text is not None else None
    return stale_windows(windows, live, line_view)
