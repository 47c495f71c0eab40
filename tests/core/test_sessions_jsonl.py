"""Line framing of session files: split on `\\n` only, byte offsets, bounded chunks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.sessions.jsonl import RawLine, iter_raw_lines


def _write(tmp_path: Path, data: bytes, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _expected_lines(data: bytes, start: int = 0) -> list[tuple[bytes, bool]]:
    """Reference framing: bytes.split(b"\\n"), no empty piece after a final newline."""
    pieces = data[start:].split(b"\n")
    lines = [(piece, True) for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append((pieces[-1], False))
    return [(p[:-1] if p.endswith(b"\r") else p, terminated) for p, terminated in lines]


def test_lines_carry_offsets_that_slice_back_to_the_file(tmp_path: Path) -> None:
    data = b'{"a":1}\n\n{"b":2}\r\nlast'
    lines = list(iter_raw_lines(_write(tmp_path, data)))
    assert lines == [
        RawLine(0, 8, b'{"a":1}', True),
        RawLine(8, 9, b"", True),
        RawLine(9, 18, b'{"b":2}', True),
        RawLine(18, 22, b"last", False),
    ]
    for line in lines:
        assert data[line.start : line.end].rstrip(b"\n").removesuffix(b"\r") == line.data


def test_only_one_trailing_carriage_return_is_stripped(tmp_path: Path) -> None:
    lines = list(iter_raw_lines(_write(tmp_path, b"a\r\r\nb\rc\n")))
    assert [line.data for line in lines] == [b"a\r", b"b\rc"]


def test_unicode_line_separators_inside_json_strings_do_not_split_lines(tmp_path: Path) -> None:
    # U+2028, U+2029, \x1c-\x1e and \x85 are line breaks for str.splitlines(), not for JSONL.
    text = "a\u2028b\u2029c\x1cd\x1de\x1ef\x85g\x0bh\x0ci"
    record = json.dumps({"type": "message", "text": text}, ensure_ascii=False)
    data = (record + "\n" + record + "\n").encode("utf-8")
    lines = list(iter_raw_lines(_write(tmp_path, data), chunk_size=7))
    assert len(lines) == 2
    assert json.loads(lines[0].data)["text"] == text


def test_a_line_longer_than_several_chunks_is_one_line(tmp_path: Path) -> None:
    big = b"x" * (3 * (1 << 20) + 17)
    data = b"head\n" + big + b"\ntail\n"
    lines = list(iter_raw_lines(_write(tmp_path, data)))
    assert [len(line.data) for line in lines] == [4, len(big), 4]
    assert lines[1].start == 5 and lines[1].end == 5 + len(big) + 1
    assert lines[2].start == lines[1].end


def test_reading_from_an_offset_continues_at_that_line(tmp_path: Path) -> None:
    data = b"one\ntwo\nthree"
    lines = list(iter_raw_lines(_write(tmp_path, data), start_offset=4))
    assert lines == [RawLine(4, 8, b"two", True), RawLine(8, 13, b"three", False)]


def test_empty_file_and_offset_at_eof_yield_nothing(tmp_path: Path) -> None:
    assert list(iter_raw_lines(_write(tmp_path, b""))) == []
    assert list(iter_raw_lines(_write(tmp_path, b"abc\n", "b.jsonl"), start_offset=4)) == []


def test_invalid_arguments_are_rejected(tmp_path: Path) -> None:
    path = _write(tmp_path, b"x\n")
    with pytest.raises(ValueError):
        list(iter_raw_lines(path, start_offset=-1))
    with pytest.raises(ValueError):
        list(iter_raw_lines(path, chunk_size=0))


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.lists(
        st.sampled_from([b"\n", b"\r", b"\r\n", b"a", b"{}", b"\xe2\x80\xa8", b"\xff", b" "]),
        max_size=60,
    ).map(b"".join)
    | st.binary(max_size=200),
    chunk_size=st.integers(min_value=1, max_value=70),
)
def test_any_bytes_in_any_chunk_size_frame_like_bytes_split(
    tmp_path: Path, data: bytes, chunk_size: int
) -> None:
    """Framing is independent of the chunk size and equals bytes.split(b"\\n")."""
    path = _write(tmp_path, data, "prop.jsonl")
    lines = list(iter_raw_lines(path, chunk_size=chunk_size))
    assert [(line.data, line.terminated) for line in lines] == _expected_lines(data)
    position = 0
    for line in lines:
        assert line.start == position
        position = line.end
    assert position == len(data)
    # Resuming at any line boundary yields the rest of the lines.
    for line in lines:
        rest = list(iter_raw_lines(path, start_offset=line.end, chunk_size=chunk_size))
        assert [(r.data, r.terminated) for r in rest] == _expected_lines(data, line.end)
