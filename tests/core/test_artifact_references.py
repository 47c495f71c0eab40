"""Artifact references (migration 12, store/artifacts.py), `ds4/artifactSearch` in the engine
(engine/artifact_requests.py) and garbage collection (artifacts/gc.py): references are
rebuilt from the JSONL alone, a search sees only the active branch's artifacts and reports a
missing, corrupt or too-large one in `searched`, and collection never removes a referenced or
a young object."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from test_engine_artifacts import BIG, line, plan, write_session
from test_engine_artifacts import engine as engine  # the fixture

from ds4_core.artifacts.gc import collect_garbage, last_gc
from ds4_core.artifacts.store import ArtifactStore, artifact_root
from ds4_core.engine import ContextEngine
from ds4_core.requests import ArtifactSearchRequest, RequestError, SessionRef
from ds4_core.sessions import sync as sync_module
from ds4_core.store import artifacts as artifact_repo

OTHER = "".join(f"tests/t{i}.py:{i}: error: other branch needle{i}\n" for i in range(2000))
BIG_ID = hashlib.sha256(BIG.encode()).hexdigest()
OTHER_ID = hashlib.sha256(OTHER.encode()).hexdigest()


def branched_session(path: Path) -> None:
    """`write_session` (e1..e4, a large result at e3) plus a second branch from e2: e5, a
    large result with other text, and e6."""
    write_session(path)
    extra = [
        line(
            "e5",
            "e2",
            {
                "role": "toolResult",
                "toolCallId": "call-1",
                "toolName": "bash",
                "content": [{"type": "text", "text": OTHER}],
                "isError": True,
                "timestamp": 5,
            },
        ),
        line("e6", "e5", {"role": "user", "content": "and now?", "timestamp": 6}),
    ]
    with path.open("a") as handle:
        handle.write("\n".join(extra) + "\n")


def refs(engine: ContextEngine) -> list[tuple[str, str, int, int]]:
    rows = engine.store.connection().execute(
        "SELECT session_id, entry_id, entry_order, artifact_id, original_chars, size_bytes "
        "FROM artifact_refs ORDER BY session_id, entry_order"
    )
    return [tuple(row) for row in rows.fetchall()]


def age(path: Path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_the_sync_records_each_large_tool_result_and_a_rebuild_finds_the_same(
    tmp_path: Path, engine: ContextEngine
) -> None:
    session = tmp_path / "s.jsonl"
    branched_session(session)
    engine.index_session(session)
    first = refs(engine)
    assert first == [
        ("art-session", "e3", 2, BIG_ID, len(BIG), len(BIG)),
        ("art-session", "e5", 4, OTHER_ID, len(OTHER), len(OTHER)),
    ]
    plan(engine, session)  # stores the objects of the active branch's results
    engine.close()
    for file in (tmp_path / "db").glob("context.db*"):
        file.unlink()
    again = ContextEngine(database_path=tmp_path / "db" / "context.db")
    try:
        again.index_session(session)
        assert refs(again) == first
        found = again.artifact_search(
            ArtifactSearchRequest("NEEDLE1999", session=SessionRef(str(session)))
        ).to_wire()
        assert found["searched"] == [{"artifactId": OTHER_ID, "status": "ok"}]
        assert [(m["sourceId"], m["line"]) for m in found["matches"]] == [("e5", 2000)]
    finally:
        again.close()


def test_a_threaded_rebuild_and_an_incremental_sync_record_the_same_rows(
    tmp_path: Path, engine: ContextEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    engine.index_session(session)  # e1..e4
    with session.open("a") as handle:  # the second branch arrives later: incremental
        branched = tmp_path / "b.jsonl"
        branched_session(branched)
        handle.write(branched.read_text().split("\n", 5)[5])
    engine.index_session(session)
    incremental = refs(engine)
    monkeypatch.setattr(sync_module, "THREADED_REBUILD_BYTES", 0)
    engine.index_session(session, force=True)
    assert refs(engine) == incremental and len(incremental) == 2


def test_an_emptied_file_drops_its_references(tmp_path: Path, engine: ContextEngine) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    engine.index_session(session)
    assert refs(engine)
    session.write_bytes(b"")
    engine.index_session(session)
    assert refs(engine) == []


def test_a_plan_records_what_it_offloaded_under_a_lower_threshold(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    high = {"artifacts": {"maxInlineToolResultChars": len(BIG) + 1}}
    engine = ContextEngine(database_path=tmp_path / "context.db", settings=high)
    try:
        engine.index_session(session)
        assert refs(engine) == []  # not large under the setting of the sync
        engine.update_settings({"artifacts": {"maxInlineToolResultChars": 12000}})
        plan(engine, session)
        assert refs(engine) == [("art-session", "e3", 2, BIG_ID, len(BIG), len(BIG))]
        plan(engine, session)  # known: nothing added twice
        assert len(refs(engine)) == 1
    finally:
        engine.close()


def test_search_by_session_covers_only_the_active_branch(
    tmp_path: Path, engine: ContextEngine
) -> None:
    session = tmp_path / "s.jsonl"
    branched_session(session)
    plan(engine, session)  # leaf e6: stores OTHER only
    on_e6 = engine.artifact_search(
        ArtifactSearchRequest("NEEDLE19", session=SessionRef(str(session)), max_matches=3)
    ).to_wire()
    assert on_e6["searched"] == [{"artifactId": OTHER_ID, "status": "ok"}]
    assert [m["line"] for m in on_e6["matches"]] == [20, 191, 192]
    assert on_e6["truncated"] is True
    assert all(m["sourceId"] == "e5" and m["artifactId"] == OTHER_ID for m in on_e6["matches"])
    assert on_e6["matches"][0]["column"] == len("tests/t19.py:19: error: other branch ") + 1
    # the other branch's object was never stored (no plan on it): reported, never raised
    on_e4 = engine.artifact_search(
        ArtifactSearchRequest("zqxbig", session=SessionRef(str(session), "e4"))
    ).to_wire()
    assert on_e4 == {
        "query": "zqxbig",
        "matches": [],
        "searched": [{"artifactId": BIG_ID, "status": "missing"}],
        "truncated": False,
    }
    with pytest.raises(RequestError) as caught:
        engine.artifact_search(
            ArtifactSearchRequest("x", artifact_id=BIG_ID, session=SessionRef(str(session)))
        )
    assert caught.value.field == "artifactId"


def test_search_by_id_reports_corrupt_and_too_large_objects(tmp_path: Path) -> None:
    engine = ContextEngine(
        database_path=tmp_path / "context.db", settings={"artifacts": {"maxSearchBytes": 1000}}
    )
    try:
        store = ArtifactStore(artifact_root(engine.store.path))
        small = store.put(b"a small Needle").artifact_id
        large = store.put(b"x" * 2000).artifact_id
        corrupt = store.put(b"will rot").artifact_id
        store.path_for(corrupt).write_bytes(b"rotten")

        def status(artifact_id: str) -> list[dict[str, str]]:
            found = engine.artifact_search(ArtifactSearchRequest("needle", artifact_id=artifact_id))
            return found.to_wire()["searched"]

        assert status(small) == [{"artifactId": small, "status": "ok"}]
        assert status(large) == [{"artifactId": large, "status": "too-large"}]
        assert status(corrupt) == [{"artifactId": corrupt, "status": "corrupt"}]
        assert not store.path_for(corrupt).exists()  # quarantined, never searched
        assert status("0" * 64) == [{"artifactId": "0" * 64, "status": "missing"}]
        match = engine.artifact_search(ArtifactSearchRequest("needle", artifact_id=small))
        assert match.to_wire()["matches"] == [
            {
                "artifactId": small,
                "sourceId": None,
                "line": 1,
                "column": 9,
                "excerpt": "a small Needle",
            }
        ]
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (ArtifactSearchRequest("x"), "artifactId"),
        (ArtifactSearchRequest("x", artifact_id="ABC"), "artifactId"),
        (ArtifactSearchRequest("x", artifact_id="A" * 64), "artifactId"),
        (ArtifactSearchRequest("", artifact_id="a" * 64), "query"),
        (ArtifactSearchRequest("q" * 1001, artifact_id="a" * 64), "query"),
        (ArtifactSearchRequest("x", artifact_id="a" * 64, max_matches=0), "maxMatches"),
        (ArtifactSearchRequest("x", artifact_id="a" * 64, max_matches=101), "maxMatches"),
        (ArtifactSearchRequest("x", session=SessionRef("/no/such.jsonl")), "session.file"),
    ],
)
def test_bad_search_params_name_their_field(
    engine: ContextEngine, request_: ArtifactSearchRequest, field: str
) -> None:
    with pytest.raises(RequestError) as caught:
        engine.artifact_search(request_)
    assert caught.value.field == field


def planned(tmp_path: Path, engine: ContextEngine) -> tuple[Path, ArtifactStore]:
    """`write_session` planned once (BIG stored), and the engine's artifact store."""
    session = tmp_path / "s.jsonl"
    write_session(session)
    plan(engine, session)
    return session, ArtifactStore(artifact_root(engine.store.path))


def test_gc_keeps_referenced_and_young_objects_and_old_quarantine_goes(
    tmp_path: Path, engine: ContextEngine
) -> None:
    _, store = planned(tmp_path, engine)
    orphan = store.put(b"nobody refers to me").artifact_id
    young = store.put(b"just written by a plan in flight").artifact_id
    for artifact_id in (BIG_ID, orphan):
        age(store.path_for(artifact_id), 7200)
    quarantine = store.root / "quarantine"
    quarantine.mkdir()
    (quarantine / f"{'1' * 64}.20260101T000000Z").write_bytes(b"old rot")
    (quarantine / f"{'2' * 64}.20260101T000000Z").write_bytes(b"new rot")
    age(quarantine / f"{'1' * 64}.20260101T000000Z", 8 * 86400)

    dry = engine.gc_artifacts(dry_run=True).to_wire()
    kept_bytes = len(BIG) + len(b"just written by a plan in flight")
    assert dry == {
        "removed": 2,
        "removedBytes": len(b"nobody refers to me") + len(b"old rot"),
        "kept": 2,
        "keptBytes": kept_bytes,
        "dryRun": True,
        "young": 1,
    }
    assert store.path_for(orphan).is_file() and engine.health().artifacts["lastGc"] is None
    done = engine.gc_artifacts().to_wire()
    assert done == {**dry, "dryRun": False}
    assert store.artifact_ids() == sorted([BIG_ID, young])
    assert [p.name[:1] for p in quarantine.iterdir()] == ["2"]
    last = engine.health().artifacts["lastGc"]
    assert last["removed"] == 2 and last["removedBytes"] == dry["removedBytes"]
    assert abs(last["at"] - time.time() * 1000) < 60_000
    assert engine.gc_artifacts().to_wire()["removed"] == 0


def test_finding_an_object_again_makes_it_young(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact_id = store.put(b"output").artifact_id
    age(store.path_for(artifact_id), 7200)
    assert store.put(b"output").deduplicated
    outcome = collect_garbage(store, set(), dry_run=False)
    assert outcome.removed == 0 and outcome.young == 1 and store.path_for(artifact_id).is_file()


def test_gc_without_a_store_directory_and_a_bad_last_gc_file(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path / "none")
    outcome = collect_garbage(store, set(), dry_run=False)
    assert (outcome.removed, outcome.kept) == (0, 0)
    assert last_gc(tmp_path / "none") is None
    (tmp_path / "last-gc.json").write_text(json.dumps({"at": "soon"}))
    assert last_gc(tmp_path) is None


def test_references_are_listed_per_artifact(tmp_path: Path, engine: ContextEngine) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    engine.index_session(session)
    assert artifact_repo.sessions_referencing(engine.store, BIG_ID) == [("art-session", "e3")]
    assert artifact_repo.referenced_ids(engine.store) == {BIG_ID}


def test_references_of_a_session_no_longer_indexed_do_not_keep_objects(
    tmp_path: Path, engine: ContextEngine
) -> None:
    session, store = planned(tmp_path, engine)
    age(store.path_for(BIG_ID), 7200)
    # the file now holds another session (a new header id): the old one leaves the index
    session.write_text(session.read_text().replace('"id": "art-session"', '"id": "other"', 1))
    engine.index_session(session)
    kept = engine.gc_artifacts(dry_run=True).to_wire()
    assert (kept["removed"], kept["kept"]) == (0, 1)  # the new session references the same
    with engine.store.write() as conn:
        conn.execute("DELETE FROM artifact_refs WHERE session_id = 'other'")
    assert artifact_repo.referenced_ids(engine.store) == set()  # art-session's rows are stale
    assert engine.gc_artifacts().to_wire()["removed"] == 1


def test_the_row_hook_is_told_each_sync_s_rows(tmp_path: Path, engine: ContextEngine) -> None:
    calls: list[tuple[str, list[str], bool]] = []
    hook = sync_module.RowHook(
        take=lambda entry: entry.entry_id if entry.entry_type == "message" else None,
        record=lambda session_id, rows, whole: calls.append((session_id, rows, whole)),
    )
    session = tmp_path / "s.jsonl"
    write_session(session)
    sync_module.sync_session(engine.store, session, on_rows=hook)
    sync_module.sync_session(engine.store, session, on_rows=hook)  # noop: not called
    with session.open("a") as handle:
        handle.write(line("e5", "e4", {"role": "user", "content": "more", "timestamp": 5}) + "\n")
    sync_module.sync_session(engine.store, session, on_rows=hook)
    assert calls == [
        ("art-session", ["e1", "e2", "e3", "e4"], True),
        ("art-session", ["e5"], False),
    ]
