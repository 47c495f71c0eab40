"""The `ds4 plan` report: the model and budget, what was sent (tail, summaries, evidence,
project snippets) and left out, and where the manifest is; in observer mode what a managed plan
would have done, in fallback mode that the original messages were sent unchanged (but for the
large tool results, sent condensed)."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from ...manifest.manifest import manifest_item_count
from ...quoting import terminal_text
from ...results import PlanResult
from ..layout import fmt, heading, one_line, room_left, table, wrap, write_warnings, write_wrapped
from .privacy import privacy_changed, privacy_line

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


def _evidence_excerpts(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Map source entry ids of evidence messages in a plan (Pi messages, as JSON objects) to
    their quoted excerpt."""
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


def print_plan(
    result: PlanResult, manifest: Mapping[str, Any], out: TextIO, db: str | None = None
) -> None:
    """The `ds4 plan` report of `result`, with the items of its `manifest` (the stored
    manifest document in the `full` view). In mode `fallback` it says the original messages
    are sent unchanged (but for the large tool results sent condensed) and why, and lists
    them; in mode `observer` the sections are labelled as what a managed plan would have done. `db` is the `--db` given, repeated in the manifest
    hint."""
    model, budget, stats = result.model, result.budget, result.stats
    mode = result.mode
    unchanged = _unchanged(result, manifest)
    session = result.session
    out.write("ds4 plan\n")
    if session:
        out.write(
            f"  session   {terminal_text(session.id)}  leaf {terminal_text(session.leaf_id)}\n"
        )
        out.write(f"            {terminal_text(session.file)}\n")
    source = model.source
    source_text = {
        "request": "from --context-window",
        "override": "from modelAwareness.overrides",
        "default": "unknown model: the default, see the warning below",
    }.get(source, f"from the table of well-known models ({source.removeprefix('table:')})")
    field = " " * 12  # where the values of `model`, `budget`, `result` lines start
    write_wrapped(
        out,
        f"{terminal_text(model.provider)}/{terminal_text(model.id)}  "
        f"window {fmt(model.context_window)} tokens ({source_text})",
        "  model     ",
        field,
    )
    write_wrapped(
        out,
        f"hard {fmt(budget.hard_input_limit)}"
        f" · target {fmt(budget.target_input_tokens)}"
        f" · output reserve {fmt(budget.output_reserve)}"
        f" · safety margin {fmt(budget.safety_margin)}"
        + (
            f" · divided by the calibrated ratio {budget.calibration_ratio:g}"
            if budget.calibration_ratio > 1
            else ""
        )
        + (" · raised 12.5% by autoTune" if budget.auto_tuned else ""),
        "  budget    ",
        field,
    )
    write_wrapped(
        out,
        f"recent tail ≤ {fmt(budget.recent_tail_tokens)}"
        f" · history ≤ {fmt(budget.max_retrieved_history_tokens)}"
        f" · project ≤ {fmt(budget.max_project_tokens)}"
        f" · summaries ≤ {fmt(budget.max_summary_tokens)}",
        field,
        field,
    )
    included, excluded = manifest.get("included", []), manifest.get("excluded", [])
    counts = stats.get("counts", {})
    messages_in = fmt(counts.get("messages", 0))
    sent = fmt(len(result.messages))
    if mode == "managed":
        write_wrapped(
            out,
            f"mode managed · {messages_in} messages (active branch + request)"
            f" and {fmt(counts.get('supplements', 0))} evidence candidate(s) → {sent} sent"
            f" · ~{fmt(result.estimated_tokens)} tokens",
            "  result    ",
            field,
        )
    else:
        write_wrapped(
            out,
            f"mode {mode} · {messages_in} messages (active branch + request)"
            f" → the same {sent} sent {unchanged} · ~{fmt(result.estimated_tokens)} tokens",
            "  result    ",
            field,
        )
    line = privacy_line(result.privacy)
    if line is not None:
        write_wrapped(out, line, "  privacy   ", field)
    if mode == "fallback":
        out.write(
            wrap(
                f"ds4 did not plan this call, so the original messages are sent {unchanged}. "
                f"Why: {terminal_text(result.fallback_reason or 'not reported')}",
                "  fallback  ",
                " " * 12,
            )
            + "\n"
        )
        _print_fallback_items(included, excluded, out, unchanged)
    else:
        would = mode == "observer"
        if would:
            planned = stats.get("plannedTokens")
            out.write(
                wrap(
                    "observer mode (context.mode) records the plan but sends the original "
                    "messages unchanged. The sections below are what a managed plan would "
                    f"have done: send {fmt(counts.get('output', 0))} messages, "
                    f"~{fmt(planned)} tokens.",
                    "  observer  ",
                    " " * 12,
                )
                + "\n"
            )
        _print_plan_sections(result, manifest, included, excluded, would, out)
    out.write("\n")
    if result.manifest_stored:
        db_option = f"--db {terminal_text(shlex.quote(db))} " if db else ""
        write_wrapped(out, f"{result.manifest_id} (stored); inspect with:", "Manifest  ", field)
        # the command on a line of its own, never broken, so that it can be copied
        out.write(f"  ds4 {db_option}manifest {result.manifest_id} --view full\n")
    else:
        write_wrapped(
            out,
            f"{result.manifest_id} (not stored: kept in this process's memory only, "
            "so `ds4 manifest` cannot show it later)",
            "Manifest  ",
            field,
        )
    write_warnings(out, result.warnings)


def _unchanged(result: PlanResult, manifest: Mapping[str, Any]) -> str:
    """How the messages of an observer or fallback plan are sent: `unchanged`, but for the
    large tool results a fallback sends condensed (the manifest's `artifacts`,
    docs/artifacts.md) and what privacy withheld or redacted."""
    but = []
    condensed = len(manifest.get("artifacts") or []) if result.mode == "fallback" else 0
    if condensed:
        but.append(f"{fmt(condensed)} large tool result(s) sent condensed (artifacts)")
    if privacy_changed(result.privacy):
        but.append("what privacy withheld or redacted")
    return "unchanged" + (" but for " + " and ".join(but) if but else "")


def _print_fallback_items(
    included: list[dict[str, Any]],
    excluded: list[dict[str, Any]],
    out: TextIO,
    unchanged: str = "unchanged",
) -> None:
    """What a fallback plan sends (every original message, `unchanged` or with its large tool
    results condensed and what privacy withheld or redacted) and drops (synthetic context)."""
    heading(
        out,
        f"Sent {unchanged}: {fmt(len(included))} message(s), {fmt(_tokens(included))} tokens"
        + (f" ({_composition(included)})" if included else ""),
    )
    write_wrapped(
        out,
        "nothing was trimmed to a recent tail, no evidence was added, no message was left out",
        "  ",
        "  ",
    )
    if excluded:
        heading(
            out,
            f"Not sent: {fmt(manifest_item_count(excluded))} item(s), "
            f"{fmt(_tokens(excluded))} tokens"
            " (a fallback adds no synthetic context)",
        )
        _print_excluded_table(excluded, out)


def _print_plan_sections(
    result: PlanResult,
    manifest: Mapping[str, Any],
    included: list[dict[str, Any]],
    excluded: list[dict[str, Any]],
    would: bool,
    out: TextIO,
) -> None:
    """Tail, summaries, evidence, project and exclusions of a managed plan; `would`: observer
    mode, where each section is what a managed plan would have done."""
    stats = result.stats
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in included:
        by_kind.setdefault(item.get("kind", "?"), []).append(item)

    tail = by_kind.get("recent", []) + by_kind.get("current", [])
    groups = sorted({i.get("groupId") for i in tail if i.get("groupId")}, key=_group_start)
    heading(
        out,
        f"{'Recent tail a managed plan would keep' if would else 'Recent tail kept'}: "
        f"{len(tail)} messages in {len(groups)} turn group(s), {fmt(_tokens(tail))} tokens"
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
                    fmt(_tokens(members)),
                    "current" if kinds.get("current") else "recent",
                    members[0].get("sourceId"),
                ]
            )
        if len(groups) > 8:
            out.write(f"  (showing the newest 8 of {len(groups)} groups)\n")
        table(group_rows, ["group", "messages", "tokens", "kind", "first entry"], out)

    summaries = by_kind.get("summary", [])
    if summaries:
        heading(
            out,
            f"{'Summaries a managed plan would keep' if would else 'Summaries kept'}: "
            f"{len(summaries)} item(s), {fmt(_tokens(summaries))} tokens",
        )
        table(
            [[s.get("sourceId"), fmt(s.get("tokens")), s.get("groupId") or "-"] for s in summaries],
            ["entry", "tokens", "group"],
            out,
        )

    others = [i for kind, items in by_kind.items() if kind not in _SECTION_KINDS for i in items]
    if others:
        heading(
            out,
            f"{'Other items a managed plan would keep' if would else 'Other items kept'}: "
            f"{len(others)} item(s), {fmt(_tokens(others))} tokens ({_composition(others)})",
        )

    _print_evidence(result, manifest, by_kind.get("history", []), would, out)

    project_status = (manifest.get("project") or {}).get("status")
    if project_status not in (None, "no-workspace"):
        _print_project_section(manifest, by_kind.get("project", []), project_status, would, out)

    count, tokens, note = _excluded_totals(manifest, excluded)
    heading(
        out,
        f"{'A managed plan would exclude' if would else 'Excluded'}: {fmt(count)} item(s), "
        f"{fmt(tokens)} tokens{note}",
    )
    if excluded:
        _print_excluded_table(excluded, out)


def _excluded_totals(
    manifest: Mapping[str, Any], excluded: list[dict[str, Any]]
) -> tuple[int, int, str]:
    """(items, tokens, note) of the whole excluded list: a stored manifest over 256 KiB keeps
    only the first and last 128 excluded items, and its `excludedRollup` has the true totals."""
    rollup = manifest.get("excludedRollup")
    if not isinstance(rollup, dict) or not rollup.get("omitted"):
        return manifest_item_count(excluded), _tokens(excluded), ""
    count = rollup.get("total", manifest_item_count(excluded))
    tokens = rollup.get("tokens", _tokens(excluded))
    return count, tokens, f" (the table lists the first and last {len(excluded) // 2})"


def _print_evidence(
    result: PlanResult,
    manifest: Mapping[str, Any],
    evidence: list[dict[str, Any]],
    would: bool,
    out: TextIO,
) -> None:
    """Historical evidence: score | entry | excerpt, the full reason on the next line."""
    retrieval_reasons = {
        r.get("entryKey"): r.get("reason") or "" for r in manifest.get("retrieved", [])
    }
    heading(
        out,
        f"{'Historical evidence a managed plan would add' if would else 'Historical evidence retrieved'}"
        f": {len(evidence)} item(s), {fmt(_tokens(evidence))} tokens",
    )
    if not evidence:
        history = (manifest.get("relevance") or {}).get("history") or {}
        why = history.get("why") if isinstance(history, Mapping) else None
        left_out = sum(
            1
            for i in manifest.get("excluded", [])
            if i.get("kind") == "history" and "floor (" not in str(i.get("reason"))
        )
        write_wrapped(
            out,
            f"{left_out} older entr(ies) matched but none fit (see the exclusions below)"
            if left_out
            else terminal_text(str(why))
            if why
            else "no older entry on the active branch matched the request",
            "  none: ",
            "        ",
        )
        return
    excerpts = _evidence_excerpts(result.messages)
    ids = [str(item.get("sourceId")).split(":", 1)[-1] for item in evidence]
    scores = [f"{item.get('score', 0):.3f}" for item in evidence]
    reasons = [
        retrieval_reasons.get(str(item.get("sourceId"))) or item.get("reason") or ""
        for item in evidence
    ]
    if excerpts:
        room = room_left(["score", *scores], ["entry", *ids])
        rows = [
            [score, entry_id, one_line(excerpts.get(entry_id, ""), room)]
            for score, entry_id in zip(scores, ids, strict=True)
        ]
        table(rows, ["score", "entry", "excerpt"], out, reasons)
    else:  # observer mode: the evidence messages were not sent, so there is no excerpt
        rows = [
            [score, entry_id, fmt(item.get("tokens"))]
            for score, entry_id, item in zip(scores, ids, evidence, strict=True)
        ]
        table(rows, ["score", "entry", "tokens"], out, reasons)


def _print_excluded_table(excluded: list[dict[str, Any]], out: TextIO) -> None:
    """Excluded items grouped by kind and reason, largest group first, reasons in full."""
    reasons: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for item in excluded:
        reasons.setdefault((item.get("kind", "?"), item.get("reason") or ""), []).append(item)
    ordered = sorted(reasons.items(), key=lambda kv: -manifest_item_count(kv[1]))
    table(
        [[kind, manifest_item_count(items), fmt(_tokens(items))] for (kind, _), items in ordered],
        ["kind", "items", "tokens"],
        out,
        [reason for (_, reason), _ in ordered],
    )


def _print_project_section(
    manifest: Mapping[str, Any],
    items: list[dict[str, Any]],
    status: str,
    would: bool,
    out: TextIO,
) -> None:
    """Project snippets of a plan (`items`, the manifest's `project` kind) in the workspace
    `status`: score, file lines and Git state, the reason under each; then the files left
    out."""
    snippets = {s["snippetId"]: s for s in manifest.get("projectSnippets") or []}
    heading(
        out,
        f"{'Project snippets a managed plan would add' if would else 'Project snippets included'}"
        f": {len(items)} item(s), {fmt(_tokens(items))} tokens (workspace {status})",
    )
    if status == "untrusted":
        write_wrapped(
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
        table(rows, ["score", "lines", "tree"], out, reasons)
    for dropped in (manifest.get("project") or {}).get("dropped", []):
        out.write(
            f"  left out {terminal_text(dropped['path'])}: {terminal_text(dropped['reason'])}\n"
        )
