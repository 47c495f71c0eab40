"""Incremental indexing of a Pi session file with a byte-offset checkpoint
(docs/reference.md §3.12).

One module: `noop`, `incremental` and `rebuild` are one decision over one checkpoint state
(`IndexState`, `_Resume`), and the rebuild's writer thread must keep the same state rules;
splitting them would spread that invariant over modules.

State per session (`session_index_state`): the file's size and mtime, the header hash, the
checkpoint (end of the last `\\n`-terminated line indexed), the sha256 of the last <= 64 KiB
before the checkpoint and where that range starts, the reader's `ResumeState`, and the
accumulated malformed-line count.

Outcomes of `sync_session`:

* `skipped`, reason "empty session file": the file is empty (or holds only blank lines / an
  unfinished first line). Nothing is stored, and an earlier index of that file is removed.
* `noop`: the file has the size last read and every byte read before is unchanged.
* `incremental`: the file only grew after the checkpoint. The new lines are read from the
  checkpoint (with the stored header and `ResumeState`, so `seq`, line numbers and v1 ids
  continue) and appended in one write transaction.
* `rebuild`: everything is re-read and replaced in one write transaction, for one of the
  reasons of docs/reference.md §3.12: `forced`, `no prior state`, `session file path changed`,
  `header hash changed`, `file truncated`, `in-place rewrite detected at byte N` (see below),
  `prefix hashes missing`, `checkpoint hash missing`, `checkpoint hash mismatch`, `entry
  changed` (an indexed entry id reappears with different bytes), `file grew after an
  unterminated tail` (see below).

In-place rewrites. Size and mtime are not trusted: a file rewritten with the same size and its
mtime restored, or rewritten anywhere and then appended to, looks unchanged or merely grown. So
every sync, including one that ends as `noop`, checks the indexed prefix `[0, file_size)`
against the per-64 KiB-block sha256 hashes stored with the state (`sessions.prefix`; no
sampling): in full when it is at most `prefix.FULL_CHECK_BYTES`; above that, the last block,
`prefix.ROLLING_BLOCKS` blocks from a rolling cursor stored in the state (`prefixCursor`, so
the next sync, in this process or another, goes on from there; a no-op sync stores it too)
and what a background pass found, while a background pass compares the rest
(`prefix.check`; the window this leaves is stated in `ds4_core.sessions.prefix` and
docs/architecture.md "sessions/sync.py", item In-place rewrites). When a block differs the session is re-indexed
fully (the upserting rebuild costs no FTS work for unchanged entries) with the reason
`in-place rewrite detected at byte N`, N being the start of the first changed block, also
returned as `SyncResult.rewritten_at`, with a warning in `SyncResult.warnings` and a log line.
Cost on the request path: one or two 64 KiB blocks plus 512 KiB, whatever the session's size
(bench/session_index.py). A state stored before these hashes existed rebuilds once (`prefix
hashes missing`).

Torn tails. A final line without `\\n` is indexed when it parses, but the checkpoint stays
before it, so the next sync reads it again. ds4 rebuilds whenever a file grows after an
unterminated tail; we re-read incrementally instead and rebuild (with that reason) only when the
re-read line is not the entry we indexed from the torn tail (same id, bytes and position).
Pi completes a torn line by appending `\\n` (docs/reference.md §P8.1), which leaves its bytes,
and so its hash, unchanged: an agent writing while we read costs one incremental step, not a
rebuild of a possibly huge file. Everything before the checkpoint is covered by the checkpoint
hash as in ds4.

Copies of one session file. The index is keyed by session id (the header's `id`): two files
with the same id (a `cp` of a session, a restored backup beside the original) share one index
and one summary graph, and each sync of the other file rebuilds it under that file ("session
file path changed"). They are not kept apart; each sync result carries a warning naming the
other live copies (still readable, same session id), and `sessions_with_copies` lists them for
the health report. The other copies' paths are kept in `resume_json` (`otherFiles`).

Duplicate entry ids within a file resolve last-wins (docs/reference.md §P8.6): a full read
keeps the last occurrence; an incremental read that meets an indexed id again with identical
bytes moves it to its new position, with different bytes rebuilds ("entry changed"). So any
sequence of appends gives exactly the rows of one full read.

Performance: a rebuild streams the file into one write transaction (no list of all rows), and
for files of `THREADED_REBUILD_BYTES` or more a writer thread runs the SQLite side while this
thread parses, since SQLite releases the GIL (bench/session_index.py: ~30 MB/s of real session
JSONL on an idle development machine, bound by the Python side: parsing and searchable text
take about 2.8x the time of `json.loads` of the same lines; appending one entry to a 50 MB
session syncs in a few ms).

Errors propagate and leave the previous index untouched (every write is one transaction):
`SessionFormatError` and its subclasses for files that are not Pi sessions or are too new, and
`OSError` (e.g. `FileNotFoundError`) when the file cannot be read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ds4_core.sessions import prefix as prefix_hashes
from ds4_core.sessions.jsonl import iter_raw_lines
from ds4_core.sessions.prefix import FileShrankError, PrefixHashes
from ds4_core.sessions.reader import (
    HEADER_SEARCH_BYTES,
    ResumeState,
    SessionEntry,
    SessionFormatError,
    SessionHeader,
    SessionReader,
    header_from_data,
    read_header,
)
from ds4_core.sessions.searchable import entry_role, searchable_text
from ds4_core.store import sessions as repo
from ds4_core.store.database import Store
from ds4_core.store.sessions import IndexedEntry, IndexState, canonical_session_file
from ds4_core.tokens import estimate_text_tokens

log = logging.getLogger(__name__)

CHECKPOINT_HASH_BYTES = 64 * 1024
"""Size of the hashed range that ends at the checkpoint (docs/reference.md §3.12)."""

THREADED_REBUILD_BYTES = 4 << 20
"""Files at least this large are rebuilt with a writer thread (parsing and SQLite overlap)."""

WRITER_BATCH_ROWS = 500
"""Rows per batch handed from the reading thread to the writer thread."""

WRITER_QUEUE_BATCHES = 8
"""Batches in flight between the threads (bounds memory to a few thousand rows)."""

PROGRESS_STEP_BYTES = 1 << 20
"""`progress` is called about once per this many bytes read (and once at the end)."""

RESUME_FORMAT = 1
"""Version of the JSON object stored in `session_index_state.resume_json`."""

_UTF8_BOM = b"\xef\xbb\xbf"
_RACE_RETRIES = 3

Outcome = Literal["noop", "incremental", "rebuild", "skipped"]
ProgressCallback = Callable[[int, int], None]

REASON_FORCED = "forced"
REASON_NO_PRIOR_STATE = "no prior state"
REASON_PATH_CHANGED = "session file path changed"
REASON_HEADER_CHANGED = "header hash changed"
REASON_TRUNCATED = "file truncated"
REASON_REWRITTEN_IN_PLACE = "in-place rewrite detected at byte {offset}"
REASON_PREFIX_HASHES_MISSING = "prefix hashes missing"
REASON_GREW_AFTER_TORN_TAIL = "file grew after an unterminated tail"
REASON_CHECKPOINT_HASH_MISSING = "checkpoint hash missing"
REASON_CHECKPOINT_HASH_MISMATCH = "checkpoint hash mismatch"
REASON_ENTRY_CHANGED = "entry changed"
REASON_EMPTY = "empty session file"


@dataclass(frozen=True)
class SyncResult:
    """What one `sync_session` call did.

    Attributes:
        session_id: the session id from the header (`None` when skipped).
        session_file: the canonical path of the file (symlinks resolved).
        outcome: `noop`, `incremental`, `rebuild` or `skipped`.
        reason: why a rebuild happened or why the file was skipped (module docstring), else
            `None`.
        entries_added: rows inserted by this call (a rebuild counts all of them).
        entries_total: rows indexed for the session after this call.
        malformed_lines: malformed terminated lines in the file, accumulated (docs/reference.md
            §3.12); an unfinished final line is not counted.
        bytes_read: bytes of session file read by the entry reader in this call.
        duration_ms: wall time of the call in ms.
        rewritten_at: when bytes indexed before were found rewritten in place, the byte offset
            of the first changed 64 KiB block (the reason then reads
            `in-place rewrite detected at byte N`); else `None`.
        warnings: human-readable warnings, e.g. that other files carry the same session id
            (module docstring, "Copies of one session file"); empty when all is well.
    """

    session_id: str | None
    session_file: str
    outcome: Outcome
    reason: str | None
    entries_added: int
    entries_total: int
    malformed_lines: int
    bytes_read: int
    duration_ms: float
    rewritten_at: int | None = None
    warnings: tuple[str, ...] = ()


CompactionHook = Callable[[str, list[SessionEntry]], None]
"""Called as `hook(session_id, compaction_entries)` inside the sync's write transaction with the
`compaction` entries this sync indexed (all of them on a rebuild, the new ones otherwise), so a
derived record of them (the summary graph) commits or rolls back with the entries."""

CustomHook = Callable[[str, list[SessionEntry], bool], None]
"""Called as `hook(session_id, custom_entries, whole)` inside the sync's write transaction with
the `custom` entries this sync indexed: on a rebuild all of them (possibly none) and
`whole=True` (a derived record of the session is replaced), otherwise the new ones and
`whole=False` (not called when there are none). Memory and pin mutations use it."""


@dataclass(frozen=True)
class RowHook:
    """A derived record taken from single entries as they stream by (nothing else is kept
    of them): `take(entry)` returns a small row or None; `record(session_id, rows, whole)` is
    called inside the sync's write transaction with the rows of the entries this sync indexed,
    `whole` as for `CustomHook` (on a rebuild, and for an emptied file, possibly no rows).
    Artifact references use it (`store/artifacts.py`)."""

    take: Callable[[SessionEntry], Any | None]
    record: Callable[[str, list[Any], bool], None]


@dataclass(frozen=True)
class _Hooks:
    """The sync's hooks over the entries it indexed (`CompactionHook`, `CustomHook`,
    `RowHook`)."""

    compactions: CompactionHook | None = None
    custom: CustomHook | None = None
    rows: RowHook | None = None

    def wanted(self, entry: SessionEntry) -> bool:
        """Whether a hook takes `entry` (the rebuild keeps only those while streaming)."""
        return entry.entry_type in ("compaction", "custom")

    def taken(self, entries: Iterable[SessionEntry]) -> list[Any]:
        """The `RowHook` rows of `entries` (none without the hook)."""
        if self.rows is None:
            return []
        return [row for row in map(self.rows.take, entries) if row is not None]

    def run(
        self,
        session_id: str,
        entries: list[SessionEntry],
        *,
        whole: bool,
        rows: list[Any] | None = None,
    ) -> None:
        """Call each hook with its entries among `entries`, the row hook with `rows` (taken
        from `entries` when None; see the hook types)."""
        if self.rows is not None:
            taken = self.taken(entries) if rows is None else rows
            if taken or whole:
                self.rows.record(session_id, taken, whole)
        if self.compactions is not None:
            compactions = [e for e in entries if e.entry_type == "compaction"]
            if compactions:
                self.compactions(session_id, compactions)
        if self.custom is not None:
            custom = [e for e in entries if e.entry_type == "custom"]
            if custom or whole:
                self.custom(session_id, custom, whole)


_NO_HOOKS = _Hooks()


class _StateRaced(Exception):
    """Another writer changed this session's state between our read and our write."""


class _EntryChanged(Exception):
    """An indexed entry id reappeared with different bytes (append-only violated)."""


@dataclass(frozen=True)
class _Resume:
    """The decoded `resume_json`: what an incremental read needs besides `IndexState`."""

    reader: ResumeState
    header_start: int
    header_length: int
    header_version: int
    torn: tuple[str, str, int] | None  # (entry_id, content_hash, seq) indexed from a torn tail
    prefix: PrefixHashes | None  # hashes of [0, file_size) as indexed
    other_files: tuple[str, ...] = ()  # other live files with this session id
    prefix_cursor: int = 0  # the rolling cursor of `prefix.check` over `prefix`

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": RESUME_FORMAT,
                "reader": json.loads(self.reader.to_json()),
                "header": {
                    "start": self.header_start,
                    "length": self.header_length,
                    "version": self.header_version,
                },
                "tornEntry": (
                    None
                    if self.torn is None
                    else {"id": self.torn[0], "contentHash": self.torn[1], "seq": self.torn[2]}
                ),
                "prefix": None if self.prefix is None else self.prefix.to_json(),
                "otherFiles": list(self.other_files),
                "prefixCursor": self.prefix_cursor,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> _Resume | None:
        """The decoded state, or `None` when it is missing, of another format or malformed."""
        try:
            obj = json.loads(text)
            if not isinstance(obj, dict) or obj.get("format") != RESUME_FORMAT:
                return None
            header = obj["header"]
            torn = obj.get("tornEntry")
            others = obj.get("otherFiles", [])
            if not isinstance(others, list) or not all(isinstance(o, str) for o in others):
                others = []
            cursor = obj.get("prefixCursor", 0)
            if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
                cursor = 0
            torn_value = None
            if torn is not None:
                torn_value = (str(torn["id"]), str(torn["contentHash"]), int(torn["seq"]))
            return cls(
                reader=ResumeState.from_json(obj["reader"]),
                header_start=int(header["start"]),
                header_length=int(header["length"]),
                header_version=int(header["version"]),
                torn=torn_value,
                prefix=PrefixHashes.from_json(obj.get("prefix")),
                other_files=tuple(others),
                prefix_cursor=cursor,
            )
        except (ValueError, KeyError, TypeError):
            return None


def _live_copies(session_id: str, path: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """The files among `candidates` other than `path` that still exist, are not `path` under
    another name, and still carry `session_id` in their header (unreadable ones are left out).
    Costs one header read per candidate."""
    found: dict[str, None] = {}
    for other in candidates:
        if other == path or other in found:
            continue
        try:
            if os.path.samefile(other, path):
                continue
            header = read_header(other)
        except (OSError, SessionFormatError):
            continue
        if header is not None and header.session_id == session_id:
            found[other] = None
    return tuple(found)


def _copies_warnings(session_id: str, others: Sequence[str]) -> tuple[str, ...]:
    if not others:
        return ()
    return (
        f"session id '{session_id}' is also the id of {len(others)} other file(s): "
        + ", ".join(f"'{o}'" for o in others)
        + "; copies of one session share one index and summary graph (the file synced last is "
        "indexed); give each copy its own session id (e.g. Pi's /fork) or keep one copy",
    )


def sessions_with_copies(store: Store) -> list[tuple[str, str, tuple[str, ...]]]:
    """`(session_id, indexed file, other live files with that id)` for every indexed session
    whose id was also met in another file that still carries it (see the module docstring).
    One query over `session_index_state` plus a header read per recorded copy."""
    rows = (
        store.connection()
        .execute(
            "SELECT session_id, session_file, json_extract(resume_json, '$.otherFiles') "
            "FROM session_index_state WHERE json_valid(resume_json) AND "
            "json_array_length(resume_json, '$.otherFiles') > 0 ORDER BY session_id"
        )
        .fetchall()
    )
    result: list[tuple[str, str, tuple[str, ...]]] = []
    for session_id, session_file, others_json in rows:
        try:
            others = json.loads(others_json)
        except ValueError:
            continue
        if not isinstance(others, list):
            continue
        live = _live_copies(session_id, session_file, (o for o in others if isinstance(o, str)))
        if live:
            result.append((session_id, session_file, live))
    return result


def _to_row(session_id: str, entry: SessionEntry) -> IndexedEntry:
    text = searchable_text(entry)
    entry_id = entry.entry_id
    return IndexedEntry(
        f"{session_id}:{entry_id}",
        entry_id,
        entry.parent_id,
        entry.entry_type,
        entry_role(entry),
        entry.timestamp,
        entry.seq,
        entry.line_number,
        text,
        estimate_text_tokens(text),
        entry.content_hash,
    )


def _read_range(path: str, start: int, length: int) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(start)
        return handle.read(length)


def _checkpoint_hash(path: str, checkpoint: int) -> tuple[int, str]:
    """`(start, sha256 hex)` of the last <= 64 KiB of the file ending at `checkpoint`."""
    start = max(0, checkpoint - CHECKPOINT_HASH_BYTES)
    data = _read_range(path, start, checkpoint - start)
    return start, hashlib.sha256(data).hexdigest()


def _header_span(path: str, header_hash: str) -> tuple[int, int]:
    """`(start, length)` of the header line's hashed bytes (BOM, `\\r`, `\\n` excluded)."""
    for line in iter_raw_lines(path):
        if line.start > HEADER_SEARCH_BYTES:
            break
        data, start = line.data, line.start
        if start == 0 and data.startswith(_UTF8_BOM):
            data, start = data[len(_UTF8_BOM) :], start + len(_UTF8_BOM)
        if hashlib.sha256(data).hexdigest() == header_hash:
            return start, len(data)
    # Unreachable for a header the reader just returned; an impossible span makes the next
    # sync rebuild ("header hash changed") rather than trust it.
    return 0, -1


def _stat(path: str) -> tuple[int, float]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns / 1_000_000


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _track(
    entries: Iterator[SessionEntry], start: int, total: int, progress: ProgressCallback | None
) -> Iterator[SessionEntry]:
    if progress is None:
        yield from entries
        return
    next_report = start + PROGRESS_STEP_BYTES
    span = max(0, total - start)
    for entry in entries:
        if entry.start_offset >= next_report:
            progress(min(entry.start_offset - start, span), span)
            next_report = entry.start_offset + PROGRESS_STEP_BYTES
        yield entry


def _torn_entry(reader: SessionReader, last: SessionEntry | None) -> tuple[str, str, int] | None:
    if reader.torn_tail and last is not None and last.start_offset >= reader.checkpoint_offset:
        return last.entry_id, last.content_hash, last.seq
    return None


def _rebuild_reason(
    path: str, prior: IndexState, resume: _Resume | None, size: int
) -> tuple[str | None, int | None, prefix_hashes.Verdict | None]:
    """`(reason, rewritten_at, verdict)`: the reason to rebuild from `prior` (docs/reference.md
    §3.12 plus the prefix check), or `(None, None, verdict)` when the indexed bytes compared are
    unchanged (then the sync is a no-op when `size == prior.file_size`, else incremental).
    `rewritten_at` is the first changed block's offset for an in-place rewrite, else `None`;
    `verdict` is the prefix check's (`prefix.check`, with the stored rolling cursor), when it
    ran."""
    if resume is None:
        return REASON_NO_PRIOR_STATE, None, None
    if resume.header_length < 0:
        return REASON_HEADER_CHANGED, None, None
    header_bytes = _read_range(path, resume.header_start, resume.header_length)
    if hashlib.sha256(header_bytes).hexdigest() != prior.header_hash:
        return REASON_HEADER_CHANGED, None, None
    if size < prior.file_size:
        return REASON_TRUNCATED, None, None
    if resume.prefix is None or resume.prefix.length != prior.file_size:
        return REASON_PREFIX_HASHES_MISSING, None, None
    verdict = prefix_hashes.check(path, resume.prefix, cursor=resume.prefix_cursor)
    if verdict.changed is not None:
        return REASON_REWRITTEN_IN_PLACE.format(offset=verdict.changed), verdict.changed, verdict
    if size == prior.file_size:
        return None, None, verdict
    if prior.checkpoint_hash is None or prior.checkpoint_hash_start is None:
        return REASON_CHECKPOINT_HASH_MISSING, None, verdict
    start = prior.checkpoint_hash_start
    data = _read_range(path, start, prior.checkpoint_offset - start)
    if hashlib.sha256(data).hexdigest() != prior.checkpoint_hash:
        return REASON_CHECKPOINT_HASH_MISMATCH, None, verdict
    return None, None, verdict


def _stored_header(store: Store, prior: IndexState, resume: _Resume) -> SessionHeader | None:
    data = repo.session_header(store, prior.session_id)
    if data is None or not isinstance(data.get("id"), str):
        return None
    return header_from_data(data, resume.header_version, prior.header_hash)


def _same_state(a: IndexState | None, b: IndexState | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.session_file, a.file_size, a.file_mtime_ms, a.checkpoint_offset, a.indexed_at) == (
        b.session_file,
        b.file_size,
        b.file_mtime_ms,
        b.checkpoint_offset,
        b.indexed_at,
    )


def _incremental(
    store: Store,
    path: str,
    prior: IndexState,
    resume: _Resume,
    size: int,
    progress: ProgressCallback | None,
    started: float,
    hooks: _Hooks = _NO_HOOKS,
    prefix_cursor: int = 0,
) -> SyncResult | str:
    """Append what follows the checkpoint; returns the result, or a reason to rebuild.
    `prefix_cursor` is stored as the next rolling cursor of the prefix check."""
    header = _stored_header(store, prior, resume)
    if header is None:
        return REASON_NO_PRIOR_STATE
    session_id = prior.session_id
    start = prior.checkpoint_offset
    reader = SessionReader(path, start_offset=start, header=header, resume=resume.reader)
    new: dict[str, SessionEntry] = {}
    first: SessionEntry | None = None
    last: SessionEntry | None = None
    for entry in _track(reader.entries(), start, size, progress):
        if first is None:
            first = entry
        new[entry.entry_id] = entry
        last = entry
    if resume.torn is not None:
        torn_id, torn_hash, torn_seq = resume.torn
        if (
            first is None
            or first.start_offset != start
            or ((first.entry_id, first.content_hash, first.seq) != (torn_id, torn_hash, torn_seq))
        ):
            return REASON_GREW_AFTER_TORN_TAIL
        # The re-read torn line is indexed already with these bytes and seq: the existing-id
        # check below skips it.
    size_after, mtime_after = _stat(path)
    checkpoint = reader.checkpoint_offset
    hash_start, hash_hex = _checkpoint_hash(path, checkpoint)
    torn = _torn_entry(reader, last)
    if resume.prefix is None:
        return REASON_PREFIX_HASHES_MISSING
    try:
        prefix = prefix_hashes.extend(path, resume.prefix, reader.end_offset)
    except FileShrankError as exc:  # the file shrank while we read it
        raise _StateRaced from exc
    others = _live_copies(session_id, path, resume.other_files)
    next_resume = _Resume(
        reader.resume_state,
        resume.header_start,
        resume.header_length,
        resume.header_version,
        torn,
        prefix,
        others,
        prefix_cursor,
    )
    try:
        with store.write():
            if not _same_state(repo.get_index_state(store, session_id), prior):
                raise _StateRaced
            existing = repo.existing_entries(store, session_id, new)
            reposition: list[tuple[str, int, int]] = []
            for entry_id, (content_hash, seq) in existing.items():
                entry = new.pop(entry_id)
                if entry.content_hash != content_hash:
                    raise _EntryChanged
                if entry.seq != seq:
                    reposition.append((entry_id, entry.seq, entry.line_number))
            rows = [_to_row(session_id, entry) for entry in new.values()]
            state = IndexState(
                session_id=session_id,
                session_file=path,
                header_hash=prior.header_hash,
                file_size=reader.end_offset,
                file_mtime_ms=mtime_after,
                checkpoint_offset=checkpoint,
                checkpoint_hash_start=hash_start,
                checkpoint_hash=hash_hex,
                indexed_entries=prior.indexed_entries + len(rows),
                malformed_lines=prior.malformed_lines + reader.malformed_lines,
                resume_json=next_resume.to_json(),
                indexed_at=prior.indexed_at,
            )
            added = repo.append_entries(store, session_id, rows, state, reposition=reposition)
            hooks.run(session_id, list(new.values()), whole=False)
    except _EntryChanged:
        return REASON_ENTRY_CHANGED
    if progress is not None:
        span = max(0, size_after - start)
        progress(span, span)
    return SyncResult(
        session_id=session_id,
        session_file=path,
        outcome="incremental",
        reason=None,
        entries_added=added,
        entries_total=state.indexed_entries,
        malformed_lines=state.malformed_lines,
        bytes_read=reader.end_offset - start,
        duration_ms=_elapsed_ms(started),
        warnings=_copies_warnings(session_id, others),
    )


def _rewrite_warnings(path: str, rewritten_at: int | None) -> tuple[str, ...]:
    """The warning (also logged) of a rebuild caused by an in-place rewrite."""
    if rewritten_at is None:
        return ()
    message = (
        f"session file '{path}' was rewritten in place at byte {rewritten_at} (bytes indexed "
        "before changed); the session was re-indexed. Until a rewrite is found, retrieval can "
        "return the old text: docs/architecture.md (sessions/sync.py, In-place rewrites) says how long"
    )
    log.warning("%s", message)
    return (message,)


def _skip_empty(
    store: Store, path: str, prior: IndexState | None, started: float, hooks: _Hooks
) -> SyncResult:
    """The result of an empty file; an earlier index of it is removed, and the custom hook
    is told the session now has no custom entries."""
    if prior is not None:
        with store.write():
            repo.delete_session(store, prior.session_id)
            if hooks.custom is not None:
                hooks.custom(prior.session_id, [], True)
            if hooks.rows is not None:
                hooks.rows.record(prior.session_id, [], True)
    return SyncResult(None, path, "skipped", REASON_EMPTY, 0, 0, 0, 0, _elapsed_ms(started))


class _Aborted(Exception):
    """The producer of a threaded rebuild failed; the writer rolls back."""


_STOP = object()


def _replace_in_writer_thread(
    store: Store,
    rows: Iterator[IndexedEntry],
    write: Callable[[Iterator[IndexedEntry]], int],
) -> int:
    """Run `write(entries)` on a writer thread while this thread produces `rows`.

    Parsing and searchable text are Python (they hold the GIL); SQLite's inserts and FTS5
    tokenizing release it, so the two overlap. Batches of `WRITER_BATCH_ROWS` pass through a
    bounded queue (at most `WRITER_QUEUE_BATCHES` in flight, so memory stays bounded). An
    exception on either side rolls the whole transaction back and is re-raised here.
    """
    batches: queue.Queue[Any] = queue.Queue(maxsize=WRITER_QUEUE_BATCHES)
    outcome: list[Any] = []

    def consume() -> Iterator[IndexedEntry]:
        while True:
            batch = batches.get()
            if batch is _STOP:
                return
            if isinstance(batch, BaseException):
                raise _Aborted from batch
            yield from batch

    def run() -> None:
        try:
            outcome.append(write(consume()))
        except BaseException as exc:  # handed to the producer thread below
            outcome.append(exc)
        finally:
            store.db.close()  # this thread's connection; the thread ends now

    def put(item: Any) -> bool:
        while writer.is_alive():
            try:
                batches.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    writer = threading.Thread(target=run, name="ds4-index-writer", daemon=True)
    writer.start()
    try:
        batch: list[IndexedEntry] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= WRITER_BATCH_ROWS:
                if not put(batch):
                    break
                batch = []
        else:
            if not batch or put(batch):
                put(_STOP)
    except BaseException as exc:
        put(exc)
        writer.join()
        raise
    writer.join()
    result = outcome[0] if outcome else RuntimeError("ds4: the index writer thread stopped")
    if isinstance(result, BaseException):
        raise result
    return int(result)


def _rebuild(
    store: Store,
    path: str,
    reason: str | None,
    prior: IndexState | None,
    size: int,
    progress: ProgressCallback | None,
    started: float,
    hooks: _Hooks = _NO_HOOKS,
    rewritten_at: int | None = None,
) -> SyncResult:
    """Read the whole file and replace the session's rows; `reason=None` means "decide".

    The file is streamed into the write transaction (duplicate ids: last wins, in SQL); files
    of `THREADED_REBUILD_BYTES` or more are written from a writer thread (see
    `_replace_in_writer_thread`) unless the caller is already inside `store.write()`.
    """
    reader = SessionReader(path)
    entries = _track(reader.entries(), 0, size, progress)
    first = next(entries, None)  # the header is parsed before the first entry is yielded
    header = reader.header
    if header is None:
        return _skip_empty(store, path, prior, started, hooks)
    session_id = header.session_id
    known = repo.get_index_state(store, session_id)  # under this file or another one
    if reason is None:
        reason = REASON_PATH_CHANGED if known is not None else REASON_NO_PRIOR_STATE
    candidates: list[str] = []
    if known is not None:
        known_resume = _Resume.from_json(known.resume_json)
        candidates = [known.session_file, *(known_resume.other_files if known_resume else ())]
    others = _live_copies(session_id, path, candidates)
    last: list[SessionEntry | None] = [first]
    derived: list[SessionEntry] = []  # the entries a hook takes
    taken: list[Any] = []  # the row hook's rows

    def rows() -> Iterator[IndexedEntry]:
        if first is None:
            return
        take = hooks.rows.take if hooks.rows is not None else None
        for entry in itertools.chain((first,), entries):
            last[0] = entry
            if hooks.wanted(entry):
                derived.append(entry)
            if take is not None and (row := take(entry)) is not None:
                taken.append(row)
            yield _to_row(session_id, entry)

    def final_state() -> IndexState:
        _size_after, mtime_after = _stat(path)
        hash_start, hash_hex = _checkpoint_hash(path, reader.checkpoint_offset)
        header_start, header_length = _header_span(path, header.header_hash)
        try:
            prefix = prefix_hashes.hash_prefix(path, reader.end_offset)
        except FileShrankError as exc:  # the file shrank while we read it
            raise _StateRaced from exc
        resume = _Resume(
            reader.resume_state,
            header_start,
            header_length,
            header.version,
            _torn_entry(reader, last[0]),
            prefix,
            others,
        )
        return IndexState(
            session_id=session_id,
            session_file=path,
            header_hash=header.header_hash,
            file_size=reader.end_offset,
            file_mtime_ms=mtime_after,
            checkpoint_offset=reader.checkpoint_offset,
            checkpoint_hash_start=hash_start,
            checkpoint_hash=hash_hex,
            indexed_entries=0,  # counted by replace_session
            malformed_lines=reader.malformed_lines,
            resume_json=resume.to_json(),
            indexed_at="",
        )

    def write(stream: Iterator[IndexedEntry]) -> int:
        with store.write():
            total = repo.replace_session(
                store,
                session_id=session_id,
                session_file=path,
                project_path=header.cwd or None,
                # ASCII: a lone surrogate in another header field is kept as its
                # JSON escape (SQLite text must be valid UTF-8).
                header_json=json.dumps(header.data, separators=(",", ":")),
                entries=stream,
                state=final_state,
            )
            hooks.run(session_id, derived, whole=True, rows=taken)
        return total

    if size >= THREADED_REBUILD_BYTES and not store.in_write():
        # (inside a caller's write() the writer thread could never take the lock)
        total = _replace_in_writer_thread(store, rows(), write)
    else:
        total = write(rows())
    if progress is not None:
        progress(size, size)
    return SyncResult(
        session_id=session_id,
        session_file=path,
        outcome="rebuild",
        reason=reason,
        entries_added=total,
        entries_total=total,
        malformed_lines=reader.malformed_lines,
        bytes_read=reader.end_offset,
        duration_ms=_elapsed_ms(started),
        rewritten_at=rewritten_at,
        warnings=_copies_warnings(session_id, others) + _rewrite_warnings(path, rewritten_at),
    )


def _store_cursor(store: Store, prior: IndexState, resume: _Resume, cursor: int) -> None:
    """Keep the prefix check's rolling cursor after a no-op sync (so the next process goes on
    from there), unless another writer changed the state meanwhile."""
    with store.write():
        if not _same_state(repo.get_index_state(store, prior.session_id), prior):
            return
        repo.update_resume_json(
            store, prior.session_id, dataclasses.replace(resume, prefix_cursor=cursor).to_json()
        )


def _sync_once(
    store: Store,
    path: str,
    force: bool,
    progress: ProgressCallback | None,
    started: float,
    hooks: _Hooks,
) -> SyncResult:
    size, _mtime_ms = _stat(path)
    prior = repo.index_state_for_file(store, path)
    if size == 0:
        return _skip_empty(store, path, prior, started, hooks)
    if force:
        return _rebuild(store, path, REASON_FORCED, prior, size, progress, started, hooks)
    if prior is None:
        return _rebuild(store, path, None, None, size, progress, started, hooks)
    resume = _Resume.from_json(prior.resume_json)
    reason, rewritten_at, verdict = _rebuild_reason(path, prior, resume, size)
    if reason is None and size == prior.file_size:
        if resume is not None and verdict is not None and verdict.cursor != resume.prefix_cursor:
            _store_cursor(store, prior, resume, verdict.cursor)
        others = _live_copies(prior.session_id, path, resume.other_files if resume else ())
        return SyncResult(
            prior.session_id,
            path,
            "noop",
            None,
            0,
            prior.indexed_entries,
            prior.malformed_lines,
            0,
            _elapsed_ms(started),
            warnings=_copies_warnings(prior.session_id, others),
        )
    if reason is None and resume is not None:
        cursor = verdict.cursor if verdict is not None else 0
        outcome = _incremental(store, path, prior, resume, size, progress, started, hooks, cursor)
        if isinstance(outcome, SyncResult):
            return outcome
        reason = outcome
    return _rebuild(store, path, reason, prior, size, progress, started, hooks, rewritten_at)


def sync_session(
    store: Store,
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: ProgressCallback | None = None,
    on_compactions: CompactionHook | None = None,
    on_custom: CustomHook | None = None,
    on_rows: RowHook | None = None,
) -> SyncResult:
    """Bring the index of the Pi session file at `path` up to date (docs/reference.md §3.12).

    See the module docstring for the outcomes and rebuild reasons. Each entry row gets
    `searchable_text` / `entry_role` (docs/reference.md §3.12), a `chars-v2` `token_estimate` of
    that text, and `created_at` = the entry's `timestamp`. Safe to call from several threads:
    writes are serialised by `store.write()`, and an incremental step re-checks the stored
    state inside its write transaction (a concurrent sync of the same file makes it start over).

    Args:
        store: an open store.
        path: the session file (stored under its canonical path, symlinks resolved).
        force: rebuild even when nothing changed (reason "forced").
        progress: called with `(bytes_done, bytes_total)` of this read about every MiB and
            once at the end, on the calling thread.
        on_compactions: see `CompactionHook`; an exception from it rolls the sync back.
        on_custom: see `CustomHook`; an exception from it rolls the sync back.
        on_rows: see `RowHook`; an exception from it rolls the sync back.

    Raises:
        SessionFormatError: the file is not a Pi session (`NotAPiSessionError`) or its format
            version is too new (`UnsupportedSessionVersionError`); the message says what to do.
        OSError: the file cannot be read (e.g. `FileNotFoundError`).
    """
    started = time.perf_counter()
    file_key = canonical_session_file(path)
    hooks = _Hooks(on_compactions, on_custom, on_rows)
    for _attempt in range(_RACE_RETRIES):
        try:
            return _sync_once(store, file_key, force, progress, started, hooks)
        except _StateRaced:
            continue
    raise RuntimeError(
        f"ds4: session file '{file_key}' was re-indexed by another writer {_RACE_RETRIES} times "
        "while this sync ran; try again"
    )
