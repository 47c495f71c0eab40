"""Session-file failures read the same from every entry point of the engine.

Each kind of failure (an empty path, a missing file, a directory, a file name that is not
UTF-8, a file that is not a Pi session, an unsupported session version, an unreadable file, a
file that shrank while it was read, a file deleted after its path was resolved) is translated
into `RequestError` in one place (`ds4_core.engine.sessions`). Every request that names a session file (`ds4/plan`,
`ds4/retrieve`, `ds4/manifest`, `ds4/compact`, `ds4.summaries`, `ds4/compactCommitted`,
`ds4/compactFailed`) answers it with the same message and the field `session.file`; `ds4 index`
with the same message and its field `file`.
"""

from __future__ import annotations

import builtins
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ds4_core.engine import ContextEngine
from ds4_core.engine import manifests as engine_manifests
from ds4_core.engine import sessions as engine_sessions
from ds4_core.json_bounds import echo
from ds4_core.requests import (
    CompactRequest,
    ManifestRequest,
    PlanRequest,
    RequestError,
    RetrieveRequest,
    SessionRef,
)
from ds4_core.sessions.prefix import FileShrankError

SESSION_LINE = (
    '{"type":"session","version":3,"id":"6d2c0ad6-55a4-4a55-9e2c-8f1f3f0f8f11",'
    '"timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}\n'
)
USER_LINE = (
    '{"type":"message","id":"a1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z",'
    '"message":{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1}}\n'
)

EntryPoint = Callable[[ContextEngine, str], Any]

REQUESTS: dict[str, EntryPoint] = {
    "plan": lambda engine, file: engine.plan(PlanRequest(session=SessionRef(file), request="x")),
    "retrieve": lambda engine, file: engine.retrieve(
        RetrieveRequest(query="x", session=SessionRef(file))
    ),
    "manifest": lambda engine, file: engine.manifest(
        ManifestRequest(session=SessionRef(file), latest=True)
    ),
    "compact": lambda engine, file: engine.compact(CompactRequest(session=SessionRef(file))),
    "summaries": lambda engine, file: engine.summaries(SessionRef(file)),
    "compact_committed": lambda engine, file: engine.compact_committed(
        "s-0", session=SessionRef(file)
    ),
    "compact_failed": lambda engine, file: engine.compact_failed("s-0", session=SessionRef(file)),
}
"""Entry points whose session file is the field `session.file`."""

READ_THROUGH_CACHE = ("plan", "retrieve", "manifest", "compact", "summaries")
"""Entry points that parse the whole file (the session cache), where a file can shrink between
the read and the hashing of its bytes."""


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    engine = ContextEngine(database_path=tmp_path / "db" / "ds4.db")
    try:
        yield engine
    finally:
        engine.close()


def failures(engine: ContextEngine, file: str) -> dict[str, tuple[str, str | None]]:
    """(message without its field prefix, field) of each entry point for `file`."""
    found: dict[str, tuple[str, str | None]] = {}
    entry_points: dict[str, EntryPoint] = {
        **REQUESTS,
        "index_session": lambda engine, file: engine.index_session(file),
    }
    for name, call in entry_points.items():
        with pytest.raises(RequestError) as caught:
            call(engine, file)
        field = caught.value.field
        found[name] = (str(caught.value).removeprefix(f"{field}: "), field)
    return found


def assert_one_answer(found: dict[str, tuple[str, str | None]], expected: str) -> None:
    """Every entry point gave message `expected`; index its field `file`, the others
    `session.file`."""
    for name, (message, field) in found.items():
        assert message == expected, name
        assert field == ("file" if name == "index_session" else "session.file"), name


def assert_cache_readers_answer(engine: ContextEngine, path: Path, expected: str) -> None:
    """Every entry point of `READ_THROUGH_CACHE`, given a fresh session file at `path`, raises
    `RequestError` with message `expected` and the field `session.file`."""
    for name in READ_THROUGH_CACHE:
        path.write_text(SESSION_LINE + USER_LINE)
        with pytest.raises(RequestError) as caught:
            REQUESTS[name](engine, str(path))
        assert caught.value.field == "session.file", name
        assert str(caught.value) == expected, name


def test_an_empty_path(engine: ContextEngine) -> None:
    assert_one_answer(failures(engine, ""), "a session file path is required")


def test_a_missing_file(engine: ContextEngine, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    assert_one_answer(
        failures(engine, str(missing)),
        f"session file {echo(str(missing))} does not exist or is not a file; "
        "pass the path of a Pi session .jsonl file",
    )


def test_a_directory(engine: ContextEngine, tmp_path: Path) -> None:
    assert_one_answer(
        failures(engine, str(tmp_path)),
        f"session file {echo(str(tmp_path))} does not exist or is not a file; "
        "pass the path of a Pi session .jsonl file",
    )


def test_a_file_name_that_is_not_utf8(engine: ContextEngine, tmp_path: Path) -> None:
    path = os.path.join(os.fsencode(tmp_path), b"\xff.jsonl")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(SESSION_LINE)
    found = failures(engine, os.fsdecode(path))
    messages = {message for message, _field in found.values()}
    assert len(messages) == 1
    assert "the file name is not valid UTF-8; rename it" in messages.pop()
    assert_one_answer(found, next(iter(found.values()))[0])


def test_a_file_that_is_not_a_pi_session(engine: ContextEngine, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text('{"foo":1}\n')
    found = failures(engine, str(other))
    message = found["plan"][0]
    assert message.startswith(f"cannot read session file '{other}': first line is not a Pi")
    assert_one_answer(found, message)


def test_an_unsupported_session_version(engine: ContextEngine, tmp_path: Path) -> None:
    future = tmp_path / "future.jsonl"
    future.write_text(SESSION_LINE.replace('"version":3', '"version":99') + USER_LINE)
    found = failures(engine, str(future))
    message = found["plan"][0]
    assert message.startswith(f"cannot read session file '{future}': ")
    assert_one_answer(found, message)


def test_an_unreadable_file(
    engine: ContextEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = (tmp_path / "locked.jsonl").resolve()
    locked.write_text(SESSION_LINE + USER_LINE)
    real_open = builtins.open

    def refusing_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if os.fspath(file) == str(locked):  # (root reads any file: refuse it here instead)
            raise PermissionError(13, "Permission denied", str(locked))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", refusing_open)
    assert_one_answer(
        failures(engine, str(locked)),
        f"cannot read session file '{locked}': Permission denied",
    )


def test_a_file_that_shrank_while_it_was_read(
    engine: ContextEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = (tmp_path / "shrinking.jsonl").resolve()

    def shrank(file: Any, *args: Any, **kwargs: Any) -> Any:
        raise FileShrankError(f"'{file}' is shorter than 10 bytes")

    monkeypatch.setattr(engine_sessions, "hash_prefix", shrank)
    assert_cache_readers_answer(
        engine, path, f"session file '{path}' changed while it was read; try again"
    )


def test_a_file_deleted_after_it_was_resolved(
    engine: ContextEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file exists when its path is resolved and is gone when the cache reads it: the
    same `cannot read session file` answer as any other read failure, not an OSError."""
    path = (tmp_path / "vanishing.jsonl").resolve()
    real_resolve = engine_sessions.resolve_session_path

    def resolve_then_delete(file: str, field: str) -> Path:
        resolved = real_resolve(file, field)
        resolved.unlink(missing_ok=True)  # the race, made certain
        return resolved

    for module in (engine_sessions, engine_manifests):
        monkeypatch.setattr(module, "resolve_session_path", resolve_then_delete)
    assert_cache_readers_answer(
        engine, path, f"cannot read session file '{path}': No such file or directory"
    )
