"""Provenance of project snippets sent to a model, and which of them have gone stale.

When a stored plan injects project snippets, their lines and text are recorded against the
manifest (`project_sent_snippets`, deleted with the manifest when it is pruned). A snippet is
*stale* when the live text of its file no longer has those lines; the LSP layer shows it as an
Information diagnostic (code `stale-snippet`) with a hover naming the plan. A newer plan that
sent lines overlapping an older snippet supersedes it, so sending the current text clears the
diagnostic. Ephemeral plans record nothing (nothing of them is written to disk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ..lines import split_lines
from ..store import Store

TRUNCATION_MARKER = "[DS4 snippet truncated]"


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


def record_sent_snippets(
    store: Store, manifest_id: str, project_path: str, sent_at: str, hits: Sequence[SentSnippet]
) -> None:
    """Record that the stored manifest `manifest_id` sent `hits` (one write transaction).

    The manifest row must exist (foreign key; the rows go when the manifest is pruned).
    """
    rows = [
        (
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
    with store.write() as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO project_sent_snippets (manifest_id, snippet_id, project_path, "
            "file_path, file_hash, start_line, end_line, content, sent_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def describe_change(sent: list[str], live: list[str], start_line: int) -> str | None:
    """None when the live lines equal what was sent, else a short description (1-based lines)."""
    if sent == live:
        return None
    if not live:
        return f"lines {start_line}-{start_line + len(sent) - 1} no longer exist"
    first = next(
        (i for i, (a, b) in enumerate(zip(sent, live, strict=False)) if a != b),
        min(len(sent), len(live)),
    )
    last_sent, last_live = len(sent) - 1, len(live) - 1
    while last_sent > first and last_live > first and sent[last_sent] == live[last_live]:
        last_sent -= 1
        last_live -= 1
    a, b = start_line + first, start_line + max(first, last_sent)
    return f"line {a} changed" if a == b else f"lines {a}-{b} changed"


def sent_paths(store: Store, project_path: str) -> list[str]:
    """Files of `project_path` that stored plans sent snippets of."""
    rows = store.connection().execute(
        "SELECT DISTINCT file_path FROM project_sent_snippets WHERE project_path = ?",
        (project_path,),
    )
    return [row[0] for row in rows]


def stale_snippets_for(
    store: Store, project_path: str, file_path: str, live_text: str | None
) -> list[dict[str, Any]]:
    """Sent snippets of `file_path` whose lines differ from `live_text`, newest plan first.

    `live_text` None means the file is gone or no longer indexable: the newest snippets are
    all stale. Each item: {snippetId, startLine, endLine, manifestId, sentAt, change}; lines
    are 1-based inclusive, in the file as it was sent.
    """
    rows = (
        store.connection()
        .execute(
            "SELECT manifest_id, snippet_id, start_line, end_line, content, sent_at "
            "FROM project_sent_snippets WHERE project_path = ? AND file_path = ? "
            "ORDER BY sent_at DESC, manifest_id DESC",
            (project_path, file_path),
        )
        .fetchall()
    )
    if not rows:
        return []  # nothing was sent from this file: no need to split its text
    live = split_lines(live_text) if live_text is not None else None
    covered: list[tuple[int, int]] = []
    stale: list[dict[str, Any]] = []
    for manifest_id, snippet_id, start, end, content, sent_at in rows:
        if any(start <= b and a <= end for a, b in covered):
            continue  # a newer plan sent (some of) these lines
        covered.append((start, end))
        if live is None:
            change: str | None = "the file was deleted or can no longer be indexed"
        else:
            body = (
                content[: -len(TRUNCATION_MARKER)]
                if content.endswith(TRUNCATION_MARKER)
                else content
            )
            sent_lines = split_lines(body.rstrip("\r\n") if body.endswith(("\n", "\r")) else body)
            if content.endswith(TRUNCATION_MARKER):
                sent_lines = sent_lines[:-1]  # the truncated last line cannot be compared
            current = live[start - 1 : start - 1 + len(sent_lines)]
            change = describe_change(sent_lines, current, start)
        if change is not None:
            stale.append(
                {
                    "snippetId": snippet_id,
                    "startLine": start,
                    "endLine": end,
                    "manifestId": manifest_id,
                    "sentAt": sent_at,
                    "change": change,
                }
            )
    return stale
