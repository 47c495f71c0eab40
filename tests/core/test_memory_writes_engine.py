"""Memory and pin writes through the engine (`engine/memory_writes.py`) and what follows from
them: one writer at a time on an owned session, stamps that sort after the items they change,
entries under the file's leaf, the complete entry line, Pi `/fork` copies, branch places,
canonical project paths, and what a remote provider sees of an item's key and source file."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from session_files import SessionWriter

from ds4_core.engine import ContextEngine
from ds4_core.json_bounds import MAX_SAFE_INTEGER
from ds4_core.memory.events import MemoryItem, Mutation, PinItem
from ds4_core.memory.replay import replay
from ds4_core.memory.writes import created_at
from ds4_core.requests import (
    ManifestRequest,
    MemoryWriteRequest,
    ModelSpec,
    PlanRequest,
    RequestFailedError,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
)
from ds4_core.sessions import owned

LOCAL = ModelSpec(provider="ollama", id="q", context_window=100_000)
REMOTE = ModelSpec(provider="anthropic", id="claude-sonnet-4-5", context_window=200_000)


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def owned_leaf(file: str) -> str:
    """The id of the last line of a session file (read without its lock)."""
    return str(json.loads(Path(file).read_text().splitlines()[-1])["id"])


def owned_session(engine: ContextEngine, *texts: str) -> tuple[str, list[str]]:
    opened = engine.session_open(SessionOpenRequest(cwd="/proj"))
    appended = engine.session_append(
        SessionAppendRequest(SessionRef(opened.file), [message(t) for t in texts or ("hi",)])
    )
    return opened.file, list(appended.entry_ids)


def remember(engine: ContextEngine, file: str, claim: str, **fields: Any) -> Any:
    return engine.write_memory(
        MemoryWriteRequest(SessionRef(file), "remember", text=claim, **fields)
    )


def plan_wire(engine: ContextEngine, file: str | Path, request: str, model: ModelSpec) -> Any:
    result = engine.plan(PlanRequest(session=SessionRef(str(file)), request=request, model=model))
    return result.to_wire()


def included(engine: ContextEngine, planned: dict[str, Any], kind: str) -> list[str]:
    found = engine.manifest(ManifestRequest(id=planned["manifestId"], view="full")).to_wire()
    return [item["sourceId"] for item in found["included"] if item["kind"] == kind]


# ---------------------------------------------------------------- one writer on an owned file


def test_an_owned_write_checks_under_the_lock_it_appends_under(tmp_path: Path) -> None:
    """A conflicting entry appended while a write waits for the lock is seen by its check."""
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    file, _ = owned_session(engine)
    outcome: list[Any] = []

    def write() -> None:
        try:
            outcome.append(remember(engine, file, "retries defaults to 3"))
        except RequestFailedError as exc:
            outcome.append(exc)

    other = ContextEngine(database_path=tmp_path / "db" / "context.db")
    lock = os.open(f"{file}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)  # another process's appender, as owned.py locks
    try:
        thread = threading.Thread(target=write)
        thread.start()
        time.sleep(0.5)  # the write reaches the lock (and, unlocked, would have checked)
        data = {
            "schemaVersion": 1,
            "mutationId": "mu-other",
            "createdAt": int(time.time() * 1000),
            "operation": "add",
            "item": {"id": "mem-other", "scope": "project", "projectPath": "/proj",
                     "claim": "retries defaults to 5", "createdAt": 1, "sourceEntryIds": []},
        }  # fmt: skip
        line = {"type": "custom", "id": "0badc0de", "parentId": owned_leaf(file),
                "timestamp": "2026-12-02T08:00:00.000Z",
                "customType": "ds4-context-memory-v1", "data": data}  # fmt: skip
        with open(file, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
        assert outcome == []  # still waiting
    finally:
        os.close(lock)
    thread.join(30)
    (refused,) = outcome
    assert isinstance(refused, RequestFailedError)
    assert refused.data == {"conflictsWith": "mem-other", "kind": "conflict"}
    listed = other.memory(SessionRef(file), include_inactive=True).to_wire()
    assert [m["id"] for m in listed["memory"]] == ["mem-other"] and listed["problems"] == []
    engine.close()
    other.close()


def race(engines: list[ContextEngine], file: str, claims: list[str]) -> list[Any]:
    """Each engine remembers its claim at the same moment; the results or refusals."""
    barrier = threading.Barrier(len(engines))
    results: list[Any] = [None] * len(engines)

    def go(index: int) -> None:
        barrier.wait()
        try:
            results[index] = remember(engines[index], file, claims[index])
        except RequestFailedError as exc:
            results[index] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(engines))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return results


def test_racing_writers_of_two_engines_never_both_succeed(tmp_path: Path) -> None:
    database = tmp_path / "db" / "context.db"
    first = ContextEngine(database_path=database)
    file, _ = owned_session(first)
    engines = [first, ContextEngine(database_path=database)]
    for attempt in range(6):
        results = race(engines, file, [f"retries defaults to {attempt * 2 + i}" for i in (0, 1)])
        accepted = [r for r in results if not isinstance(r, RequestFailedError)]
        assert len(accepted) == 1, results
        first.write_memory(
            MemoryWriteRequest(SessionRef(file), "forget", target_id=accepted[0].item_id)
        )
    listed = first.memory(SessionRef(file), include_inactive=True).to_wire()
    assert listed["problems"] == [] and listed["counts"]["rejected"] == 0
    for engine in engines:
        engine.close()


def test_the_lock_is_reentrant_for_its_thread_only(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    file, ids = owned_session(engine)
    with owned.locked(file):
        assert owned.current_leaf(file) == ids[-1]  # no deadlock on the same thread
        (new,) = owned.append_entries(file, [{"type": "session_info", "name": "x"}])
        assert owned.current_leaf(file) == new
    engine.close()


# ---------------------------------------------------------------- stamps after the items


def test_an_item_dated_ahead_of_this_clock_can_be_forgotten_and_superseded(
    tmp_path: Path,
) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-f")
    writer.user("hello")
    ahead = int(time.time() * 1000) + 3_600_000
    item = {"id": "mem-future", "scope": "project", "projectPath": "/home/me/demo",
            "claim": "retries defaults to 3", "createdAt": ahead, "sourceEntryIds": []}  # fmt: skip
    writer.mutation("memory", "mu-f", ahead, operation="add", item=item)
    session = SessionRef(str(writer.path))
    forget = engine.write_memory(MemoryWriteRequest(session, "forget", target_id="mem-future"))
    assert forget.data["createdAt"] == ahead + 1
    with pytest.raises(RequestFailedError) as refused:
        remember(engine, str(writer.path), "retries defaults to 5")
    assert refused.value.data == {"conflictsWith": "mem-future", "kind": "conflict"}
    replaced = remember(engine, str(writer.path), "retries defaults to 5", supersedes="mem-future")
    writer.append("custom", customType=replaced.custom_type, data=replaced.data)
    listed = engine.memory(session, include_inactive=True).to_wire()
    assert {m["id"]: m["status"] for m in listed["memory"]} == {
        "mem-future": "superseded",
        replaced.item_id: "active",
    }
    engine.close()


def test_created_at_is_now_or_after_the_newest_stored_mutation() -> None:
    def at(ms: int) -> Mutation:
        item = MemoryItem("m", "project", "c", ms)
        return Mutation("memory", "mu", ms, "add", item, None, None, None, None, "s", "e", 0)

    assert created_at([], 1000) == 1000
    assert created_at([at(10), at(5000)], 1000) == 5001
    assert created_at([at(MAX_SAFE_INTEGER)], 1000) == MAX_SAFE_INTEGER


def test_an_unorderable_refusal_names_the_param(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    other = SessionWriter(tmp_path / "a.jsonl", session_id="zzz-later")
    other.user("x")
    item = {"id": "mem-max", "scope": "project", "projectPath": "/home/me/demo",
            "claim": "c", "createdAt": MAX_SAFE_INTEGER, "sourceEntryIds": []}  # fmt: skip
    other.mutation("memory", "mu-max", MAX_SAFE_INTEGER, operation="add", item=item)
    engine.index_session(other.path)
    writer = SessionWriter(tmp_path / "b.jsonl", session_id="aaa-first")
    writer.user("hello")
    with pytest.raises(RequestFailedError) as refused:
        engine.write_memory(
            MemoryWriteRequest(SessionRef(str(writer.path)), "forget", target_id="mem-max")
        )
    assert "(params.memoryId)" in str(refused.value)
    assert refused.value.data == {"kind": "refused"}
    engine.close()


# ---------------------------------------------------------------- where the entry goes


def test_an_owned_write_with_an_older_leaf_keeps_the_conversation_leaf(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    file, ids = owned_session(engine, "turn one", "turn two", "turn three")
    pinned = engine.write_memory(
        MemoryWriteRequest(SessionRef(file, leaf_id=ids[0]), "pin", text="use tabs", scope="branch")
    )
    assert pinned.appended and pinned.entry["parentId"] == ids[-1]
    assert pinned.data["item"]["branchLeafId"] == ids[0]
    engine.session_append(SessionAppendRequest(SessionRef(file), [message("turn four")]))
    planned = plan_wire(engine, file, "turn four", LOCAL)
    sent = json.dumps(planned["messages"])
    assert all(turn in sent for turn in ("turn one", "turn two", "turn three"))
    assert included(engine, planned, "pin") == [pinned.item_id]  # ids[0] is on the branch
    engine.close()


def test_the_complete_entry_line_is_imported_when_appended_raw(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-c")
    writer.user("hello")
    leaf = writer.user("again")
    result = remember(engine, str(writer.path), "retries defaults to 3")
    entry = result.to_wire()["entry"]
    assert not result.appended and entry["parentId"] == leaf
    assert entry["id"] not in {"00000001", "00000002"} and len(entry["id"]) == 8
    assert entry["timestamp"].endswith("Z") and entry["data"] == result.data
    with writer.path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
    listed = engine.memory(SessionRef(str(writer.path))).to_wire()
    assert [m["id"] for m in listed["memory"]] == [result.item_id]
    assert listed["counts"] == {"applied": 1, "rejected": 0, "invalid": 0}
    engine.close()


# ---------------------------------------------------------------- Pi /fork copies


@pytest.mark.parametrize("fork_id", ["sess-zz-fork", "sess-aa-fork"])
def test_a_forked_session_keeps_its_copied_pins_and_the_original_too(
    tmp_path: Path, fork_id: str
) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "orig.jsonl", session_id="sess-m-orig")
    writer.user("hello")
    item = {"id": "pin-1", "scope": "session", "content": "use tabs", "createdAt": 10}
    writer.mutation("pin", "mu-p", 10, operation="add", item=item)
    writer.user("more")
    engine.index_session(writer.path)
    lines = writer.path.read_text().splitlines()
    header = {**json.loads(lines[0]), "id": fork_id, "parentSession": str(writer.path)}
    fork = tmp_path / "fork.jsonl"
    fork.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    engine.index_session(fork)
    for path in (writer.path, fork):
        assert included(engine, plan_wire(engine, path, "next", LOCAL), "pin") == ["pin-1"]
    listed = engine.memory(SessionRef(str(fork))).to_wire()
    assert [p["id"] for p in listed["pins"]] == ["pin-1"] and listed["problems"] == []
    assert len(listed["pins"][0]["provenance"]["mutationKeys"]) == 2
    assert listed["counts"] == {"applied": 2, "rejected": 0, "invalid": 0}
    other = SessionWriter(tmp_path / "other.jsonl", session_id="sess-other")
    other.user("unrelated")
    assert engine.memory(SessionRef(str(other.path))).to_wire()["pins"] == []
    engine.close()


def test_a_copy_with_other_content_is_no_copy_and_a_copy_of_a_rejection_is_rejected() -> None:
    def add(item_id: str, content: str, session: str, mutation_id: str) -> Mutation:
        item = PinItem(item_id, "session", content, 1)
        return Mutation("pin", mutation_id, 1, "add", item, None, None, None, None, session,
                        f"e-{item_id}", 0)  # fmt: skip

    state = replay([add("p1", "a", "s1", "mu-1"), add("p1", "b", "s2", "mu-1")])
    assert [r.reason for r in state.rejected] == ["pin id 'p1' exists already"]
    assert state.items["p1"].copy_sessions == ()
    state = replay(
        [add("p1", "a", "s1", "mu-1"), add("p2", "a", "s1", "mu-2"), add("p2", "a", "s2", "mu-2")]
    )
    assert [r.mutation.session_id for r in state.rejected] == ["s1", "s2"]
    assert state.items["p1"].copy_sessions == ()


# ---------------------------------------------------------------- places


def test_the_same_pin_on_two_branches_is_no_repeat(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-b")
    root = writer.user("start")
    on_a = writer.user("on branch a")

    def pin_at(leaf: str) -> Any:
        request = MemoryWriteRequest(
            SessionRef(str(writer.path), leaf_id=leaf), "pin", text="use the v2 client",
            scope="branch",
        )  # fmt: skip
        return engine.write_memory(request)

    first = pin_at(on_a)
    writer.append("custom", customType=first.custom_type, data=first.data)
    writer.leaf = root
    on_b = writer.user("on branch b")
    second = pin_at(on_b)
    assert second.data["item"]["branchLeafId"] == on_b
    writer.append("custom", customType=second.custom_type, data=second.data)
    with pytest.raises(RequestFailedError) as refused:
        pin_at(on_b)
    assert refused.value.data == {"conflictsWith": second.item_id, "kind": "repeat"}
    listed = engine.memory(SessionRef(str(writer.path))).to_wire()
    assert len(listed["pins"]) == 2 and listed["problems"] == []
    engine.close()


def test_project_memory_is_shared_by_the_canonical_project_path(tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    os.symlink(tmp_path / "proj", tmp_path / "link")
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    first = SessionWriter(tmp_path / "a.jsonl", session_id="sess-a", cwd=str(tmp_path / "link/"))
    first.user("hi")
    result = remember(engine, str(first.path), "retries defaults to 3")
    assert result.data["item"]["projectPath"] == str(tmp_path / "proj")
    first.append("custom", customType=result.custom_type, data=result.data)
    engine.memory(SessionRef(str(first.path)))
    raw = {"id": "mem-raw", "scope": "project", "projectPath": str(tmp_path / "link") + "/",
           "claim": "the cache is redis", "createdAt": 1, "sourceEntryIds": []}  # fmt: skip
    first.mutation("memory", "mu-raw", 1, operation="add", item=raw)  # as another writer put it
    engine.memory(SessionRef(str(first.path)))
    for number, cwd in enumerate((tmp_path / "proj", f"{tmp_path / 'proj'}/", tmp_path / "link")):
        other = SessionWriter(tmp_path / f"b{number}.jsonl", session_id=f"s{number}", cwd=str(cwd))
        other.user("hi")
        listed = engine.memory(SessionRef(str(other.path))).to_wire()
        assert sorted(m["id"] for m in listed["memory"]) == sorted(["mem-raw", result.item_id])
    engine.close()


# ---------------------------------------------------------------- what a provider sees


def test_secrets_in_a_key_or_a_source_file_withhold_the_item(tmp_path: Path) -> None:
    secret = "sk-" + "ant-" + "abcdefghijklmnop1234"
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-k")
    writer.user("hello")
    item = {"id": "m1", "scope": "project", "projectPath": "/home/me/demo", "key": f"token {secret}",
            "claim": "the deploy token rotates weekly", "createdAt": 10, "sourceEntryIds": []}  # fmt: skip
    writer.mutation("memory", "mu-1", 10, operation="add", item=item)
    pin = {"id": "p1", "scope": "session", "content": "keep the v1 api",
           "sourceFile": f"/tmp/{token}/notes.txt", "createdAt": 11}  # fmt: skip
    writer.mutation("pin", "mu-2", 11, operation="add", item=pin)
    planned = plan_wire(engine, writer.path, "deploy token", REMOTE)
    sent = json.dumps(planned["messages"])
    assert secret not in sent and token not in sent and "keep the v1 api" not in sent
    found = engine.manifest(ManifestRequest(id=planned["manifestId"], view="full")).to_wire()
    withheld = {i["sourceId"]: i["reason"] for i in found["excluded"]}
    assert withheld == {
        "m1": "excluded due to privacy policy",
        "p1": "excluded due to privacy policy",
    }
    local = json.dumps(plan_wire(engine, writer.path, "deploy token", LOCAL)["messages"])
    assert "keep the v1 api" in local and "the deploy token rotates weekly" in local
    engine.close()


def test_the_selected_because_line_quotes_the_key(tmp_path: Path) -> None:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-q")
    writer.user("hello")
    result = remember(engine, str(writer.path), "retries defaults to 3")
    writer.append("custom", customType=result.custom_type, data=result.data)
    sent = json.dumps(plan_wire(engine, writer.path, "what are the retries", LOCAL)["messages"])
    assert 'Selected because: keywords retries; key \\"retries\\"' in sent
    engine.close()
