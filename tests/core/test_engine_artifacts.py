"""Artifacts in `ds4/plan` (core/ds4_core/engine/artifacts.py): a managed session plan sends a
large tool result condensed and stores it beside the database; the session file, observer mode
and ephemeral plans are left alone; the manifest names the artifact, never its text."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from test_planner import result

from ds4_core.artifacts.condense import END_LINE, tool_result_text
from ds4_core.artifacts.store import ArtifactStore
from ds4_core.cli.printers.plan import print_plan
from ds4_core.engine import ContextEngine
from ds4_core.engine.artifacts import CONDENSED_IN_FALLBACK
from ds4_core.engine.planning import Planner
from ds4_core.requests import (
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    SessionAppendRequest,
    SessionOpenRequest,
    SessionRef,
)

BIG = "".join(f"src/app/mod{i % 9}.py:{i}: warning: unused import zqxbig{i}\n" for i in range(3000))


def line(entry_id: str, parent: str | None, message: dict[str, Any]) -> str:
    stamp = "2026-01-01T00:00:0" + entry_id[-1] + ".000Z"
    entry = {"type": "message", "id": entry_id, "parentId": parent, "timestamp": stamp}
    return json.dumps({**entry, "message": message})


def write_session(path: Path) -> bytes:
    header = {
        "type": "session",
        "version": 3,
        "id": "art-session",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/w",
    }
    call = {"type": "toolCall", "id": "call-1", "name": "bash", "arguments": {"command": "make"}}
    lines = [
        json.dumps(header),
        line("e1", None, {"role": "user", "content": "build it", "timestamp": 1}),
        line(
            "e2",
            "e1",
            {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2},
        ),
        line(
            "e3",
            "e2",
            {
                "role": "toolResult",
                "toolCallId": "call-1",
                "toolName": "bash",
                "content": [{"type": "text", "text": BIG}],
                "isError": False,
                "timestamp": 3,
            },
        ),
        line(
            "e4",
            "e3",
            {"role": "assistant", "content": [{"type": "text", "text": "built"}], "timestamp": 4},
        ),
    ]
    data = ("\n".join(lines) + "\n").encode()
    path.write_bytes(data)
    return data


def plan(engine: ContextEngine, session: Path | None, mode: str | None = None) -> dict[str, Any]:
    request = PlanRequest(
        session=SessionRef(file=str(session)) if session else None,
        messages=None if session else [{"role": "user", "content": "hi"}, result("call-1", BIG)],
        request="what failed?",
        model=ModelSpec(provider="acme", id="alpha", context_window=200000),
        mode=mode,  # type: ignore[arg-type]
    )
    return engine.plan(request).to_wire()


def tool_results(result: dict[str, Any]) -> list[str]:
    return [tool_result_text(m) for m in result["messages"] if m.get("role") == "toolResult"]


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = ContextEngine(database_path=tmp_path / "db" / "context.db")
    yield engine
    engine.close()


def test_a_managed_plan_sends_the_large_result_condensed_and_stores_it(
    engine: ContextEngine, tmp_path: Path
) -> None:
    session = tmp_path / "s.jsonl"
    before = write_session(session)
    result = plan(engine, session)
    assert result["mode"] == "managed"
    [sent] = tool_results(result)
    assert sent.endswith(END_LINE) and len(sent) < 12000 + 4000
    artifact_id = hashlib.sha256(BIG.encode()).hexdigest()
    assert f"Artifact ID: {artifact_id}" in sent
    store = ArtifactStore(tmp_path / "db" / "artifacts")
    assert store.read(artifact_id).decode() == BIG
    assert session.read_bytes() == before  # the session file is never changed
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert manifest["artifacts"] == [
        {
            "artifactId": artifact_id,
            "sourceId": "e3",
            "originalChars": len(BIG),
            "sizeBytes": len(BIG.encode()),
            "notStored": None,
        }
    ]
    assert "zqxbig1500" not in json.dumps(manifest)  # ids and sizes, never the text
    again = plan(engine, session)
    assert tool_results(again) == [sent]
    assert engine.health().artifacts == {
        "objects": 1,
        "bytes": len(BIG.encode()),
        "quarantined": 0,
        "quarantinedBytes": 0,
        "lastGc": None,
    }


@pytest.mark.parametrize("case", ["observer", "ephemeral", "disabled"])
def test_observer_ephemeral_and_disabled_plans_never_offload(
    engine: ContextEngine, tmp_path: Path, case: str
) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    if case == "disabled":
        engine.update_settings({"artifacts": {"enabled": False}})
    result = plan(
        engine, None if case == "ephemeral" else session, "observer" if case == "observer" else None
    )
    assert tool_results(result) == [BIG]
    assert not (tmp_path / "db" / "artifacts").exists()


@pytest.mark.parametrize("why", ["over-the-hard-limit", "internal-error"])
def test_a_fallback_plan_sends_the_condensed_result_and_lists_it(
    engine: ContextEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    """A fallback sends the condensed copy (a large output never goes whole), and the
    manifest and the text report say so."""
    session = tmp_path / "s.jsonl"
    write_session(session)
    fixed = 0
    if why == "internal-error":

        def fail(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(Planner, "managed_plan", fail)
    else:
        fixed = 190000
    request = PlanRequest(
        session=SessionRef(file=str(session)),
        request="what failed?",
        model=ModelSpec(provider="acme", id="alpha", context_window=200000),
        fixed_tokens=fixed,
    )
    planned = engine.plan(request)
    result = planned.to_wire()
    assert result["mode"] == "fallback"
    [sent] = tool_results(result)
    artifact_id = hashlib.sha256(BIG.encode()).hexdigest()
    assert f"Artifact ID: {artifact_id}" in sent and "zqxbig1500" not in sent
    manifest = engine.manifest(ManifestRequest(id=result["manifestId"], view="full")).to_wire()
    assert [item["artifactId"] for item in manifest["artifacts"]] == [artifact_id]
    [condensed] = [
        i for i in manifest["included"] if i["sourceId"] == manifest["artifacts"][0]["sourceId"]
    ]
    assert condensed["reason"] == CONDENSED_IN_FALLBACK
    assert all(
        i["reason"] == "fallback: original message sent unchanged"
        for i in manifest["included"]
        if i is not condensed
    )
    out = io.StringIO()
    print_plan(planned, manifest, out)
    report = " ".join(out.getvalue().split())
    assert "but for 1 large tool result(s) sent condensed (artifacts)" in report
    assert "sent unchanged ·" not in report


def test_a_grown_session_plans_as_a_fresh_engine_does(
    engine: ContextEngine, tmp_path: Path
) -> None:
    """The condensed copy kept with the session context gives the plan a fresh engine makes,
    before and after the session grows."""
    session = tmp_path / "s.jsonl"
    write_session(session)
    plan(engine, session)
    with session.open("a") as handle:
        handle.write(
            line("e5", "e4", {"role": "user", "content": "and now?", "timestamp": 5}) + "\n"
        )
    grown = plan(engine, session)
    fresh_engine = ContextEngine(database_path=tmp_path / "db2" / "context.db")
    try:
        fresh = plan(fresh_engine, session)
    finally:
        fresh_engine.close()
    strip = [{k: v for k, v in m.items() if k != "timestamp"} for m in grown["messages"]]
    assert strip == [{k: v for k, v in m.items() if k != "timestamp"} for m in fresh["messages"]]
    assert grown["estimatedTokens"] == fresh["estimatedTokens"]
    assert sum(END_LINE in text for text in tool_results(grown)) == 1


@pytest.mark.parametrize("where", ["whole", "cut"])
def test_privacy_markers_in_an_excerpt_still_withhold(
    engine: ContextEngine, tmp_path: Path, where: str
) -> None:
    """A local-only block in the head excerpt is withheld from a remote provider, whole or
    cut by the excerpt's end (a broken block raises the whole message)."""
    secret = "zqxlocalonly"
    close = "[/ds4:local-only]" if where == "whole" else ""
    text = f"[ds4:local-only]{secret}{close}\n" + BIG
    if where == "cut":
        text = text + "[/ds4:local-only]"
    session = tmp_path / "s.jsonl"
    write_session(session)
    lines = session.read_text().splitlines()
    lines[3] = lines[3].replace(json.dumps(BIG)[1:-1], json.dumps(text)[1:-1], 1)
    session.write_text("\n".join(lines) + "\n")
    result = plan(engine, session)
    assert result["mode"] == "managed"
    assert secret not in json.dumps(result["messages"])
    assert "content excluded by privacy policy" in json.dumps(result["messages"])


def _with_output(session: Path, text: str) -> None:
    """The session of `write_session` with its large tool output replaced by `text`."""
    write_session(session)
    lines = session.read_text().splitlines()
    lines[3] = lines[3].replace(json.dumps(BIG)[1:-1], json.dumps(text)[1:-1], 1)
    session.write_text("\n".join(lines) + "\n")


def test_a_private_key_near_the_end_never_reaches_a_remote_provider(
    engine: ContextEngine, tmp_path: Path
) -> None:
    """An RSA-4096 key whose BEGIN line is before the tail's redaction window (review 15A #1)."""
    body = base64.b64encode(bytes(range(256)) * 9 + bytes(45)).decode()
    key_lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    pem = (
        "-----BEGIN " + "RSA PRIVATE KEY-----\n" + "\n".join(key_lines)
        + "\n-----END " + "RSA PRIVATE KEY-----\n"
    )  # fmt: skip
    session = tmp_path / "s.jsonl"
    _with_output(session, BIG + "$ cat ~/.ssh/id_rsa\n" + pem + "$ echo done\n" + "x" * 300)
    result = plan(engine, session)
    assert result["mode"] == "managed"
    sent = json.dumps(result["messages"])
    assert "REDACTED PRIVATE KEY" in sent
    assert [line for line in key_lines if line in sent or line.replace("/", "\\/") in sent] == []


def test_a_classified_error_line_in_the_omitted_middle_keeps_its_level(
    engine: ContextEngine, tmp_path: Path
) -> None:
    """The error line is taken from a local-only block far from head and tail: the block's
    `Error JSON` line carries the level (review 15A #2)."""
    secret = "zqxmergercontoso"
    session = tmp_path / "s.jsonl"
    text = BIG + f"[ds4:local-only]\nerror: {secret} closes in March\n[/ds4:local-only]\n" + BIG
    _with_output(session, text)
    result = plan(engine, session)
    sent = json.dumps(result["messages"])
    assert secret not in sent
    assert "[DS4 local-only content excluded by privacy policy]" in sent
    assert "Head JSON" in sent and "Artifact ID" in sent  # the unclassified lines still go


def test_the_first_offload_sweeps_temporaries_a_crashed_writer_left(
    engine: ContextEngine, tmp_path: Path
) -> None:
    shard = tmp_path / "db" / "artifacts" / "ab"
    shard.mkdir(parents=True)
    stale, young = shard / ".tmp-ab-old", shard / ".tmp-ab-new"
    stale.write_bytes(b"partial")
    young.write_bytes(b"in progress")
    os.utime(stale, (1, 1))
    session = tmp_path / "s.jsonl"
    write_session(session)
    plan(engine, session)
    assert not stale.exists() and young.exists()


def test_kept_copies_are_bounded_by_the_characters_they_hold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ds4_core.engine import artifacts as engine_artifacts

    monkeypatch.setattr(engine_artifacts, "KEPT_CHARS", 2 * len(BIG))
    offloads = engine_artifacts.ArtifactOffloads(None)  # type: ignore[arg-type]
    store = ArtifactStore(tmp_path)
    messages = [result(f"call-{i}", BIG + str(i)) for i in range(5)]
    settings = engine_artifacts.Config().artifacts
    for message in messages:
        offloads._offload(message, 0, store, settings)
    assert len(offloads._kept) == 1 and offloads._kept_chars == len(BIG) + 1


def test_a_session_with_more_large_results_than_the_cache_plans_without_condensing_again(
    monkeypatch: pytest.MonkeyPatch, engine: ContextEngine, tmp_path: Path
) -> None:
    """After an append, only new large results are condensed, however many the session holds
    (review 15A #7: a 64-entry cache thrashed once a session held more, 17-60x slower)."""
    from ds4_core.engine import artifacts as engine_artifacts

    monkeypatch.setattr(engine_artifacts, "KEPT", 3)
    header = {"type": "session", "version": 3, "id": "many", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}  # fmt: skip
    lines, parent = [json.dumps(header)], None
    for i in range(8):
        call = {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {}}
        for entry_id, message in (
            (f"a{i}", {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2}),
            (f"r{i}", {**result(f"c{i}", BIG + str(i)), "timestamp": 3}),
        ):  # fmt: skip
            lines.append(line(entry_id, parent, message))
            parent = entry_id
    session = tmp_path / "many.jsonl"
    session.write_text("\n".join(lines) + "\n")
    calls: list[int] = []
    real = engine_artifacts.offload_tool_result

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine_artifacts, "offload_tool_result", counted)
    first = plan(engine, session)
    assert len(calls) == 8 and sum(END_LINE in text for text in tool_results(first)) == 8
    for j in range(3):
        user = {"role": "user", "content": f"more {j}", "timestamp": 4}
        with session.open("a") as handle:
            handle.write(line(f"x{j}", parent, user) + "\n")
        parent = f"x{j}"
        again = plan(engine, session)
        assert len(calls) == 8  # nothing condensed again
        assert again["messages"][: len(first["messages"]) - 1] == first["messages"][:-1]


def test_carried_copies_are_bounded_by_sessions_and_characters_the_latest_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ds4_core.engine import artifacts as engine_artifacts

    offloads = engine_artifacts.ArtifactOffloads(None)  # type: ignore[arg-type]
    settings = engine_artifacts.Config().artifacts
    store = ArtifactStore(tmp_path)
    messages = [result(f"call-{i}", BIG + str(i)) for i in range(4)]
    done = [offloads._offload(m, i, store, settings) for i, m in enumerate(messages)]
    assert all(item is not None for item in done)
    monkeypatch.setattr(engine_artifacts, "KEPT_SESSIONS", 2)
    for session in ("s1", "s2", "s3"):
        offloads._carry(session, settings, messages, done[:1], [1] * 4)  # type: ignore[list-item]
    assert list(offloads._carried) == ["s2", "s3"]
    monkeypatch.setattr(engine_artifacts, "KEPT_CHARS", len(BIG))
    offloads._carry("big", settings, messages, done, [1] * 4)  # type: ignore[arg-type]
    assert list(offloads._carried) == ["big"]  # over the bound alone, but the latest


def _lose_the_database(tmp_path: Path) -> None:
    """Delete context.db* and age every object past the grace period (3 hours)."""
    for path in (tmp_path / "db").glob("context.db*"):
        path.unlink()
    old = time.time() - 3 * 3600
    store = ArtifactStore(tmp_path / "db" / "artifacts")
    for artifact_id in store.artifact_ids():
        os.utime(store.path_for(artifact_id), (old, old))


def test_gc_syncs_the_owned_sessions_first_after_the_database_was_lost(
    tmp_path: Path,
) -> None:
    first = ContextEngine(database_path=tmp_path / "db" / "context.db")
    opened = first.session_open(SessionOpenRequest(cwd="/w"))
    call = {"type": "toolCall", "id": "call-1", "name": "bash", "arguments": {"command": "make"}}
    first.session_append(
        SessionAppendRequest(
            session=SessionRef(file=opened.file),
            messages=[
                {"role": "user", "content": "build it", "timestamp": 1},
                {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2},
                result("call-1", BIG),
            ],
        )
    )
    plan(first, Path(opened.file))
    first.close()
    _lose_the_database(tmp_path)
    again = ContextEngine(database_path=tmp_path / "db" / "context.db")
    try:
        outcome = again.gc_artifacts()
    finally:
        again.close()
    assert (outcome.removed, outcome.kept) == (0, 1)
    store = ArtifactStore(tmp_path / "db" / "artifacts")
    assert store.read(hashlib.sha256(BIG.encode()).hexdigest()).decode() == BIG


def test_gc_refuses_when_the_index_holds_no_session_unless_forced(tmp_path: Path) -> None:
    first = ContextEngine(database_path=tmp_path / "db" / "context.db")
    session = tmp_path / "s.jsonl"
    write_session(session)
    plan(first, session)
    first.close()
    _lose_the_database(tmp_path)
    again = ContextEngine(database_path=tmp_path / "db" / "context.db")
    try:
        with pytest.raises(RequestError, match="index holds no session") as refused:
            again.gc_artifacts()
        assert refused.value.field == "force"
        assert again.gc_artifacts(dry_run=True).removed == 1  # a dry run only counts
        assert ArtifactStore(tmp_path / "db" / "artifacts").artifact_ids() != []
        assert again.gc_artifacts(force=True).removed == 1
    finally:
        again.close()
    assert ArtifactStore(tmp_path / "db" / "artifacts").artifact_ids() == []
