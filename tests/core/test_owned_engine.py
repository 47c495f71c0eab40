"""Owned sessions through the engine: which files count as owned, ids the index already holds,
and where an owned session's compaction entry goes when the file grew meanwhile (review 15A)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from ds4_core.engine import ContextEngine, compacting
from ds4_core.requests import (
    CompactRequest,
    MemoryWriteRequest,
    RequestError,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
)
from ds4_core.sessions import build_session_context, owned, read_all

PI_ID = "0199aaaa-0000-7000-8000-000000000000"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    with closing(ContextEngine(database_path=tmp_path / "data" / "ds4.db")) as engine:
        yield engine


def _pi_session(path: Path, session_id: str = PI_ID) -> Path:
    """A session file as Pi writes it: no owned mark in the header."""
    header = {"type": "session", "version": 3, "id": session_id, "timestamp": "2026-12-02T08:00:00.000Z", "cwd": "/w"}  # fmt: skip
    message = {"role": "user", "content": "the user's own Pi session", "timestamp": 1}
    entry = {"type": "message", "id": "a1b2c3d4", "parentId": None, "timestamp": "2026-12-02T08:00:01.000Z", "message": message}  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(header) + "\n" + json.dumps(entry) + "\n")
    return path


def _turns(count: int) -> list[dict[str, Any]]:
    words = "w " * 400
    return [
        {"role": "user", "content": f"branch A turn {i} {words}"}
        if i % 2 == 0
        else {"role": "assistant", "content": [{"type": "text", "text": f"reply {i} {words}"}]}
        for i in range(count)
    ]


def test_a_pi_session_in_the_sessions_directory_is_not_owned(
    engine: ContextEngine, tmp_path: Path
) -> None:
    opened = engine.session_open(SessionOpenRequest(cwd="/w"))
    header = json.loads(Path(opened.file).read_text().splitlines()[0])
    assert header[owned.OWNED_MARK] is True
    assert read_all(opened.file).header.session_id == opened.session_id  # type: ignore[union-attr]
    pi_file = _pi_session(Path(opened.file).parent / f"2026-12-02T08-00-00-000Z_{PI_ID}.jsonl")
    before = pi_file.read_bytes()
    data_dir = tmp_path / "data"
    assert owned.is_owned(data_dir, opened.file) and not owned.is_owned(data_dir, pi_file)
    remembered = engine.write_memory(
        MemoryWriteRequest(SessionRef(str(pi_file)), "remember", text="retries defaults to 3")
    )
    assert not remembered.appended and remembered.entry_id is None
    user = {"role": "user", "content": "hi"}
    with pytest.raises(RequestError) as caught:
        engine.session_append(SessionAppendRequest(SessionRef(str(pi_file)), [user]))
    assert caught.value.field == "session.file"
    with pytest.raises(RequestError) as caught:  # reopening Pi's file by its id
        engine.session_open(SessionOpenRequest(cwd="/w", session_id=PI_ID))
    assert caught.value.field == "sessionId"
    assert pi_file.read_bytes() == before and not Path(f"{pi_file}.lock").exists()


def test_an_id_the_index_holds_for_a_pi_session_is_refused(
    engine: ContextEngine, tmp_path: Path
) -> None:
    pi_file = _pi_session(tmp_path / "pi" / "demo.jsonl", "demo")
    engine.index_session(pi_file)
    with pytest.raises(RequestError) as caught:
        engine.session_open(SessionOpenRequest(cwd="/w", session_id="demo"))
    assert caught.value.field == "sessionId" and "does not own" in str(caught.value)
    assert not (tmp_path / "data" / "sessions").exists() or not list(
        (tmp_path / "data" / "sessions").glob("*.jsonl")
    )
    opened = engine.session_open(SessionOpenRequest(cwd="/w", session_id="mine"))
    engine.session_append(SessionAppendRequest(SessionRef(opened.file), _turns(2)))
    engine.index_session(opened.file)  # now indexed as owned: reopening it still works
    again = engine.session_open(SessionOpenRequest(cwd="/w", session_id="mine"))
    assert again.file == opened.file and not again.created
    Path(opened.file).unlink()  # an owned file deleted: never a silent empty session instead
    with pytest.raises(RequestError, match="no longer exists") as refused:
        engine.session_open(SessionOpenRequest(cwd="/w", session_id="mine"))
    assert refused.value.field == "sessionId"
    anew = engine.session_open(SessionOpenRequest(cwd="/w"))  # a new session, a new id
    assert anew.created and anew.session_id != "mine"


@pytest.mark.parametrize("other_branch", [True, False])
def test_a_compaction_entry_stays_on_the_branch_it_summarised(
    engine: ContextEngine, monkeypatch: pytest.MonkeyPatch, other_branch: bool
) -> None:
    opened = engine.session_open(SessionOpenRequest(cwd="/w"))
    ref = SessionRef(opened.file)
    ids = engine.session_append(SessionAppendRequest(ref, _turns(40))).entry_ids
    real = compacting.append_owned
    grown: list[str] = []

    def racing(*args: Any, **kwargs: Any) -> list[str]:
        # another client appends while the summary was being made: a branch from the second
        # entry, or one more message on the summarised branch
        message = {"type": "message", "message": {"role": "user", "content": "q", "timestamp": 1}}
        grown.extend(owned.append_entries(opened.file, [message], ids[1] if other_branch else None))
        return real(*args, **kwargs)

    monkeypatch.setattr(compacting, "append_owned", racing)
    result = engine.compact(CompactRequest(session=ref, first_kept_entry_id=ids[30]))
    assert result.appended and grown
    entries = read_all(opened.file).entries
    compaction = entries[-1]
    assert compaction.entry_id == result.entry_id
    expected_parent = ids[-1] if other_branch else grown[0]
    assert compaction.parent_id == expected_parent
    context = build_session_context(entries)
    assert context.messages[0]["role"] == "compactionSummary"
    assert "branch A turn 30" in context.messages[1]["content"]
