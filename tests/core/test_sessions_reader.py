"""Reading Pi session files: header, migration, malformed and torn lines, resuming, search text."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.sessions import (
    NotAPiSessionError,
    ResumeState,
    SessionEntry,
    SessionFormatError,
    SessionReader,
    UnsupportedSessionVersionError,
    entry_role,
    read_all,
    read_header,
    searchable_text,
)
from ds4_core.tokens import sha256_hex

HEADER_V3 = {
    "type": "session",
    "version": 3,
    "id": "s-1",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/proj",
}
HEADER_V1 = {"type": "session", "id": "s-v1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/p"}


def _line(record: dict[str, Any] | str | bytes) -> bytes:
    if isinstance(record, bytes):
        return record
    if isinstance(record, str):
        return record.encode("utf-8")
    return json.dumps(record, ensure_ascii=False).encode("utf-8")


def _write_session(
    path: Path,
    records: list[dict[str, Any] | str | bytes],
    *,
    eol: bytes = b"\n",
    final_newline: bool = True,
) -> Path:
    data = eol.join(_line(r) for r in records)
    if final_newline and records:
        data += eol
    path.write_bytes(data)
    return path


def _msg(
    entry_id: str | None, parent: str | None, role: str = "user", text: str = "hi", **extra: Any
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "message",
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": role, "content": text, "timestamp": 1},
    }
    if entry_id is not None:
        entry["id"] = entry_id
        entry["parentId"] = parent
    entry.update(extra)
    return entry


# ------------------------------------------------------------------------------------------
# Real fixtures


def _independent_counts(path: Path) -> tuple[Counter[str], Counter[str]]:
    """Entry types and message roles counted without the reader (bytes.split + json.loads)."""
    types: Counter[str] = Counter()
    roles: Counter[str] = Counter()
    for raw in path.read_bytes().split(b"\n")[1:]:
        if raw.strip():
            obj = json.loads(raw)
            types[obj["type"]] += 1
            if obj["type"] == "message":
                roles[obj["message"]["role"]] += 1
    return types, roles


@pytest.mark.parametrize(
    ("name", "session_id", "version", "types", "roles"),
    [
        (
            "pi-mono-v1-large-session.jsonl",
            "d703a1a9-1b7b-4fb1-b512-c9738b1fe617",
            1,
            {"message": 914, "thinking_level_change": 103, "model_change": 1},
            {"user": 88, "assistant": 453, "toolResult": 373},
        ),
        (
            "openclaw-v3-single-turn-6a5d2a19.jsonl",
            "6a5d2a19-7148-419a-8c4c-28a69f062726",
            3,
            {"model_change": 1, "thinking_level_change": 1, "custom": 1, "message": 2},
            {"user": 1, "assistant": 1},
        ),
        (
            "v3-branching-compaction.jsonl",
            "fixture-session",
            3,
            {"message": 5, "model_change": 1, "compaction": 1, "future_entry": 1},
            {"user": 1, "assistant": 3, "toolResult": 1},
        ),
        (
            "v1-prompt-cache-replay.jsonl",
            "replay-session-1",
            1,
            {"message": 6},
            {"user": 2, "assistant": 3, "toolResult": 1},
        ),
    ],
)
def test_real_fixture_reads_with_the_right_counts(
    pi_sessions_dir: Path,
    name: str,
    session_id: str,
    version: int,
    types: dict[str, int],
    roles: dict[str, int],
) -> None:
    path = pi_sessions_dir / name
    session = read_all(path)
    assert session.header is not None
    assert session.header.session_id == session_id
    assert session.header.version == version
    assert Counter(e.entry_type for e in session.entries) == types
    assert Counter(entry_role(e) for e in session.entries if e.entry_type == "message") == roles
    assert (Counter(types), Counter(roles)) == _independent_counts(path)
    assert session.malformed_lines == 0
    assert session.duplicate_ids == 0
    assert not session.torn_tail
    size = path.stat().st_size
    assert session.checkpoint_offset == session.end_offset == size
    assert [e.seq for e in session.entries] == list(range(len(session.entries)))
    assert [e.line_number for e in session.entries] == list(range(2, len(session.entries) + 2))
    assert session.resume_state.seq == len(session.entries)
    first_line = path.read_bytes().split(b"\n", 1)[0]
    assert session.header.header_hash == sha256_hex(first_line)


def test_large_v1_fixture_has_1018_entries_after_the_header(pi_sessions_dir: Path) -> None:
    # 914 messages + 103 thinking_level_change + 1 model_change; the header is not an entry.
    session = read_all(pi_sessions_dir / "pi-mono-v1-large-session.jsonl")
    assert len(session.entries) == 1018
    assert session.entries[0].entry_id == "v1-1" and session.entries[0].parent_id is None
    assert session.entries[-1].entry_id == "v1-1018"
    assert session.entries[-1].parent_id == "v1-1017"


def test_empty_file_is_a_valid_empty_session(pi_sessions_dir: Path) -> None:
    session = read_all(pi_sessions_dir / "openclaw-v3-empty-862b07aa.jsonl")
    assert session.header is None
    assert session.entries == []
    assert (session.malformed_lines, session.checkpoint_offset, session.torn_tail) == (0, 0, False)


def test_content_hash_is_the_sha256_of_the_raw_line(pi_sessions_dir: Path) -> None:
    path = pi_sessions_dir / "v3-branching-compaction.jsonl"
    raw_lines = path.read_bytes().split(b"\n")
    for entry in read_all(path).entries:
        assert entry.content_hash == sha256_hex(raw_lines[entry.line_number - 1])


# ------------------------------------------------------------------------------------------
# Header


def test_a_file_whose_first_record_is_not_a_header_is_rejected_with_advice(
    tmp_path: Path,
) -> None:
    path = _write_session(tmp_path / "x.jsonl", [_msg("a", None)])
    with pytest.raises(NotAPiSessionError) as caught:
        read_all(path)
    message = str(caught.value)
    assert f"cannot read session file '{path}'" in message
    assert "first line is not a Pi session header" in message
    assert "is this a Pi session file?" in message


_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "id", "foo", "version"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    first=_JSON_VALUES.filter(lambda v: not (isinstance(v, dict) and v.get("type") == "session"))
)
def test_a_first_line_of_valid_json_that_is_no_header_is_named_as_such(
    tmp_path: Path, first: Any
) -> None:
    """A first line that parses as JSON (`{"foo":1}`, `[1]`, `42`) is the first record, and it
    is not a Pi session header (docs/reference.md §P8.4): the error says so, never that the
    file holds "only malformed lines", even with a real header after it."""
    path = _write_session(tmp_path / "x.jsonl", [json.dumps(first), HEADER_V3])
    with pytest.raises(NotAPiSessionError) as caught:
        read_all(path)
    assert "first line is not a Pi session header" in str(caught.value)


def test_a_header_without_a_string_id_is_not_a_session(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", [{"type": "session", "id": 7}])
    with pytest.raises(NotAPiSessionError, match='no string "id"'):
        read_all(path)


def test_a_file_of_junk_lines_is_not_a_session(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", ["not json", "[1, 2]"])
    with pytest.raises(NotAPiSessionError):
        read_all(path)


def test_the_header_must_lie_within_the_first_mebibyte(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", ["#" * (1 << 20), HEADER_V3])
    with pytest.raises(NotAPiSessionError, match="1 MiB"):
        read_all(path)


def test_blank_and_malformed_lines_before_the_header_are_skipped(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", ["", "garbage", HEADER_V3, _msg("a", None)])
    session = read_all(path)
    assert session.header is not None and session.header.session_id == "s-1"
    assert [e.entry_id for e in session.entries] == ["a"]
    assert session.entries[0].line_number == 4
    assert session.malformed_lines == 1


def test_blank_only_file_is_an_empty_session(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n \r\n")
    session = read_all(path)
    assert session.header is None and session.entries == []


@pytest.mark.parametrize("version", [4, 99, "3", 2.5, True])
def test_unsupported_versions_are_rejected(tmp_path: Path, version: Any) -> None:
    path = _write_session(tmp_path / "x.jsonl", [{**HEADER_V3, "version": version}])
    with pytest.raises(UnsupportedSessionVersionError) as caught:
        read_all(path)
    assert isinstance(caught.value, SessionFormatError)
    assert str(path) in str(caught.value)


def test_header_fields(tmp_path: Path) -> None:
    header = {**HEADER_V3, "parentSession": "/old.jsonl", "forkedAt": 3}
    path = _write_session(tmp_path / "x.jsonl", [header])
    parsed = read_header(path)
    assert parsed is not None
    assert (parsed.session_id, parsed.version, parsed.cwd) == ("s-1", 3, "/proj")
    assert parsed.parent_session == "/old.jsonl"
    assert parsed.timestamp == "2026-01-01T00:00:00.000Z"
    assert parsed.data["forkedAt"] == 3
    v1 = _write_session(
        tmp_path / "v1.jsonl", [{"type": "session", "id": "x", "branchedFrom": "/a"}]
    )
    parsed_v1 = read_header(v1)
    assert parsed_v1 is not None
    assert (parsed_v1.version, parsed_v1.cwd, parsed_v1.parent_session) == (1, "", "/a")


# ------------------------------------------------------------------------------------------
# Migration


def test_v1_entries_get_deterministic_ids_and_a_linear_chain(tmp_path: Path) -> None:
    records: list[Any] = [
        HEADER_V1,
        _msg(None, None),
        "",
        "{broken",
        _msg(None, None, "assistant"),
        {"type": "thinking_level_change", "thinkingLevel": "high"},
    ]
    entries = read_all(_write_session(tmp_path / "v1.jsonl", records)).entries
    assert [(e.entry_id, e.parent_id) for e in entries] == [
        ("v1-1", None),
        ("v1-2", "v1-1"),
        ("v1-3", "v1-2"),
    ]
    assert [(e.data["id"], e.data["parentId"]) for e in entries] == [
        ("v1-1", None),
        ("v1-2", "v1-1"),
        ("v1-3", "v1-2"),
    ]


@pytest.mark.parametrize(
    ("index", "expected"),
    [(1, "v1-1"), (2, "v1-2"), (0, None), (3, None), (7, None), (-1, None), ("2", None)],
)
def test_v1_first_kept_entry_index_maps_to_an_id(
    tmp_path: Path, index: Any, expected: str | None
) -> None:
    # Header = index 0; the blank and malformed lines are not counted; the compaction is v1-3.
    compaction = {
        "type": "compaction",
        "summary": "s",
        "tokensBefore": 5,
        "firstKeptEntryIndex": index,
    }
    records: list[Any] = [HEADER_V1, _msg(None, None), "", "not json", _msg(None, None), compaction]
    entries = read_all(_write_session(tmp_path / "v1.jsonl", records)).entries
    data = entries[2].data
    assert entries[2].entry_id == "v1-3"
    assert "firstKeptEntryIndex" not in data
    assert data.get("firstKeptEntryId") == expected


def test_hook_message_role_is_renamed_below_version_3(tmp_path: Path) -> None:
    hook = _msg("a", None, role="hookMessage")
    v2 = read_all(_write_session(tmp_path / "v2.jsonl", [{**HEADER_V3, "version": 2}, hook]))
    v3 = read_all(_write_session(tmp_path / "v3.jsonl", [HEADER_V3, hook]))
    assert entry_role(v2.entries[0]) == "custom"
    assert entry_role(v3.entries[0]) == "hookMessage"


def test_unknown_types_and_keys_are_kept_as_opaque_entries(tmp_path: Path) -> None:
    odd = {"type": "future_entry", "id": "f", "parentId": None, "secret": {"x": 1}}
    entries = read_all(_write_session(tmp_path / "x.jsonl", [HEADER_V3, odd])).entries
    assert entries[0].entry_type == "future_entry"
    assert entries[0].data["secret"] == {"x": 1}
    assert entries[0].timestamp is None


# ------------------------------------------------------------------------------------------
# Malformed, odd and torn lines


def test_malformed_middle_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    records: list[Any] = [
        HEADER_V3,
        _msg("a", None),
        "{not json",
        "[1, 2]",
        '"a string"',
        '{"type": 5, "id": "n"}',
        '{"id": "no-type"}',
        {"type": "message", "parentId": "a"},  # v3 entry without an id
        {"type": "message", "id": 12, "parentId": "a"},  # non-string id
        {"type": "session", "id": "second-header"},
        "",
        "   ",
        _msg("b", "a"),
    ]
    session = read_all(_write_session(tmp_path / "x.jsonl", records))
    assert [e.entry_id for e in session.entries] == ["a", "b"]
    assert session.malformed_lines == 8
    assert [e.seq for e in session.entries] == [0, 1]
    assert session.entries[1].line_number == 13


def test_crlf_files_read_like_lf_files(tmp_path: Path) -> None:
    records: list[Any] = [HEADER_V3, _msg("a", None), "", _msg("b", "a", "assistant")]
    lf = read_all(_write_session(tmp_path / "lf.jsonl", records))
    crlf = read_all(_write_session(tmp_path / "crlf.jsonl", records, eol=b"\r\n"))
    assert [(e.entry_id, e.data, e.content_hash, e.line_number) for e in crlf.entries] == [
        (e.entry_id, e.data, e.content_hash, e.line_number) for e in lf.entries
    ]
    assert crlf.malformed_lines == 0 and not crlf.torn_tail


def test_line_separators_inside_strings_stay_inside_the_entry(tmp_path: Path) -> None:
    text = "one\u2028two\u2029three\x1cfour\x85five"
    session = read_all(
        _write_session(tmp_path / "x.jsonl", [HEADER_V3, _msg("a", None, text=text)])
    )
    assert len(session.entries) == 1
    assert session.entries[0].data["message"]["content"] == text
    assert searchable_text(session.entries[0]) == text


def test_a_line_over_one_mebibyte_is_one_entry(tmp_path: Path) -> None:
    text = "y" * (3 << 20)
    records: list[Any] = [HEADER_V3, _msg("a", None, text=text), _msg("b", "a")]
    session = read_all(_write_session(tmp_path / "x.jsonl", records))
    assert [e.entry_id for e in session.entries] == ["a", "b"]
    assert len(session.entries[0].data["message"]["content"]) == 3 << 20


def test_non_utf8_bytes_are_replaced_not_fatal(tmp_path: Path) -> None:
    bad = b'{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x\xff\xfey"}}'
    session = read_all(_write_session(tmp_path / "x.jsonl", [HEADER_V3, bad]))
    assert session.entries[0].data["message"]["content"] == "x\ufffd\ufffdy"
    assert session.entries[0].content_hash == sha256_hex(bad)


def test_a_valid_torn_final_line_is_read_but_not_checkpointed(tmp_path: Path) -> None:
    records: list[Any] = [HEADER_V3, _msg("a", None), _msg("b", "a")]
    path = _write_session(tmp_path / "x.jsonl", records, final_newline=False)
    reader = SessionReader(path)
    entries = list(reader.entries())
    assert [e.entry_id for e in entries] == ["a", "b"]
    assert reader.torn_tail
    assert reader.checkpoint_offset == entries[1].start_offset
    assert reader.end_offset == path.stat().st_size
    assert reader.resume_state.seq == 1
    assert reader.resume_state.last_entry_id == "a"
    assert reader.malformed_lines == 0


def test_an_invalid_torn_final_line_is_pending_not_malformed(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", [HEADER_V3, _msg("a", None)])
    with path.open("ab") as handle:
        handle.write(b'{"type":"message","id":"b","par')
    reader = SessionReader(path)
    assert [e.entry_id for e in reader.entries()] == ["a"]
    assert reader.torn_tail and reader.malformed_lines == 0
    assert reader.checkpoint_offset < reader.end_offset


def test_a_torn_header_is_not_consumed(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(json.dumps(HEADER_V3).encode())
    reader = SessionReader(path)
    assert list(reader.entries()) == []
    assert reader.header is not None and reader.torn_tail
    assert reader.checkpoint_offset == 0


def test_duplicate_ids_are_counted_and_kept(tmp_path: Path) -> None:
    records: list[Any] = [HEADER_V3, _msg("a", None), _msg("b", "a"), _msg("a", "b", text="again")]
    session = read_all(_write_session(tmp_path / "x.jsonl", records))
    assert [e.entry_id for e in session.entries] == ["a", "b", "a"]
    assert session.duplicate_ids == 1


# ------------------------------------------------------------------------------------------
# Resuming


def test_resume_state_round_trips_through_json() -> None:
    state = ResumeState(seq=4, v1_index=4, last_entry_id="v1-4", line_count=9)
    assert ResumeState.from_json(state.to_json()) == state
    assert ResumeState.from_json(json.loads(state.to_json())) == state
    assert ResumeState.from_json('{"seq":1,"v1Index":0,"lastEntryId":null}').line_count is None
    for bad in ("[]", '{"seq":-1,"v1Index":0}', '{"seq":"1","v1Index":0}', '{"seq":1}'):
        with pytest.raises(ValueError):
            ResumeState.from_json(bad)


def test_resuming_needs_the_saved_state(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "x.jsonl", [HEADER_V3])
    with pytest.raises(ValueError, match="ResumeState"):
        SessionReader(path, start_offset=10)


def test_appended_entries_resume_after_the_checkpoint(tmp_path: Path) -> None:
    path = _write_session(tmp_path / "v1.jsonl", [HEADER_V1, _msg(None, None)])
    first = SessionReader(path)
    before = list(first.entries())
    with path.open("ab") as handle:
        handle.write(_line(_msg(None, None, "assistant")) + b"\n" + b"oops\n")
    state = ResumeState.from_json(first.resume_state.to_json())
    second = SessionReader(
        path, start_offset=first.checkpoint_offset, header=first.header, resume=state
    )
    after = list(second.entries())
    assert before + after == read_all(path).entries
    assert after[0].entry_id == "v1-2" and after[0].parent_id == "v1-1" and after[0].seq == 1
    assert second.malformed_lines == 1
    # Without the line count or the header, both are recovered from the file.
    third = SessionReader(
        path,
        start_offset=first.checkpoint_offset,
        resume=ResumeState(seq=1, v1_index=1, last_entry_id="v1-1"),
    )
    assert list(third.entries()) == after


@st.composite
def _session_bytes(draw: st.DrawFn) -> bytes:
    """A small session file with every kind of line the reader must handle."""
    version = draw(st.sampled_from([1, 2, 3]))
    header = dict(HEADER_V1) if version == 1 else {**HEADER_V3, "version": version}
    lines: list[bytes] = [_line(header)]
    ids: list[str] = []
    for number in range(draw(st.integers(min_value=0, max_value=14))):
        kind = draw(
            st.sampled_from(
                [
                    "user",
                    "assistant",
                    "hook",
                    "compaction",
                    "blank",
                    "malformed",
                    "noid",
                    "dup",
                    "unknown",
                    "label",
                ]
            )
        )
        entry_id = None if version == 1 else f"id{number}"
        parent = ids[-1] if ids else None
        text = draw(st.text(max_size=12))
        if kind in ("user", "assistant", "hook"):
            role = {"user": "user", "assistant": "assistant", "hook": "hookMessage"}[kind]
            record: Any = _msg(entry_id, parent, role, text)
        elif kind == "compaction":
            record = {"type": "compaction", "summary": text, "tokensBefore": 10}
            if version == 1:
                record["firstKeptEntryIndex"] = draw(st.integers(min_value=-1, max_value=16))
            else:
                record.update(
                    id=entry_id,
                    parentId=parent,
                    firstKeptEntryId=draw(st.sampled_from([*ids, "nope"])),
                )
        elif kind == "blank":
            lines.append(draw(st.sampled_from([b"", b" ", b"\r", b"\t "])))
            continue
        elif kind == "malformed":
            lines.append(draw(st.sampled_from([b"{", b"[]", b"null", b'{"type":1}', b"\xff"])))
            continue
        elif kind == "noid":
            record = {"type": "message", "message": {"role": "user", "content": text}}
        elif kind == "dup" and ids:
            record = _msg(ids[0], parent, "user", text) if version > 1 else _msg(None, None)
        else:
            record = {"type": "label", "targetId": parent, "label": text}
            if entry_id is not None:
                record.update(id=entry_id, parentId=parent)
        if entry_id is not None:
            ids.append(entry_id)
        lines.append(_line(record))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = eol.join(lines)
    if draw(st.booleans()):
        data += eol
    return data


def _read_in_appends(path: Path, data: bytes, cuts: list[int]) -> tuple[list[SessionEntry], int]:
    """Grow `path` to each cut of `data` in turn, reading from the last checkpoint each time.

    Returns the entries a consumer would keep (torn tails are re-read later, so an entry past
    the checkpoint is kept only from the final read) and the total malformed count.
    """
    path.write_bytes(b"")
    kept: list[SessionEntry] = []
    malformed = 0
    checkpoint, header, state = 0, None, None
    for cut in [*sorted({c for c in cuts if c < len(data)}), len(data)]:
        with path.open("ab") as handle:
            handle.write(data[path.stat().st_size : cut])
        reader = SessionReader(
            path, start_offset=checkpoint, header=header, resume=state if checkpoint else None
        )
        entries = list(reader.entries())
        final = cut == len(data)
        kept.extend(e for e in entries if final or e.start_offset < reader.checkpoint_offset)
        malformed += reader.malformed_lines
        checkpoint, header, state = reader.checkpoint_offset, reader.header, reader.resume_state
        # JSON round trip, as the store does.
        state = ResumeState.from_json(state.to_json())
    return kept, malformed


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=_session_bytes(), cut_fractions=st.lists(st.floats(0, 1), max_size=8))
def test_any_append_sequence_reads_like_one_full_read(
    tmp_path: Path, data: bytes, cut_fractions: list[float]
) -> None:
    """Growing a session in arbitrary pieces (torn lines included) gives the full-read entries."""
    full_path = tmp_path / "full.jsonl"
    full_path.write_bytes(data)
    full = read_all(full_path)
    cuts = [int(f * len(data)) for f in cut_fractions]
    entries, malformed = _read_in_appends(tmp_path / "grow.jsonl", data, cuts)
    assert entries == full.entries
    assert malformed == full.malformed_lines


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(
        [
            "v1-prompt-cache-replay.jsonl",
            "v3-branching-compaction.jsonl",
            "openclaw-v3-single-turn-6a5d2a19.jsonl",
            "pi-mono-v1-large-session.jsonl",
        ]
    ),
    cut_fractions=st.lists(st.floats(0, 1), max_size=6),
)
def test_real_sessions_read_in_appends_like_one_full_read(
    tmp_path: Path, pi_sessions_dir: Path, name: str, cut_fractions: list[float]
) -> None:
    data = (pi_sessions_dir / name).read_bytes()
    full = read_all(pi_sessions_dir / name)
    cuts = [int(f * len(data)) for f in cut_fractions]
    entries, _ = _read_in_appends(tmp_path / name, data, cuts)
    assert entries == full.entries


# ------------------------------------------------------------------------------------------
# Searchable text (docs/reference.md §3.12)


def _entry(data: dict[str, Any]) -> SessionEntry:
    return SessionEntry(data.get("id", "x"), None, data["type"], None, data, "", 1, 0, 0)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"type": "message", "message": {"role": "user", "content": "plain"}}, "plain"),
        (
            {
                "type": "message",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "secret plan"},
                        {"type": "text", "text": "Reading it."},
                        {
                            "type": "toolCall",
                            "id": "t1",
                            "name": "read",
                            "arguments": {"path": "a.ts"},
                        },
                        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                    ],
                },
            },
            'Reading it.\nread {"path":"a.ts"}',
        ),
        (
            {
                "type": "message",
                "message": {
                    "role": "toolResult",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "body"}],
                },
            },
            "read\nbody",
        ),
        (
            {
                "type": "message",
                "message": {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": "a.ts\n",
                    "exitCode": None,
                },
            },
            "Command: ls\na.ts\n",
        ),
        ({"type": "message", "message": {"role": "system", "content": "prompt"}}, ""),
        (
            {
                "type": "custom_message",
                "customType": "x",
                "content": [{"type": "text", "text": "c"}],
            },
            "c",
        ),
        ({"type": "compaction", "summary": "## Goal", "tokensBefore": 3}, "## Goal"),
        ({"type": "branch_summary", "fromId": "f1", "summary": "tried A"}, "f1\ntried A"),
        ({"type": "model_change", "provider": "openai", "modelId": "gpt-4o"}, "openai\ngpt-4o"),
        ({"type": "thinking_level_change", "thinkingLevel": "high"}, "high"),
        ({"type": "thinking_level_change", "thinkingLevel": None}, ""),
        ({"type": "label", "targetId": "a1", "label": "checkpoint-1"}, "a1\ncheckpoint-1"),
        ({"type": "session_info", "name": "Refactor auth"}, "Refactor auth"),
        ({"type": "custom", "customType": "mem", "data": {"claim": "private"}}, ""),
        ({"type": "context_edit", "targetId": "a", "replacement": {"content": "x"}}, ""),
        ({"type": "future_entry", "text": "nope"}, ""),
        ({"type": "message", "message": "not a dict"}, ""),
    ],
)
def test_searchable_text_per_entry_type(data: dict[str, Any], text: str) -> None:
    assert searchable_text(_entry(data)) == text


def test_entry_role() -> None:
    assert (
        entry_role(_entry({"type": "message", "message": {"role": "toolResult"}})) == "toolResult"
    )
    assert entry_role(_entry({"type": "custom_message", "content": "x"})) == "custom"
    assert entry_role(_entry({"type": "compaction"})) is None
    assert entry_role(_entry({"type": "message", "message": {"role": 3}})) is None


def test_a_binary_file_without_line_breaks_is_not_a_session(tmp_path: Path) -> None:
    """Garbage with no newline is not 'a header still being written': it is rejected."""
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(range(256)) * 40)
    with pytest.raises(NotAPiSessionError, match="does not start with a JSON record"):
        read_all(path)


def test_a_header_being_written_is_pending_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"type":"session","version":3,"id":"ab')
    session = read_all(path)
    assert session.header is None and session.entries == [] and session.torn_tail


def test_nan_and_infinity_make_a_line_malformed(tmp_path: Path) -> None:
    """JSON has no NaN: passing it on would make our own JSON output invalid."""
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00Z","cwd":"/"}\n'
        '{"type":"message","id":"a","parentId":null,"timestamp":"x","message":'
        '{"role":"user","content":"hi","timestamp":NaN}}\n'
        '{"type":"message","id":"b","parentId":null,"timestamp":"x","message":'
        '{"role":"user","content":"ok","timestamp":Infinity}}\n'
        '{"type":"message","id":"c","parentId":null,"timestamp":"x","message":'
        '{"role":"user","content":"fine","timestamp":1}}\n'
        '{"type":"message","id":"d","parentId":null,"timestamp":"x","message":'
        '{"role":"user","content":"huge","timestamp":1e999}}\n'
        '{"type":"message","id":"e","parentId":null,"timestamp":"x","message":'
        '{"role":"user","content":"tiny","timestamp":-1E+400}}\n'
    )
    session = read_all(path)
    assert [e.entry_id for e in session.entries] == ["c"]
    assert session.malformed_lines == 4


def test_a_line_nested_too_deep_keeps_its_entry_with_the_deep_part_omitted(
    tmp_path: Path,
) -> None:
    """Tool-call arguments nested 330 levels: the entry is read, its value below
    MAX_RECORD_DEPTH levels replaced by the marker, and json.dumps of it works."""
    from ds4_core.json_bounds import DEPTH_MARKER, MAX_RECORD_DEPTH, too_deep

    deep: Any = 1
    for _ in range(330):
        deep = {"a": deep}
    call = {"type": "toolCall", "id": "c1", "name": "write", "arguments": deep}
    assistant = _msg("e2", "e1", role="assistant")
    assistant["message"]["content"] = [call]
    path = _write_session(tmp_path / "deep.jsonl", [HEADER_V3, _msg("e1", None), assistant])
    parsed = read_all(path)
    assert [e.entry_id for e in parsed.entries] == ["e1", "e2"]
    assert parsed.malformed_lines == 0
    record = parsed.entries[1].data
    assert too_deep(record, MAX_RECORD_DEPTH) is None
    assert DEPTH_MARKER in json.dumps(record)
    arguments = record["message"]["content"][0]["arguments"]
    assert too_deep(arguments, MAX_RECORD_DEPTH - 4) is None
