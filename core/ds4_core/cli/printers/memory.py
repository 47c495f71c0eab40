"""`ds4 memory`: the memory items and pins with their provenance (the `ds4/memory` result;
docs/memory.md). The text is the user's own and is shown, escaped for the terminal; nothing
here goes to a model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from ...quoting import terminal_text
from ...results import MemoryResult
from ..layout import heading, write_wrapped


def _line(item: Mapping[str, Any], text_field: str) -> tuple[str, str]:
    """(prefix, text) of one item: id, scope, status when not active, key; then its text."""
    parts = [str(item["id"]), str(item["scope"])]
    if item["status"] != "active":
        by = item.get("supersededBy")
        parts.append(f"{item['status']} (by {by})" if by else str(item["status"]))
    if item.get("key"):
        parts.append(f"key {item['key']}")
    if item.get("classification"):
        parts.append(str(item["classification"]))
    return "  " + " · ".join(terminal_text(p) for p in parts), terminal_text(item[text_field])


def print_memory(result: MemoryResult, out: TextIO) -> None:
    """The `ds4 memory` report: memory items, pins, the mutation counts and the problems."""
    where = f"session {result.session_id}" if result.session_id else "every indexed session"
    heading(out, f"ds4 memory: {terminal_text(where)}")
    for title, items, text_field in (
        ("memory", result.memory, "claim"),
        ("pins", result.pins, "content"),
    ):
        out.write(f"{title} ({len(items)})\n")
        if not items:
            out.write("  none\n")
        for item in items:
            prefix, text = _line(item, text_field)
            out.write(prefix + "\n")
            write_wrapped(out, text, "    ", "    ")
    counts = result.counts
    out.write(
        f"mutations: {counts['applied']} applied, {counts['rejected']} rejected, "
        f"{counts['invalid']} invalid\n"
    )
    for problem in result.problems:
        write_wrapped(
            out,
            terminal_text(f"{problem['mutationKey']} ({problem['kind']}): {problem['problem']}"),
            "  problem: ",
            "    ",
        )
