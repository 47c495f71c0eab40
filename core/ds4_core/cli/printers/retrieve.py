"""The `ds4 retrieve` report: the search status and counters, the history hits (score, entry,
role, time, excerpt, reason) and the project snippets of a trusted workspace."""

from __future__ import annotations

from typing import Any, TextIO

from ...quoting import terminal_text
from ..layout import heading, one_line, room_left, table, write_warnings, write_wrapped

_WINDOW_WARNING = "context window of model"
"""Prefix of the engine's unknown-context-window warning, which `ds4 retrieve` does not print:
the CLI gives retrieve no model, and the window only bounds the evidence tokens."""


def print_retrieve(result: dict[str, Any], out: TextIO) -> None:
    stats = result["stats"]
    write_wrapped(
        out,
        f"status {result['status']} · {len(result['history'])} hit(s)"
        f" · {stats['latencyMs']:.2f} ms",
        "ds4 retrieve: ",
        "  ",
    )
    write_wrapped(
        out,
        f"candidates {stats['candidates']} · duplicates {stats['duplicates']}"
        f" · other branches {stats['alternateBranchCandidates']}"
        f" · already in context {stats['alreadyInContext']}",
        "  ",
        "  ",
    )
    out.write("\n")
    hits = result["history"]
    if hits:
        scores = [f"{h['score']:.3f}" for h in hits]
        ids = [str(h["entryId"]) for h in hits]
        roles = [h["role"] or "-" for h in hits]
        created = [(h.get("createdAt") or "")[:19] for h in hits]
        room = room_left(
            ["score", *scores], ["entry", *ids], ["role", *roles], ["created", *created]
        )
        table(
            [
                [score, entry_id, role, when, one_line(h["excerpt"], room)]
                for score, entry_id, role, when, h in zip(
                    scores, ids, roles, created, hits, strict=True
                )
            ],
            ["score", "entry", "role", "created", "excerpt"],
            out,
            [h["reason"] for h in hits],
        )
    if result.get("projectStatus") is not None:
        _print_project_hits(result, out)
    write_warnings(
        out, [w for w in result.get("warnings", []) if not w.startswith(_WINDOW_WARNING)]
    )


def _print_project_hits(result: dict[str, Any], out: TextIO) -> None:
    hits = result.get("project") or []
    heading(
        out, f"Project: status {terminal_text(result['projectStatus'])} · {len(hits)} snippet(s)"
    )
    if hits:
        table(
            [
                [
                    f"{h['score']:.3f}",
                    f"{h['path']}:{h['startLine']}-{h['endLine']}",
                    "modified" if h.get("modified") else "",
                ]
                for h in hits
            ],
            ["score", "lines", "tree"],
            out,
            [h["reason"] for h in hits],
        )
