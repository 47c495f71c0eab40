"""`ds4`: the context engine on the command line.

    ds4 [GLOBAL] plan --session FILE [--leaf ID] [--model PROVIDER/ID] [--context-window N]
                      [--fixed-tokens N] [--workspace DIR [--trust]] [--json] REQUEST
    ds4 [GLOBAL] retrieve [--session FILE] [--leaf ID] [--max-results N]
                          [--scope history|project]... [--workspace DIR [--trust]] [--json] QUERY

A REQUEST or QUERY of `-` is read from standard input (UTF-8; one trailing line break
dropped); standard input or a text argument (REQUEST, QUERY, ID, --leaf, --model,
--first-kept) that is not UTF-8 is refused with exit 2. Text reports fit the terminal's width
(`COLUMNS`, else 100 columns off a terminal): long lines wrap, and table columns that do not
fit move under their row as `header: value`.
    ds4 [GLOBAL] manifest (ID | --latest --session FILE)
                          [--view summary|included|excluded|full] [--json]
    ds4 [GLOBAL] index [--force] [--json] (FILE | DIR)...
    ds4 [GLOBAL] compact --session FILE [--leaf ID] [--reason manual|threshold|overflow]
                         [--first-kept ID] [--json | --entry]
    ds4 [GLOBAL] summaries --session FILE [--leaf ID] [--json | --dot] [--output PATH]
    ds4 [GLOBAL] health [--json]
    ds4 [GLOBAL] rebuild [--json]

GLOBAL options, before the command: `--db PATH`, `--settings-file FILE`, `--set KEY=VALUE`
(repeatable; settings of docs/configuration.md), `-v` (counts and timings on stderr),
`--version`.

`--json` prints exactly the object the matching LSP request returns (docs/protocol.md):
`plan` the `ds4/plan` result, `retrieve` the `ds4/retrieve` result, `manifest` the
`ds4/manifest` result, `health` the `ds4.health` result without `server`, `rebuild` the
`ds4.rebuildIndex` result (failures in its `failed`). `index` has no LSP request: it prints a
list with one object per FILE (a DIR: per `.jsonl` file directly in it, by name), in order: the file's sync result (`sessionId`,
`sessionFile`, `outcome`, `reason`, `entriesAdded`, `entriesTotal`, `malformedLines`,
`bytesRead`, `durationMs`, as in `ds4.rebuildIndex` `results`), or `{sessionFile, error}` for a
file that could not be indexed (so a failure never disappears from stdout; tell the two apart
by `error`). JSON output is ASCII (`json_text`: non-ASCII characters and lone surrogates as
`\\uXXXX` escapes), printed whole; text reports escape what the output encoding cannot show.

`compact` prepares one compaction with the offline summarizer (the CLI has no model): `--json`
prints the `ds4/compact` result, `--entry` the Pi compaction entry to append (one JSON line).
ds4 never writes the session file: the batch stays `prepared` until the session contains
that entry; the next sync then marks it `committed`. `summaries` shows the session's summary graph:
`--json` prints the `ds4.summaries` view, `--dot` Graphviz DOT.

Exit codes: 0 success; 1 unexpected internal error; 2 bad usage or input you can fix (the
message says what to do), including a database that cannot be opened or stays locked by
another writer past `storage.busyTimeoutMs`; 3 some session files could not be indexed or
rebuilt (the others were; for `index` a file that is missing, unreadable or not a Pi session,
a `.jsonl` that is not a regular file (a FIFO, a directory, a broken link), a file whose name
is not valid UTF-8, or one that met a locked database); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import secrets
import shlex
import shutil
import sqlite3
import stat
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from . import __version__
from .config import flatten_settings
from .engine import ContextEngine
from .lines import split_lines
from .quoting import terminal_text
from .requests import (
    CompactRequest,
    DatabaseUnavailableError,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    RetrieveRequest,
    SessionRef,
)
from .store.database import database_locked_message, is_database_locked, utc_now_iso

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_PARTIAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130
"""Ctrl-C, as a shell reports a process killed by SIGINT (128 + 2)."""

_OPTION_OF_FIELD: dict[str, dict[str, str]] = {
    "plan": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "model.contextWindow": "--context-window",
        "fixedTokens": "--fixed-tokens",
    },
    "retrieve": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "maxResults": "--max-results",
    },
    "manifest": {"session.file": "--session", "view": "--view"},
    "compact": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "firstKeptEntryId": "--first-kept",
        "reason": "--reason",
    },
    "summaries": {
        "file": "--session",
        "session.file": "--session",
        "session.leafId": "--leaf",
        "output": "--output",
    },
}
"""Engine request fields (wire spelling) -> the `ds4` option that supplies them, per command."""


def _usage_message(exc: RequestError, command: str) -> str:
    """The engine's message for a bad input, naming the CLI option instead of the wire field."""
    text = str(exc)
    if exc.field:
        text = text.removeprefix(f"{exc.field}:").strip()
    option = _OPTION_OF_FIELD.get(command, {}).get(exc.field or "")
    return f"{option}: {text}" if option else text


_clock_s = time.monotonic
"""Seconds on a monotonic clock (a module attribute so tests can stand in for slow work)."""


class _Progress:
    """A one-line progress bar on stderr, shown only when work lasts over 0.3 s on a terminal."""

    def __init__(self, stream: TextIO = sys.stderr, delay_s: float = 0.3) -> None:
        self.stream = stream
        self.delay_s = delay_s
        self.started = _clock_s()
        self.width = 0
        try:
            self.enabled = stream.isatty()
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            self.enabled = False

    def __call__(self, done: int, total: int, message: str) -> None:
        if not self.enabled or _clock_s() - self.started < self.delay_s:
            return
        size = 30
        fraction = max(0.0, min(1.0, done / total)) if total else 0.0
        filled = int(size * fraction)
        line = f"[{'#' * filled}{'-' * (size - filled)}] {fraction * 100:5.1f}%  {message[:40]}"
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = max(self.width, len(line))

    @property
    def shown(self) -> bool:
        """Whether the bar was drawn (and `close` must erase it)."""
        return self.width > 0

    def close(self) -> None:
        """Erase the bar, leaving the cursor at the start of an empty line."""
        if self.shown:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


REPORT_WIDTH = 100
"""Width (characters) of the text reports when stdout is not a terminal and `COLUMNS` is unset
(see `report_width`)."""

MIN_REPORT_WIDTH = 40
"""The narrowest width (characters) a report is laid out for, however narrow the terminal."""


def report_width() -> int:
    """Width (characters) the text reports wrap reasons at and fit excerpts into: `COLUMNS`
    when set, else the width of the terminal on stdout, else `REPORT_WIDTH`
    (`shutil.get_terminal_size`); never below `MIN_REPORT_WIDTH`."""
    return max(MIN_REPORT_WIDTH, shutil.get_terminal_size((REPORT_WIDTH, 24)).columns)


_WINDOW_WARNING = "context window of model"
"""Prefix of the engine's unknown-context-window warning, which `ds4 retrieve` does not print:
the CLI gives retrieve no model, and the window only bounds the evidence tokens."""

_KIND_LABELS = {
    "background": "older",
    "current": "current turn",
    "recent": "recent",
    "summary": "summary",
    "system": "system",
    "history": "evidence",
    "project": "project",
    "pin": "pinned",
    "memory": "memory",
    "tool": "tool",
}
"""Plan item kinds as the report names them."""

_SECTION_KINDS = frozenset({"recent", "current", "summary", "history", "project"})
"""Included item kinds with a section of their own in the plan report."""


def _fmt(n: int | float | None) -> str:
    if n is None:
        return "-"
    return f"{n:,}" if isinstance(n, int) else f"{n:,.3f}"


def _wrap(text: str, first: str, rest: str) -> str:
    """`text` on lines of at most `report_width()` characters, the first starting with `first`
    and the others with `rest` (whitespace runs collapsed; long words are never split)."""
    return textwrap.fill(
        " ".join(text.split()),
        width=max(report_width(), len(first) + 20, len(rest) + 20),
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _write_wrapped(out: TextIO, text: str, first: str, rest: str) -> None:
    """Write `text` as `_wrap` lays it out (at `report_width()`), ending with a line break."""
    out.write(_wrap(text, first, rest) + "\n")


def _heading(out: TextIO, text: str) -> None:
    """A section heading of a report: an empty line, then `text` wrapped at `report_width()`."""
    out.write("\n")
    _write_wrapped(out, text, "", "  ")


def _table(
    rows: Sequence[Sequence[Any]],
    headers: Sequence[str],
    out: TextIO,
    reasons: Sequence[str | None] | None = None,
) -> None:
    """An aligned table that fits `report_width()`: when the rows are wider, their last
    columns move, one `header: value` line each (wrapped), under the row, until the columns
    left fit (the first column always stays). `reasons[i]`, when given, is printed in full
    under row i as `why: ...`. Lines under a row are indented to the second column (4 spaces
    when that leaves under 20 characters), and wrapped at `report_width()`."""
    width = report_width()
    cells = [[terminal_text(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=False)]
    inline = len(headers)
    while inline > 1 and 2 + sum(w + 2 for w in widths[:inline]) - 2 > width:
        inline -= 1
    out.write(
        "  "
        + "  ".join(h.ljust(w) for h, w in zip(headers[:inline], widths, strict=False)).rstrip()
        + "\n"
    )
    for index, row in enumerate(cells):
        out.write(
            "  "
            + "  ".join(c.ljust(w) for c, w in zip(row[:inline], widths, strict=False)).rstrip()
            + "\n"
        )
        for header, cell in zip(headers[inline:], row[inline:], strict=False):
            if cell:
                label = f"{header}: "
                indent = _under_indent(widths[0], label)
                out.write(_wrap(cell, indent + label, indent + " " * len(label)) + "\n")
        reason = reasons[index] if reasons is not None and index < len(reasons) else None
        if reason:
            indent = _under_indent(widths[0], "why: ")
            out.write(_wrap(terminal_text(reason), indent + "why: ", indent + "     ") + "\n")


def _under_indent(first_width: int, label: str) -> str:
    """Indent of a `label` line under a `_table` row: to the second column, or 4 spaces when
    that would leave under 20 characters of `report_width()` for the text."""
    indent = 2 + first_width + 2
    return " " * (indent if indent + len(label) + 20 <= report_width() else 4)


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _room(*columns: Sequence[str]) -> int:
    """Characters left in a `report_width()` table row for a last column after `columns`
    (each the header and cells of one column). When under 30 are left, `_table` moves the
    last column under the row as `excerpt: ...`: then the room there (at least 20)."""
    width = report_width()
    taken = 2 + sum(max((len(c) for c in column), default=0) + 2 for column in columns)
    if width - taken >= 30:
        return width - taken
    first_width = max((len(c) for c in columns[0]), default=0) if columns else 0
    label = "excerpt: "  # the last column of the tables that ask
    return max(20, width - len(_under_indent(first_width, label)) - len(label))


def _evidence_excerpts(messages: list[dict[str, Any]]) -> dict[str, str]:
    """Map source entry ids of evidence messages in a plan to their quoted excerpt."""
    found: dict[str, str] = {}
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list) or not content or not isinstance(content[0], dict):
            continue
        text = content[0].get("text") or ""
        if not text.startswith("[DS4 HISTORICAL EVIDENCE"):
            continue
        source = excerpt = None
        for line in text.split("\n"):
            if line.startswith("Source entry: "):
                try:
                    source = json.loads(line[len("Source entry: ") :])
                except ValueError:
                    source = None
            elif line.startswith("Quoted content JSON: "):
                try:
                    excerpt = json.loads(line[len("Quoted content JSON: ") :])
                except ValueError:
                    excerpt = None
        if isinstance(source, str) and isinstance(excerpt, str):
            found[source] = excerpt
    return found


def _group_start(group_id: Any) -> tuple[int, str]:
    """Sort key of a planner group id `group:<start>-<end>` (start index first)."""
    text = str(group_id)
    head = text.partition(":")[2].partition("-")[0]
    return (int(head) if head.isdigit() else -1, text)


def _tokens(items: Sequence[dict[str, Any]]) -> int:
    return sum(i.get("tokens", 0) or 0 for i in items)


def _composition(items: Sequence[dict[str, Any]]) -> str:
    """`3 older, 1 summary, 1 current turn`: item counts by kind, in first-seen order."""
    kinds = Counter(str(i.get("kind", "?")) for i in items)
    return ", ".join(f"{n} {_KIND_LABELS.get(kind, kind)}" for kind, n in kinds.items())


def _print_plan(
    result: dict[str, Any], manifest: dict[str, Any], out: TextIO, db: str | None = None
) -> None:
    """The `ds4 plan` report. In mode `fallback` it says the original messages are sent
    unchanged and why, and lists them; in mode `observer` the sections are labelled as what a
    managed plan would have done. `db` is the `--db` given, repeated in the manifest hint."""
    model, budget, stats = result["model"], result["budget"], result.get("stats", {})
    mode = result["mode"]
    session = result.get("session")
    out.write("ds4 plan\n")
    if session:
        out.write(
            f"  session   {terminal_text(session['id'])}"
            f"  leaf {terminal_text(session.get('leafId'))}\n"
        )
        out.write(f"            {terminal_text(session['file'])}\n")
    source = model["source"]
    source_text = {
        "request": "from --context-window",
        "override": "from modelAwareness.overrides",
        "default": "unknown model: the default, see the warning below",
    }.get(source, f"from the table of well-known models ({source.removeprefix('table:')})")
    field = " " * 12  # where the values of `model`, `budget`, `result` lines start
    _write_wrapped(
        out,
        f"{terminal_text(model['provider'])}/{terminal_text(model['id'])}  "
        f"window {_fmt(model['contextWindow'])} tokens ({source_text})",
        "  model     ",
        field,
    )
    _write_wrapped(
        out,
        f"hard {_fmt(budget['hardInputLimit'])}"
        f" · target {_fmt(budget['targetInputTokens'])}"
        f" · output reserve {_fmt(budget['outputReserve'])}"
        f" · safety margin {_fmt(budget['safetyMargin'])}",
        "  budget    ",
        field,
    )
    _write_wrapped(
        out,
        f"recent tail ≤ {_fmt(budget['recentTailTokens'])}"
        f" · history ≤ {_fmt(budget['maxRetrievedHistoryTokens'])}"
        f" · project ≤ {_fmt(budget['maxProjectTokens'])}"
        f" · summaries ≤ {_fmt(budget['maxSummaryTokens'])}",
        field,
        field,
    )
    included, excluded = manifest.get("included", []), manifest.get("excluded", [])
    counts = stats.get("counts", {})
    messages_in = _fmt(counts.get("messages", 0))
    sent = _fmt(len(result["messages"]))
    if mode == "managed":
        _write_wrapped(
            out,
            f"mode managed · {messages_in} messages (active branch + request)"
            f" and {_fmt(counts.get('supplements', 0))} evidence candidate(s) → {sent} sent"
            f" · ~{_fmt(result['estimatedTokens'])} tokens",
            "  result    ",
            field,
        )
    else:
        _write_wrapped(
            out,
            f"mode {mode} · {messages_in} messages (active branch + request)"
            f" → the same {sent} sent unchanged · ~{_fmt(result['estimatedTokens'])} tokens",
            "  result    ",
            field,
        )
    if mode == "fallback":
        out.write(
            _wrap(
                "ds4 did not plan this call, so the original messages are sent unchanged. "
                f"Why: {terminal_text(result.get('fallbackReason') or 'not reported')}",
                "  fallback  ",
                " " * 12,
            )
            + "\n"
        )
        _print_fallback_items(included, excluded, out)
    else:
        would = mode == "observer"
        if would:
            planned = stats.get("plannedTokens")
            out.write(
                _wrap(
                    "observer mode (context.mode) records the plan but sends the original "
                    "messages unchanged. The sections below are what a managed plan would "
                    f"have done: send {_fmt(counts.get('output', 0))} messages, "
                    f"~{_fmt(planned)} tokens.",
                    "  observer  ",
                    " " * 12,
                )
                + "\n"
            )
        _print_plan_sections(result, manifest, included, excluded, would, out)
    out.write("\n")
    if result.get("manifestStored"):
        db_option = f"--db {terminal_text(shlex.quote(db))} " if db else ""
        _write_wrapped(out, f"{result['manifestId']} (stored); inspect with:", "Manifest  ", field)
        # the command on a line of its own, never broken, so that it can be copied
        out.write(f"  ds4 {db_option}manifest {result['manifestId']} --view full\n")
    else:
        _write_wrapped(
            out,
            f"{result['manifestId']} (not stored: kept in this process's memory only, "
            "so `ds4 manifest` cannot show it later)",
            "Manifest  ",
            field,
        )
    for warning in result.get("warnings", []):
        _write_wrapped(out, terminal_text(warning), "warning: ", " " * 9)


def _print_fallback_items(
    included: list[dict[str, Any]], excluded: list[dict[str, Any]], out: TextIO
) -> None:
    """What a fallback plan sends (every original message) and drops (synthetic context)."""
    _heading(
        out,
        f"Sent unchanged: {_fmt(len(included))} message(s), {_fmt(_tokens(included))} tokens"
        + (f" ({_composition(included)})" if included else ""),
    )
    _write_wrapped(
        out,
        "nothing was trimmed to a recent tail, no evidence was added, no message was left out",
        "  ",
        "  ",
    )
    if excluded:
        _heading(
            out,
            f"Not sent: {_fmt(len(excluded))} item(s), {_fmt(_tokens(excluded))} tokens"
            " (a fallback adds no synthetic context)",
        )
        _print_excluded_table(excluded, out)


def _print_plan_sections(
    result: dict[str, Any],
    manifest: dict[str, Any],
    included: list[dict[str, Any]],
    excluded: list[dict[str, Any]],
    would: bool,
    out: TextIO,
) -> None:
    """Tail, summaries, evidence, project and exclusions of a managed plan; `would`: observer
    mode, where each section is what a managed plan would have done."""
    stats = result.get("stats", {})
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in included:
        by_kind.setdefault(item.get("kind", "?"), []).append(item)

    tail = by_kind.get("recent", []) + by_kind.get("current", [])
    groups = sorted({i.get("groupId") for i in tail if i.get("groupId")}, key=_group_start)
    _heading(
        out,
        f"{'Recent tail a managed plan would keep' if would else 'Recent tail kept'}: "
        f"{len(tail)} messages in {len(groups)} turn group(s), {_fmt(_tokens(tail))} tokens"
        + (" (immediate predecessor rescued)" if stats.get("rescuedImmediatePredecessor") else ""),
    )
    if groups:
        group_rows = []
        for group in groups[-8:]:
            members = [i for i in tail if i.get("groupId") == group]
            kinds = Counter(i["kind"] for i in members)
            group_rows.append(
                [
                    group,
                    len(members),
                    _fmt(_tokens(members)),
                    "current" if kinds.get("current") else "recent",
                    members[0].get("sourceId"),
                ]
            )
        if len(groups) > 8:
            out.write(f"  (showing the newest 8 of {len(groups)} groups)\n")
        _table(group_rows, ["group", "messages", "tokens", "kind", "first entry"], out)

    summaries = by_kind.get("summary", [])
    if summaries:
        _heading(
            out,
            f"{'Summaries a managed plan would keep' if would else 'Summaries kept'}: "
            f"{len(summaries)} item(s), {_fmt(_tokens(summaries))} tokens",
        )
        _table(
            [
                [s.get("sourceId"), _fmt(s.get("tokens")), s.get("groupId") or "-"]
                for s in summaries
            ],
            ["entry", "tokens", "group"],
            out,
        )

    others = [i for kind, items in by_kind.items() if kind not in _SECTION_KINDS for i in items]
    if others:
        _heading(
            out,
            f"{'Other items a managed plan would keep' if would else 'Other items kept'}: "
            f"{len(others)} item(s), {_fmt(_tokens(others))} tokens ({_composition(others)})",
        )

    _print_evidence(result, manifest, by_kind.get("history", []), would, out)

    project_status = (manifest.get("project") or {}).get("status")
    if project_status not in (None, "no-workspace"):
        _print_project_section(manifest, by_kind.get("project", []), project_status, would, out)

    count, tokens, note = _excluded_totals(manifest, excluded)
    _heading(
        out,
        f"{'A managed plan would exclude' if would else 'Excluded'}: {_fmt(count)} item(s), "
        f"{_fmt(tokens)} tokens{note}",
    )
    if excluded:
        _print_excluded_table(excluded, out)


def _excluded_totals(
    manifest: dict[str, Any], excluded: list[dict[str, Any]]
) -> tuple[int, int, str]:
    """(items, tokens, note) of the whole excluded list: a stored manifest over 256 KiB keeps
    only the first and last 128 excluded items, and its `excludedRollup` has the true totals."""
    rollup = manifest.get("excludedRollup")
    if not isinstance(rollup, dict) or not rollup.get("omitted"):
        return len(excluded), _tokens(excluded), ""
    count = rollup.get("total", len(excluded))
    tokens = rollup.get("tokens", _tokens(excluded))
    return count, tokens, f" (the table lists the first and last {len(excluded) // 2})"


def _print_evidence(
    result: dict[str, Any],
    manifest: dict[str, Any],
    evidence: list[dict[str, Any]],
    would: bool,
    out: TextIO,
) -> None:
    """Historical evidence: score | entry | excerpt, the full reason on the next line."""
    retrieval_reasons = {
        r.get("entryKey"): r.get("reason") or "" for r in manifest.get("retrieved", [])
    }
    _heading(
        out,
        f"{'Historical evidence a managed plan would add' if would else 'Historical evidence retrieved'}"
        f": {len(evidence)} item(s), {_fmt(_tokens(evidence))} tokens",
    )
    if not evidence:
        left_out = sum(1 for i in manifest.get("excluded", []) if i.get("kind") == "history")
        _write_wrapped(
            out,
            f"{left_out} older entr(ies) matched but none fit (see the exclusions below)"
            if left_out
            else "no older entry on the active branch matched the request",
            "  none: ",
            "        ",
        )
        return
    excerpts = _evidence_excerpts(result["messages"])
    ids = [str(item.get("sourceId")).split(":", 1)[-1] for item in evidence]
    scores = [f"{item.get('score', 0):.3f}" for item in evidence]
    reasons = [
        retrieval_reasons.get(str(item.get("sourceId"))) or item.get("reason") or ""
        for item in evidence
    ]
    if excerpts:
        room = _room(["score", *scores], ["entry", *ids])
        rows = [
            [score, entry_id, _one_line(excerpts.get(entry_id, ""), room)]
            for score, entry_id in zip(scores, ids, strict=True)
        ]
        _table(rows, ["score", "entry", "excerpt"], out, reasons)
    else:  # observer mode: the evidence messages were not sent, so there is no excerpt
        rows = [
            [score, entry_id, _fmt(item.get("tokens"))]
            for score, entry_id, item in zip(scores, ids, evidence, strict=True)
        ]
        _table(rows, ["score", "entry", "tokens"], out, reasons)


def _print_excluded_table(excluded: list[dict[str, Any]], out: TextIO) -> None:
    """Excluded items grouped by kind and reason, largest group first, reasons in full."""
    reasons: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in excluded:
        reasons.setdefault((item.get("kind", "?"), item.get("reason") or ""), []).append(item)
    ordered = sorted(reasons.items(), key=lambda kv: -len(kv[1]))
    _table(
        [[kind, len(items), _fmt(_tokens(items))] for (kind, _), items in ordered],
        ["kind", "items", "tokens"],
        out,
        [reason for (_, reason), _ in ordered],
    )


def _print_project_section(
    manifest: dict[str, Any],
    items: list[dict[str, Any]],
    status: str,
    would: bool,
    out: TextIO,
) -> None:
    snippets = {s["snippetId"]: s for s in manifest.get("projectSnippets") or []}
    _heading(
        out,
        f"{'Project snippets a managed plan would add' if would else 'Project snippets included'}"
        f": {len(items)} item(s), {_fmt(_tokens(items))} tokens (workspace {status})",
    )
    if status == "untrusted":
        _write_wrapped(
            out,
            "the workspace is untrusted, so its files were not read (--trust)",
            "  none: ",
            " " * 8,
        )
        return
    rows, reasons = [], []
    for item in items:
        snippet = snippets.get(str(item.get("sourceId")), {})
        lines = snippet.get("lines") or ["?", "?"]
        rows.append(
            [
                f"{item.get('score', 0):.3f}",
                f"{snippet.get('path', '?')}:{lines[0]}-{lines[1]}",
                "modified" if snippet.get("modified") else "",
            ]
        )
        reasons.append(snippet.get("reason") or item.get("reason") or "")
    if rows:
        _table(rows, ["score", "lines", "tree"], out, reasons)
    for dropped in (manifest.get("project") or {}).get("dropped", []):
        out.write(
            f"  left out {terminal_text(dropped['path'])}: {terminal_text(dropped['reason'])}\n"
        )


def _print_retrieve(result: dict[str, Any], out: TextIO) -> None:
    stats = result["stats"]
    _write_wrapped(
        out,
        f"status {result['status']} · {len(result['history'])} hit(s)"
        f" · {stats['latencyMs']:.2f} ms",
        "ds4 retrieve: ",
        "  ",
    )
    _write_wrapped(
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
        room = _room(["score", *scores], ["entry", *ids], ["role", *roles], ["created", *created])
        _table(
            [
                [score, entry_id, role, when, _one_line(h["excerpt"], room)]
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
    for warning in result.get("warnings", []):
        if not warning.startswith(_WINDOW_WARNING):
            _write_wrapped(out, terminal_text(warning), "warning: ", " " * 9)


def _print_project_hits(result: dict[str, Any], out: TextIO) -> None:
    hits = result.get("project") or []
    _heading(
        out, f"Project: status {terminal_text(result['projectStatus'])} · {len(hits)} snippet(s)"
    )
    if hits:
        _table(
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


def _print_manifest(manifest: dict[str, Any], out: TextIO) -> None:
    _write_wrapped(
        out,
        f"{terminal_text(manifest.get('id'))}  created {terminal_text(manifest.get('createdAt'))}",
        "manifest ",
        "  ",
    )
    for key in (
        "sessionId",
        "branchLeafId",
        "provider",
        "model",
        "contextWindow",
        "hardInputLimit",
        "targetInputTokens",
        "estimatedTokens",
        "promptHash",
        "plannerVersion",
        "policyVersion",
        "estimatorVersion",
    ):
        if key in manifest:
            out.write(f"  {key:<18} {terminal_text(manifest[key])}\n")
    planning = manifest.get("planning") or {}
    if planning:
        out.write(
            f"  {'mode':<18} {terminal_text(planning.get('mode'))}"
            + (
                f" ({terminal_text(planning.get('fallbackReason'))})"
                if planning.get("fallbackReason")
                else ""
            )
            + "\n"
        )
    counts = manifest.get("counts") or planning.get("counts") or {}
    for key, value in counts.items():
        out.write(f"  {terminal_text(key):<18} {terminal_text(value)}\n")
    for section in ("included", "excluded"):
        items = manifest.get(section)
        if items is None:
            continue
        out.write(f"\n{section} ({len(items)})\n")
        _table(
            [
                [
                    i.get("kind"),
                    f"{i['path']}:{i['lines'][0]}-{i['lines'][1]}"
                    if i.get("path") and i.get("lines")
                    else i.get("sourceId"),
                    i.get("groupId") or "-",
                    _fmt(i.get("tokens")),
                    f"{i.get('score') or 0:.3f}",
                    " ".join((i.get("reason") or "").split()),
                ]
                for i in items
            ],
            ["kind", "source", "group", "tokens", "score", "reason"],
            out,
        )


COMMIT_NOTE = (
    "ds4 never writes your session file; append this compaction entry through Pi (or your "
    "agent), and the next sync marks it committed."
)
"""What `ds4 compact` says about the batch it prepared (it is not in the session yet)."""


def _ends_with_newline(path: str) -> bool:
    """Whether the file at `path` is empty or ends with `\n` (False when unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() == 0:
                return True
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:
        return False


def compaction_entry(result: dict[str, Any]) -> dict[str, Any]:
    """The Pi compaction entry that carries a `ds4/compact` result (what `--entry` prints).

    `{"type": "compaction", "id", "parentId", "timestamp", "summary", "firstKeptEntryId",
    "tokensBefore", "details", "fromHook": true}`: the id is 8 random hex characters (as Pi
    makes them), the parent the leaf the compaction was prepared on, the timestamp now (ISO-8601
    UTC, milliseconds). `details.ds4ContextEngine.summaryId` is what lets the next sync mark
    the prepared batch committed. (A v1 session file has no ids: its reader numbers the
    appended line like any other, so the id and parent here are ignored there.)
    """
    compaction = result["compaction"]
    return {
        "type": "compaction",
        "id": secrets.token_hex(4),
        "parentId": result["session"]["leafId"],
        "timestamp": utc_now_iso(),
        "summary": compaction["summary"],
        "firstKeptEntryId": compaction["firstKeptEntryId"],
        "tokensBefore": compaction["tokensBefore"],
        "details": compaction["details"],
        "fromHook": True,
    }


def _yes_no(value: Any) -> str:
    return "yes" if value else "no"


def _print_compact(result: dict[str, Any], out: TextIO, session_arg: str) -> None:
    """The `ds4 compact` report: the span, the new nodes, validation, the summary text, and
    how the prepared batch becomes committed. `session_arg` is the --session given, repeated
    in the `--entry` hint."""
    span, validation, tokens = result["span"], result["validation"], result["tokens"]
    session = result["session"]
    out.write(
        f"ds4 compact: prepared {result['summaryKind']} {result['summaryId']}"
        f" (level {result['graphLevel']}) · {result['summarizer']} summary"
        f" · {result['durationMs']:.1f} ms\n"
    )
    out.write(
        f"  session     {terminal_text(session['id'])}"
        f"  leaf {terminal_text(session.get('leafId'))}\n"
    )
    out.write(f"              {terminal_text(session['file'])}\n")
    out.write(
        f"  span        {_fmt(span['messageCount'])} message(s), {_fmt(span['tokens'])} tokens"
        f" summarized ({_fmt(span['sourceEntryCount'])} entries)\n"
        f"              {_fmt(span['keptTokens'])} tokens kept verbatim from entry"
        f" {terminal_text(span['firstKeptEntryId'])} · split turn {_yes_no(span['isSplitTurn'])}\n"
    )
    previous = span.get("previousSummaryId")
    out.write(
        "  extends     "
        + (
            f"the branch's current root {terminal_text(previous)}\n"
            if previous
            else "nothing: this is the branch's first summary\n"
        )
    )
    if result["summaryKind"] == "aggregate":
        out.write(
            f"  nodes       aggregate {result['summaryId']} (level {result['graphLevel']})"
            f" = [{terminal_text(previous)}, segment {result['segmentSummaryId']}]\n"
        )
    else:
        out.write(f"  nodes       segment {result['summaryId']} (level {result['graphLevel']})\n")
    out.write(
        f"  validation  {validation['status']}"
        f" · issues {', '.join(validation['issueCodes']) or 'none'}"
        f" · repairs {', '.join(validation['repairs']) or 'none'}\n"
    )
    out.write(
        f"  summary     {_fmt(tokens['summary'])} tokens (limit {_fmt(tokens['limit'])})"
        f" · tokens before {_fmt(result['compaction']['tokensBefore'])}\n"
    )
    if result["summarizer"] == "offline":
        out.write(
            "  summarizer  offline (ds4/offline-v1, deterministic): the CLI has no model to ask\n"
        )
    out.write(f"\nSummary {result['summaryId']} (the text the model sees instead of the span):\n")
    for line in split_lines(result["compaction"]["summary"]):
        out.write(f"  {terminal_text(line)}".rstrip() + "\n")
    out.write(
        "\n"
        + _wrap(
            f"Prepared, not written: {COMMIT_NOTE} This prints the entry as the one JSON "
            "line to append (each run prepares a new batch):",
            "",
            "",
        )
        + "\n"
    )
    # the command on a line of its own, never broken, so that it can be copied
    out.write(f"  ds4 compact --session {terminal_text(shlex.quote(session_arg))} --entry\n")
    for warning in result.get("warnings", []):
        _write_wrapped(out, terminal_text(warning), "warning: ", " " * 9)


def _print_summaries(view: dict[str, Any], out: TextIO) -> None:
    """The `ds4 summaries` report: a header (session, leaf, active root, counts) and the view's
    text tree (its legend says what `*` marks)."""
    nodes = view.get("nodes") or []
    counts = view.get("counts") or {}
    out.write("ds4 summaries\n")
    out.write(
        f"  session   {terminal_text(view.get('sessionId'))}"
        f"  leaf {terminal_text(view.get('leafId') or '(none: the session has no entries)')}\n"
    )
    out.write(f"            {terminal_text(view.get('sessionFile'))}\n")
    active = view.get("activeRootId")
    out.write(
        "  active    "
        + (
            f"{terminal_text(active)} (the summary the model sees on this leaf)\n"
            if active
            else "none: the active branch has no compaction yet\n"
        )
    )
    kinds = Counter(str(node.get("kind")) for node in nodes)
    lifecycles = ", ".join(
        f"{counts.get(state, 0)} {state}"
        for state in ("committed", "prepared", "failed")
        if counts.get(state)
    )
    out.write(
        f"  nodes     {len(nodes)}"
        + (f" ({', '.join(f'{n} {kind}' for kind, n in kinds.items())})" if nodes else "")
        + (f" · {lifecycles}" if lifecycles else "")
        + (f" · {counts.get('roots', 0)} root(s)" if nodes else "")
        + "\n"
    )
    if not nodes:
        out.write(
            "\nNo summaries yet: `ds4 compact --session FILE --entry` prints a compaction entry "
            "to append, or let Pi compact.\n"
        )
        return
    tree = str(view.get("tree") or "").rstrip("\n")
    out.write("\n" + "\n".join(terminal_text(line) for line in tree.split("\n")) + "\n")


def _write_output(text: str, path: str | None, out: TextIO, err: TextIO, what: str) -> None:
    """`text` to `path` (`--output`) or, without one, to `out`.

    Raises:
        RequestError: the file cannot be written (field `output`).
    """
    if path is None:
        out.write(text)
        return
    try:
        Path(path).expanduser().write_text(text, encoding="utf-8", errors="backslashreplace")
    except OSError as exc:
        raise RequestError(
            f"output: cannot write '{path}': {exc.strerror or exc}; choose a writable path",
            "output",
        ) from exc
    err.write(f"ds4: wrote {what} to '{path}'\n")


def _workspace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="project folder whose files may be quoted (only with --trust)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="trust --workspace: allow ds4 to list, read and index its files",
    )


def _open_workspace(engine: ContextEngine, args: argparse.Namespace, err: TextIO) -> None:
    """Set the workspace of --workspace/--trust and sync its index (with a progress bar)."""
    if not args.workspace:
        if args.trust:
            raise RequestError("--trust needs --workspace DIR", "workspace")
        return
    status = engine.set_workspace(args.workspace, args.trust).to_wire()
    if status["status"] == "untrusted":
        err.write(
            f"ds4: workspace '{args.workspace}' is untrusted: its files are not read; "
            "add --trust to use them\n"
        )
        return
    progress = _Progress(err)
    try:
        synced = engine.sync_project(progress=progress)
    finally:
        progress.close()
    for warning in synced.get("warnings") or []:
        err.write(f"ds4: warning: {terminal_text(warning)}\n")
    if synced.get("truncated"):
        err.write(
            "ds4: warning: the project index stopped at project.maxFiles / project.maxTotalBytes;"
            " files after that (in path order) are not searched (raise them with --set)\n"
        )
    if synced.get("status") == "error":
        err.write(f"ds4: warning: project knowledge is off: {terminal_text(synced.get('error'))}\n")


_EPILOG = """\
database:
  --db PATH, else $DS4_DB, else the setting storage.databasePath (relative to
  $XDG_DATA_HOME/ds4-lsp), else $XDG_DATA_HOME/ds4-lsp/context.db
  (~/.local/share/ds4-lsp/context.db when XDG_DATA_HOME is unset or not absolute)

exit codes:
  0    success
  1    unexpected internal error (rerun with -v for the traceback)
  2    bad usage or input you can fix (the message says what to do), or a database
       that cannot be opened or stays locked past storage.busyTimeoutMs
  3    some session files could not be indexed or rebuilt (the others were)
  130  interrupted (Ctrl-C)

Settings: docs/configuration.md. --json output: docs/protocol.md."""


def build_parser() -> argparse.ArgumentParser:
    """The `ds4` argument parser (see the module docstring for the synopsis)."""
    parser = argparse.ArgumentParser(
        prog="ds4",
        description="DS4 context engine: index Pi sessions, retrieve history, plan model calls, "
        "compact sessions into a summary graph.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ds4 {__version__}")
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="database file (default: $DS4_DB, else the storage.databasePath setting, else "
        "$XDG_DATA_HOME/ds4-lsp/context.db; see below)",
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of docs/configuration.md, e.g. --set context.mode=observer or "
        '--set \'modelAwareness.overrides={"local/*": {"contextWindow": 32768}}\' '
        "(VALUE is read as JSON when it parses, else as a string; repeatable)",
    )
    parser.add_argument(
        "--settings-file",
        metavar="FILE",
        help="a JSON file of settings (nested or dotted keys), applied before --set",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log counts and timings to stderr"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("plan", help="plan the next model call for a session and a new request")
    p.add_argument("--session", required=True, metavar="FILE", help="Pi session .jsonl file")
    p.add_argument(
        "--leaf", metavar="ID", help="leaf entry id of the active branch (default: last entry)"
    )
    p.add_argument(
        "--model",
        metavar="PROVIDER/ID",
        help="model of the call (default: the session's current model)",
    )
    p.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="context window in tokens (default: overrides, then the table of well-known models)",
    )
    p.add_argument(
        "--fixed-tokens",
        type=int,
        default=0,
        metavar="N",
        help="tokens of the system prompt and tool schemas (default 0)",
    )
    _workspace_arguments(p)
    p.add_argument("--json", action="store_true", help="print the ds4/plan result as JSON")
    p.add_argument("request", help="the new user message (`-`: read it from standard input)")

    r = sub.add_parser(
        "retrieve", help="search a session's history (active branch) and a trusted workspace"
    )
    r.add_argument("--session", metavar="FILE", help="Pi session .jsonl file (history scope)")
    r.add_argument("--leaf", metavar="ID")
    r.add_argument("--max-results", type=int, metavar="N")
    _workspace_arguments(r)
    r.add_argument(
        "--scope",
        action="append",
        choices=["history", "project"],
        help="what to search (repeatable; default: history, plus project with --workspace)",
    )
    r.add_argument("--json", action="store_true", help="print the ds4/retrieve result as JSON")
    r.add_argument("query", help="what to search for (`-`: read it from standard input)")

    m = sub.add_parser("manifest", help="show a stored plan manifest")
    m.add_argument("id", nargs="?", help="manifest id (printed by `ds4 plan`)")
    m.add_argument("--latest", action="store_true", help="the newest manifest of --session")
    m.add_argument("--session", metavar="FILE")
    m.add_argument("--view", choices=["summary", "included", "excluded", "full"], default="summary")
    m.add_argument("--json", action="store_true")

    i = sub.add_parser(
        "index",
        help="index (or incrementally sync) session files, or the .jsonl files of a directory",
    )
    i.add_argument("--force", action="store_true", help="rebuild even if unchanged")
    i.add_argument("--json", action="store_true")
    i.add_argument(
        "files",
        nargs="+",
        metavar="PATH",
        help="a Pi session file, or a directory: its .jsonl files (not subdirectories), by name",
    )

    c = sub.add_parser(
        "compact",
        help="prepare a compaction of a session (offline summary); prints the entry to append",
    )
    c.add_argument("--session", required=True, metavar="FILE", help="Pi session .jsonl file")
    c.add_argument(
        "--leaf", metavar="ID", help="leaf entry id of the active branch (default: last entry)"
    )
    c.add_argument(
        "--reason",
        choices=["manual", "threshold", "overflow"],
        default="manual",
        help="why the session is compacted, as Pi says it (default manual)",
    )
    c.add_argument(
        "--first-kept",
        metavar="ID",
        help="first entry kept verbatim (default: keep the newest compaction.keepRecentTokens "
        "tokens, cut at a turn boundary)",
    )
    compact_output = c.add_mutually_exclusive_group()
    compact_output.add_argument(
        "--json", action="store_true", help="print the ds4/compact result as JSON"
    )
    compact_output.add_argument(
        "--entry",
        action="store_true",
        help="print only the Pi compaction entry to append to the session, as one JSON line",
    )

    s = sub.add_parser("summaries", help="show a session's summary graph (compactions)")
    s.add_argument("--session", required=True, metavar="FILE", help="Pi session .jsonl file")
    s.add_argument(
        "--leaf", metavar="ID", help="leaf entry id of the active branch (default: last entry)"
    )
    summaries_output = s.add_mutually_exclusive_group()
    summaries_output.add_argument(
        "--json", action="store_true", help="print the ds4.summaries view as JSON"
    )
    summaries_output.add_argument(
        "--dot",
        action="store_true",
        help="print the graph as Graphviz DOT (e.g. | dot -Tsvg > graph.svg)",
    )
    s.add_argument("--output", metavar="PATH", help="write to PATH instead of stdout")

    h = sub.add_parser("health", help="database and engine health")
    h.add_argument("--json", action="store_true")

    b = sub.add_parser("rebuild", help="rebuild the index of every known session from its JSONL")
    b.add_argument("--json", action="store_true")
    return parser


def _parse_model(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    if "/" not in value or value.startswith("/") or value.endswith("/"):
        raise RequestError(
            f"--model: expected PROVIDER/ID (e.g. anthropic/claude-sonnet-4-5), got {value!r}"
        )
    provider, model_id = value.split("/", 1)
    return provider, model_id


def json_text(value: Any, *, one_line: bool = False) -> str:
    """`value` as the JSON text the CLI prints: indented (or `one_line`, compact), ending in a
    newline, and pure ASCII. Every non-ASCII character is a `\\uXXXX` escape (RFC 8259
    section 7), so the text is valid whatever the output encoding (a C locale, a pipe, a
    Windows console), and a lone UTF-16 surrogate that older Pi versions wrote for a cut emoji
    (`"\\ud83c"` in the session file) comes back out as that same escape instead of failing
    to encode halfway through the output.
    """
    if one_line:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":")) + "\n"
    return json.dumps(value, ensure_ascii=True, indent=2) + "\n"


def _emit_json(value: Any, out: TextIO) -> None:
    """Write `value` as JSON (`json_text`) in one piece: the whole text is built before the
    first character is written, so an error never leaves half a JSON document on stdout."""
    out.write(json_text(value))


@contextlib.contextmanager
def _logging_to(err: TextIO, verbose: bool) -> Iterator[None]:
    """Send `ds4_core` log records to `err` while the command runs (errors only, or counts and
    timings with -v), then restore the logger. Only this package's logger is touched."""
    logger = logging.getLogger("ds4_core")
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("ds4: %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO if verbose else logging.ERROR)
    previous_level = logger.level
    logger.addHandler(handler)
    if verbose and (logger.level == logging.NOTSET or logger.level > logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)


def _parse_args(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, out: TextIO, err: TextIO
) -> argparse.Namespace | int:
    """Parsed arguments, or the exit code when argparse stopped (usage error 2, --help 0)."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            return parser.parse_args(argv)
        except SystemExit as exc:
            code = exc.code
            return code if isinstance(code, int) else (EXIT_OK if code is None else EXIT_USAGE)


def _print_notices(engine: ContextEngine, err: TextIO) -> None:
    for notice in engine.notices:
        err.write(f"ds4: {terminal_text(notice.removeprefix('ds4: '))}\n")


def _settings_from(args: argparse.Namespace) -> dict[str, Any] | None:
    """Settings from `--settings-file` then `--set KEY=VALUE` (later wins), or None.

    Raises:
        RequestError: an unreadable or non-object settings file, or a `--set` without `=`.
    """
    settings: dict[str, Any] = {}
    if args.settings_file:
        try:
            with open(args.settings_file, encoding="utf-8") as handle:
                loaded = json.load(handle)
        except OSError as exc:
            raise RequestError(
                f"--settings-file: cannot read '{args.settings_file}': {exc.strerror or exc}"
            ) from exc
        except ValueError as exc:
            raise RequestError(
                f"--settings-file: '{args.settings_file}' is not valid JSON ({exc})"
            ) from exc
        if not isinstance(loaded, dict):
            raise RequestError(
                f"--settings-file: '{args.settings_file}' must hold a JSON object of settings"
            )
        settings.update(flatten_settings(loaded))
    for item in args.settings:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise RequestError(
                f"--set: expected KEY=VALUE (e.g. context.mode=observer), got {item!r}"
            )
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        settings[key.strip()] = value
    return settings or None


STDIN_ARGUMENT = "-"
"""A REQUEST (`plan`) or QUERY (`retrieve`) given as this is read from standard input."""


def read_argument_from(stream: TextIO, name: str) -> str:
    """The text of `stream` (standard input) for the positional argument `name`, decoded as
    UTF-8 whatever the locale, without one trailing line break (as `$(cat file)` drops it).

    Raises:
        RequestError: the input is not UTF-8, or holds nothing but whitespace.
    """
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        text = _utf8_text(buffer.read(), f"{name} (-): standard input")
    else:
        text = stream.read()
    text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise RequestError(
            f"{name} (-): standard input was empty; pipe the text in, e.g. "
            f"`echo 'fix the login bug' | ds4 ... -`"
        )
    return text


def _utf8_text(raw: bytes, what: str) -> str:
    """`raw` decoded as UTF-8.

    Raises:
        RequestError: `raw` is not UTF-8: "`what` is not UTF-8 text (byte N of M)", N the
            0-based offset of the first bad byte, M the length in bytes.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(f"{what} is not UTF-8 text (byte {exc.start} of {len(raw)})") from exc


_TEXT_ARGUMENTS = (
    ("request", "REQUEST"),
    ("query", "QUERY"),
    ("leaf", "--leaf"),
    ("model", "--model"),
    ("first_kept", "--first-kept"),
    ("id", "ID"),
)
"""Arguments that are text, not paths (attribute, name in messages): they must be UTF-8."""


def _read_text_arguments(args: argparse.Namespace, stdin: TextIO) -> None:
    """Replace a REQUEST or QUERY of `-` by the text of `stdin` (`read_argument_from`), and
    refuse a text argument (`_TEXT_ARGUMENTS`) whose bytes are not UTF-8, which Python hands
    over as lone surrogates (PEP 383 `surrogateescape`), as standard input would be refused.
    Paths (`--session`, `--db`, FILE...) may be any bytes the file system takes.

    Raises:
        RequestError: standard input or an argument is not UTF-8 (see `_utf8_text`), or
            standard input is empty.
    """
    for attribute, name in _TEXT_ARGUMENTS:
        value = getattr(args, attribute, None)
        if value == STDIN_ARGUMENT and attribute in ("request", "query"):
            setattr(args, attribute, read_argument_from(stdin, name))
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
                continue
            except UnicodeEncodeError:
                pass
            try:
                raw = os.fsencode(value)  # the bytes given, on POSIX
            except UnicodeEncodeError as exc:  # a surrogate that stands for no byte
                raise RequestError(
                    f"{name}: the argument is not UTF-8 text (a lone surrogate at character "
                    f"{exc.start})"
                ) from exc
            setattr(args, attribute, _utf8_text(raw, f"{name}: the argument"))


def run(
    argv: Sequence[str] | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    stdin: TextIO | None = None,
) -> int:
    """Run the CLI with arguments `argv` (default: `sys.argv[1:]`), writing results to `out`
    and messages to `err` and reading a REQUEST/QUERY of `-` from `stdin` (default
    `sys.stdin`); returns the exit code (see the module docstring). Never raises or exits:
    argparse's usage errors and `--help` become their exit codes too."""
    parser = build_parser()
    args = _parse_args(parser, argv, out, err)
    if isinstance(args, int):
        return args
    try:
        settings = _settings_from(args)
        _read_text_arguments(args, sys.stdin if stdin is None else stdin)
    except RequestError as exc:
        err.write(f"ds4: {terminal_text(exc)}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C while typing a REQUEST of `-` on a terminal
        err.write("ds4: interrupted\n")
        return EXIT_INTERRUPTED
    with _logging_to(err, args.verbose):
        engine = ContextEngine(database_path=args.db, settings=settings)
        for warning in engine.config_warnings:
            err.write(f"ds4: warning: {terminal_text(warning)}\n")
        try:
            try:
                engine.store  # noqa: B018 - open (create, migrate) the database up front
            except DatabaseUnavailableError as exc:
                err.write(f"ds4: {terminal_text(exc)}\n")
                return EXIT_USAGE
            _print_notices(engine, err)
            return _dispatch(engine, args, out, err)
        except RequestError as exc:
            err.write(f"ds4: {terminal_text(_usage_message(exc, args.command))}\n")
            return EXIT_USAGE
        except KeyboardInterrupt:
            err.write("ds4: interrupted\n")
            return EXIT_INTERRUPTED
        except BrokenPipeError:  # e.g. `ds4 plan --json ... | head`: the reader went away
            return EXIT_OK
        except Exception as exc:  # noqa: BLE001 - last-resort report, the traceback only on -v
            if is_database_locked(exc):  # not damage: another writer, so no `rebuild` hint
                err.write(
                    "ds4: "
                    + database_locked_message(
                        engine.database_path, engine.config["storage.busyTimeoutMs"]
                    )
                    + "\n"
                )
                return EXIT_USAGE
            if args.verbose:
                logging.getLogger("ds4_core.cli").exception("unexpected error")
            damage = isinstance(exc, sqlite3.DatabaseError)  # only then may `rebuild` help
            err.write(
                f"ds4: internal error ({type(exc).__name__}: {exc}); rerun with -v for the "
                + (
                    "traceback, or run `ds4 rebuild` if the database may be damaged\n"
                    if damage
                    else "traceback\n"
                )
            )
            return EXIT_INTERNAL
        finally:
            engine.close()


def session_files_of(paths: Sequence[str]) -> list[tuple[str, str | None]]:
    """The session files `ds4 index PATH...` indexes, in order, each with None or the reason
    it cannot be tried.

    A FILE stands for itself (whatever its name: the engine says whether it is a Pi
    session; a FIFO, socket or broken link fails here). A DIR stands for the `*.jsonl`
    entries directly in it, sorted by name; subdirectories are not searched (pass them too,
    e.g. `~/.pi/agent/sessions/*/`), and a `.jsonl` there that is not a Pi session fails
    like a FILE would (Pi's own listing skips it; `ds4 index` reports it). So does a `.jsonl` entry that is not a regular file (a FIFO,
    a directory, a broken link: `not_a_regular_file`), which is never opened. A DIR with no
    `.jsonl` entry, or one that cannot be listed, is one failed item `(DIR, reason)`.
    """
    found: list[tuple[str, str | None]] = []
    for path in paths:
        folder = Path(path).expanduser()
        if not folder.is_dir():  # a FILE; a missing one is for the engine to report
            found.append((path, not_a_regular_file(folder) if os.path.lexists(folder) else None))
            continue
        try:
            entries = sorted(
                (child for child in folder.iterdir() if child.suffix == ".jsonl"),
                key=lambda child: child.name,
            )
        except OSError as exc:
            found.append((path, f"cannot list directory '{path}': {exc.strerror or exc}"))
            continue
        if not entries:
            found.append(
                (
                    path,
                    f"directory '{path}' holds no .jsonl file (subdirectories are not searched: "
                    "pass them too, e.g. DIR/*/)",
                )
            )
        found.extend((str(child), not_a_regular_file(child)) for child in entries)
    return found


def not_a_regular_file(path: Path) -> str | None:
    """None when `path` is a regular file (or a link to one), else why it is no session file:
    a directory, a FIFO, a socket, a device, a broken link, or a path that cannot be examined.
    Uses stat/lstat only: a FIFO is never opened (opening one blocks until a writer comes)."""
    try:
        mode = path.stat().st_mode
    except ValueError:  # a NUL byte: for the engine to report
        return None
    except OSError as exc:
        if path.is_symlink():
            try:
                target = f" '{os.readlink(path)}'"
            except OSError:
                target = ""
            return (
                f"'{path}' is a broken link (its target{target} cannot be reached: "
                f"{exc.strerror or exc}), not a session file"
            )
        return f"cannot examine '{path}': {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        what = "a directory (subdirectories are not searched: pass it too)"
    elif stat.S_ISFIFO(mode):
        what = "a FIFO (named pipe; ds4 does not read from one)"
    elif stat.S_ISSOCK(mode):
        what = "a socket"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        what = "a device"
    else:
        what = "not a regular file"
    return f"'{path}' is {what}, not a session file"


def _index(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`ds4 index PATH...`: sync each session file (`session_files_of`: a FILE, or the `.jsonl`
    files of a DIR); a file that cannot be indexed is reported on stderr (and, with --json, as
    `{sessionFile, error}` in its place in the list) and the others are still indexed. Exit 3
    when any file failed."""
    outcomes: list[dict[str, Any]] = []
    failures = 0
    targets = session_files_of(args.files)
    for file, problem in targets:
        if problem is not None:
            failures += 1
            err.write(f"ds4: {terminal_text(problem)}\n")
            # (named as listed, not resolved: a broken link is named, not its missing target)
            outcomes.append(
                {"sessionFile": os.path.abspath(os.path.expanduser(file)), "error": problem}
            )
            continue
        progress = _Progress(err)
        try:
            synced = engine.index_session(file, force=args.force, progress=progress).to_wire()
            outcomes.append(synced)
            for warning in synced.get("warnings") or []:  # e.g. a copy with the same session id
                err.write(f"ds4: warning: {terminal_text(warning)}\n")
        except Exception as exc:
            message = _index_failure(engine, exc)
            if message is None:
                raise
            failures += 1
            err.write(f"ds4: {terminal_text(message)}\n")
            outcomes.append({"sessionFile": _absolute(file), "error": message})
        finally:
            progress.close()
    results = [r for r in outcomes if "error" not in r]
    if args.json:
        _emit_json(outcomes, out)
    elif results:
        _table(
            [
                [
                    r["sessionId"] or "-",
                    r["outcome"] + (f" ({r['reason']})" if r.get("reason") else ""),
                    _fmt(r["entriesTotal"]),
                    _fmt(r["malformedLines"]),
                    f"{r['durationMs']:.1f}",
                    os.path.basename(r["sessionFile"]),
                ]
                for r in results
            ],
            ["session", "outcome", "entries", "malformed", "ms", "file"],
            out,
        )
    if failures == len(targets):
        err.write(f"ds4: none of the {failures} file(s) could be indexed (see above)\n")
    elif failures:
        err.write(
            f"ds4: {failures} of {len(targets)} file(s) could not be indexed (see above); "
            + ("the other one was\n" if len(results) == 1 else f"the other {len(results)} were\n")
        )
    return EXIT_PARTIAL if failures else EXIT_OK


def _index_failure(engine: ContextEngine, exc: Exception) -> str | None:
    """The message for a session file `ds4 index` could not index because of `exc` (the file
    is missing, unreadable or not a Pi session; or the database stayed locked past the busy
    timeout), or None when `exc` is none of those (an unexpected error)."""
    if isinstance(exc, RequestError):
        return _usage_message(exc, "index")
    if is_database_locked(exc):
        return database_locked_message(engine.database_path, engine.config["storage.busyTimeoutMs"])
    return None


def _sync_with_progress(engine: ContextEngine, file: str, err: TextIO) -> None:
    """Index (or incrementally sync) `file` first, with a progress bar for a long first read."""
    progress = _Progress(err)
    try:
        engine.index_session(file, progress=progress)
    finally:
        progress.close()


def _absolute(file: str) -> str:
    """`file` as the engine names session files (user-expanded, resolved), for index errors."""
    try:
        return str(Path(file).expanduser().resolve())
    except (OSError, RuntimeError, ValueError):  # e.g. a symlink loop, a NUL in the path
        return file


def _dispatch(engine: ContextEngine, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if args.command == "plan":
        provider, model_id = _parse_model(args.model)
        if args.context_window is not None and args.context_window < 1:
            raise RequestError("expected a positive number of tokens", "model.contextWindow")
        progress = _Progress(err)
        try:
            engine.index_session(args.session, progress=progress)
        finally:
            progress.close()
        _open_workspace(engine, args, err)
        result = engine.plan(
            PlanRequest(
                session=SessionRef(args.session, args.leaf),
                request=args.request,
                model=ModelSpec(provider=provider, id=model_id, context_window=args.context_window),
                fixed_tokens=args.fixed_tokens,
            )
        ).to_wire()
        if args.json:
            _emit_json(result, out)
        else:
            manifest = engine.manifest(
                ManifestRequest(id=result["manifestId"], view="full")
            ).to_wire()
            _print_plan(result, manifest, out, db=args.db)
        return EXIT_OK
    if args.command == "retrieve":
        scopes = tuple(
            dict.fromkeys(args.scope or ["history", *(["project"] if args.workspace else [])])
        )
        if "history" in scopes and not args.session:
            raise RequestError(
                "the history scope needs --session FILE (or use --scope project)", "session"
            )
        _open_workspace(engine, args, err)
        result = engine.retrieve(
            RetrieveRequest(
                query=args.query,
                session=SessionRef(args.session, args.leaf) if args.session else None,
                scopes=scopes,  # type: ignore[arg-type]
                max_results=args.max_results,
            )
        ).to_wire()
        if args.json:
            _emit_json(result, out)
        else:
            _print_retrieve(result, out)
        return EXIT_OK
    if args.command == "manifest":
        if not args.id and not args.latest:
            raise RequestError(
                "give a manifest ID (printed by `ds4 plan`), or --latest --session FILE"
            )
        if args.latest and not args.id and not args.session:
            raise RequestError("--latest needs --session FILE")
        try:
            manifest = engine.manifest(
                ManifestRequest(
                    id=args.id,
                    session=SessionRef(args.session) if args.session else None,
                    latest=args.latest,
                    view=args.view,
                )
            ).to_wire()
        except RequestError as exc:
            if exc.field != "id" or not args.id:
                raise
            raise RequestError(
                f"{exc} (`ds4 manifest --latest --session FILE`; database in use: "
                f"'{engine.database_path}', set with --db or DS4_DB)",
                "id",
            ) from exc
        if args.json:
            _emit_json(manifest, out)
        else:
            _print_manifest(manifest, out)
        return EXIT_OK
    if args.command == "index":
        return _index(engine, args, out, err)
    if args.command == "compact":
        _sync_with_progress(engine, args.session, err)
        try:
            result = engine.compact(
                CompactRequest(
                    session=SessionRef(args.session, args.leaf),
                    reason=args.reason,
                    first_kept_entry_id=args.first_kept,
                )
            ).to_wire()
        except RequestError as exc:
            if exc.field is not None or "pass firstKeptEntryId" not in str(exc):
                raise
            raise RequestError(  # the engine's hint in the CLI's words
                str(exc).replace(
                    "pass firstKeptEntryId",
                    "pass --first-kept ID (or lower --set compaction.keepRecentTokens=N)",
                )
            ) from exc
        if args.entry:
            # `--entry >> FILE` must not glue the entry to an unterminated last line.
            lead = "" if _ends_with_newline(args.session) else "\n"
            out.write(lead + json_text(compaction_entry(result), one_line=True))
        elif args.json:
            _emit_json(result, out)
        else:
            _print_compact(result, out, args.session)
        return EXIT_OK
    if args.command == "summaries":
        _sync_with_progress(engine, args.session, err)
        ref = SessionRef(args.session, args.leaf)
        if args.dot:
            _write_output(engine.summaries_dot(ref), args.output, out, err, "the DOT graph")
            return EXIT_OK
        view = engine.summaries(ref).to_wire()
        text = io.StringIO()
        if args.json:
            _emit_json(view, text)
        else:
            _print_summaries(view, text)
        _write_output(
            text.getvalue(), args.output, out, err, "the JSON view" if args.json else "the report"
        )
        return EXIT_OK
    if args.command == "health":
        health = engine.health().to_wire()
        if args.json:
            _emit_json(health, out)
        else:
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
                    _write_wrapped(out, terminal_text(value), f"  {key:<20} ", " " * 23)
                else:
                    _write_wrapped(out, terminal_text(value), f"  {key}: ", " " * 4)
        return EXIT_OK
    if args.command == "rebuild":
        progress = _Progress(err)
        try:
            result = engine.rebuild(progress=progress).to_wire()
        finally:
            progress.close()
        if args.json:
            _emit_json(result, out)
        else:
            out.write(
                f"rebuilt {result['sessions']} session(s), {_fmt(result['entries'])} entries "
                f"in {result['durationMs']:.0f} ms\n"
            )
            for failure in result["failed"]:
                out.write(
                    f"  failed: {terminal_text(failure['sessionFile'])}:"
                    f" {terminal_text(failure['error'])}\n"
                )
        if result["failed"]:
            err.write(f"ds4: {len(result['failed'])} session(s) could not be rebuilt\n")
        return EXIT_PARTIAL if result["failed"] else EXIT_OK
    raise AssertionError(args.command)


def _replace_unencodable(*streams: TextIO) -> None:
    """Make `streams` write a character their encoding lacks (a lone surrogate from a session
    file, `·` under an ASCII locale) as a backslash escape instead of raising
    UnicodeEncodeError in the middle of a report. JSON output never needs it (`json_text`
    is ASCII)."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):  # e.g. a closed stream
                reconfigure(errors="backslashreplace")


def main() -> None:
    """Console-script entry point."""
    _replace_unencodable(sys.stdout, sys.stderr)
    code = run()
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # the reader of a pipe went away: stay quiet at interpreter exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(code)


if __name__ == "__main__":
    main()
