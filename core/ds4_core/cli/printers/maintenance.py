"""The reports of the database commands: `ds4 index` (one row per session file synced),
`ds4 health` (one line per health field) and `ds4 rebuild` (totals and failures)."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import TextIO

from ...quoting import terminal_text
from ...results import HealthResult, RebuildResult, SyncReport
from ...wire import camel_case, to_wire
from ..layout import fmt, table, write_wrapped
from ..terminal import report_width
from .usage import calibration_text


def print_index(reports: Sequence[SyncReport], out: TextIO) -> None:
    """The `ds4 index` table: session, outcome (and reason), entries, malformed lines,
    milliseconds and file name of each file that was synced (nothing when none was)."""
    if not reports:
        return
    table(
        [
            [
                r.session_id or "-",
                r.outcome + (f" ({r.reason})" if r.reason else ""),
                fmt(r.entries_total),
                fmt(r.malformed_lines),
                f"{r.duration_ms:.1f}",
                os.path.basename(r.session_file),
            ]
            for r in reports
        ],
        ["session", "outcome", "entries", "malformed", "ms", "file"],
        out,
    )


def print_health(health: HealthResult, out: TextIO) -> None:
    """The `ds4 health` report: each field of `health` on a line of its own, its wire name
    then its value (a list joined by `; `, an object such as `project` as `key value` pairs
    without its null ones; `calibration` one profile after the other, `calibration_text`),
    aligned when the width allows."""
    for field in dataclasses.fields(health):
        key = camel_case(field.name)
        value = to_wire(getattr(health, field.name))
        if field.name == "calibration":
            value = "; ".join(calibration_text(p) for p in value) if value else "no usage reported"
        elif isinstance(value, list):
            value = "; ".join(str(v) for v in value) if value else "none"
        elif isinstance(value, dict):
            value = ", ".join(
                f"{k} {json.dumps(v) if isinstance(v, dict | list | bool) else v}"
                for k, v in value.items()
                if v is not None
            )
        if report_width() >= 60:  # aligned values, else a label of its own width
            write_wrapped(out, terminal_text(value), f"  {key:<20} ", " " * 23)
        else:
            write_wrapped(out, terminal_text(value), f"  {key}: ", " " * 4)


def print_rebuild(result: RebuildResult, out: TextIO) -> None:
    """The `ds4 rebuild` report: sessions and entries rebuilt, the time taken, then one line per
    session that failed."""
    out.write(
        f"rebuilt {result.sessions} session(s), {fmt(result.entries)} entries "
        f"in {result.duration_ms:.0f} ms\n"
    )
    for failure in result.failed:
        out.write(
            f"  failed: {terminal_text(failure.session_file)}: {terminal_text(failure.error)}\n"
        )
