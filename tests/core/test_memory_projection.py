"""Memory and pins projected from session files: filled by the sync, rebuilt from JSONL alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from session_files import SessionWriter, memory_item

from ds4_core.engine import ContextEngine
from ds4_core.store import memory as memory_repo


def memory_entry(
    writer: SessionWriter, mutation_id: str, at: int, operation: str = "add", **fields: Any
) -> str:
    return writer.mutation("memory", mutation_id, at, operation=operation, **fields)


def pin_entry(writer: SessionWriter, mutation_id: str, at: int, **fields: Any) -> str:
    return writer.mutation("pin", mutation_id, at, **fields)


def snapshot(engine: ContextEngine) -> tuple[Any, ...]:
    store = engine.store
    return (
        memory_repo.list_memory(store, include_inactive=True),
        memory_repo.list_pins(store, include_inactive=True),
        memory_repo.counts(store),
        store.connection()
        .execute("SELECT mutation_key, error, rejected_reason FROM context_mutations ORDER BY 1")
        .fetchall(),
    )


@pytest.fixture
def sessions(tmp_path: Path) -> tuple[SessionWriter, SessionWriter]:
    first = SessionWriter(tmp_path / "a.jsonl", session_id="sess-a")
    source = first.user("retries default to 3 in the client")
    memory_entry(first, "mu1", 100, item=memory_item("m1", "retries defaults to 3", 100, [source]))
    pin_entry(
        first, "pu1", 100, operation="add",
        item={"id": "p1", "scope": "session", "content": "Never touch the v1 API", "createdAt": 100},
    )  # fmt: skip
    first.user("more work")
    memory_entry(first, "bad", 150, item={"id": "m9", "scope": "galaxy"})  # invalid: skipped
    second = SessionWriter(tmp_path / "b.jsonl", session_id="sess-b")
    second.user("we changed the default")
    # Same createdAt as the conflicting add below: the session id decides the order.
    memory_entry(second, "mu2", 200, item=memory_item("m2", "retries defaults to 5", 200, []))
    memory_entry(
        first, "mu3", 200, operation="supersede", previousId="m1",
        item=memory_item("m3", "retries defaults to 5", 200, []),
    )  # fmt: skip
    pin_entry(first, "pu2", 300, operation="status", pinId="p1", status="deleted", reason="done")
    return first, second


def test_deleting_the_database_loses_no_memory_or_pins(
    tmp_path: Path, sessions: tuple[SessionWriter, SessionWriter]
) -> None:
    first, second = sessions
    database = tmp_path / "db" / "ds4.db"
    engine = ContextEngine(database_path=database)
    engine.index_session(first.path)
    engine.index_session(second.path)
    before = snapshot(engine)
    engine.close()
    for leftover in database.parent.iterdir():
        leftover.unlink()
    again = ContextEngine(database_path=database)
    again.index_session(second.path)  # the other order: replay order does not depend on it
    again.index_session(first.path)
    assert snapshot(again) == before
    again.close()

    memory, pins, counts, _rows = before
    assert [(m["memory_id"], m["status"]) for m in memory] == [
        ("m1", "superseded"),
        ("m3", "active"),
    ]
    assert memory[0]["superseded_by"] == "m3" and memory[0]["memory_key"] == "retries"
    # sess-a sorts before sess-b at createdAt 200: the supersede wins, the add conflicts.
    assert counts.rejected == 1 and counts.invalid == 1 and counts.applied == 4
    assert pins[0]["status"] == "deleted" and pins[0]["status_reason"] == "done"


def test_the_projection_follows_appends_and_reports_bad_entries(
    tmp_path: Path, sessions: tuple[SessionWriter, SessionWriter]
) -> None:
    first, _second = sessions
    engine = ContextEngine(database_path=tmp_path / "db" / "ds4.db")
    engine.index_session(first.path)
    store = engine.store
    assert [m["memory_id"] for m in memory_repo.list_memory(store)] == ["m3"]
    memory_entry(first, "mu4", 400, operation="status", memoryId="m3", status="expired")
    assert engine.index_session(first.path).outcome == "incremental"
    assert memory_repo.list_memory(store) == []
    error = (
        store.connection()
        .execute("SELECT error FROM context_mutations WHERE error IS NOT NULL")
        .fetchone()[0]
    )
    assert error.startswith("item.scope")
    engine.close()


def test_a_rewritten_session_replaces_its_mutations(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "a.jsonl", session_id="sess-a")
    memory_entry(writer, "mu1", 1, item=memory_item("m1", "the cache is redis", 1, []))
    engine = ContextEngine(database_path=tmp_path / "db" / "ds4.db")
    engine.index_session(writer.path)
    assert len(memory_repo.list_memory(engine.store)) == 1
    header = writer.path.read_text(encoding="utf-8").splitlines()[0]
    writer.path.write_text(header + "\n", encoding="utf-8")
    writer.user("no memory any more")
    assert engine.index_session(writer.path).outcome == "rebuild"
    assert memory_repo.list_memory(engine.store, include_inactive=True) == []
    engine.close()


def test_an_emptied_session_file_drops_its_memory(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "a.jsonl", session_id="sess-a")
    memory_entry(writer, "mu1", 1, item=memory_item("m1", "the cache is redis", 1, []))
    engine = ContextEngine(database_path=tmp_path / "db" / "ds4.db")
    engine.index_session(writer.path)
    writer.path.write_bytes(b"")
    assert engine.index_session(writer.path).outcome == "skipped"
    assert memory_repo.list_memory(engine.store, include_inactive=True) == []
    assert memory_repo.counts(engine.store).applied == 0
    engine.close()


_CLAIMS = [
    "retries defaults to 3",
    "retries defaults to 5",
    "enable telemetry",
    "disable telemetry",
]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.sampled_from(["add", "supersede", "status"]),
            st.integers(min_value=0, max_value=3),
            st.integers(min_value=0, max_value=2),
        ),
        min_size=1,
        max_size=10,
    ),
    sync_every=st.integers(min_value=1, max_value=4),
)
def test_syncing_as_the_files_grow_equals_one_rebuild(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[str, str, int, int]],
    sync_every: int,
) -> None:
    """Two sessions appending mutations (equal timestamps included), synced incrementally
    every few appends, end with the projection a fresh database rebuilds from the files."""
    root = tmp_path_factory.mktemp("grow")
    writers = {
        name: SessionWriter(root / f"{name}.jsonl", session_id=f"sess-{name}") for name in "ab"
    }
    growing = ContextEngine(database_path=root / "grow.db")
    for index, (name, operation, choice, at) in enumerate(steps):
        writer = writers[name]
        target = f"m{max(0, index - 1 - choice % max(1, index))}"
        if operation == "status":
            memory_entry(writer, f"x{index}", at, "status", memoryId=target, status="invalid")
        else:
            item = memory_item(f"m{index}", _CLAIMS[choice], at, [])
            extra = {"previousId": target} if operation == "supersede" and index else {}
            kind = "supersede" if extra else "add"
            memory_entry(writer, f"x{index}", at, kind, item=item, **extra)
        if index % sync_every == 0:
            growing.index_session(writer.path)
    for writer in writers.values():
        growing.index_session(writer.path)
    fresh = ContextEngine(database_path=root / "fresh.db")
    for writer in reversed(list(writers.values())):
        fresh.index_session(writer.path)
    assert snapshot(growing) == snapshot(fresh)
    growing.close()
    fresh.close()
