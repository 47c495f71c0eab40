"""The human-readable reports of `ds4` (without `--json`), one module per command group; each
printer writes one engine result to a text stream, laid out by `ds4_core.cli.layout`."""

from __future__ import annotations

from .compaction import COMMIT_NOTE, compaction_entry, print_compact, print_summaries
from .maintenance import print_health, print_index, print_rebuild
from .manifest import print_manifest
from .memory import print_memory
from .plan import print_plan
from .privacy import print_privacy
from .retrieve import print_retrieve
from .usage import print_usage

__all__ = [
    "COMMIT_NOTE",
    "compaction_entry",
    "print_compact",
    "print_health",
    "print_index",
    "print_manifest",
    "print_memory",
    "print_plan",
    "print_privacy",
    "print_rebuild",
    "print_retrieve",
    "print_summaries",
    "print_usage",
]
