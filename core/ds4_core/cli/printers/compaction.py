"""The reports of `ds4 compact` (the prepared summary and how it becomes committed), its
`--entry` (the Pi compaction entry to append), and `ds4 summaries` (the summary graph)."""

from __future__ import annotations

import secrets
import shlex
from collections import Counter
from typing import Any, TextIO

from ...lines import split_lines
from ...quoting import terminal_text
from ...results import CompactResult, SummariesResult
from ...store.database import utc_now_iso
from ...wire import to_wire
from ..layout import fmt, wrap, write_warnings, yes_no

COMMIT_NOTE = (
    "ds4 never writes your session file; append this compaction entry through Pi (or your "
    "agent), and the next sync marks it committed."
)
"""What `ds4 compact` says about the batch it prepared (it is not in the session yet)."""


def compaction_entry(result: CompactResult) -> dict[str, Any]:
    """The Pi compaction entry that carries a `ds4/compact` result (what `--entry` prints).

    `{"type": "compaction", "id", "parentId", "timestamp", "summary", "firstKeptEntryId",
    "tokensBefore", "details", "fromHook": true}`: the id is 8 random hex characters (as Pi
    makes them), the parent the leaf the compaction was prepared on, the timestamp now (ISO-8601
    UTC, milliseconds). `details.ds4ContextEngine.summaryId` is what lets the next sync mark
    the prepared batch committed. (A v1 session file has no ids: its reader numbers the
    appended line like any other, so the id and parent here are ignored there.)
    """
    compaction = result.compaction
    return {
        "type": "compaction",
        "id": secrets.token_hex(4),
        "parentId": result.session.leaf_id,
        "timestamp": utc_now_iso(),
        "summary": compaction.summary,
        "firstKeptEntryId": compaction.first_kept_entry_id,
        "tokensBefore": to_wire(compaction.tokens_before),
        "details": to_wire(compaction.details),
        "fromHook": True,
    }


def print_compact(result: CompactResult, out: TextIO, session_arg: str) -> None:
    """The `ds4 compact` report of `result`: the span, the new nodes, validation, the summary
    text, and how the prepared batch becomes committed. `session_arg` is the --session given,
    repeated in the `--entry` hint."""
    span, validation, tokens, session = (
        result.span,
        result.validation,
        result.tokens,
        result.session,
    )
    out.write(
        f"ds4 compact: prepared {result.summary_kind} {result.summary_id}"
        f" (level {result.graph_level}) · {result.summarizer} summary"
        f" · {result.duration_ms:.1f} ms\n"
    )
    out.write(f"  session     {terminal_text(session.id)}  leaf {terminal_text(session.leaf_id)}\n")
    out.write(f"              {terminal_text(session.file)}\n")
    out.write(
        f"  span        {fmt(span.message_count)} message(s), {fmt(span.tokens)} tokens"
        f" summarized ({fmt(span.source_entry_count)} entries)\n"
        f"              {fmt(span.kept_tokens)} tokens kept verbatim from entry"
        f" {terminal_text(span.first_kept_entry_id)} · split turn {yes_no(span.is_split_turn)}\n"
    )
    previous = span.previous_summary_id
    out.write(
        "  extends     "
        + (
            f"the branch's current root {terminal_text(previous)}\n"
            if previous
            else "nothing: this is the branch's first summary\n"
        )
    )
    if result.summary_kind == "aggregate":
        out.write(
            f"  nodes       aggregate {result.summary_id} (level {result.graph_level})"
            f" = [{terminal_text(previous)}, segment {result.segment_summary_id}]\n"
        )
    else:
        out.write(f"  nodes       segment {result.summary_id} (level {result.graph_level})\n")
    out.write(
        f"  validation  {validation.status}"
        f" · issues {', '.join(validation.issue_codes) or 'none'}"
        f" · repairs {', '.join(validation.repairs) or 'none'}\n"
    )
    out.write(
        f"  summary     {fmt(tokens.summary)} tokens (limit {fmt(tokens.limit)})"
        f" · tokens before {fmt(result.compaction.tokens_before)}\n"
    )
    if result.summarizer == "offline":
        out.write(
            "  summarizer  offline (ds4/offline-v1, deterministic): the CLI has no model to ask\n"
        )
    out.write(f"\nSummary {result.summary_id} (the text the model sees instead of the span):\n")
    for line in split_lines(result.compaction.summary):
        out.write(f"  {terminal_text(line)}".rstrip() + "\n")
    if result.appended:
        out.write(
            f"\nAppended as entry {terminal_text(result.entry_id)} of this server-owned session"
            " and committed (docs/sessions.md).\n"
        )
        return
    out.write(
        "\n"
        + wrap(
            f"Prepared, not written: {COMMIT_NOTE} This prints the entry as the one JSON "
            "line to append (each run prepares a new batch):",
            "",
            "",
        )
        + "\n"
    )
    # the command on a line of its own, never broken, so that it can be copied
    out.write(f"  ds4 compact --session {terminal_text(shlex.quote(session_arg))} --entry\n")
    write_warnings(out, result.warnings)


def print_summaries(view: SummariesResult, out: TextIO) -> None:
    """The `ds4 summaries` report of `view`: a header (session, leaf, active root, counts)
    and the view's text tree (its legend says what `*` marks). The nodes and counts are the
    summary graph's rows (JSON objects, see `SummariesResult`)."""
    nodes, counts = view.nodes, view.counts
    out.write("ds4 summaries\n")
    out.write(
        f"  session   {terminal_text(view.session_id)}"
        f"  leaf {terminal_text(view.leaf_id or '(none: the session has no entries)')}\n"
    )
    out.write(f"            {terminal_text(view.session_file)}\n")
    active = view.active_root_id
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
    tree = view.tree.rstrip("\n")
    out.write("\n" + "\n".join(terminal_text(line) for line in tree.split("\n")) + "\n")
