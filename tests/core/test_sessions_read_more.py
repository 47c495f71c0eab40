"""`read_more`: extending a parsed session by what was appended equals reading it again."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.sessions.prefix import hash_prefix
from ds4_core.sessions.reader import read_all, read_more

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s-1",
    "timestamp": "2026-01-01T00:00:00Z",
    "cwd": "/w",
}
V1_HEADER = {"type": "session", "id": "s-1", "timestamp": "2026-01-01T00:00:00Z", "cwd": "/w"}


def _line(n: int, kind: str) -> bytes:
    if kind == "malformed":
        return b"{not json\n"
    if kind == "blank":
        return b"\n"
    if kind == "crlf":
        record = {
            "type": "message",
            "id": f"{n:08x}",
            "parentId": None,
            "message": {"role": "user", "content": f"crlf {n}"},
        }
        return json.dumps(record).encode() + b"\r\n"
    if kind == "compaction":
        record = {
            "type": "compaction",
            "id": f"{n:08x}",
            "parentId": None,
            "summary": "s",
            "firstKeptEntryIndex": 1,
            "tokensBefore": 3,
        }
        return json.dumps(record).encode() + b"\n"
    record = {
        "type": "message",
        "id": f"{n:08x}",
        "parentId": None,
        "message": {"role": "user", "content": f"text {n} é"},
    }
    return json.dumps(record, ensure_ascii=False).encode() + b"\n"


def _same(a: object, b: object) -> None:
    assert a.header == b.header  # type: ignore[attr-defined]
    assert [
        (e.entry_id, e.parent_id, e.data, e.content_hash, e.line_number, e.start_offset, e.seq)
        for e in a.entries  # type: ignore[attr-defined]
    ] == [
        (e.entry_id, e.parent_id, e.data, e.content_hash, e.line_number, e.start_offset, e.seq)
        for e in b.entries  # type: ignore[attr-defined]
    ]
    for name in ("malformed_lines", "checkpoint_offset", "end_offset", "torn_tail", "resume_state"):
        assert getattr(a, name) == getattr(b, name), name


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kinds=st.lists(
        st.sampled_from(["message", "message", "malformed", "blank", "crlf", "compaction"]),
        max_size=30,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=4),
    v1=st.booleans(),
)
def test_growing_a_file_in_pieces_reads_like_reading_it_once(
    tmp_path_factory: object, kinds: list[str], cuts: list[int], v1: bool
) -> None:
    directory: Path = tmp_path_factory.mktemp("grow")  # type: ignore[attr-defined]
    header = json.dumps(V1_HEADER if v1 else HEADER).encode() + b"\n"
    content = header + b"".join(_line(n, kind) for n, kind in enumerate(kinds, start=1))
    points = sorted({min(len(content), max(len(header), c)) for c in cuts} | {len(content)})
    path = directory / "s.jsonl"
    path.write_bytes(content[: points[0]])
    parsed = read_all(path)
    for point in points[1:]:
        tail = hash_prefix(path, parsed.end_offset)
        path.write_bytes(content[:point])  # appended bytes, possibly ending mid-line
        grown = read_more(path, parsed, tail)
        assert grown is not None
        parsed = grown
    _same(parsed, read_all(path))


def test_a_rewritten_or_truncated_file_is_not_extended(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        json.dumps(HEADER).encode() + b"\n" + _line(1, "message") + _line(2, "message")
    )
    parsed = read_all(path)
    tail = hash_prefix(path, parsed.end_offset)
    path.write_bytes(json.dumps(HEADER).encode() + b"\n" + _line(1, "message"))
    assert read_more(path, parsed, tail) is None  # truncated
    path.write_bytes(
        json.dumps(HEADER).encode()
        + b"\n"
        + _line(7, "message")
        + _line(8, "message")
        + _line(9, "message")
    )
    assert read_more(path, parsed, tail) is None  # same length or longer, different bytes


def test_a_same_size_rewrite_far_before_the_checkpoint_is_not_extended(tmp_path: Path) -> None:
    """A rewrite 34 KB into a longer file, then an append: read_more must not extend."""
    path = tmp_path / "s.jsonl"
    lines = [_line(n, "message") for n in range(1, 2000)]
    path.write_bytes(json.dumps(HEADER).encode() + b"\n" + b"".join(lines))
    parsed = read_all(path)
    prefix = hash_prefix(path, parsed.end_offset)
    data = bytearray(path.read_bytes())
    at = data.index(b"text ", 34_000)
    data[at : at + 4] = b"TEXT"
    path.write_bytes(bytes(data) + _line(5000, "message"))
    assert parsed.end_offset > 100_000
    assert read_more(path, parsed, prefix) is None
