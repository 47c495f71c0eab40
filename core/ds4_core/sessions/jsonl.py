"""Byte-level line framing for JSONL session files.

Pi session files are UTF-8 JSON, one object per line, and lines end at `\\n` only
(docs/reference.md §P2). We never decode before splitting and never use `str.splitlines`:
U+2028, U+2029, `\\x1c`-`\\x1e` and `\\x85` may legally appear inside JSON strings. The file is
read in fixed-size chunks (1 MiB by default, docs/reference.md §3.12), so memory is bounded by the
longest line, not by the file; a single line may be many megabytes long.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

DEFAULT_CHUNK_SIZE = 1 << 20
"""Bytes read per `read()` call (1 MiB, docs/reference.md §3.12)."""

StrPath = str | os.PathLike[str]


class RawLine(NamedTuple):
    """One physical line of a JSONL file, as bytes.

    Attributes:
        start: byte offset of the line's first byte in the file.
        end: byte offset just past the line's `\\n`, or the end of file when the line is
            unterminated (so the next line, if any, starts at `end`).
        data: the line's bytes without the `\\n` and without one trailing `\\r` (CRLF files).
        terminated: `True` when the line ended with `\\n`; `False` only for a final line at EOF
            (a torn write or a file whose last line has no newline yet).
    """

    start: int
    end: int
    data: bytes
    terminated: bool


def _strip_cr(data: bytes) -> bytes:
    return data[:-1] if data.endswith(b"\r") else data


def iter_raw_lines(
    path: StrPath, start_offset: int = 0, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> Iterator[RawLine]:
    """Yield every line of the file at `path` from byte `start_offset` to EOF, in order.

    Lines are split on `b"\\n"` only; one trailing `b"\\r"` is removed from `data`. Blank lines
    are yielded too (callers decide what to skip). A final line without `\\n` is yielded with
    `terminated=False`; a file ending in `\\n` yields no empty final line. Offsets are absolute
    file offsets in bytes. The file is read `chunk_size` bytes at a time and is never held in
    memory as a whole; a line longer than `chunk_size` is assembled from its pieces.

    `start_offset` should be a line boundary (0 or the `end` of an earlier line); otherwise the
    first yielded line is the remainder of the line containing that offset.

    Raises:
        ValueError: if `start_offset < 0` or `chunk_size < 1`.
        OSError: if the file cannot be opened or read.
    """
    if start_offset < 0:
        raise ValueError(f"start_offset must be >= 0, got {start_offset}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    with open(path, "rb") as handle:
        if start_offset:
            handle.seek(start_offset)
        line_start = start_offset  # offset of the first byte of the pending line
        pending: list[bytes] = []  # pieces of a line that spans chunk boundaries
        read = handle.read
        while True:
            chunk = read(chunk_size)
            if not chunk:
                break
            pieces = chunk.split(b"\n")
            last = len(pieces) - 1
            for index in range(last):
                piece = pieces[index]
                if pending:
                    pending.append(piece)
                    piece = b"".join(pending)
                    pending.clear()
                end = line_start + len(piece) + 1
                yield RawLine(line_start, end, _strip_cr(piece), True)
                line_start = end
            tail = pieces[last]
            if tail:
                pending.append(tail)
        if pending:
            data = b"".join(pending)
            yield RawLine(line_start, line_start + len(data), _strip_cr(data), False)
