"""Which paths name an owned session: hard links and `..` components are refused (the file
checked must be the file written), and a reopened session keeps the cwd it was created with."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ds4_core.sessions import owned, read_all

USER = {"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 1}}


def test_a_hard_link_to_an_owned_file_of_another_data_directory_is_not_owned(
    tmp_path: Path,
) -> None:
    theirs = owned.open_session(tmp_path / "a", "/a")
    ours = owned.open_session(tmp_path / "b", "/b")  # creates b/sessions
    linked = ours.file.parent / f"2026-12-02T00-00-00-000Z_{theirs.session_id}.jsonl"
    os.link(theirs.file, linked)
    before = theirs.file.read_bytes()

    assert not owned.is_owned(tmp_path / "b", linked)
    assert owned.owned_path(tmp_path / "b", linked) is None
    # The original has two names now: neither is appended to, whichever directory asks.
    assert not owned.is_owned(tmp_path / "a", theirs.file)
    for name in (linked, theirs.file):
        with pytest.raises(owned.OwnedSessionError, match="2 hard links"):
            owned.append_entries(name, [USER])
    with pytest.raises(ValueError, match=r"^sessionId: .*hard links"):
        owned.open_session(tmp_path / "b", "/b", title="x", session_id=theirs.session_id)
    assert theirs.file.read_bytes() == before

    linked.unlink()  # one name again: owned and writable
    assert owned.is_owned(tmp_path / "a", theirs.file)
    assert len(owned.append_entries(theirs.file, [USER])) == 1
    assert owned.is_owned(tmp_path / "b", ours.file)


def test_a_path_with_a_dot_dot_component_is_refused(tmp_path: Path) -> None:
    session = owned.open_session(tmp_path, "/p")
    sessions = session.file.parent
    through = sessions / ".." / "sessions" / session.file.name
    assert through.exists()  # the same file, named through `..`
    assert not owned.is_owned(tmp_path, through)

    # Why not resolve it: the kernel resolves `link/..` through the link, lexical
    # normalisation does not, so the file checked and the file opened would differ.
    outside = tmp_path / "outside" / "deep"
    outside.mkdir(parents=True)
    (outside.parent / session.file.name).write_bytes(b'{"type":"session","id":"x"}\n')
    (sessions / "evil").symlink_to(outside)
    trick = sessions / "evil" / ".." / session.file.name
    assert trick.read_bytes() != session.file.read_bytes()
    assert os.path.normpath(trick) == str(session.file)
    assert not owned.is_owned(tmp_path, trick)

    assert owned.owned_path(tmp_path, session.file) == session.file.resolve()
    assert owned.owned_path(tmp_path, f"{sessions}//./{session.file.name}") == session.file


def test_reopening_with_another_cwd_is_refused_and_the_header_cwd_is_returned(
    tmp_path: Path,
) -> None:
    first = owned.open_session(tmp_path, "/a", session_id="reopen1")
    assert first.cwd == "/a"
    with pytest.raises(ValueError, match=r'^cwd: the session "reopen1" was opened with cwd "/a"'):
        owned.open_session(tmp_path, "/b", title="t", session_id="reopen1", expect_cwd="/b")
    assert len(read_all(first.file).entries) == 0  # the refused title was not appended

    same = owned.open_session(tmp_path, "/a/", session_id="reopen1", expect_cwd="/a/")
    kept = owned.open_session(tmp_path, "/elsewhere", session_id="reopen1")
    assert same.file == kept.file == first.file and not (same.created or kept.created)
    assert same.cwd == kept.cwd == "/a"
    assert read_all(first.file).header.cwd == "/a"  # type: ignore[union-attr]

    created = owned.open_session(tmp_path, "/b", session_id="new1", expect_cwd="/b")
    assert created.created and created.cwd == "/b"
