"""Lone UTF-16 surrogates in session metadata (ids, references, timestamps, header fields).

JSON allows `"\\ud800"`; SQLite and UTF-8 cannot hold it. The session reader escapes such ids
and references as literal text (`storable_id`), drops timestamps that do not parse, and the
session is indexed and answered like any other: real session files written with the JSON
escapes, a real SQLite database, the CLI as a subprocess.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_files import TS, hostile_metadata_session, message, write_session
from test_cli import run_ds4_process

from ds4_core.sessions.reader import read_all
from ds4_core.sessions.sync import sync_session
from ds4_core.store import Store, entry_count, list_sessions, load_entries, open_store


@pytest.fixture
def store(tmp_path: Path):
    opened = open_store(tmp_path / "db" / "context.db")
    yield opened
    opened.close()


def test_storable_id_escapes_each_lone_surrogate_as_text_and_is_idempotent() -> None:
    from ds4_core.sessions.reader import storable_id

    assert storable_id("a\ud800b\udfff") == "a\\ud800b\\udfff"
    assert storable_id("a\\ud800") == "a\\ud800"
    assert storable_id("plain-\U0001f680") == "plain-\U0001f680"


def test_sync_indexes_every_entry_and_the_tree_still_links(store: Store, tmp_path: Path) -> None:
    path = hostile_metadata_session(tmp_path / "s.jsonl")
    result = sync_session(store, path)

    assert (result.outcome, result.session_id) == ("rebuild", "s\\ud800")
    assert result.entries_total == entry_count(store, "s\\ud800") == 8 - 1
    rows = {row.entry_id: row for row in load_entries(store, "s\\ud800")}
    assert rows["a\\udc01"].parent_id == "r\\ud800"
    assert rows["u3"].parent_id == "a\\udc01"
    assert rows["c\\ud800"].parent_id == "k\\udfff"
    assert rows["a\\udc01"].created_at is None  # "2\ud800" is no timestamp
    assert rows["r\\ud800"].created_at == TS.format(1)
    (listed,) = list_sessions(store)
    assert listed["project_path"] == "/w\\udc00"
    # The next sync reads the stored header back: an append is incremental, not a rebuild.
    with open(path, "a", encoding="ascii") as handle:
        handle.write(json.dumps(message("u8\ud801", "u7", "user", "more", TS.format(8))) + "\n")
    again = sync_session(store, path)
    assert (again.outcome, again.entries_total) == ("incremental", 8)
    assert {r.entry_id for r in load_entries(store, "s\\ud800")} >= {"u8\\ud801"}


def test_the_reader_escapes_references_and_drops_unparsable_timestamps(tmp_path: Path) -> None:
    session = read_all(hostile_metadata_session(tmp_path / "s.jsonl"))
    assert session.header is not None
    assert session.header.session_id == "s\\ud800"
    assert session.header.cwd == "/w\\udc00"
    assert session.header.parent_session == "/p\\ud800.jsonl"
    assert session.header.timestamp is None
    by_id = {e.entry_id: e for e in session.entries}
    assert by_id["l\\ud800"].data["targetId"] == "r\\ud800"
    assert by_id["a\\udc01"].data["parentId"] == "r\\ud800"
    assert by_id["a\\udc01"].timestamp is None


def _plan(tmp_path: Path, session: Path, *extra: str) -> dict[str, Any]:
    done = run_ds4_process(
        "--db",
        str(tmp_path / "cli.db"),
        "plan",
        "--session",
        str(session),
        "--context-window",
        "200000",
        "--json",
        *extra,
        "what about the tokenizer?",
        encoding="utf-8",
    )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_cli_plan_json_answers_normally(tmp_path: Path) -> None:
    """`ds4 plan --json` used to exit 1 with `internal error (UnicodeEncodeError ...)`."""
    session = hostile_metadata_session(tmp_path / "s.jsonl")
    result = _plan(tmp_path, session)
    assert result["mode"] == "managed"
    assert result["session"] == {"id": "s\\ud800", "file": str(session), "leafId": "u7"}
    roles = [m["role"] for m in result["messages"]]
    assert roles == ["compactionSummary", "user", "assistant", "user", "user"]
    # A client names an entry whose id held a surrogate by the escaped text.
    branch = _plan(tmp_path, session, "--leaf", "a\\udc01")
    assert branch["session"]["leafId"] == "a\\udc01"
    assert "zanzibar" in json.dumps(branch["messages"])


def as_read(text: str) -> str:
    """`text` written as JSON and read back (a high surrogate followed by a low one is a
    valid pair there), each lone surrogate then spelled as its lower-case escape."""
    read = json.loads(json.dumps(text))
    return re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", read)


_SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
_TEXT = st.lists(st.one_of(_SURROGATE, st.sampled_from("ab-9")), min_size=1, max_size=4).map(
    "".join
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ids=st.lists(_TEXT, min_size=1, max_size=6, unique_by=as_read),
    parents=st.lists(st.one_of(st.none(), _TEXT, st.integers(0, 5)), min_size=6, max_size=6),
    stamps=st.lists(st.one_of(_TEXT, st.just(TS.format(1))), min_size=6, max_size=6),
    header=st.fixed_dictionaries(
        {"id": _TEXT, "cwd": _TEXT, "timestamp": _TEXT, "parentSession": _TEXT, "x": _TEXT}
    ),
)
def test_any_lone_surrogates_in_metadata_sync_every_entry(
    tmp_path: Path,
    ids: list[str],
    parents: list[str | int | None],
    stamps: list[str],
    header: dict[str, str],
) -> None:
    """Ids, parentIds (strings, or the id of another entry), timestamps and header fields full
    of lone surrogates: sync succeeds and stores one row per entry, linked as in the file."""
    records: list[dict[str, Any]] = [{"type": "session", "version": 3, **header}]
    expected_parent = {}
    for n, entry_id in enumerate(ids):
        parent = parents[n]
        if isinstance(parent, int):
            parent = ids[parent % len(ids)]
        records.append(message(entry_id, parent, "user", f"text {n}", stamps[n]))
        expected_parent[as_read(entry_id)] = None if parent is None else as_read(parent)
    path = write_session(tmp_path / f"p-{uuid.uuid4().hex}.jsonl", records)  # one per example
    with open_store(tmp_path / "prop" / f"{path.stem}.db") as store:
        result = sync_session(store, path)
        assert result.entries_total == len(ids)
        rows = load_entries(store, as_read(header["id"]))
        assert {r.entry_id: r.parent_id for r in rows} == expected_parent
        assert all(r.created_at in (None, TS.format(1)) for r in rows)


def test_ids_in_a_ds4_compaction_record_are_escaped_like_the_entries(tmp_path: Path) -> None:
    """The record's source ids and firstKeptEntryId name entries: they must be spelled as the
    reader spells those entries' ids (not with U+FFFD like message text), or they match none."""
    from ds4_core.compaction.records import nodes_from_compaction_entry

    record = {
        "schemaVersion": 1,
        "summaryId": "seg-1",
        "sourceEntryIds": ["r\ud800", "a\udc01"],
        "firstKeptEntryId": "u\ud800",
    }
    path = write_session(
        tmp_path / "c.jsonl",
        [
            {"type": "session", "version": 3, "id": "s1", "cwd": "/w"},
            message("r\ud800", None, "user", "hello", TS.format(1)),
            {
                "type": "compaction",
                "id": "c1",
                "parentId": "r\ud800",
                "timestamp": TS.format(2),
                "summary": "hello was said",
                "firstKeptEntryId": "r\ud800",
                "tokensBefore": 10,
                "details": {"ds4ContextEngine": record},
            },
        ],
    )
    entry = read_all(path).entries[1]
    (node,) = nodes_from_compaction_entry("s1", entry)
    assert node.source_entry_ids == ("r\\ud800", "a\\udc01")
    assert node.first_kept_entry_id == "u\\ud800"
