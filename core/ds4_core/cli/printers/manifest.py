"""The `ds4 manifest` report: a stored manifest's header fields, planning mode and counts, and
its included and excluded items as tables (the view asked for decides which are present)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from ...manifest.manifest import manifest_item_count
from ...quoting import terminal_text
from ..layout import fmt, table, write_wrapped
from ..terminal import report_width
from .privacy import privacy_line
from .usage import manifest_usage_lines


def print_manifest(manifest: Mapping[str, Any], out: TextIO) -> None:
    """The `ds4 manifest` report of a stored manifest document (`ManifestResult.document`, a
    versioned JSON document read as the mapping it is): id and creation time, the header
    fields present, the provider's usage and the calibration (`usage.manifest_usage_lines`),
    the planning mode and counts, then a table per item list in the view."""
    write_wrapped(
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
    for label, text in manifest_usage_lines(manifest):
        if report_width() >= 60:  # aligned with the fields above, else a label of its own width
            write_wrapped(out, text, f"  {label:<18} ", " " * 21)
        else:
            write_wrapped(out, text, f"  {label}: ", " " * 4)
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
    _print_relevance(manifest.get("relevance"), out)
    line = privacy_line(manifest.get("privacy"))
    if line is not None:
        write_wrapped(out, line, f"  {'privacy':<18} ", " " * 21)
    for section in ("included", "excluded"):
        items = manifest.get(section)
        if items is None:
            continue
        out.write(f"\n{section} ({manifest_item_count(items)})\n")
        table(
            [
                [
                    i.get("kind"),
                    f"{i['path']}:{i['lines'][0]}-{i['lines'][1]}"
                    if i.get("path") and i.get("lines")
                    else _source(i),
                    i.get("groupId") or "-",
                    fmt(i.get("tokens")),
                    f"{i.get('score') or 0:.3f}",
                    " ".join((i.get("reason") or "").split()),
                ]
                for i in items
            ],
            ["kind", "source", "group", "tokens", "score", "reason"],
            out,
        )


def _source(item: Mapping[str, Any]) -> Any:
    """The source column of a manifest item: its `sourceId`, or for a bulk item the range it
    stands for (`first .. last (N messages)`)."""
    count = item.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 1:
        return f"{item.get('sourceId')} .. {item.get('lastSourceId')} ({count:,} messages)"
    return item.get("sourceId")


def _print_relevance(relevance: Any, out: TextIO) -> None:
    """One line per searched scope of the manifest's `relevance` section: sent and
    below-floor counts, and why nothing was sent when so."""
    if not isinstance(relevance, Mapping):
        return
    for scope, entry in relevance.items():
        if not isinstance(entry, Mapping):
            continue
        line = (
            f"{terminal_text(scope)}: sent {terminal_text(entry.get('sent'))} · below floor "
            f"{terminal_text(entry.get('belowFloor'))}"
        )
        if entry.get("why"):
            line += f" · none sent: {terminal_text(entry.get('why'))}"
        write_wrapped(out, line, f"  {'relevance':<18} ", " " * 21)
