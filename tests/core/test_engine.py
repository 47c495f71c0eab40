"""`ContextEngine` end to end: real Pi sessions, a real SQLite file in a temp dir.

What a caller of `ds4/plan`, `ds4/retrieve` and `ds4/manifest` relies on: the plan brings back
early history the tail leaves out, never splits a tool call from its result, falls back to the
caller's messages on any failure, keeps plans off disk when asked to, never logs request text,
and can be used from several threads at once.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ds4_core.artifacts.condense import tool_result_chars
from ds4_core.engine import ContextEngine
from ds4_core.engine import manifests as engine_manifests
from ds4_core.engine import planning as engine_planning
from ds4_core.engine import preparing as engine_preparing
from ds4_core.engine import sessions as engine_sessions
from ds4_core.requests import (
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    RetrieveRequest,
    SessionRef,
)
from ds4_core.sessions import build_session_context, read_all
from ds4_core.tokens import estimate_messages_tokens

V1_LARGE = "pi-mono-v1-large-session.jsonl"
V3 = "v3-branching-compaction.jsonl"
SINGLE = "openclaw-v3-single-turn-6a5d2a19.jsonl"
EMPTY = "openclaw-v3-empty-862b07aa.jsonl"
REPLAY = "v1-prompt-cache-replay.jsonl"
EARLY_REQUEST = (
    "Let's get back to porting user-message-selector.ts: which patterns from oauth-selector "
    "and theme.ts did we say it should follow?"
)
MARKER = "zqxmarkerwordvq"
"""A word that occurs in no fixture: if it shows up in a log or on disk, request text leaked."""

PLAN_KEYS = {
    "mode",
    "messages",
    "manifestId",
    "manifestStored",
    "estimatedTokens",
    "budget",
    "model",
    "warnings",
    "stats",
}


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "db" / "context.db"


@pytest.fixture
def make_engine(db_path: Path) -> Iterator[Callable[..., ContextEngine]]:
    """Factory of engines on the temp database (closed after the test)."""
    engines: list[ContextEngine] = []

    def make(settings: dict[str, Any] | None = None) -> ContextEngine:
        engine = ContextEngine(database_path=db_path, settings=settings)
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        engine.close()


@pytest.fixture
def engine(make_engine: Callable[..., ContextEngine]) -> ContextEngine:
    return make_engine()


def session(pi_sessions_dir: Path, name: str, leaf_id: str | None = None) -> SessionRef:
    return SessionRef(str(pi_sessions_dir / name), leaf_id)


def stored_manifest_count(db_path: Path) -> int:
    """Rows of `context_manifests`, read with plain sqlite3 (not through the engine)."""
    with sqlite3.connect(db_path) as conn:
        return conn.execute("SELECT COUNT(*) FROM context_manifests").fetchone()[0]


def database_bytes(db_path: Path) -> bytes:
    """Everything SQLite wrote for this database: the file and its WAL and shared memory."""
    files = [db_path, *(db_path.with_name(db_path.name + s) for s in ("-wal", "-shm"))]
    return b"".join(f.read_bytes() for f in files if f.exists())


def session_messages(path: Path, leaf_id: str | None = None) -> list[dict[str, Any]]:
    entries = read_all(path).entries
    context = build_session_context(entries, leaf_id) if leaf_id else build_session_context(entries)
    return context.messages


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(c.get("text", "") for c in content or [] if isinstance(c, dict))


def tool_call_positions(messages: list[dict[str, Any]]) -> dict[str, int]:
    return {
        block["id"]: i
        for i, m in enumerate(messages)
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "toolCall"
    }


def tool_result_positions(messages: list[dict[str, Any]]) -> dict[str, int]:
    return {m["toolCallId"]: i for i, m in enumerate(messages) if m.get("role") == "toolResult"}


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


# ------------------------------------------------------------------------------------ plan


def test_plan_of_the_large_session_brings_back_the_early_request(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    """The turn where the user asked to port the selectors (entry v1-4, far outside the recent
    tail) comes back as quoted evidence, and the plan fits the model's hard input limit."""
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V1_LARGE), request=EARLY_REQUEST)
    ).to_wire()

    assert result["mode"] == "managed"
    assert PLAN_KEYS <= result.keys()
    assert result["model"] == {
        "provider": "anthropic",
        "id": "claude-sonnet-4-5",
        "contextWindow": 200_000,
        "maxOutputTokens": 64_000,
        "source": "table:claude-sonnet-4",
    }
    assert result["session"]["leafId"] == "v1-1018"
    assert result["estimatedTokens"] <= result["budget"]["hardInputLimit"]
    assert text_of(result["messages"][-1]) == EARLY_REQUEST
    evidence = [m for m in result["messages"] if 'Source entry: "v1-4"' in text_of(m)]
    assert len(evidence) == 1 and evidence[0]["role"] == "user"
    assert text_of(evidence[0]).startswith("[DS4 HISTORICAL EVIDENCE")
    # far fewer messages than the session: the older turns were left out, with a reason
    assert len(result["messages"]) < len(session_messages(pi_sessions_dir / V1_LARGE))

    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert result["manifestStored"] is True
    retrieved = {r["entryKey"].split(":", 1)[1]: r for r in manifest["retrieved"]}
    assert "v1-4" in retrieved and retrieved["v1-4"]["reason"] and retrieved["v1-4"]["score"] > 0
    assert any(
        i["kind"] == "history" and i["sourceId"].endswith(":v1-4") for i in manifest["included"]
    )
    assert manifest["excluded"] and all(i["reason"] for i in manifest["excluded"])
    [turn] = [i for i in manifest["excluded"] if i["sourceId"] == "v1-4"]
    assert "quoted as retrieved history evidence" in turn["reason"]  # not "no evidence"
    assert result["stats"]["included"] == len(manifest["included"])
    # the older turns beyond the newest 128 are one bulk item, counted by its messages
    assert result["stats"]["excluded"] == sum(i.get("count", 1) for i in manifest["excluded"])
    assert result["stats"]["excluded"] > len(manifest["excluded"])


def test_a_tool_call_is_never_split_from_its_result(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    """Every tool call in the plan keeps its result right after it, and no result is orphaned.
    (The session itself has calls whose turn was aborted before a result; those stay alone.)"""
    session_results = tool_result_positions(session_messages(pi_sessions_dir / V1_LARGE))
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V1_LARGE), request=EARLY_REQUEST)
    ).to_wire()
    calls = tool_call_positions(result["messages"])
    results = tool_result_positions(result["messages"])

    assert calls and results  # the recent tail of this session is full of tool use
    assert results.keys() <= calls.keys()
    for call_id, position in calls.items():
        if call_id in session_results:
            assert call_id in results, call_id
            assert results[call_id] > position


def test_the_leaf_chooses_the_branch(engine: ContextEngine, pi_sessions_dir: Path) -> None:
    """v3-branching-compaction forks after e2: e3..e6 (compacted) and e7..e8 (the last entry)."""
    default = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V3), request="next")
    ).to_wire()
    branch = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V3, "e6"), request="next")
    ).to_wire()

    assert default["session"]["leafId"] == "e8"
    assert set(tool_call_positions(default["messages"])) == {"call-2"}
    assert branch["session"]["leafId"] == "e6"
    assert set(tool_call_positions(branch["messages"])) == {"call-1"}
    assert any(m["role"] == "compactionSummary" for m in branch["messages"])
    assert (
        engine.manifest(ManifestRequest(id=branch["manifestId"])).to_wire()["branchLeafId"] == "e6"
    )


def test_an_unknown_leaf_is_rejected_naming_it(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    with pytest.raises(RequestError) as caught:
        engine.plan(PlanRequest(session=session(pi_sessions_dir, V3, "no-such-leaf"), request="x"))
    assert caught.value.field == "session.leafId"
    assert "'no-such-leaf'" in str(caught.value)


def test_a_missing_session_file_is_rejected(engine: ContextEngine, tmp_path: Path) -> None:
    missing = tmp_path / "gone.jsonl"
    with pytest.raises(RequestError) as caught:
        engine.plan(PlanRequest(session=SessionRef(str(missing)), request="x"))
    assert caught.value.field == "session.file"
    assert "does not exist" in str(caught.value) and str(missing) in str(caught.value)


def test_plan_needs_a_session_or_messages(engine: ContextEngine) -> None:
    with pytest.raises(RequestError) as caught:
        engine.plan(PlanRequest(request="x"))
    assert caught.value.field == "session"


def test_default_model_is_the_sessions_last_model_change(
    engine: ContextEngine, pi_session_copy: Callable[[str], Path]
) -> None:
    """A `model_change` after the last assistant message decides the model, and so the window."""
    path = pi_session_copy(V3)
    before = engine.plan(PlanRequest(session=SessionRef(str(path)), request="x")).to_wire()
    assert (before["model"]["provider"], before["model"]["id"]) == ("acme", "alpha")

    change = {
        "type": "model_change",
        "id": "e9",
        "parentId": "e8",
        "timestamp": "2026-01-01T00:00:09.000Z",
        "provider": "openai",
        "modelId": "gpt-5",
    }
    with path.open("a") as f:
        f.write(json.dumps(change) + "\n")
    after = engine.plan(PlanRequest(session=SessionRef(str(path)), request="x")).to_wire()

    assert after["model"]["provider"] == "openai" and after["model"]["id"] == "gpt-5"
    assert after["model"]["contextWindow"] == 400_000
    assert after["model"]["source"] == "table:gpt-5"
    assert after["budget"]["contextWindow"] == 400_000
    assert after["warnings"] == []


def test_window_source_request_then_override_then_table_then_default(
    make_engine: Callable[..., ContextEngine], pi_sessions_dir: Path
) -> None:
    ref = session(pi_sessions_dir, V3)  # model acme/alpha: in no table
    plain = make_engine()
    overridden = make_engine(
        {"modelAwareness": {"overrides": {"acme/*": {"contextWindow": 50_000}}}}
    )

    default = plain.plan(PlanRequest(session=ref, request="x")).to_wire()
    assert default["model"]["source"] == "default"
    assert default["model"]["contextWindow"] == 128_000
    assert any("'acme/alpha'" in w and "unknown" in w for w in default["warnings"])

    table = plain.plan(
        PlanRequest(session=ref, request="x", model=ModelSpec("openai", "gpt-4o"))
    ).to_wire()
    assert table["model"]["source"] == "table:gpt-4o"
    assert table["model"]["contextWindow"] == 128_000 and table["warnings"] == []

    override = overridden.plan(PlanRequest(session=ref, request="x")).to_wire()
    assert override["model"]["source"] == "override"
    assert override["budget"]["contextWindow"] == 50_000
    assert override["budget"]["hardInputLimit"] < default["budget"]["hardInputLimit"]

    request = overridden.plan(
        PlanRequest(session=ref, request="x", model=ModelSpec(context_window=64_000))
    ).to_wire()
    assert request["model"]["source"] == "request"
    assert request["budget"]["contextWindow"] == 64_000
    assert request["model"]["id"] == "alpha"  # the window came from the request, the model not


def test_manifest_warnings_are_not_repeated(engine: ContextEngine, pi_sessions_dir: Path) -> None:
    result = engine.plan(PlanRequest(session=session(pi_sessions_dir, V3), request="x")).to_wire()
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()
    assert result["warnings"]  # the unknown-window warning
    assert sorted(manifest["warnings"]) == sorted(result["warnings"])


def test_an_empty_session_plans_the_request_alone(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, EMPTY), request="hello")
    ).to_wire()
    assert result["mode"] == "managed"
    assert [text_of(m) for m in result["messages"]] == ["hello"]
    assert result["manifestStored"] is False  # no session id to store it under
    assert "session" not in result
    assert (
        engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()["id"]
        == result["manifestId"]
    )


# ------------------------------------------------------------------------------ modes, fail-open


def test_observer_mode_returns_the_messages_unchanged(
    make_engine: Callable[..., ContextEngine], pi_sessions_dir: Path
) -> None:
    engine = make_engine({"context": {"mode": "observer"}})
    original = session_messages(pi_sessions_dir / V1_LARGE)
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V1_LARGE), request=EARLY_REQUEST)
    ).to_wire()

    assert result["mode"] == "observer"
    assert result["messages"][:-1] == original
    assert text_of(result["messages"][-1]) == EARLY_REQUEST
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()
    assert manifest["planning"]["mode"] == "observer"
    assert manifest["planning"]["plannedTokens"] < result["estimatedTokens"]


def test_observer_mode_per_request(engine: ContextEngine) -> None:
    messages = [user_message("first"), user_message("second")]
    result = engine.plan(PlanRequest(messages=messages, mode="observer")).to_wire()
    assert result["mode"] == "observer" and result["messages"] == messages


def test_disabled_engine_falls_back_without_touching_the_index(
    make_engine: Callable[..., ContextEngine], pi_sessions_dir: Path
) -> None:
    engine = make_engine({"enabled": False})
    result = engine.plan(PlanRequest(session=session(pi_sessions_dir, V3), request="x")).to_wire()

    assert result["mode"] == "fallback"
    assert "enabled" in result["fallbackReason"]
    assert result["messages"][:-1] == session_messages(pi_sessions_dir / V3)
    assert engine.health().to_wire()["sessions"] == 0


def test_a_planner_exception_falls_back_to_the_callers_messages(
    engine: ContextEngine, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("planner exploded")

    monkeypatch.setattr(engine_preparing, "plan_context", broken)
    messages = [user_message("read the file"), {"role": "assistant", "content": [], "timestamp": 2}]
    messages.append(user_message("now fix it"))
    snapshot = json.loads(json.dumps(messages))

    result = engine.plan(PlanRequest(messages=messages, fixed_tokens=500)).to_wire()

    assert result["mode"] == "fallback"
    assert result["messages"] == snapshot and messages == snapshot
    assert "RuntimeError" in result["fallbackReason"]
    assert result["estimatedTokens"] == 500 + estimate_messages_tokens(snapshot)
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()
    assert manifest["planning"]["mode"] == "fallback"
    assert manifest["planning"]["fallbackReason"] == result["fallbackReason"]


def test_a_retrieval_exception_falls_back_and_still_stores_the_manifest(
    engine: ContextEngine, db_path: Path, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(engine_planning, "retrieve_history", broken)
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V1_LARGE), request=EARLY_REQUEST)
    ).to_wire()

    assert result["mode"] == "fallback"
    assert "OperationalError" in result["fallbackReason"]
    # the session's messages, but for its large tool results: sent condensed (docs/artifacts.md)
    sent, original = result["messages"][:-1], session_messages(pi_sessions_dir / V1_LARGE)
    assert len(sent) == len(original)
    large = [
        i
        for i, message in enumerate(original)
        if message["role"] == "toolResult" and tool_result_chars(message) > 12000
    ]
    assert large and all(text_of(sent[i]).startswith("[DS4 LARGE TOOL OUTPUT") for i in large)
    assert [m for i, m in enumerate(sent) if i not in large] == [
        m for i, m in enumerate(original) if i not in large
    ]
    assert text_of(result["messages"][-1]) == EARLY_REQUEST
    assert result["manifestStored"] is True
    assert stored_manifest_count(db_path) == 1
    latest = engine.manifest(
        ManifestRequest(session=session(pi_sessions_dir, V1_LARGE), latest=True)
    ).to_wire()
    assert latest["id"] == result["manifestId"]
    assert latest["planning"]["mode"] == "fallback"


def test_a_session_read_failure_falls_back_to_the_given_messages(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("parentId")

    monkeypatch.setattr(engine_sessions, "context_for_path", broken)
    messages = [user_message("hello")]
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V3), messages=messages)
    ).to_wire()
    assert result["mode"] == "fallback" and result["messages"] == messages
    assert "KeyError" in result["fallbackReason"]
    with pytest.raises(KeyError):  # without messages there is nothing to fall back to
        engine.plan(PlanRequest(session=session(pi_sessions_dir, V3), request="x"))


def test_a_manifest_that_cannot_be_stored_does_not_fail_the_plan(
    engine: ContextEngine, pi_sessions_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(engine_manifests.manifest_repo, "save_manifest", broken)
    result = engine.plan(PlanRequest(session=session(pi_sessions_dir, V3), request="x")).to_wire()
    assert result["mode"] == "managed"
    assert result["manifestStored"] is False
    assert any("could not be stored" in w for w in result["warnings"])
    assert (
        engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()["id"]
        == result["manifestId"]
    )


# -------------------------------------------------------------------------------------- privacy


def test_a_plan_of_messages_alone_writes_nothing_to_disk(
    engine: ContextEngine, db_path: Path
) -> None:
    engine.health()  # the database exists, so "nothing written" is about rows, not a file
    messages = [user_message(f"please refactor the {MARKER} module")]

    result = engine.plan(PlanRequest(messages=messages, request=f"and test {MARKER}")).to_wire()

    assert result["manifestStored"] is False
    assert stored_manifest_count(db_path) == 0
    assert MARKER.encode() not in database_bytes(db_path)
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert manifest["id"] == result["manifestId"] and manifest["sessionId"] is None
    assert MARKER not in json.dumps(manifest)  # metadata only
    assert engine.health().to_wire()["ephemeralManifests"] == 1


def test_storage_off_keeps_session_plans_in_memory(
    make_engine: Callable[..., ContextEngine],
    db_path: Path,
    pi_session_copy: Callable[[str], Path],
) -> None:
    engine = make_engine({"diagnostics.storeContextManifest": False})
    ref = SessionRef(str(pi_session_copy(V3)))

    result = engine.plan(PlanRequest(session=ref, request=f"what about {MARKER}?")).to_wire()

    assert result["manifestStored"] is False
    assert stored_manifest_count(db_path) == 0
    assert MARKER.encode() not in database_bytes(db_path)
    assert (
        engine.manifest(ManifestRequest(id=result["manifestId"])).to_wire()["id"]
        == result["manifestId"]
    )
    latest = engine.manifest(ManifestRequest(session=ref, latest=True)).to_wire()
    assert latest["id"] == result["manifestId"]


def test_logs_never_carry_request_text(
    engine: ContextEngine,
    pi_sessions_dir: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG, logger="ds4_core")
    ref = session(pi_sessions_dir, V1_LARGE)
    engine.plan(PlanRequest(session=ref, request=f"port the {MARKER} selector to the theme"))
    engine.retrieve(RetrieveRequest(session=ref, query=f"{MARKER} theme selector"))
    engine.plan(PlanRequest(messages=[user_message(MARKER)], request=MARKER))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"cannot plan {MARKER}")  # an exception quoting the request

    monkeypatch.setattr(engine_preparing, "plan_context", broken)
    fallback = engine.plan(PlanRequest(messages=[user_message(MARKER)])).to_wire()
    assert fallback["mode"] == "fallback"

    logged = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("plan:") for line in logged)
    assert any(line.startswith("retrieve:") for line in logged)
    assert any("failed open" in line for line in logged)
    assert MARKER not in caplog.text
    assert MARKER not in fallback["fallbackReason"]


# ----------------------------------------------------------------------------------- manifests


def test_only_the_latest_128_manifests_are_kept(
    engine: ContextEngine, db_path: Path, pi_sessions_dir: Path
) -> None:
    ref = session(pi_sessions_dir, SINGLE)
    ids = [
        engine.plan(PlanRequest(session=ref, request=f"q{i}")).to_wire()["manifestId"]
        for i in range(130)
    ]

    assert stored_manifest_count(db_path) == 128
    for evicted in ids[:2]:
        with pytest.raises(RequestError) as caught:
            engine.manifest(ManifestRequest(id=evicted))
        assert caught.value.field == "id" and evicted in str(caught.value)
    assert engine.manifest(ManifestRequest(id=ids[2])).to_wire()["id"] == ids[2]
    assert engine.manifest(ManifestRequest(session=ref, latest=True)).to_wire()["id"] == ids[-1]


def test_manifest_views(engine: ContextEngine, pi_sessions_dir: Path) -> None:
    result = engine.plan(
        PlanRequest(session=session(pi_sessions_dir, V1_LARGE), request=EARLY_REQUEST)
    ).to_wire()
    views = {
        view: engine.manifest(ManifestRequest(id=result["manifestId"], view=view)).to_wire()
        for view in ("summary", "included", "excluded", "full")
    }
    full = views["full"]
    assert full["included"] and full["excluded"]
    assert "included" not in views["summary"] and "excluded" not in views["summary"]
    assert views["summary"]["itemCounts"] == {
        "included": len(full["included"]),
        "excluded": sum(item.get("count", 1) for item in full["excluded"]),  # bulk: count
    }
    assert views["included"]["included"] == full["included"] and "excluded" not in views["included"]
    assert views["excluded"]["excluded"] == full["excluded"] and "included" not in views["excluded"]
    # metadata only: neither the request nor the quoted evidence is in the manifest
    dumped = json.dumps(full, ensure_ascii=False)
    assert EARLY_REQUEST not in dumped and "HISTORICAL EVIDENCE" not in dumped
    quoted = [text_of(m)[-200:] for m in result["messages"] if len(text_of(m)) >= 40]
    assert quoted and not any(text in dumped for text in quoted)


def test_manifest_requests_that_cannot_be_served(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    with pytest.raises(RequestError) as unknown:
        engine.manifest(ManifestRequest(id="m-000000000000ffffffffffffffff"))
    assert unknown.value.field == "id" and "m-000000000000ffffffffffffffff" in str(unknown.value)

    with pytest.raises(RequestError) as no_selector:
        engine.manifest(ManifestRequest(session=session(pi_sessions_dir, V3)))
    assert no_selector.value.field == "id"

    with pytest.raises(RequestError) as none_yet:
        engine.manifest(ManifestRequest(session=session(pi_sessions_dir, V3), latest=True))
    assert none_yet.value.field == "session.file" and "plan" in str(none_yet.value)

    with pytest.raises(RequestError) as bad_view:
        engine.manifest(ManifestRequest(id="x", view="everything"))  # type: ignore[arg-type]
    assert bad_view.value.field == "view"


def test_an_ephemeral_manifest_cannot_be_changed_by_a_caller(engine: ContextEngine) -> None:
    result = engine.plan(PlanRequest(messages=[user_message("hello")])).to_wire()
    first = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    first["included"].clear()
    again = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert again["included"]


# ------------------------------------------------------------------------------------ retrieve


def test_retrieve_finds_early_history_but_not_what_the_tail_holds(
    engine: ContextEngine, pi_sessions_dir: Path
) -> None:
    result = engine.retrieve(
        RetrieveRequest(query=EARLY_REQUEST, session=session(pi_sessions_dir, V1_LARGE))
    ).to_wire()
    assert result["status"] == "ok"
    ids = [h["entryId"] for h in result["history"]]
    assert "v1-4" in ids
    scores = [h["score"] for h in result["history"]]
    assert scores == sorted(scores, reverse=True)
    assert all(h["reason"] and h["excerpt"] and h["tokens"] > 0 for h in result["history"])
    assert result["stats"]["alreadyInContext"] > 0
    # nothing of the recent tail (the last entries of the session) is offered back
    tail_ids = {f"v1-{n}" for n in range(1000, 1019)}
    assert not tail_ids & set(ids)


def test_retrieve_limits_and_missing_session(engine: ContextEngine, pi_sessions_dir: Path) -> None:
    ref = session(pi_sessions_dir, V1_LARGE)
    two = engine.retrieve(
        RetrieveRequest(query=EARLY_REQUEST, session=ref, max_results=2)
    ).to_wire()
    assert len(two["history"]) == 2
    assert engine.retrieve(RetrieveRequest(query="theme")).to_wire()["status"] == "no-session"
    with pytest.raises(RequestError) as caught:
        engine.retrieve(RetrieveRequest(query="theme", session=ref, max_results=0))
    assert caught.value.field == "maxResults"


# ------------------------------------------------------------------------------ index, rebuild


def test_index_counts_every_fixture(engine: ContextEngine, pi_sessions_dir: Path) -> None:
    expected = {V1_LARGE: 1018, V3: 8, SINGLE: 5, REPLAY: 6, EMPTY: 0}
    results = {name: engine.index_session(pi_sessions_dir / name).to_wire() for name in expected}

    assert {name: r["entriesTotal"] for name, r in results.items()} == expected
    assert results[EMPTY]["outcome"] == "skipped" and results[EMPTY]["sessionId"] is None
    assert engine.health().to_wire()["entries"] == sum(expected.values())
    again = engine.index_session(pi_sessions_dir / V1_LARGE).to_wire()
    assert again["outcome"] == "noop" and again["entriesAdded"] == 0


def test_index_rejects_a_file_that_is_not_a_session(engine: ContextEngine, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    with pytest.raises(RequestError) as caught:
        engine.index_session(notes)
    assert caught.value.field == "file"
    assert "Pi session" in str(caught.value) and str(notes) in str(caught.value)


def test_rebuild_lists_sessions_that_are_gone_or_broken_and_rebuilds_the_rest(
    engine: ContextEngine, pi_session_copy: Callable[[str], Path]
) -> None:
    kept, deleted, broken = (pi_session_copy(n) for n in (V3, SINGLE, REPLAY))
    for path in (kept, deleted, broken):
        engine.index_session(path)
    deleted.unlink()
    broken.write_text("this is not a session any more\n")

    result = engine.rebuild().to_wire()

    failed = {Path(f["sessionFile"]).name: f["error"] for f in result["failed"]}
    assert set(failed) == {SINGLE, REPLAY}
    assert "no longer exists" in failed[SINGLE]
    assert "Pi session" in failed[REPLAY]
    assert result["sessions"] == 1 and result["entries"] == 8
    assert [r["reason"] for r in result["results"]] == ["forced"]


# -------------------------------------------------------------------------------------- threads


def test_concurrent_plans_and_retrievals_on_one_engine(
    engine: ContextEngine, db_path: Path, pi_sessions_dir: Path
) -> None:
    """Eight threads start together on a fresh database: first open, first sync of three
    sessions, plans and retrievals all race."""
    refs = [session(pi_sessions_dir, n) for n in (V1_LARGE, V3, SINGLE)]
    start = threading.Barrier(8)
    errors: list[BaseException] = []
    plans: list[dict[str, Any]] = []

    def work(worker: int) -> None:
        try:
            start.wait()
            for step in range(3):
                ref = refs[(worker + step) % len(refs)]
                if worker % 2:
                    plans.append(
                        engine.plan(PlanRequest(session=ref, request="theme selector")).to_wire()
                    )
                else:
                    found = engine.retrieve(
                        RetrieveRequest(query="theme selector", session=ref)
                    ).to_wire()
                    assert found["status"] == "ok"
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(plans) == 12 and {p["mode"] for p in plans} == {"managed"}
    assert not any("index" in w for p in plans for w in p["warnings"])
    assert engine.health().to_wire()["entries"] == 1018 + 8 + 5
    assert stored_manifest_count(db_path) == 12


@pytest.mark.parametrize(
    ("model", "field"),
    [
        (ModelSpec(context_window=0), "model.contextWindow"),
        (ModelSpec(context_window=-5), "model.contextWindow"),
        (ModelSpec(context_window=10**30), "model.contextWindow"),
        (ModelSpec(max_output_tokens=-1), "model.maxOutputTokens"),
    ],
)
def test_impossible_model_limits_are_rejected_naming_the_field(
    engine: ContextEngine, pi_sessions_dir: Path, model: ModelSpec, field: str
) -> None:
    with pytest.raises(RequestError) as caught:
        engine.plan(PlanRequest(session=session(pi_sessions_dir, V3), request="x", model=model))
    assert caught.value.field == field and field in str(caught.value)


def test_a_disabled_engine_retrieves_nothing(
    make_engine: Callable[..., ContextEngine], pi_sessions_dir: Path
) -> None:
    engine = make_engine(settings={"enabled": False})
    result = engine.retrieve(
        RetrieveRequest(query="theme", session=session(pi_sessions_dir, V1_LARGE))
    ).to_wire()
    assert result["status"] == "disabled" and result["history"] == []


def test_a_same_size_rewrite_with_the_mtime_restored_is_planned_from_the_new_text(
    engine: ContextEngine, pi_session_copy: Callable[[str], Path]
) -> None:
    """The parsed-session cache does not trust size and mtime: the rewritten text is served."""
    path = pi_session_copy(V3)
    ref = SessionRef(str(path), None)
    first = engine.plan(PlanRequest(session=ref, request="next")).to_wire()
    assert any(text_of(m) == "sanitized" for m in first["messages"] if m["role"] == "user")
    before = path.stat()
    data = path.read_bytes()
    at = data.index(b'"content":"sanitized"') + len(b'"content":"')
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(b"rewritten")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = engine.plan(PlanRequest(session=ref, request="next")).to_wire()
    users = [text_of(m) for m in again["messages"] if m["role"] == "user"]
    assert "rewritten" in users and "sanitized" not in users


def test_from_record_refuses_a_missing_or_unknown_key() -> None:
    """`engine.convert.from_record` builds a result from a camelCase record only when every
    field without a default is there and no key is left over (nothing silently defaulted)."""
    from ds4_core.engine.convert import from_record
    from ds4_core.results import RebuildFailure

    assert from_record(RebuildFailure, {"sessionFile": "/s.jsonl", "error": "gone"}) == (
        RebuildFailure("/s.jsonl", "gone")
    )
    with pytest.raises(TypeError, match="lacks 'error'"):
        from_record(RebuildFailure, {"sessionFile": "/s.jsonl"})
    with pytest.raises(TypeError, match="unknown key"):
        from_record(RebuildFailure, {"sessionFile": "/s.jsonl", "error": "x", "extra": 1})
