"""The privacy lines of `ds4 plan`, `ds4 manifest` and `ds4 retrieve`, and the `ds4 privacy`
report (docs/privacy.md). Counts and levels only: never content."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TextIO

from ...quoting import terminal_text
from ...results import PrivacyResult
from ..layout import write_wrapped


def privacy_line(privacy: Any) -> str | None:
    """One line for a plan's, manifest's or retrieval's `privacy` section: the destination,
    what it may see, and what was withheld, excluded and redacted; None without a section."""
    if not isinstance(privacy, Mapping):
        return None
    if not privacy.get("enabled"):
        return "off (privacy.enabled is false): nothing classified, withheld or redacted"
    target = privacy.get("destination")
    if isinstance(target, Mapping):
        provider = target.get("provider") or "an unnamed provider"
        allowed = ", ".join(str(level) for level in target.get("allowed") or ()) or "nothing"
        head = f"to {provider} ({target.get('kind')}), which may see {allowed}"
    else:
        head = "no destination named: hits classified, not rewritten"
    parts = [head]
    for key, label in (
        ("withheld", "withheld in turns"),
        ("excluded", "left out whole"),
        ("classified", "classified"),
    ):
        counts = privacy.get(key)
        if isinstance(counts, Mapping) and counts:
            shown = ", ".join(f"{level} {n}" for level, n in counts.items())
            parts.append(f"{label}: {shown}")
    redacted = privacy.get("redacted")
    if isinstance(redacted, int) and redacted:
        kinds = privacy.get("redactedByKind")
        detail = (
            " (" + ", ".join(f"{kind} {n}" for kind, n in kinds.items()) + ")"
            if isinstance(kinds, Mapping) and kinds
            else ""
        )
        parts.append(f"{redacted} secret(s) redacted{detail}")
    return terminal_text(" · ".join(parts))


def privacy_changed(privacy: Any) -> bool:
    """Whether privacy changed what is sent (a placeholder or a redaction) per a `privacy`
    section."""
    if not isinstance(privacy, Mapping) or not privacy.get("enabled"):
        return False
    return bool(privacy.get("withheld")) or bool(privacy.get("redacted"))


def print_privacy(result: PrivacyResult, out: TextIO) -> None:
    """The `ds4 privacy` report: the destination, its class and levels, the rule that decided,
    the explanation, then the active policy."""
    provider = result.provider or "(unnamed provider)"
    write_wrapped(out, f"{terminal_text(provider)} is {result.kind}", "ds4 privacy: ", "  ")
    rows = [
        ("enabled", "yes" if result.enabled else "no"),
        ("may see", ", ".join(result.allowed) or "nothing"),
        ("withheld", ", ".join(result.withheld) or "nothing"),
        ("secrets", "redacted" if result.redact_secrets else "not redacted"),
        ("decided by", result.rule),
    ]
    for label, value in rows:
        write_wrapped(out, terminal_text(value), f"  {label:<11} ", " " * 14)
    out.write("\n")
    write_wrapped(out, terminal_text(result.explanation), "  ", "  ")
    out.write("\npolicy\n")
    for key, value in result.policy.items():
        shown = value if isinstance(value, str) else json.dumps(value)
        write_wrapped(out, terminal_text(shown), f"  {key:<22} ", " " * 25)
