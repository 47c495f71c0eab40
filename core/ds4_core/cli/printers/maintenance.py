"""The reports of the database commands: `ds4 index` (one row per session file synced),
`ds4 health` (one line per health field) and `ds4 rebuild` (totals and failures)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any, TextIO

from ...quoting import terminal_text
from ..layout import fmt, table, write_wrapped
from ..terminal import report_width


def print_index(results: Sequence[dict[str, Any]], out: TextIO) -> None:
    """The `ds4 index` table: session, outcome (and reason), entries, malformed lines,
    milliseconds and file name of each file that was synced (nothing when none was)."""
    if not results:
        return
    table(
        [
            [
                r["sessionId"] or "-",
                r["outcome"] + (f" ({r['reason']})" if r.get("reason") else ""),
                fmt(r["entriesTotal"]),
                fmt(r["malformedLines"]),
                f"{r['durationMs']:.1f}",
                os.path.basename(r["sessionFile"]),
            ]
            for r in results
        ],
        ["session", "outcome", "entries", "malformed", "ms", "file"],
        out,
    )


def print_health(health: dict[str, Any], out: TextIO) -> None:
    """The `ds4 health` report: each field on a line of its own, its name then its value (a
    list joined by `; `, an object as `key value` pairs), aligned when the width allows."""
    for key, value in health.items():
        if isinstance(value, list):
            value = "; ".join(str(v) for v in value) if value else "none"
        elif isinstance(value, dict):
            value = ", ".join(
                f"{k} {json.dumps(v) if isinstance(v, dict | list) else v}"
                for k, v in value.items()
                if v is not None
            )
        if report_width() >= 60:  # aligned values, else a label of its own width
            write_wrapped(out, terminal_text(value), f"  {key:<20} ", " " * 23)
        else:
            write_wrapped(out, terminal_text(value), f"  {key}: ", " " * 4)


def print_rebuild(result: dict[str, Any], out: TextIO) -> None:
    """The `ds4 rebuild` report: sessions and entries rebuilt, the time taken, then one line per
    session that failed."""
    out.write(
        f"rebuilt {result['sessions']} session(s), {fmt(result['entries'])} entries "
        f"in {result['durationMs']:.0f} ms\n"
    )
    for failure in result["failed"]:
        out.write(
            f"  failed: {terminal_text(failure['sessionFile'])}:"
            f" {terminal_text(failure['error'])}\n"
        )
