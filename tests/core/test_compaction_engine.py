"""`ContextEngine.compact` and the summary graph on real SQLite files and session files
(docs/reference.md §3.13; docs/compaction.md)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from session_files import SessionWriter

from ds4_core.compaction.nodes import PI_SUMMARY_ISSUE, SummaryNode, pi_summary_id
from ds4_core.engine import ContextEngine
from ds4_core.requests import (
    CompactRequest,
    ManifestRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    SessionRef,
    SummarizeAnswer,
    SummarizeCall,
    SummarizerUnavailable,
)
from ds4_core.store import summaries as summary_repo

MODEL = ModelSpec(provider="anthropic", id="claude-sonnet-4-5", context_window=200_000)
SMALL = {"compaction": {"keepRecentTokens": 150}}


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    eng = ContextEngine(database_path=tmp_path / "db" / "ds4.db", settings=SMALL)
    yield eng
    eng.close()


def _session(tmp_path: Path, turns: int = 6, name: str = "s.jsonl") -> SessionWriter:
    writer = SessionWriter(tmp_path / name)
    for n in range(1, turns + 1):
        writer.turn(n)
    return writer


def _compact(engine: ContextEngine, writer: SessionWriter, **kwargs: Any) -> dict[str, Any]:
    leaf = kwargs.pop("leaf", None)
    summarizer = kwargs.pop("summarizer", None)
    request = CompactRequest(session=SessionRef(str(writer.path), leaf), **kwargs)
    return engine.compact(request, summarizer).to_wire()


def _commit(engine: ContextEngine, writer: SessionWriter, result: dict[str, Any]) -> str:
    """Append the compaction entry as Pi would and sync (detects the commit)."""
    entry_id = writer.compaction(result["compaction"])
    engine.index_session(writer.path)
    return entry_id


def _nodes(engine: ContextEngine, session_id: str) -> dict[str, SummaryNode]:
    return {n.summary_id: n for n in summary_repo.session_nodes(engine.store, session_id)}


# ----------------------------------------------------------------- one compaction


def test_first_compaction_is_a_prepared_offline_segment(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    result = _compact(engine, writer, reason="threshold")
    assert result["summaryKind"] == "segment" and result["graphLevel"] == 0
    assert result["summarizer"] == "offline"
    assert "no model summarizer" in result["fallbackReason"]
    assert result["validation"]["status"] == "valid"
    record = result["compaction"]["details"]["ds4ContextEngine"]
    assert record["schemaVersion"] == 2 and record["contractVersion"] == 1
    assert record["summaryId"] == result["summaryId"] == record["segmentSummaryId"]
    assert record["reason"] == "threshold"
    assert record["embeddedNodes"] == []
    assert record["sourceEntryIds"][0] == "00000001"
    assert result["compaction"]["firstKeptEntryId"] not in record["sourceEntryIds"]
    details = result["compaction"]["details"]
    assert "src/parser_1.py" in details["modifiedFiles"]
    summary = result["compaction"]["summary"]
    assert summary.startswith("## Objective")
    assert "`src/parser_1.py`" in summary
    node = summary_repo.get_node(engine.store, writer.session_id, result["summaryId"])
    assert node is not None and node.lifecycle == "prepared" and node.pi_entry_id is None
    assert node.source_entry_ids == tuple(record["sourceEntryIds"])


def test_writing_the_entry_commits_it_and_it_becomes_the_active_root(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    result = _compact(engine, writer)
    entry_id = _commit(engine, writer, result)
    node = summary_repo.get_node(engine.store, writer.session_id, result["summaryId"])
    assert node is not None and node.lifecycle == "committed" and node.pi_entry_id == entry_id
    view = engine.summaries(SessionRef(str(writer.path))).to_wire()
    assert view["activeRootId"] == result["summaryId"]
    roles = {n["summaryId"]: n["role"] for n in view["nodes"]}
    assert roles[result["summaryId"]] == "active-root"
    assert "*" in view["tree"]


def test_chained_compactions_build_aggregates_over_previous_root_and_new_segment(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    first = _compact(engine, writer)
    _commit(engine, writer, first)
    for n in range(7, 11):
        writer.turn(n)
    second = _compact(engine, writer)
    assert second["summaryKind"] == "aggregate" and second["graphLevel"] == 1
    record = second["compaction"]["details"]["ds4ContextEngine"]
    assert record["childSummaryIds"] == [first["summaryId"], second["segmentSummaryId"]]
    assert [n["summaryId"] for n in record["embeddedNodes"]] == [second["segmentSummaryId"]]
    assert second["span"]["previousSummaryId"] == first["summaryId"]
    # the second segment's span starts after the first compaction's kept entry
    assert first["compaction"]["firstKeptEntryId"] in record["sourceEntryIds"]
    _commit(engine, writer, second)
    for n in range(11, 15):
        writer.turn(n)
    third = _compact(engine, writer)
    assert third["graphLevel"] == 2
    sources = summary_repo.transitive_sources(engine.store, writer.session_id, third["summaryId"])
    assert sources[0] == "00000001"
    assert set(record["sourceEntryIds"]) <= set(sources)


def test_previous_summary_id_must_be_the_branch_root(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path)
    with pytest.raises(RequestError) as raised:
        _compact(engine, writer, previous_summary_id="s-0000000000000000")
    assert raised.value.field == "previousSummaryId"
    first = _compact(engine, writer)
    _commit(engine, writer, first)
    writer.turn(7)
    writer.turn(8)
    assert _compact(engine, writer, previous_summary_id=first["summaryId"])["graphLevel"] == 1


def test_bad_requests_name_their_field(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path, turns=1)
    with pytest.raises(RequestError) as raised:
        _compact(engine, writer, reason="sometimes")
    assert raised.value.field == "reason"
    with pytest.raises(RequestError) as raised:
        engine.compact(CompactRequest(session=SessionRef(str(tmp_path / "missing.jsonl"))))
    assert raised.value.field == "session.file"
    big = ContextEngine(database_path=tmp_path / "db2" / "ds4.db")  # default keep: 20000 tokens
    try:
        with pytest.raises(RequestError, match="nothing to compact"):
            _compact(big, writer)
    finally:
        big.close()


# ----------------------------------------------------------------- summarizers


def _valid_client_summary(call: SummarizeCall) -> str:
    files = "\n".join(f"- `{p}`" for p in call.modified_files) or "- None"
    sections = {
        "Objective": "- Fix the parser bugs one file at a time.",
        "User Constraints": "- Keep the API stable.",
        "Durable Decisions": "- None",
        "Completed Work": "- Edited `src/parser_1.py` to strip whitespace.",
        "Current State": "- Tests pass.",
        "Files Read": "- None",
        "Files Modified": files,
        "Commands / Tests": "- `pytest tests/test_parser_1.py -q`",
        "Errors / Risks": "- None",
        "Open Questions": "- None",
        "Next Actions": "- Continue with the next file.",
        "Critical Exact Values": "- `return value.strip()`",
    }
    return "\n\n".join(f"## {k}\n{v}" for k, v in sections.items())


def test_a_valid_client_summary_is_used(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path)
    calls: list[SummarizeCall] = []

    def summarizer(call: SummarizeCall) -> SummarizeAnswer:
        calls.append(call)
        return SummarizeAnswer(_valid_client_summary(call), "acme", "m-1")

    result = _compact(engine, writer, summarizer=summarizer)
    assert len(calls) == 1
    call = calls[0]
    assert "<conversation-source>" in call.prompt and call.token_limit == 4000
    assert call.source_hash == result["compaction"]["details"]["ds4ContextEngine"]["sourceHash"]
    assert result["summarizer"] == "client" and result["fallbackReason"] is None
    record = result["compaction"]["details"]["ds4ContextEngine"]
    assert (record["provider"], record["model"]) == ("acme", "m-1")


def test_unusable_client_summaries_fall_back_offline_with_the_reason(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)

    def broken(call: SummarizeCall) -> SummarizeAnswer:
        return SummarizeAnswer("## Objective\n- only one section")

    result = _compact(engine, writer, summarizer=broken)
    assert result["summarizer"] == "offline"
    assert "missing-section" in result["fallbackReason"]
    assert (
        "missing-section" in result["validation"]["issueCodes"]
        or result["validation"]["status"] == "valid"
    )

    def times_out(call: SummarizeCall) -> SummarizeAnswer:
        raise SummarizerUnavailable("the client did not answer ds4/summarize within 300 ms")

    result = _compact(engine, writer, summarizer=times_out)
    assert result["summarizer"] == "offline"
    assert result["fallbackReason"] == "the client did not answer ds4/summarize within 300 ms"
    assert any("offline summary used" in w for w in result["warnings"])


def test_repairable_client_summary_is_repaired(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path)

    def sloppy(call: SummarizeCall) -> SummarizeAnswer:
        text = _valid_client_summary(call)
        text = text.replace("## Files Read\n- None", "## Files Read\n- `src/never_read.py`")
        text = text.replace("- Tests pass.", "- Tests pass with `flag=--made-up`.")
        return SummarizeAnswer(text)

    result = _compact(engine, writer, summarizer=sloppy)
    assert result["summarizer"] == "client"
    assert {"unsupported-read-file", "unsupported-exact-value"} <= set(
        result["validation"]["issueCodes"]
    )
    assert "files-overwritten" in result["validation"]["repairs"]
    summary = result["compaction"]["summary"]
    assert "never_read" not in summary and "--made-up" not in summary


# ----------------------------------------------------------------- atomicity and lifecycle


def test_a_failure_between_node_inserts_leaves_no_partial_batch(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    first = _compact(engine, writer)
    _commit(engine, writer, first)
    writer.turn(7)
    writer.turn(8)
    before = _nodes(engine, writer.session_id)

    def boom(node: SummaryNode) -> None:
        if node.kind == "segment":  # after the first of the two nodes
            raise RuntimeError("injected failure")

    with pytest.raises(RuntimeError, match="injected"):
        engine.compact(
            CompactRequest(session=SessionRef(str(writer.path))), None, after_insert=boom
        )
    assert _nodes(engine, writer.session_id) == before
    # and the engine still compacts afterwards
    assert _compact(engine, writer)["graphLevel"] == 1


def test_notifications_and_leftover_prepared_batches(tmp_path: Path) -> None:
    db = tmp_path / "db" / "ds4.db"
    writer = _session(tmp_path)
    engine = ContextEngine(database_path=db, settings=SMALL)
    one = _compact(engine, writer)
    two = _compact(engine, writer)
    three = _compact(engine, writer)
    assert engine.compact_failed(one["summaryId"], "user cancelled").to_wire()["changed"] == [
        one["summaryId"]
    ]
    assert engine.compact_committed(two["summaryId"]).to_wire()["changed"] == [two["summaryId"]]
    assert engine.compact_failed(two["summaryId"]).to_wire()["changed"] == []  # committed stays
    engine.close()
    restarted = ContextEngine(database_path=db, settings=SMALL)
    try:
        # a plain engine (the CLI) leaves them prepared; a server start marks them failed
        pending = summary_repo.get_node(restarted.store, writer.session_id, three["summaryId"])
        assert pending is not None and pending.lifecycle == "prepared"
        assert restarted.fail_leftover_compactions() == 1
        lifecycles = {
            n.summary_id: n.lifecycle
            for n in summary_repo.session_nodes(restarted.store, writer.session_id)
        }
        assert lifecycles == {
            one["summaryId"]: "failed",
            two["summaryId"]: "committed",
            three["summaryId"]: "failed",
        }
        # the JSONL is canonical: a failed batch whose entry shows up becomes committed
        _commit(restarted, writer, three)
        node = summary_repo.get_node(restarted.store, writer.session_id, three["summaryId"])
        assert node is not None and node.lifecycle == "committed"
    finally:
        restarted.close()


# ----------------------------------------------------------------- branches


def test_branches_compact_separately(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path, turns=3)
    fork = writer.leaf
    for n in range(4, 8):
        writer.turn(n, topic="lexer")
    a = _compact(engine, writer)
    a_entry = _commit(engine, writer, a)
    writer.turn(8, topic="lexer")
    writer.turn(9, topic="lexer")
    a_leaf = writer.leaf
    writer.leaf = fork  # the second branch starts before branch A's compaction
    for n in range(4, 8):
        writer.turn(n, topic="printer")
    b = _compact(engine, writer)
    assert b["summaryKind"] == "segment"  # no aggregate over branch A's root
    assert b["span"]["previousSummaryId"] is None
    _commit(engine, writer, b)
    writer.turn(8, topic="printer")
    writer.turn(9, topic="printer")
    b2 = _compact(engine, writer)
    assert b2["compaction"]["details"]["ds4ContextEngine"]["childSummaryIds"][0] == b["summaryId"]
    a2 = _compact(engine, writer, leaf=a_leaf)
    assert a2["compaction"]["details"]["ds4ContextEngine"]["childSummaryIds"][0] == a["summaryId"]
    view_a = engine.summaries(SessionRef(str(writer.path), a_leaf)).to_wire()
    roles = {n["summaryId"]: n["role"] for n in view_a["nodes"]}
    assert view_a["activeRootId"] == a["summaryId"]
    assert roles[b["summaryId"]] == "alternate-branch"
    assert a_entry  # branch A's entry is on its own path only


# ----------------------------------------------------------------- reconstruction


def test_rebuilding_from_the_jsonl_alone_restores_the_graph_exactly(tmp_path: Path) -> None:
    writer = _session(tmp_path, turns=4)
    db = tmp_path / "db" / "ds4.db"
    engine = ContextEngine(database_path=db, settings=SMALL)
    for n in range(5, 10):
        result = _compact(engine, writer)
        _commit(engine, writer, result)
        writer.turn(n)
        writer.turn(n + 100)
    before = summary_repo.export_graph(engine.store, writer.session_id)
    view_before = engine.summaries(SessionRef(str(writer.path))).to_wire()
    engine.close()
    for path in db.parent.iterdir():
        path.unlink()
    rebuilt = ContextEngine(database_path=db, settings=SMALL)
    try:
        rebuilt.index_session(writer.path)
        assert summary_repo.export_graph(rebuilt.store, writer.session_id) == before
        view_after = rebuilt.summaries(SessionRef(str(writer.path))).to_wire()
        assert view_after["activeRootId"] == view_before["activeRootId"]
        assert view_after["tree"] == view_before["tree"]
        levels = sorted(n["level"] for n in view_after["nodes"])
        assert levels[-1] == 4
    finally:
        rebuilt.close()


def test_pi_native_compaction_fixture_imports_as_a_branch_node(
    engine: ContextEngine, pi_session_copy: Callable[[str], Path]
) -> None:
    path = pi_session_copy("v3-branching-compaction.jsonl")
    engine.index_session(path)
    view = engine.summaries(SessionRef(str(path))).to_wire()
    session_id = view["sessionId"]
    node = summary_repo.get_node(engine.store, session_id, pi_summary_id("e5"))
    assert node is not None
    assert node.kind == "branch" and node.validation_status == "warning"
    assert PI_SUMMARY_ISSUE in node.validation_issue_codes
    assert node.first_kept_entry_id == "e3" and node.tokens_before == 100
    assert node.lifecycle == "committed" and node.pi_entry_id == "e5"


def test_v1_compaction_with_first_kept_entry_index(engine: ContextEngine, tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    lines: list[dict[str, Any]] = [
        {
            "type": "session",
            "id": "v1-session",
            "timestamp": "2025-05-01T10:00:00.000Z",
            "cwd": "/w",
        },
    ]
    for n in range(6):
        lines.append(
            {
                "type": "message",
                "timestamp": "2025-05-01T10:00:01.000Z",
                "message": {"role": "user", "content": f"question {n}", "timestamp": 1},
            }
        )
        lines.append(
            {
                "type": "message",
                "timestamp": "2025-05-01T10:00:02.000Z",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "text", "text": f"answer {n}"}],
                    "timestamp": 2,
                },
            }
        )
    # header = index 0, so index 9 is the 9th entry: v1-9 (docs/reference.md §P7)
    lines.append(
        {
            "type": "compaction",
            "timestamp": "2025-05-01T10:00:03.000Z",
            "summary": "Old summary.",
            "firstKeptEntryIndex": 9,
            "tokensBefore": 5000,
        }
    )
    lines.append(
        {
            "type": "message",
            "timestamp": "2025-05-01T10:00:04.000Z",
            "message": {"role": "user", "content": "go on", "timestamp": 3},
        }
    )
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    view = engine.summaries(SessionRef(str(path))).to_wire()
    (node,) = summary_repo.session_nodes(engine.store, "v1-session")
    assert node.kind == "branch" and node.first_kept_entry_id == "v1-9"
    assert view["activeRootId"] == node.summary_id
    plan = engine.plan(
        PlanRequest(session=SessionRef(str(path)), request="next", model=MODEL)
    ).to_wire()
    stored = engine.manifest(ManifestRequest(id=plan["manifestId"], view="full")).to_wire()
    assert stored["summaryIds"] == [node.summary_id]


def test_manifest_records_the_active_root_summary_id(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path)
    result = _compact(engine, writer)
    _commit(engine, writer, result)
    writer.turn(20)
    plan = engine.plan(
        PlanRequest(session=SessionRef(str(writer.path)), request="continue", model=MODEL)
    ).to_wire()
    stored = engine.manifest(ManifestRequest(id=plan["manifestId"], view="full")).to_wire()
    assert stored["summaryIds"] == [result["summaryId"]]
    roles = [m.get("role") for m in plan["messages"]]
    assert "compactionSummary" in roles


def test_a_malformed_ds4_record_never_breaks_the_sync(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path, turns=2)
    writer.append(
        "compaction",
        summary="## Objective\n- x",
        firstKeptEntryId="00000009",
        tokensBefore=10,
        details={
            "ds4ContextEngine": {"schemaVersion": 2, "summaryId": 42, "embeddedNodes": "nope"}
        },
    )
    writer.turn(3)
    result = engine.index_session(writer.path).to_wire()
    assert result["entriesTotal"] > 0
    view = engine.summaries(SessionRef(str(writer.path))).to_wire()
    assert len(view["nodes"]) == 1


def test_lone_surrogates_in_the_transcript_become_replacement_characters(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path, turns=2)
    line = (
        '{"type":"message","id":"0000ffff","parentId":"PARENT",'
        '"timestamp":"2026-11-01T11:00:00.000Z",'
        '"message":{"role":"user","content":"odd `bad\\ud800value` here","timestamp":9}}\n'
    )
    with writer.path.open("a", encoding="utf-8") as handle:  # JSON allows a lone \ud800
        handle.write(line.replace("PARENT", str(writer.leaf)))
    writer.leaf = "0000ffff"
    writer.turn(3)
    writer.turn(4)

    def echo(call: SummarizeCall) -> SummarizeAnswer:
        return SummarizeAnswer(
            _valid_client_summary(call).replace("- None", "- `bad\ud800value`", 1)
        )

    result = _compact(engine, writer, summarizer=echo)
    assert "bad\ufffdvalue" in result["compaction"]["summary"]
    node = summary_repo.get_node(engine.store, writer.session_id, result["summaryId"])
    assert node is not None and "\ud800" not in node.content
    assert result["compaction"]["summary"].encode("utf-8")  # encodable: no lone surrogate left


# ----------------------------------------------------------------- forked sessions


def _fork(writer: SessionWriter, name: str, session_id: str) -> SessionWriter:
    """Session B as Pi's `/fork` writes it: a header with a new id and `parentSession`, then
    a copy of A's entries (ids, compaction entries and their summary ids included)."""
    fork = SessionWriter(writer.path.parent / name, session_id=session_id)
    lines = writer.path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = {**json.loads(lines[0]), "id": session_id, "parentSession": str(writer.path)}
    fork.path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    fork._next, fork._minute, fork.leaf = writer._next, writer._minute, writer.leaf
    return fork


def test_a_forked_session_holds_its_own_complete_graph(tmp_path: Path) -> None:
    db = tmp_path / "db" / "ds4.db"
    engine = ContextEngine(database_path=db, settings=SMALL)
    a = _session(tmp_path)
    first = _compact(engine, a)
    _commit(engine, a, first)
    for n in range(7, 11):
        a.turn(n)
    second = _compact(engine, a)
    _commit(engine, a, second)
    b = _fork(a, "fork.jsonl", "0a1b2c3d-fork")
    engine.index_session(b.path)
    graph_ids = {first["summaryId"], second["segmentSummaryId"], second["summaryId"]}
    nodes_a, nodes_b = _nodes(engine, a.session_id), _nodes(engine, b.session_id)
    assert set(nodes_a) == set(nodes_b) == graph_ids
    assert {n.session_id for n in nodes_b.values()} == {b.session_id}
    assert all(n.lifecycle == "committed" for n in nodes_b.values())
    assert nodes_b[second["summaryId"]].child_ids == nodes_a[second["summaryId"]].child_ids
    graph_a = summary_repo.export_graph(engine.store, a.session_id)

    # B compacts further: its aggregate extends B's own previous root, A is left alone
    for n in range(11, 15):
        b.turn(n, topic="fork")
    third = _compact(engine, b)
    assert third["summaryKind"] == "aggregate"
    assert third["span"]["previousSummaryId"] == second["summaryId"]
    record = third["compaction"]["details"]["ds4ContextEngine"]
    assert record["childSummaryIds"] == [second["summaryId"], third["segmentSummaryId"]]
    root = summary_repo.get_node(engine.store, b.session_id, third["summaryId"])
    assert root is not None and root.lifecycle == "prepared"
    assert summary_repo.get_node(engine.store, a.session_id, third["summaryId"]) is None
    sources_b = summary_repo.transitive_sources(engine.store, b.session_id, third["summaryId"])
    sources_a = summary_repo.transitive_sources(engine.store, a.session_id, second["summaryId"])
    assert sources_b[: len(sources_a)] == sources_a and len(sources_b) > len(sources_a)
    _commit(engine, b, third)
    assert set(_nodes(engine, b.session_id)) == graph_ids | {
        third["summaryId"],
        third["segmentSummaryId"],
    }
    assert summary_repo.export_graph(engine.store, a.session_id) == graph_a
    view_b = engine.summaries(SessionRef(str(b.path))).to_wire()
    assert view_b["activeRootId"] == third["summaryId"]
    assert {n["summaryId"] for n in view_b["nodes"]} == set(_nodes(engine, b.session_id))
    view_a = engine.summaries(SessionRef(str(a.path))).to_wire()
    assert view_a["activeRootId"] == second["summaryId"]
    assert {n["summaryId"] for n in view_a["nodes"]} == graph_ids
    graph_b = summary_repo.export_graph(engine.store, b.session_id)
    engine.close()

    # the fork's graph is rebuilt from its own JSONL alone
    for path in db.parent.iterdir():
        path.unlink()
    rebuilt = ContextEngine(database_path=db, settings=SMALL)
    try:
        rebuilt.index_session(b.path)
        assert summary_repo.export_graph(rebuilt.store, b.session_id) == graph_b
        assert summary_repo.session_nodes(rebuilt.store, a.session_id) == []
        rebuilt.index_session(a.path)
        assert summary_repo.export_graph(rebuilt.store, a.session_id) == graph_a
        assert summary_repo.export_graph(rebuilt.store, b.session_id) == graph_b
    finally:
        rebuilt.close()


def test_a_fork_of_a_session_with_a_pi_native_summary_imports_the_aggregate_over_it(
    engine: ContextEngine, tmp_path: Path
) -> None:
    a = _session(tmp_path, turns=4)
    kept = a.turn(5)
    a.turn(6)
    a.append(
        "compaction",
        summary="## Goal\nPi's own summary of steps 1-4.",
        firstKeptEntryId=kept,
        tokensBefore=4000,
    )
    for n in range(7, 11):
        a.turn(n)
    result = _compact(engine, a)
    assert result["summaryKind"] == "aggregate"
    branch_id = result["compaction"]["details"]["ds4ContextEngine"]["childSummaryIds"][0]
    assert _nodes(engine, a.session_id)[branch_id].kind == "branch"
    _commit(engine, a, result)
    b = _fork(a, "fork.jsonl", "0a1b2c3d-fork")
    engine.index_session(b.path)
    nodes_b = _nodes(engine, b.session_id)
    assert set(nodes_b) == set(_nodes(engine, a.session_id))
    assert nodes_b[result["summaryId"]].child_ids[0] == branch_id
    assert nodes_b[branch_id].kind == "branch" and nodes_b[branch_id].pi_entry_id is not None
    b.turn(11, topic="fork")
    b.turn(12, topic="fork")
    assert _compact(engine, b)["span"]["previousSummaryId"] == result["summaryId"]


def test_notifications_apply_to_the_session_where_the_batch_is_pending(
    engine: ContextEngine, tmp_path: Path
) -> None:
    a = _session(tmp_path)
    first = _compact(engine, a)
    entry_id = a.compaction(first["compaction"])  # written, but A is not synced yet
    b = _fork(a, "fork.jsonl", "0a1b2c3d-fork")
    engine.index_session(b.path)  # B imports its copy, committed
    assert _nodes(engine, b.session_id)[first["summaryId"]].lifecycle == "committed"
    assert _nodes(engine, a.session_id)[first["summaryId"]].lifecycle == "prepared"
    # no session named: applied where the batch is pending (A), B's copy is not touched
    assert engine.compact_failed(first["summaryId"], "late").to_wire() == {
        "summaryId": first["summaryId"],
        "sessions": [a.session_id],
        "changed": [first["summaryId"]],
    }
    assert _nodes(engine, b.session_id)[first["summaryId"]].lifecycle == "committed"
    committed = engine.compact_committed(first["summaryId"], entry_id).to_wire()
    assert committed["sessions"] == [a.session_id]
    assert committed["changed"] == [first["summaryId"]]
    node = summary_repo.get_node(engine.store, a.session_id, first["summaryId"])
    assert node is not None and node.lifecycle == "committed" and node.pi_entry_id == entry_id
    assert engine.compact_committed(first["summaryId"]).to_wire()["changed"] == []

    # a session named: only that session's nodes change
    for n in range(7, 11):
        b.turn(n, topic="fork")
    second = _compact(engine, b)
    ids = [second["segmentSummaryId"], second["summaryId"]]
    root = second["summaryId"]
    in_a, in_b = SessionRef(str(a.path)), SessionRef(str(b.path), b.leaf)
    assert (
        engine.compact_failed(root, session=in_a).to_wire()["changed"] == []
    )  # A does not hold it
    assert engine.compact_failed(root, session=in_b).to_wire() == {
        "summaryId": root,
        "sessions": [b.session_id],
        "changed": ids,
    }
    assert engine.compact_committed(root, "feedbeef", in_b).to_wire()["changed"] == ids
    with pytest.raises(RequestError) as raised:
        engine.compact_committed(root, session=SessionRef(str(tmp_path / "no")))
    assert raised.value.field == "session.file"


def test_the_session_cache_follows_appends_like_a_fresh_read(tmp_path: Path) -> None:
    """The cached parse and walked paths are extended on append (read_more, PathIndex); every
    answer equals what a new engine reading the file from scratch gives."""
    writer = _session(tmp_path, turns=2)
    warm = ContextEngine(database_path=tmp_path / "warm.db", settings=SMALL)

    def messages(engine: ContextEngine, leaf: str | None = None) -> list[Any]:
        plan = engine.plan(
            PlanRequest(session=SessionRef(str(writer.path), leaf), request="go", model=MODEL)
        ).to_wire()
        return plan["messages"][:-1]  # the appended request carries the time of the call

    try:
        fork = writer.leaf
        for step in range(4):
            messages(warm)
            writer.turn(10 + step)
            if step == 1:  # branch back to an earlier leaf
                writer.leaf = fork
            if step == 2:  # a torn final line, completed afterwards
                with writer.path.open("a", encoding="utf-8") as handle:
                    handle.write(f'{{"type":"message","id":"torn0001","parentId":"{writer.leaf}",')
                messages(warm)
                with writer.path.open("a", encoding="utf-8") as handle:
                    handle.write(
                        '"timestamp":"2026-11-01T12:00:00.000Z","message":{"role":"user",'
                        '"content":"completed","timestamp":5}}\n'
                    )
                writer.leaf = "torn0001"
            fresh = ContextEngine(database_path=tmp_path / f"fresh{step}.db", settings=SMALL)
            try:
                assert messages(warm) == messages(fresh)
                assert messages(warm, fork) == messages(fresh, fork)
            finally:
                fresh.close()
        result = _compact(warm, writer)
        assert result["span"]["messageCount"] > 0
    finally:
        warm.close()


# ----------------------------------------------------------------- entries ds4 cannot trust


def _record(entry: dict[str, Any]) -> dict[str, Any]:
    return entry["details"]["ds4ContextEngine"]


def test_keep_recent_tokens_zero_keeps_only_the_last_message(tmp_path: Path) -> None:
    writer = _session(tmp_path, turns=2)
    engine = ContextEngine(
        database_path=tmp_path / "z.db", settings={"compaction": {"keepRecentTokens": 0}}
    )
    try:
        result = _compact(engine, writer)
        assert result["compaction"]["firstKeptEntryId"] == writer.leaf
        assert result["span"]["keptTokens"] > 0
    finally:
        engine.close()


def test_a_hand_edited_summary_is_imported_as_unverified(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    result = _compact(engine, writer)
    compaction = dict(result["compaction"])
    compaction["summary"] = "## Objective\n- rewritten by hand \ud800"
    entry_id = writer.compaction(compaction)
    view = engine.summaries(SessionRef(str(writer.path))).to_wire()
    root = summary_repo.node_for_entry(engine.store, writer.session_id, entry_id)
    assert root is not None and root.kind == "branch"
    assert root.metadata.get("editedDs4Summary") is True
    assert root.content.endswith("\ufffd")  # the lone surrogate could not be stored as is
    assert view["activeRootId"] == root.summary_id
    writer.turn(30)
    writer.turn(31)
    nxt = _compact(engine, writer)
    assert nxt["compaction"]["details"]["ds4ContextEngine"]["childSummaryIds"][0] == root.summary_id


def test_a_record_whose_children_exist_nowhere_is_imported_as_unverified(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path)
    result = _compact(engine, writer)
    compaction = json.loads(json.dumps(result["compaction"]))
    record = _record(compaction)
    record.update(
        summaryKind="aggregate",
        graphLevel=1,
        childSummaryIds=["s-aaaaaaaaaaaaaaaa", "s-bbbbbbbbbbbbbbbb"],
        summaryId="s-cccccccccccccccc",
    )
    entry_id = writer.compaction(compaction)
    engine.summaries(SessionRef(str(writer.path)))
    root = summary_repo.node_for_entry(engine.store, writer.session_id, entry_id)
    assert root is not None and root.kind == "branch"
    assert "untrustedDs4Record" in root.metadata
    writer.turn(30)
    writer.turn(31)
    assert _compact(engine, writer)["summaryKind"] == "aggregate"


@pytest.mark.parametrize("change", ["level", "time"])
def test_a_record_breaking_the_graph_rules_is_imported_as_unverified(
    engine: ContextEngine, tmp_path: Path, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    """An aggregate whose level is not above its children's, or a record reusing a stored
    node id with another time, is imported as a Pi-native node, with a warning in the log."""
    writer = _session(tmp_path)
    first = _compact(engine, writer)
    writer.compaction(first["compaction"])
    writer.turn(30)
    writer.turn(31)
    second = _compact(engine, writer)
    assert second["summaryKind"] == "aggregate"
    compaction = json.loads(json.dumps(second["compaction"]))
    record = _record(compaction)
    if change == "level":
        record["graphLevel"] = 0  # its children are at level 0
    else:
        record["summaryId"] = _record(first["compaction"])["summaryId"]
        record.update({k: v for k, v in _record(first["compaction"]).items() if k != "generatedAt"})
        compaction["summary"] = first["compaction"]["summary"]
        record["generatedAt"] = "2020-01-01T00:00:00.000Z"
    with caplog.at_level(logging.WARNING, logger="ds4_core"):
        entry_id = writer.compaction(compaction)
        engine.summaries(SessionRef(str(writer.path)))
    root = summary_repo.node_for_entry(engine.store, writer.session_id, entry_id)
    assert root is not None and root.kind == "branch"
    assert "untrustedDs4Record" in root.metadata
    assert "compaction entry imported unverified" in caplog.text


def test_a_summary_id_reused_with_another_text_keeps_the_text_the_model_saw(
    engine: ContextEngine, tmp_path: Path
) -> None:
    writer = _session(tmp_path, turns=3)
    fork = writer.leaf
    for n in range(4, 8):
        writer.turn(n)
    result = _compact(engine, writer)
    writer.compaction(result["compaction"])
    writer.leaf = fork
    for n in range(4, 8):
        writer.turn(n, topic="other")
    copied = json.loads(json.dumps(result["compaction"]))
    copied["summary"] = "## Objective\n- other branch"
    del _record(copied)["contentHash"]  # as a writer that knows nothing of it would
    other_entry = writer.compaction(copied)
    view = engine.summaries(SessionRef(str(writer.path))).to_wire()
    active = summary_repo.get_node(engine.store, writer.session_id, view["activeRootId"])
    assert active is not None and active.content == "## Objective\n- other branch"
    assert active.pi_entry_id == other_entry and active.kind == "branch"


def test_plans_survive_lone_surrogates_in_messages(engine: ContextEngine, tmp_path: Path) -> None:
    writer = _session(tmp_path, turns=1)
    writer.user("odd \ud800 text")
    plan = engine.plan(
        PlanRequest(session=SessionRef(str(writer.path)), request="next", model=MODEL)
    ).to_wire()
    assert plan["mode"] == "managed"


def test_a_large_span_prompt_drops_tool_output_until_it_fits(tmp_path: Path) -> None:
    """The model still gets a large span: tool outputs are cut (4,000, 1,000, 250, 0 characters)
    until the prompt fits compaction.maxRequestInputTokens; only then does ds4 go offline."""
    writer = SessionWriter(tmp_path / "big.jsonl")
    for n in range(1, 9):
        writer.user(f"step {n}: read the log")
        writer.assistant("reading", [(f"c{n}", "read", {"path": f"logs/{n}.txt"})])
        writer.tool_result(f"c{n}", "read", f"line {n} " * 2000)  # ~14,000 characters each
        writer.assistant(f"done {n}")
    prompts: list[str] = []

    def summarizer(call: SummarizeCall) -> SummarizeAnswer:
        prompts.append(call.prompt)
        raise SummarizerUnavailable("recorded")

    def compact(limit: int) -> dict[str, Any]:
        engine = ContextEngine(
            database_path=tmp_path / f"{limit}.db",
            settings={"compaction": {"keepRecentTokens": 10, "maxRequestInputTokens": limit}},
        )
        try:
            return _compact(engine, writer, summarizer=summarizer)
        finally:
            engine.close()

    compact(64000)
    assert "characters omitted]" in prompts[-1] and "line 1 line 1" in prompts[-1]
    compact(1000)  # (about 8,800 tokens at 4,000 characters; 2,800 at 1,000; 1,300 at 250)
    assert "line 1 line 1" not in prompts[-1]  # tool output left out entirely
    assert "[… " in prompts[-1] and "logs/1.txt" in prompts[-1]
    count = len(prompts)
    result = compact(700)
    assert len(prompts) == count  # not even the smallest prompt fits: nobody was asked
    assert "even without tool output" in result["fallbackReason"]


@pytest.mark.parametrize(
    "oddity",
    ["timestamp out of range", "deeply nested details", "huge tokensBefore", "reused child"],
)
def test_an_odd_compaction_entry_never_blocks_the_session(
    engine: ContextEngine, tmp_path: Path, oddity: str
) -> None:
    """The index, plans, summaries and the next compaction all still work."""
    writer = _session(tmp_path)
    result = _compact(engine, writer)
    compaction = json.loads(json.dumps(result["compaction"]))
    timestamp = None
    if oddity == "timestamp out of range":
        timestamp = "0001-01-01T00:00:00+01:00"
        _record(compaction)["generatedAt"] = timestamp
    elif oddity == "deeply nested details":
        compaction["details"]["extra"] = "DEEP"  # replaced in the line below: 800 levels
    elif oddity == "huge tokensBefore":
        compaction["tokensBefore"] = 10**20
        _record(compaction)["tokensBefore"] = 10**20
    else:
        _record(compaction)["childSummaryIds"] = [result["summaryId"]]
    entry_id = writer.compaction(compaction)
    if oddity == "deeply nested details":  # deeper than a recursive copy could go
        text = writer.path.read_text(encoding="utf-8")
        writer.path.write_text(
            text.replace('"DEEP"', '{"x":[' * 470 + "{}" + "]}" * 470), encoding="utf-8"
        )
    if timestamp is not None:
        lines = writer.path.read_text(encoding="utf-8").splitlines()
        record = json.loads(lines[-1])
        record["timestamp"] = timestamp
        lines[-1] = json.dumps(record)
        writer.path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    indexed = engine.index_session(writer.path).to_wire()
    assert indexed["entriesTotal"] >= 49
    view = engine.summaries(SessionRef(str(writer.path))).to_wire()
    assert view["activeRootId"] is not None
    plan = engine.plan(
        PlanRequest(session=SessionRef(str(writer.path)), request="next", model=MODEL)
    ).to_wire()
    assert plan["mode"] == "managed"
    assert summary_repo.node_for_entry(engine.store, writer.session_id, entry_id) is not None
    writer.turn(40)
    writer.turn(41)
    assert _compact(engine, writer)["summaryKind"] == "aggregate"
