"""Garbage collection of the artifact store (docs/artifacts.md "Garbage collection").

An object no indexed session references is removed, unless it was modified within the grace
period (`GRACE_S`, an hour): a plan in flight may have just written it (or found it again,
which touches it: `ArtifactStore.put`) and not yet recorded its reference. A real run holds
the store's lock exclusively while it reads ages and removes objects (`ArtifactStore.locked`),
so a `put` that finds an object either runs before (the object is young) or after (it is
written again). Quarantined files
older than `QUARANTINE_KEEP_S` (7 days) are removed, and so are temporaries of crashed writes
older than an hour (`ArtifactStore.sweep_temporaries`). A dry run removes nothing and reports
what would go. The outcome of the last real run is kept beside the objects (`LAST_GC_FILE`)
for `ds4.health`.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .store import ArtifactStore

GRACE_S = 3600.0
"""An object modified this recently (seconds) is never removed."""
QUARANTINE_KEEP_S = 7 * 86400.0
"""Quarantined files are kept this long (seconds) for a person to look at."""
LAST_GC_FILE = "last-gc.json"
"""The file in the store's root holding the last run's outcome (`last_gc`)."""


@dataclass(frozen=True, slots=True)
class GcOutcome:
    """What a run removed and kept (sizes in bytes)."""

    removed: int
    """Objects and quarantined files removed (or that a dry run would remove)."""
    removed_bytes: int
    kept: int
    """Objects kept: referenced, or unreferenced but within the grace period (`young`)."""
    kept_bytes: int
    young: int
    """Unreferenced objects kept because they were modified within the grace period."""
    dry_run: bool


def collect_garbage(
    store: ArtifactStore,
    referenced: Set[str],
    *,
    dry_run: bool,
    now: float | None = None,
    grace_s: float = GRACE_S,
    quarantine_keep_s: float = QUARANTINE_KEEP_S,
) -> GcOutcome:
    """Remove the objects of `store` whose id is not in `referenced` and whose modification
    time is older than `grace_s`, and quarantined files older than `quarantine_keep_s`
    (`now`: seconds since the epoch, default the clock). Each object's age is read just
    before it is removed. A file that vanished meanwhile is skipped. A real run first moves
    symbolic links standing in an object's place to quarantine
    (`ArtifactStore.quarantine_links`), and also sweeps temporaries and records its outcome
    (`last_gc`).

    Raises:
        OSError: the store cannot be listed or a file cannot be removed (permissions).
    """
    clock = time.time() if now is None else now
    removed = removed_bytes = kept = kept_bytes = young = 0
    with store.locked(shared=dry_run):  # a dry run removes nothing: plans may go on
        if not dry_run:  # links in an object's place (never followed) go to quarantine
            store.quarantine_links()
        for artifact_id in store.artifact_ids():
            path = store.path_for(artifact_id)
            try:
                stat = path.lstat()
            except FileNotFoundError:
                continue
            if artifact_id in referenced or stat.st_mtime > clock - grace_s:
                kept += 1
                kept_bytes += stat.st_size
                young += artifact_id not in referenced
                continue
            if not dry_run and not _unlink(path):
                continue
            removed += 1
            removed_bytes += stat.st_size
    quarantine = store.root / "quarantine"
    if quarantine.is_dir() and not quarantine.is_symlink():
        for path in sorted(quarantine.iterdir()):
            try:
                stat = path.lstat()  # a quarantined symbolic link is removed, never followed
            except FileNotFoundError:
                continue
            if (
                path.is_dir() and not path.is_symlink()
            ) or stat.st_mtime > clock - quarantine_keep_s:
                continue
            if not dry_run and not _unlink(path):
                continue
            removed += 1
            removed_bytes += stat.st_size
    outcome = GcOutcome(removed, removed_bytes, kept, kept_bytes, young, dry_run)
    if not dry_run:
        store.sweep_temporaries()
        if store.root.is_dir():
            _write_last(store.root, outcome, clock)
    return outcome


def last_gc(root: Path) -> dict[str, Any] | None:
    """The last real run's `{at (ms since the epoch), removed, removedBytes}`, or None when
    none ran or the file is unreadable."""
    try:
        data = json.loads((root / LAST_GC_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fields = ("at", "removed", "removedBytes")
    if not all(type(data.get(key)) is int for key in fields):
        return None
    return {key: data[key] for key in fields}


def _unlink(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def _write_last(root: Path, outcome: GcOutcome, clock: float) -> None:
    """Write `LAST_GC_FILE` through a temporary file and a rename (a reader never sees half)."""
    text = json.dumps(
        {"at": int(clock * 1000), "removed": outcome.removed, "removedBytes": outcome.removed_bytes}
    )
    temporary = root / f".{LAST_GC_FILE}.{secrets.token_hex(8)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, root / LAST_GC_FILE)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
