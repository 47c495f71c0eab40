"""The reports of `ds4 artifacts`: `search` (one block per match: where, then the redacted
excerpt; the artifacts that could not be searched) and `gc` (what was removed and kept)."""

from __future__ import annotations

from typing import TextIO

from ...quoting import terminal_text
from ...results import ArtifactGcResult, ArtifactSearchResult
from ..layout import write_wrapped


def print_artifact_search(result: ArtifactSearchResult, out: TextIO) -> None:
    """The `ds4 artifacts search` report: a count line, then per match its artifact (first 12
    hex digits), source entry, line and column and the excerpt on the next line (every value
    through `terminal_text`), then each artifact whose status is not `ok`."""
    searched = len(result.searched)
    more = " (more exist: raise --max-matches)" if result.truncated else ""
    write_wrapped(
        out,
        f"{len(result.matches)} match(es) in {searched} artifact(s){more}",
        "ds4 artifacts search: ",
        "  ",
    )
    for match in result.matches:
        source = match["sourceId"] or "-"
        out.write(
            f"{match['artifactId'][:12]} entry {terminal_text(source)} "
            f"line {match['line']} column {match['column']}\n"
        )
        out.write(f"  {terminal_text(match['excerpt'])}\n")
    for item in result.searched:
        if item["status"] != "ok":
            out.write(f"not searched: {item['artifactId']} ({item['status']})\n")


def print_artifact_gc(result: ArtifactGcResult, out: TextIO) -> None:
    """The `ds4 artifacts gc` report: removed (or, for a dry run, to remove) and kept, with
    their bytes, and the young unreferenced objects kept."""
    verb = "would remove" if result.dry_run else "removed"
    write_wrapped(
        out,
        f"{verb} {result.removed} file(s), {result.removed_bytes} bytes · kept {result.kept} "
        f"object(s), {result.kept_bytes} bytes ({result.young} unreferenced but written in the "
        "last hour)",
        "ds4 artifacts gc: ",
        "  ",
    )
