"""The `ds4 retrieve` report: the search status and counters, the history hits (score, entry,
role, time, excerpt, reason), the project snippets of a trusted workspace and the commits of
its Git history (scope `git`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ...quoting import terminal_text
from ...results import CommitHit, ProjectHit, RetrieveResult
from ..layout import heading, one_line, room_left, table, write_warnings, write_wrapped
from .privacy import privacy_line

_WINDOW_WARNING = "context window of model"
"""Prefix of the engine's unknown-context-window warning, which `ds4 retrieve` does not print:
the CLI gives retrieve no model, and the window only bounds the evidence tokens."""


def print_retrieve(result: RetrieveResult, out: TextIO) -> None:
    """The `ds4 retrieve` report of `result`: status, hit count and latency, the search
    counters, a table of the history hits (reason under each), the project snippets when the
    project scope was searched, and the warnings (but the unknown-context-window one)."""
    stats = result.stats
    if "history" not in result.relevance and not result.history:
        # the history scope was not searched (e.g. `--scope git` alone): no history counters
        write_wrapped(out, f"status {result.status}", "ds4 retrieve: ", "  ")
    else:
        write_wrapped(
            out,
            f"status {result.status} · {len(result.history)} hit(s) · {stats.latency_ms:.2f} ms",
            "ds4 retrieve: ",
            "  ",
        )
        write_wrapped(
            out,
            f"candidates {stats.candidates} · duplicates {stats.duplicates}"
            f" · other branches {stats.alternate_branch_candidates}"
            f" · already in context {stats.already_in_context}",
            "  ",
            "  ",
        )
    _print_why(result.relevance.get("history"), "History", out)
    line = privacy_line(result.privacy)
    if line is not None and (result.privacy or {}).get("destination") is not None:
        write_wrapped(out, line, "  privacy: ", "    ")
    out.write("\n")
    hits = result.history
    if hits:
        scores = [f"{h.score:.3f}" for h in hits]
        ids = [str(h.entry_id) for h in hits]
        roles = [h.role or "-" for h in hits]
        created = [(h.created_at or "")[:19] for h in hits]
        room = room_left(
            ["score", *scores], ["entry", *ids], ["role", *roles], ["created", *created]
        )
        table(
            [
                [score, entry_id, role, when, one_line(h.excerpt, room)]
                for score, entry_id, role, when, h in zip(
                    scores, ids, roles, created, hits, strict=True
                )
            ],
            ["score", "entry", "role", "created", "excerpt"],
            out,
            [h.reason for h in hits],
        )
    if result.project_status is not None:
        _print_project_hits(
            result.project_status, result.project, out, result.relevance.get("project")
        )
    if result.git_status is not None:
        _print_commits(result.git_status, result.git or (), out, result.relevance.get("git"))
    write_warnings(out, [w for w in result.warnings if not w.startswith(_WINDOW_WARNING)])


def _print_why(relevance: Mapping[str, Any] | None, scope: str, out: TextIO) -> None:
    """`<scope>: nothing sent: <why>` when the scope's relevance says why nothing was sent
    (e.g. no candidate reached the relevance floor); nothing otherwise."""
    why = relevance.get("why") if isinstance(relevance, Mapping) else None
    if why:
        write_wrapped(out, f"{scope}: nothing sent: {terminal_text(str(why))}", "  ", "  ")


def _print_project_hits(
    status: str, hits: Sequence[ProjectHit], out: TextIO, relevance: Mapping[str, Any] | None
) -> None:
    """The project section: the project search `status`, why nothing was sent (when so) and
    a table of its snippets."""
    heading(out, f"Project: status {terminal_text(status)} · {len(hits)} snippet(s)")
    _print_why(relevance, "Project", out)
    if hits:
        table(
            [
                [
                    f"{h.score:.3f}",
                    f"{h.path}:{h.start_line}-{h.end_line}",
                    "modified" if h.modified else "",
                ]
                for h in hits
            ],
            ["score", "lines", "tree"],
            out,
            [h.reason for h in hits],
        )


def _print_commits(
    status: str, hits: Sequence[CommitHit], out: TextIO, relevance: Mapping[str, Any] | None
) -> None:
    """The git section: the git search `status`, why nothing was sent (when so) and a table of
    its commits (score, short hash, date, subject; the reason and changed files under each)."""
    heading(out, f"Git history: status {terminal_text(status)} · {len(hits)} commit(s)")
    _print_why(relevance, "Git history", out)
    if hits:
        scores = [f"{h.score:.3f}" for h in hits]
        hashes = [h.hash[:12] for h in hits]
        dates = [h.committed_at[:10] for h in hits]
        room = room_left(["score", *scores], ["commit", *hashes], ["date", *dates])
        table(
            [
                [score, commit, date, one_line(h.subject or "(message withheld)", room)]
                for score, commit, date, h in zip(scores, hashes, dates, hits, strict=True)
            ],
            ["score", "commit", "date", "subject"],
            out,
            [
                f"{h.reason} · files: {', '.join(h.files[:5])}"
                + (f" (+{h.files_total - 5} more)" if h.files_total > 5 else "")
                for h in hits
            ],
        )
