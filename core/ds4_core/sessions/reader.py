"""Streaming reader for Pi session JSONL files (header, v1/v2/v3 migration, entries).

One module: `SessionReader.entries` is one resumable streaming state machine (`ResumeState`), and
the header scan and the v1/v2/v3 migration rules below are the steps it applies to each line.

Rules (docs/reference.md §P2, §P3, §P7, §P8; docs/reference.md §3.12):

* Lines are framed on `\\n` only (`jsonl.iter_raw_lines`); blank lines are skipped.
* A line that is not a JSON object with a string `type` is malformed: counted and skipped.
  Non-UTF-8 bytes are decoded with `errors="replace"`. Arrays and objects nested deeper than
  `json_bounds.MAX_RECORD_DEPTH` levels are replaced by `json_bounds.DEPTH_MARKER` (logged), so
  the entry is kept and no later walk over it can exhaust the stack.
* The first record must be the header `{"type":"session","id":<string>, ...}` and its line must
  lie within the first 1 MiB; a `version` above 3 is rejected. An empty (or blank-only) file is
  a valid empty session. Nothing is consumed (checkpoint 0) until a complete header line is
  seen.
* v1 files (no `version`) get deterministic ids `v1-<n>` (n = 1-based index among records after
  the header), `parentId` = the previous entry, and compaction `firstKeptEntryIndex` k becomes
  `firstKeptEntryId = "v1-<k>"` when `1 <= k < n` (dropped otherwise). Files below version 3
  get message role `hookMessage` renamed to `custom`.
* In v2/v3 files an entry without a string `id` is malformed.
* Identifiers and metadata must be storable (SQLite and UTF-8 need Unicode scalar values), but
  JSON allows lone UTF-16 surrogates (`"\\ud800"`). `storable_id` replaces each one in an
  entry's `id`, `parentId`, `firstKeptEntryId`, `fromId` and `targetId` (in `data` too) and in
  the header's `id`, `cwd` and `parentSession` by the six characters of its escape, lower-case
  (`\\ud800` as literal text), so references still link; clients name such an entry by that
  text. A `timestamp` that is not ISO-8601 (`datetime.fromisoformat`) or holds a lone surrogate
  is treated as missing (`None`); `data` keeps it as written.
* A final line without `\\n` is parsed and yielded when it is a valid record, but the checkpoint
  and the resume state never move past it (`torn_tail`); an invalid torn tail is simply pending
  (not counted as malformed).

A reader can resume from a checkpoint: `SessionReader(path, start_offset=checkpoint,
header=stored_header, resume=stored_resume_state)` continues `seq`, line numbers and v1 id
assignment, so that reading a file across any sequence of appends yields exactly the entries
of one full read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, TypeGuard

from ds4_core.json_bounds import MAX_RECORD_DEPTH, clip_depth, may_be_too_deep
from ds4_core.sessions.jsonl import DEFAULT_CHUNK_SIZE, RawLine, StrPath, iter_raw_lines
from ds4_core.sessions.prefix import PrefixHashes, check

CURRENT_SESSION_VERSION = 3
"""Highest Pi session format version this reader understands (docs/reference.md §P7)."""

HEADER_SEARCH_BYTES = 1 << 20
"""The header record must start within this many bytes of the file start (docs/reference.md
§3.12)."""

_sha256 = hashlib.sha256

log = logging.getLogger(__name__)


def _reject_constant(name: str) -> Any:
    """JSON has no NaN or Infinity: a line using them is malformed (passing them on would make
    our own JSON output invalid for strict parsers such as JavaScript's `JSON.parse`)."""
    raise ValueError(f"non-standard JSON constant {name}")


def _finite_float(literal: str) -> float:
    """A JSON number as a float; one beyond the double range (`1e999`, which Python reads as
    infinity) makes the line malformed, like `Infinity` itself."""
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError("a number beyond the range of a double")
    return value


_loads = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float).decode


# --------------------------------------------------------------------------------------------
# Errors


class SessionFormatError(Exception):
    """A session file cannot be read as a Pi session; the message says what to do about it.

    Attributes:
        path: the session file path as given (or `None` when not file-related).
    """

    def __init__(self, message: str, path: StrPath | None = None) -> None:
        super().__init__(message)
        self.path = os.fspath(path) if path is not None else None


class NotAPiSessionError(SessionFormatError):
    """The first record is not a Pi session header, or no header starts within 1 MiB."""


class UnsupportedSessionVersionError(SessionFormatError):
    """The header's `version` is newer than 3 (or not an integer)."""

    def __init__(self, message: str, path: StrPath | None = None, version: Any = None) -> None:
        super().__init__(message, path)
        self.version = version


# --------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The session header line (docs/reference.md §P2); not part of the entry tree.

    Attributes:
        session_id: the header `id` (a UUID or a caller-chosen id).
        version: the file's format version: 1 when `version` is absent, else 1..3.
        timestamp: the header's ISO-8601 creation time, or `None` if absent / not a string.
        cwd: the working directory (`""` when absent, as in very old files).
        parent_session: `parentSession` (or the v1 name `branchedFrom`), or `None`.
        data: the header object as parsed (unknown keys kept).
        header_hash: lower-case hex sha256 of the header line bytes (without `\\n` / `\\r`).
    """

    session_id: str
    version: int
    timestamp: str | None
    cwd: str
    parent_session: str | None
    data: dict[str, Any]
    header_hash: str


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """One entry (non-header record) of a session file, after migration.

    Attributes:
        entry_id: the entry `id` (v1 entries: `v1-<n>`).
        parent_id: the `parentId` when it is a string, else `None` (a root).
        entry_type: the `type` discriminator (unknown types are kept as opaque entries).
        timestamp: the entry's ISO-8601 `timestamp`, or `None` if absent / not a string.
        data: the migrated JSON object (docs/reference.md §P7); treat it as read-only.
        content_hash: lower-case hex sha256 of the raw line bytes (without `\\n` and one `\\r`).
        line_number: 1-based physical line number in the file (the header's line counts).
        start_offset: byte offset of the line's first byte.
        seq: 0-based position of the entry among the file's entries (the header excluded).
    """

    entry_id: str
    parent_id: str | None
    entry_type: str
    timestamp: str | None
    data: dict[str, Any]
    content_hash: str
    line_number: int
    start_offset: int
    seq: int


@dataclass(frozen=True, slots=True)
class ResumeState:
    """What a reader needs to continue from a checkpoint, as of that checkpoint.

    Attributes:
        seq: the `seq` the next entry will get (= entries before the checkpoint).
        v1_index: the v1 id counter: records after the header before the checkpoint in a v1
            file (equal to `seq` there); always 0 for v2/v3 files.
        last_entry_id: id of the last entry before the checkpoint (the v1 parent of the next).
        line_count: physical lines before the checkpoint, or `None` when unknown (the reader
            then counts newlines in the file prefix once).
    """

    seq: int = 0
    v1_index: int = 0
    last_entry_id: str | None = None
    line_count: int | None = None

    def to_json(self) -> str:
        """This state as a compact JSON object string (stored in `resume_json`)."""
        return json.dumps(
            {
                "seq": self.seq,
                "v1Index": self.v1_index,
                "lastEntryId": self.last_entry_id,
                "lineCount": self.line_count,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, value: str | bytes | Mapping[str, Any]) -> ResumeState:
        """Parse a state written by `to_json()` (a JSON string or an already-decoded dict).

        Raises:
            ValueError: if the value is not a JSON object with integer `seq` / `v1Index`.
        """
        obj = json.loads(value) if isinstance(value, (str, bytes)) else value
        if not isinstance(obj, Mapping):
            raise ValueError("resume state must be a JSON object")
        seq = obj.get("seq")
        v1_index = obj.get("v1Index")
        last = obj.get("lastEntryId")
        lines = obj.get("lineCount")
        if not _is_int(seq) or not _is_int(v1_index) or seq < 0 or v1_index < 0:
            raise ValueError(f"resume state needs non-negative integers seq and v1Index: {obj!r}")
        if last is not None and not isinstance(last, str):
            raise ValueError(f"resume state lastEntryId must be a string or null: {last!r}")
        if lines is not None and (not _is_int(lines) or lines < 0):
            raise ValueError(f"resume state lineCount must be a non-negative integer: {lines!r}")
        return cls(seq=seq, v1_index=v1_index, last_entry_id=last, line_count=lines)


@dataclass(slots=True)
class SessionFile:
    """A whole session file read at once (`read_all`).

    Attributes mirror `SessionReader` after exhaustion; `entries` are in file order.
    """

    header: SessionHeader | None
    entries: list[SessionEntry]
    malformed_lines: int = 0
    duplicate_ids: int = 0
    checkpoint_offset: int = 0
    end_offset: int = 0
    torn_tail: bool = False
    resume_state: ResumeState = field(default_factory=ResumeState)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# Storable metadata

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def storable_id(value: str) -> str:
    """`value` with every lone UTF-16 surrogate replaced by its JSON escape as literal text
    (U+D800 becomes the six characters `\\ud800`, hex lower-case); other strings unchanged.

    For identifiers (entry ids and every reference to them, the session id, paths): JSON allows
    lone surrogates, SQLite and UTF-8 cannot hold them, and replacing them all by U+FFFD would
    merge distinct ids. The mapping is deterministic and idempotent (its result holds no
    surrogate), so applying it to ids and to references alike keeps the tree linked, and a
    client may name an entry by the escaped text. An id that already contains such literal
    text (`"a\\\\ud800"` in JSON) becomes equal to the escaped one: one more duplicate id,
    resolved last-wins like any other (docs/reference.md §P8.6).
    """
    if value.isascii() or not _LONE_SURROGATE.search(value):
        return value
    return _LONE_SURROGATE.sub(_escape_surrogate, value)


def parsable_timestamp(value: Any) -> str | None:
    """`value` when it is an ISO-8601 string `datetime.fromisoformat` accepts and holds no lone
    surrogate, else `None` (a timestamp that cannot be parsed counts as missing)."""
    if not isinstance(value, str):
        return None
    if not value.isascii() and _LONE_SURROGATE.search(value):
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return None
    return value


_REFERENCE_KEYS = ("firstKeptEntryId", "fromId", "targetId")
"""Entry keys that name another entry (docs/reference.md §P5), escaped like ids."""


def _storable_references(obj: dict[str, Any]) -> None:
    """Apply `storable_id` in place to the string values of `_REFERENCE_KEYS` in `obj`."""
    for key in _REFERENCE_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            clean = storable_id(value)
            if clean is not value:
                obj[key] = clean


# --------------------------------------------------------------------------------------------
# Header


def _parse_record(data: bytes) -> dict[str, Any] | None:
    """The line as a JSON object with a string `type`, or `None` when it is not one."""
    try:
        obj = _loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return None
    if type(obj) is not dict or not isinstance(obj.get("type"), str):
        return None
    if may_be_too_deep(data, MAX_RECORD_DEPTH) and clip_depth(obj):
        # Walks over entries (planning, JSON output) must not exhaust the stack.
        log.warning(
            "session line nested deeper than %d levels: deep values omitted", MAX_RECORD_DEPTH
        )
    return obj


def _header_version(obj: dict[str, Any], path: StrPath) -> int:
    version = obj.get("version")
    if version is None:
        return 1
    if isinstance(version, float) and version.is_integer():
        version = int(version)
    if not _is_int(version):
        raise UnsupportedSessionVersionError(
            f"cannot read session file '{os.fspath(path)}': the session header has version "
            f"{version!r}, expected an integer from 1 to {CURRENT_SESSION_VERSION}; "
            "is this file from a Pi fork?",
            path,
            version,
        )
    if version > CURRENT_SESSION_VERSION:
        raise UnsupportedSessionVersionError(
            f"cannot read session file '{os.fspath(path)}': session format version {version} is "
            f"newer than this reader supports ({CURRENT_SESSION_VERSION}); update ds4",
            path,
            version,
        )
    return max(version, 1)


def _not_a_header(path: StrPath, line_number: int) -> NotAPiSessionError:
    """The error for a first record (1-based `line_number`) that is not a Pi session header."""
    where = "first line" if line_number == 1 else f"first record (line {line_number})"
    return NotAPiSessionError(
        f"cannot read session file '{os.fspath(path)}': {where} is not a Pi session header "
        '(expected {"type":"session", ...}); is this a Pi session file?',
        path,
    )


def _parses_as_json(data: bytes) -> bool:
    """Whether the line is valid JSON of any kind (`42`, `[1]`, `{"foo":1}`), as `_loads`
    reads it (no NaN or Infinity)."""
    try:
        _loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return False
    return True


def _make_header(obj: dict[str, Any], raw: bytes, path: StrPath, line_number: int) -> SessionHeader:
    if obj.get("type") != "session":
        raise _not_a_header(path, line_number)
    session_id = obj.get("id")
    if not isinstance(session_id, str):
        raise NotAPiSessionError(
            f"cannot read session file '{os.fspath(path)}': the Pi session header on line "
            f'{line_number} has no string "id"; is this a Pi session file?',
            path,
        )
    return header_from_data(obj, _header_version(obj, path), _sha256(raw).hexdigest())


def header_from_data(data: dict[str, Any], version: int, header_hash: str) -> SessionHeader:
    """The `SessionHeader` of a parsed header object whose `id` is a string.

    `data` is changed in place: its `id`, `cwd`, `parentSession` and `branchedFrom` strings go
    through `storable_id`. `timestamp` is `parsable_timestamp(data["timestamp"])`; a missing or
    non-string `cwd` gives `""`. Also used to rebuild the header from the stored `data`.
    """
    for key in ("id", "cwd", "parentSession", "branchedFrom"):
        value = data.get(key)
        if isinstance(value, str):
            data[key] = storable_id(value)
    cwd = data.get("cwd")
    parent = data.get("parentSession")
    if not isinstance(parent, str):
        parent = data.get("branchedFrom")  # v1 name (docs/reference.md §P2)
    return SessionHeader(
        session_id=data["id"],
        version=version,
        timestamp=parsable_timestamp(data.get("timestamp")),
        cwd=cwd if isinstance(cwd, str) else "",
        parent_session=parent if isinstance(parent, str) else None,
        data=data,
        header_hash=header_hash,
    )


class _HeaderScan(NamedTuple):
    """Outcome of the header search.

    Until a complete (`\\n`-terminated) header line is seen nothing is consumed: checkpoint
    and line count stay 0 and malformed lines before it are not reported, so that a later read
    from offset 0 counts everything exactly once.
    """

    header: SessionHeader | None
    checkpoint_offset: int  # end of the header line, or 0
    line_count: int  # lines up to and including the header line, or 0
    end_offset: int  # bytes examined
    malformed_lines: int
    torn_tail: bool  # bytes after checkpoint_offset that may still become a line


def _scan_header(path: StrPath) -> _HeaderScan:
    """Find the header within the first `HEADER_SEARCH_BYTES`, reading at most that much."""
    with open(path, "rb") as handle:
        prefix = handle.read(HEADER_SEARCH_BYTES)
        at_eof = len(prefix) < HEADER_SEARCH_BYTES or not handle.read(1)
    pieces = prefix.split(b"\n")
    last = len(pieces) - 1
    if at_eof and pieces[last]:
        last += 1  # the final unterminated line is complete as far as the file goes
    offset = 0
    malformed = 0
    for index in range(last):
        piece = pieces[index]
        terminated = index < len(pieces) - 1
        offset += len(piece) + terminated
        data = piece[:-1] if piece.endswith(b"\r") else piece
        if index == 0 and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]  # tolerate a UTF-8 byte order mark before the header
        if not data.strip():
            if terminated:
                continue
            return _HeaderScan(None, 0, 0, offset, 0, True)  # blank torn tail: pending
        obj = _parse_record(data)
        if obj is None and _parses_as_json(data):
            # A parsed line that is not a typed record is still the first record, and so
            # the file is no Pi session (docs/reference.md §P8.4), not one of junk lines.
            raise _not_a_header(path, index + 1)
        if obj is None:
            if terminated:
                malformed += 1
                continue
            if data.lstrip()[:1] == b"{":
                return _HeaderScan(None, 0, 0, offset, 0, True)  # torn, unparsable: pending
            raise NotAPiSessionError(  # e.g. a binary file: no line breaks, no JSON
                f"cannot read session file '{os.fspath(path)}': it does not start with a JSON "
                'record (expected {"type":"session", ...}); is this a Pi session file?',
                path,
            )
        header = _make_header(obj, data, path, index + 1)
        if terminated:
            return _HeaderScan(header, offset, index + 1, offset, malformed, False)
        return _HeaderScan(header, 0, 0, offset, 0, True)
    if at_eof and not malformed:
        # Empty or blank-only file: a valid "no session yet" (docs/reference.md §P8.3).
        return _HeaderScan(None, 0, 0, offset, 0, False)
    if at_eof:
        reason = 'it holds no JSON record with a "type", only malformed lines'
    else:
        reason = "no Pi session header lies within its first 1 MiB"
    raise NotAPiSessionError(
        f"cannot read session file '{os.fspath(path)}': {reason} "
        '(expected {"type":"session", ...}); is this a Pi session file?',
        path,
    )


def read_header(path: StrPath) -> SessionHeader | None:
    """The header of the session file at `path`, reading at most its first 1 MiB.

    Returns `None` for an empty (or blank-only) file, or one whose only content is an
    unfinished (unterminated, unparsable) first line. Useful for session discovery.

    Raises:
        NotAPiSessionError: the first record is not a header, or none starts within 1 MiB.
        UnsupportedSessionVersionError: the header's version is above 3 or not an integer.
        OSError: the file cannot be read.
    """
    return _scan_header(path).header


def _count_lines_before(path: StrPath, offset: int) -> int:
    """Number of `\\n` bytes in the file before byte `offset`."""
    count = 0
    remaining = offset
    with open(path, "rb") as handle:
        while remaining > 0:
            chunk = handle.read(min(DEFAULT_CHUNK_SIZE, remaining))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count


# --------------------------------------------------------------------------------------------
# Reader


class SessionReader:
    """Streams the entries of one Pi session file, optionally resuming from a checkpoint.

    Usage::

        reader = SessionReader(path)
        for entry in reader.entries():
            ...
        reader.checkpoint_offset, reader.resume_state  # persist both to resume later

    Args:
        path: the session file.
        start_offset: byte offset to start at: 0, or a `checkpoint_offset` of an earlier read.
        header: the header from the earlier read (read from the file again when omitted).
        resume: the `resume_state` of the earlier read; required when `start_offset > 0`.

    After `entries()` is exhausted these attributes describe the read:
        header: `SessionHeader`, or `None` for an empty session.
        malformed_lines: terminated lines skipped as malformed by this read (blank lines are
            not counted; when resuming, only lines after `start_offset`).
        duplicate_ids: entries whose id was already seen in this read (consumers use
            last-wins, docs/reference.md §P8.6); `duplicate_entry_ids` lists them in order.
        checkpoint_offset: end of the last `\\n`-terminated line consumed (bytes); stays 0
            until a complete header line has been seen.
        end_offset: offset just past the last byte read (the file size at read time).
        resume_state: `ResumeState` at `checkpoint_offset` (a torn final line not counted).
        torn_tail: `True` when the file ends with an unterminated, non-empty line (whether or
            not it parsed), which a later read from `checkpoint_offset` will see again.

    Errors (raised from `entries()`): `NotAPiSessionError`, `UnsupportedSessionVersionError`,
    `SessionFormatError` (resuming a file that has no header any more), `OSError`.
    """

    def __init__(
        self,
        path: StrPath,
        *,
        start_offset: int = 0,
        header: SessionHeader | None = None,
        resume: ResumeState | None = None,
    ) -> None:
        if start_offset < 0:
            raise ValueError(f"start_offset must be >= 0, got {start_offset}")
        if start_offset > 0 and resume is None:
            raise ValueError(
                "resuming at a byte offset needs the ResumeState saved with that checkpoint "
                "(pass resume=...)"
            )
        self.path = path
        self.start_offset = start_offset
        self._given_header = header
        self._resume = resume or ResumeState()
        self._reset()

    def _reset(self) -> None:
        self.header: SessionHeader | None = self._given_header if self.start_offset else None
        self.malformed_lines = 0
        self.duplicate_ids = 0
        self.duplicate_entry_ids: list[str] = []
        self.checkpoint_offset = self.start_offset
        self.end_offset = self.start_offset
        self.resume_state = self._resume if self.start_offset else ResumeState(line_count=0)
        self.torn_tail = False

    def __iter__(self) -> Iterator[SessionEntry]:
        return self.entries()

    def entries(self) -> Iterator[SessionEntry]:
        """Yield the entries from `start_offset` to EOF in file order (streaming).

        Each call re-reads from `start_offset` and resets the statistics attributes.
        """
        self._reset()
        path = self.path
        offset = self.start_offset
        resume = self._resume
        if offset == 0:
            scan = _scan_header(path)
            self.header = scan.header
            self.malformed_lines = scan.malformed_lines
            self.checkpoint_offset = scan.checkpoint_offset
            self.end_offset = scan.end_offset
            self.torn_tail = scan.torn_tail
            self.resume_state = ResumeState(line_count=scan.line_count)
            if scan.header is None or scan.checkpoint_offset == 0:
                return  # empty, or no complete header line yet
            offset = scan.checkpoint_offset
            line_number = scan.line_count
            seq, v1_index, last_id = 0, 0, None
        else:
            if self.header is None:
                self.header = _scan_header(path).header
                if self.header is None:
                    raise SessionFormatError(
                        f"cannot resume reading session file '{os.fspath(path)}': it no longer "
                        "starts with a Pi session header; re-index it from the start",
                        path,
                    )
            known_lines = resume.line_count
            line_number = (
                known_lines if known_lines is not None else _count_lines_before(path, offset)
            )
            seq, v1_index, last_id = resume.seq, resume.v1_index, resume.last_entry_id
        yield from self._read_entries(offset, line_number, seq, v1_index, last_id)

    def _read_entries(
        self, offset: int, line_number: int, seq: int, v1_index: int, last_id: str | None
    ) -> Iterator[SessionEntry]:
        header = self.header
        assert header is not None
        is_v1 = header.version < 2
        rename_hook = header.version < CURRENT_SESSION_VERSION
        seen: set[str] = set()
        malformed = self.malformed_lines  # lines before the header, when read from 0
        checkpoint = offset
        end_offset = offset
        torn = False
        line: RawLine
        for line in iter_raw_lines(self.path, offset):
            line_number += 1
            data = line.data
            terminated = line.terminated
            end_offset = line.end
            if not terminated:
                torn = True
            if not data.strip():  # blank line: skipped, not counted
                if terminated:
                    checkpoint = end_offset
                continue
            obj = _parse_record(data)
            if obj is None or obj["type"] == "session":
                # Not a JSON object with a string type, or a stray second header.
                if terminated:
                    malformed += 1
                    checkpoint = end_offset
                continue
            entry_type = obj["type"]
            if is_v1:
                index = v1_index + 1
                entry_id = f"v1-{index}"
                parent_id = last_id
                obj["id"] = entry_id
                obj["parentId"] = parent_id
                if entry_type == "compaction" and "firstKeptEntryIndex" in obj:
                    kept = obj.pop("firstKeptEntryIndex")
                    if _is_int(kept) and 1 <= kept < index:
                        obj["firstKeptEntryId"] = f"v1-{kept}"
            else:
                index = v1_index
                raw_id = obj.get("id")
                if not isinstance(raw_id, str):
                    if terminated:
                        malformed += 1
                        checkpoint = end_offset
                    continue
                entry_id = storable_id(raw_id)
                parent_id = obj.get("parentId")
                if isinstance(parent_id, str):
                    parent_id = storable_id(parent_id)
                    if entry_id is not raw_id or parent_id is not obj["parentId"]:
                        obj["id"], obj["parentId"] = entry_id, parent_id
                else:
                    parent_id = None
                    if entry_id is not raw_id:
                        obj["id"] = entry_id
                _storable_references(obj)
            if rename_hook and entry_type == "message":
                message = obj.get("message")
                if type(message) is dict and message.get("role") == "hookMessage":
                    message["role"] = "custom"
            entry = SessionEntry(
                entry_id,
                parent_id,
                entry_type,
                parsable_timestamp(obj.get("timestamp")),
                obj,
                _sha256(data).hexdigest(),
                line_number,
                line.start,
                seq,
            )
            if entry_id in seen:
                self.duplicate_ids += 1
                self.duplicate_entry_ids.append(entry_id)
            else:
                seen.add(entry_id)
            if terminated:
                seq += 1
                v1_index = index
                last_id = entry_id
                checkpoint = end_offset
                # Keep the statistics current while streaming (a consumer may stop early).
                self.checkpoint_offset = checkpoint
                self.resume_state = ResumeState(seq, v1_index, last_id, line_number)
            self.malformed_lines = malformed
            self.end_offset = end_offset
            yield entry
        self.malformed_lines = malformed
        self.checkpoint_offset = checkpoint
        self.end_offset = end_offset
        self.torn_tail = torn
        self.resume_state = ResumeState(seq, v1_index, last_id, line_number - (1 if torn else 0))


def read_all(path: StrPath) -> SessionFile:
    """Read the whole session file at `path` into memory (entries in file order).

    Raises the errors of `SessionReader.entries()`.
    """
    reader = SessionReader(path)
    entries = list(reader.entries())
    return SessionFile(
        header=reader.header,
        entries=entries,
        malformed_lines=reader.malformed_lines,
        duplicate_ids=reader.duplicate_ids,
        checkpoint_offset=reader.checkpoint_offset,
        end_offset=reader.end_offset,
        torn_tail=reader.torn_tail,
        resume_state=reader.resume_state,
    )


def read_more(
    path: StrPath, previous: SessionFile, previous_prefix: PrefixHashes
) -> SessionFile | None:
    """`previous` extended by what was appended to `path` since it was read, or None when the
    file did not simply grow (then read it again with `read_all`).

    The file only grew when every byte `previous` read is unchanged: `previous_prefix` (from
    `prefix.hash_prefix(path, previous.end_offset)` right after the read) must cover
    `previous.end_offset` bytes and `prefix.check` must find no changed block (Pi only ever
    appends, docs/reference.md §P8, but other tools rewrite in place and may keep size and
    mtime). On a prefix over `prefix.FULL_CHECK_BYTES` that check compares the last block and
    the background pass's findings on this call and leaves the rest to a background pass, so a
    rewrite elsewhere is caught within the window of `ds4_core.sessions.prefix` (c), not
    necessarily by this call. A torn final line of `previous` is dropped and read
    again from the checkpoint. Statistics are the sums over both reads; `duplicate_ids` counts
    only duplicates within each read (consumers use last-wins anyway).

    Raises the errors of `SessionReader.entries()`.
    """
    if previous.header is None or previous.checkpoint_offset == 0:
        return None
    try:
        size = os.stat(path).st_size
    except OSError:
        return None
    if size < previous.end_offset or previous_prefix.length != previous.end_offset:
        return None
    if check(path, previous_prefix, rolling_blocks=0).changed is not None:
        return None
    reader = SessionReader(
        path,
        start_offset=previous.checkpoint_offset,
        header=previous.header,
        resume=previous.resume_state,
    )
    added = list(reader.entries())
    kept = previous.entries
    if previous.torn_tail and kept and kept[-1].start_offset >= previous.checkpoint_offset:
        kept = kept[:-1]
    return SessionFile(
        header=previous.header,
        entries=[*kept, *added],
        malformed_lines=previous.malformed_lines + reader.malformed_lines,
        duplicate_ids=previous.duplicate_ids + reader.duplicate_ids,
        checkpoint_offset=reader.checkpoint_offset,
        end_offset=reader.end_offset,
        torn_tail=reader.torn_tail,
        resume_state=reader.resume_state,
    )
