"""The `details.ds4ContextEngine` record <-> summary nodes (docs/compaction.md "Details metadata
(schema 2)"; docs/reference.md §3.13): the database must be rebuildable from the JSONL alone."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ds4_core.compaction.nodes import PI_SUMMARY_ISSUE, SummaryNode, pi_summary_id
from ds4_core.compaction.records import (
    ROOT_KEYS,
    compaction_details,
    details_record,
    nodes_from_compaction_entry,
    normalize_timestamp,
)
from ds4_core.sessions.reader import SessionEntry, read_all
from ds4_core.store import open_store
from ds4_core.store import summaries as repo
from ds4_core.tokens import sha256_hex

SESSION = "0193-session"
DOC_KEYS = [
    "schemaVersion",
    "contractVersion",
    "summaryId",
    "summaryKind",
    "graphLevel",
    "sourceHash",
    "sourceEntryIds",
    "validationStatus",
    "validationIssueCodes",
    "firstKeptEntryId",
    "tokensBefore",
    "reason",
    "isSplitTurn",
    "messageCount",
    "generatedAt",
    "provider",
    "model",
    "childSummaryIds",
    "segmentSummaryId",
    "readFiles",
    "modifiedFiles",
    "contentHash",
]
EMBEDDED_DOC_KEYS = [
    "summaryId",
    "summaryKind",
    "graphLevel",
    "content",
    "sourceHash",
    "sourceEntryIds",
    "validationStatus",
    "validationIssueCodes",
    "childSummaryIds",
    "generatedAt",
    "provider",
    "model",
    "readFiles",
    "modifiedFiles",
]


def entry(
    data: dict[str, Any],
    entry_id: str = "c0ffee01",
    timestamp: str | None = "2026-11-30T12:00:00.000Z",
    entry_type: str = "compaction",
) -> SessionEntry:
    return SessionEntry(
        entry_id=entry_id,
        parent_id="p",
        entry_type=entry_type,
        timestamp=timestamp,
        data={"type": entry_type, "id": entry_id, **data},
        content_hash="0" * 64,
        line_number=2,
        start_offset=0,
        seq=0,
    )


def engine_operation(
    index: int,
    previous_root: SummaryNode | None,
    *,
    fallback_reason: str | None = None,
    is_split_turn: bool = False,
) -> tuple[SummaryNode, list[SummaryNode], dict[str, Any]]:
    """(root, embedded, details kwargs) shaped like `compaction.service` builds them."""
    created = f"2026-11-30T12:{index:02d}:00.000Z"
    span = (f"{index:04d}0001", f"{index:04d}0002")
    seg_id = f"s-{index:016x}"
    metadata: dict[str, Any] = {
        "readFiles": [f"src/read_{index}.py"],
        "modifiedFiles": [f"src/mod_{index}.py"],
        "isSplitTurn": is_split_turn,
        "messageCount": 7 + index,
        "summarizer": "offline",
        "repairs": ["files-overwritten"],
    }
    if fallback_reason is not None:
        metadata["fallbackReason"] = fallback_reason
    segment = SummaryNode(
        summary_id=seg_id,
        session_id=SESSION,
        kind="segment",
        content=f"## Objective\n- step {index} ✓",
        source_hash=sha256_hex(f"seg{index}"),
        graph_level=0,
        created_at=created,
        validation_status="valid",
        validation_issue_codes=("text-outside-bullets",),
        provider="ds4",
        model="offline-v1",
        first_kept_entry_id=f"{index:04d}0003",
        tokens_before=1000 * (index + 1),
        reason="threshold",
        operation_id=seg_id,
        source_entry_ids=span,
        metadata=metadata,
    )
    kwargs = {
        "is_split_turn": is_split_turn,
        "message_count": 7 + index,
        "source_entry_ids": span,
        "segment_summary_id": seg_id,
    }
    if previous_root is None:
        return segment, [], kwargs
    agg_id = f"s-a{index:015x}"
    root = SummaryNode(
        summary_id=agg_id,
        session_id=SESSION,
        kind="aggregate",
        content=f"## Objective\n- merged up to {index}",
        source_hash=sha256_hex(f"agg{index}"),
        graph_level=max(previous_root.graph_level, 0) + 1,
        created_at=created,
        validation_status="valid",
        provider="ds4",
        model="merge-v1",
        first_kept_entry_id=segment.first_kept_entry_id,
        tokens_before=segment.tokens_before,
        reason="threshold",
        operation_id=agg_id,
        child_ids=(previous_root.summary_id, seg_id),
        metadata={"readFiles": ["src/a.py"], "modifiedFiles": []},
    )
    return root, [replace(segment, operation_id=agg_id)], kwargs


def written_entry(
    root: SummaryNode, embedded: list[SummaryNode], kwargs: dict[str, Any], entry_id: str
) -> SessionEntry:
    """The compaction entry a client writes, as read back from the JSONL (JSON round trip)."""
    data = {
        "summary": root.content,
        "firstKeptEntryId": root.first_kept_entry_id,
        "tokensBefore": root.tokens_before,
        "details": compaction_details(root, embedded, **kwargs),
    }
    return entry(json.loads(json.dumps(data)), entry_id=entry_id)


def committed(nodes: list[SummaryNode], entry_id: str) -> list[SummaryNode]:
    *inner, root = nodes
    return [replace(n, lifecycle="committed") for n in inner] + [
        replace(root, lifecycle="committed", pi_entry_id=entry_id)
    ]


# --- writing ---------------------------------------------------------------------------------


def test_engine_records_use_the_documented_keys_only() -> None:
    first, _, kwargs = engine_operation(0, None, fallback_reason="no model summarizer")
    details = compaction_details(first, [], **kwargs)
    assert details["readFiles"] == ["src/read_0.py"]
    assert details["modifiedFiles"] == ["src/mod_0.py"]
    record = details["ds4ContextEngine"]
    extras = ["summarizer", "repairs", "fallbackReason"]
    assert list(record) == DOC_KEYS + extras + ["embeddedNodes"]
    assert record["schemaVersion"] == 2 and record["contractVersion"] == 1
    assert record["embeddedNodes"] == []
    root, embedded, kwargs = engine_operation(1, first)
    record = details_record(root, embedded, **kwargs)
    assert list(record) == DOC_KEYS + ["embeddedNodes"]
    assert record["childSummaryIds"] == [first.summary_id, embedded[0].summary_id]
    assert record["sourceEntryIds"] == ["00010001", "00010002"]
    (item,) = record["embeddedNodes"]
    assert list(item) == EMBEDDED_DOC_KEYS + ["isSplitTurn", "messageCount", *extras[:2]]
    assert item["content"] == embedded[0].content
    assert json.loads(json.dumps(record)) == record


def test_unserializable_metadata_is_refused() -> None:
    root, _, kwargs = engine_operation(0, None)
    with pytest.raises(ValueError, match="JSON"):
        details_record(replace(root, metadata={"x": object()}), [], **kwargs)


# --- exact round trip ------------------------------------------------------------------------


def round_trip_cases() -> list[tuple[str, SummaryNode, list[SummaryNode], dict[str, Any]]]:
    first, none, first_kwargs = engine_operation(0, None, fallback_reason="timeout")
    second, embedded, kwargs = engine_operation(1, first, is_split_turn=True)
    odd_root = replace(
        second,
        metadata={"summaryId": "collides", "metadata": 1, "readFiles": ["x", 3]},
        source_entry_ids=("odd",),
        operation_id="elsewhere",
    )
    odd_embedded = [
        replace(
            embedded[0],
            first_kept_entry_id=None,
            tokens_before=None,
            reason="manual",
            metadata={},
            created_at="",
        )
    ]
    return [
        ("segment root", first, none, first_kwargs),
        ("aggregate root over previous root and segment", second, embedded, kwargs),
        ("fields the documented keys cannot carry", odd_root, odd_embedded, kwargs),
        ("segment root without inventories", replace(first, metadata={}), [], first_kwargs),
    ]


@pytest.mark.parametrize(
    ("root", "embedded", "kwargs"),
    [case[1:] for case in round_trip_cases()],
    ids=[case[0] for case in round_trip_cases()],
)
def test_reading_the_written_entry_gives_the_nodes_back_exactly(
    root: SummaryNode, embedded: list[SummaryNode], kwargs: dict[str, Any]
) -> None:
    read = nodes_from_compaction_entry(SESSION, written_entry(root, embedded, kwargs, "e1"))
    assert read == committed([*embedded, root], "e1")


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
TEXT = st.text(min_size=1, max_size=20)
OPTIONAL_TEXT = st.none() | st.text(max_size=10)


@st.composite
def operations(draw: st.DrawFn) -> tuple[SummaryNode, list[SummaryNode], dict[str, Any]]:
    def node(kind: str, summary_id: str, children: tuple[str, ...]) -> SummaryNode:
        inventories: st.SearchStrategy[dict[str, Any]] = st.fixed_dictionaries(
            {
                "readFiles": st.lists(st.text(max_size=10), max_size=3),
                "modifiedFiles": st.lists(st.text(max_size=10), max_size=3),
            }
        )
        anything: st.SearchStrategy[dict[str, Any]] = st.dictionaries(
            st.text(max_size=12), JSON_VALUES, max_size=4
        )
        metadata = draw(inventories | anything)
        metadata.update(draw(st.dictionaries(st.text(max_size=12), JSON_VALUES, max_size=3)))
        return SummaryNode(
            summary_id=summary_id,
            session_id=SESSION,
            kind=kind,  # type: ignore[arg-type]
            content=draw(TEXT),
            source_hash=draw(st.text(max_size=64)),
            graph_level=draw(st.integers(0, 10**6)),
            created_at=draw(st.text(max_size=30)),
            validation_status=draw(st.sampled_from(["valid", "warning", "invalid"])),
            validation_issue_codes=tuple(draw(st.lists(st.text(max_size=12), max_size=3))),
            provider=draw(OPTIONAL_TEXT),
            model=draw(OPTIONAL_TEXT),
            first_kept_entry_id=draw(OPTIONAL_TEXT),
            tokens_before=draw(st.none() | st.integers(0, 10**9)),
            reason=draw(st.none() | st.sampled_from(["manual", "threshold", "overflow"])),
            operation_id=draw(st.just(summary_id) | st.text(max_size=8)),
            source_entry_ids=tuple(draw(st.lists(st.text(max_size=8), max_size=4))),
            child_ids=children,
            metadata=metadata,
        )

    if draw(st.booleans()):
        root = node("segment", "s-root", ())
        span = draw(st.just(root.source_entry_ids) | st.lists(st.text(max_size=8), max_size=3))
        kwargs: dict[str, Any] = {
            "source_entry_ids": tuple(span),
            "segment_summary_id": draw(TEXT),
        }
        embedded: list[SummaryNode] = []
    else:
        seg = node("segment", "s-seg", ())
        root = node("aggregate", "s-agg", ("s-prev", "s-seg"))
        root = replace(root, source_entry_ids=draw(st.just(()) | st.just(("x",))))
        kwargs = {"source_entry_ids": seg.source_entry_ids, "segment_summary_id": "s-seg"}
        embedded = [seg]
    kwargs["is_split_turn"] = draw(st.booleans())
    kwargs["message_count"] = draw(st.integers(0, 5000))
    return root, embedded, kwargs


@settings(max_examples=300, deadline=None)
@given(operations())
def test_any_operation_round_trips_exactly_through_the_jsonl(
    operation: tuple[SummaryNode, list[SummaryNode], dict[str, Any]],
) -> None:
    root, embedded, kwargs = operation
    read = nodes_from_compaction_entry(SESSION, written_entry(root, embedded, kwargs, "e9"))
    assert read == committed([*embedded, root], "e9")


def test_rebuilding_the_database_from_the_jsonl_restores_the_graph_exactly(
    tmp_path: Path,
) -> None:
    entries: list[SessionEntry] = []
    with open_store(tmp_path / "live.db") as live:
        previous: SummaryNode | None = None
        for index in range(6):
            root, embedded, kwargs = engine_operation(
                index, previous, fallback_reason="timeout" if index % 2 else None
            )
            repo.insert_prepared(live, [*embedded, root])
            written = written_entry(root, embedded, kwargs, f"e{index:07d}")
            repo.mark_committed(live, SESSION, root.summary_id, written.entry_id)
            entries.append(written)
            previous = root
        native = entry({"summary": "Pi's own summary", "tokensBefore": 5}, entry_id="native01")
        entries.append(native)
        repo.import_committed(live, nodes_from_compaction_entry(SESSION, native))
        # a prepared operation never written to the file is not part of the committed graph
        extra_root, extra_embedded, _ = engine_operation(6, previous)
        repo.insert_prepared(live, [*extra_embedded, extra_root])
        expected = repo.export_graph(live, SESSION)
    assert len(expected["nodes"]) == 12
    with open_store(tmp_path / "rebuilt.db") as rebuilt:
        for written in entries:
            repo.import_committed(rebuilt, nodes_from_compaction_entry(SESSION, written))
        assert repo.export_graph(rebuilt, SESSION) == expected
        for written in entries:  # every sync re-imports: nothing changes
            assert (
                repo.import_committed(rebuilt, nodes_from_compaction_entry(SESSION, written)) == []
            )


# --- legacy and Pi-native records ------------------------------------------------------------


def test_a_pi_native_compaction_imports_as_an_unverified_branch_node() -> None:
    data = {
        "summary": "## Goal\n- ship",
        "firstKeptEntryId": "a1b2c3d4",
        "tokensBefore": 50000,
        "details": {"readFiles": ["a.ts"], "modifiedFiles": ["b.ts", 3]},
    }
    (node,) = nodes_from_compaction_entry(SESSION, entry(data, timestamp="2026-01-01T00:10:00Z"))
    assert node == SummaryNode(
        summary_id=pi_summary_id("c0ffee01"),
        session_id=SESSION,
        kind="branch",
        content="## Goal\n- ship",
        source_hash=sha256_hex("## Goal\n- ship"),
        graph_level=0,
        created_at="2026-01-01T00:10:00.000Z",
        validation_status="warning",
        validation_issue_codes=(PI_SUMMARY_ISSUE,),
        first_kept_entry_id="a1b2c3d4",
        tokens_before=50000,
        lifecycle="committed",
        pi_entry_id="c0ffee01",
        operation_id=pi_summary_id("c0ffee01"),
        metadata={"readFiles": ["a.ts"]},
    )


def test_real_pi_session_compactions_import_as_branch_nodes(pi_sessions_dir: Path) -> None:
    session = read_all(pi_sessions_dir / "v3-branching-compaction.jsonl")
    assert session.header is not None
    nodes = [
        n
        for e in session.entries
        for n in nodes_from_compaction_entry(session.header.session_id, e)
    ]
    assert [(n.kind, n.pi_entry_id, n.first_kept_entry_id, n.tokens_before) for n in nodes] == [
        ("branch", "e5", "e3", 100)
    ]
    assert nodes[0].created_at == "2026-01-01T00:00:05.000Z"


def test_a_v1_file_compaction_imports_with_its_migrated_first_kept_entry(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    records = [
        {"type": "session", "id": "v1-sess", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/p"},
        {"type": "message", "timestamp": "2025-01-01T00:00:01Z",
         "message": {"role": "user", "content": "hi", "timestamp": 1}},
        {"type": "message", "timestamp": "2025-01-01T00:00:02Z",
         "message": {"role": "user", "content": "more", "timestamp": 2}},
        {"type": "compaction", "timestamp": "2025-01-01T00:00:03+01:00", "summary": "old",
         "firstKeptEntryIndex": 2, "tokensBefore": 10},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    session = read_all(path)
    (node,) = nodes_from_compaction_entry("v1-sess", session.entries[-1])
    assert node.kind == "branch" and node.first_kept_entry_id == "v1-2"
    assert node.pi_entry_id == "v1-3" and node.created_at == "2024-12-31T23:00:03.000Z"


def test_a_legacy_schema_1_record_imports_as_a_level_0_segment() -> None:
    record = {
        "schemaVersion": 1,
        "summaryId": "s-legacy",
        "sourceHash": "abc",
        "sourceEntryIds": ["e1", "e2"],
        "validationStatus": "valid",
        "validationIssueCodes": [],
        "firstKeptEntryId": "e3",
        "tokensBefore": 99,
        "reason": "manual",
        "generatedAt": "2025-05-05T05:05:05.000Z",
        "provider": "anthropic",
        "model": "claude",
    }
    data = {"summary": "legacy text", "details": {"ds4ContextEngine": record}}
    (node,) = nodes_from_compaction_entry(SESSION, entry(data))
    assert node == SummaryNode(
        summary_id="s-legacy",
        session_id=SESSION,
        kind="segment",
        content="legacy text",
        source_hash="abc",
        graph_level=0,
        created_at="2025-05-05T05:05:05.000Z",
        validation_status="valid",
        provider="anthropic",
        model="claude",
        first_kept_entry_id="e3",
        tokens_before=99,
        reason="manual",
        lifecycle="committed",
        pi_entry_id="c0ffee01",
        operation_id="s-legacy",
        source_entry_ids=("e1", "e2"),
        metadata={"schemaVersion": 1},
    )


def test_a_legacy_record_missing_fields_gets_derived_ones() -> None:
    data = {
        "summary": "legacy",
        "firstKeptEntryId": "k",
        "tokensBefore": 5,
        "details": {"ds4ContextEngine": {"summaryId": 7, "validationStatus": "great"}},
    }
    (node,) = nodes_from_compaction_entry(SESSION, entry(data))
    assert node.summary_id == pi_summary_id("c0ffee01")
    assert node.source_hash == sha256_hex("legacy")
    assert (node.kind, node.graph_level, node.validation_status) == ("segment", 0, "warning")
    assert (node.first_kept_entry_id, node.tokens_before) == ("k", 5)
    assert node.created_at == "2026-11-30T12:00:00.000Z"
    assert node.metadata == {"schemaVersion": 1}


MALFORMED = [
    {"schemaVersion": 2, "summaryId": 42, "embeddedNodes": "nope"},
    {"schemaVersion": 2},
    {"schemaVersion": 3, "summaryId": "s-x"},
    {"schemaVersion": True, "summaryId": "s-x"},
    "not an object",
    ["a", "list"],
]


def valid_record() -> dict[str, Any]:
    root, embedded, kwargs = engine_operation(1, engine_operation(0, None)[0])
    return json.loads(json.dumps(details_record(root, embedded, **kwargs)))


BROKEN_FIELDS = [
    ("graphLevel", -1),
    ("graphLevel", True),
    ("graphLevel", 1.5),
    ("summaryKind", "task-state"),
    ("validationStatus", None),
    ("sourceEntryIds", "e1"),
    ("childSummaryIds", [1, 2]),
    ("tokensBefore", "10"),
    ("provider", 3),
    ("metadata", []),
    ("embeddedNodes", [1]),
    ("embeddedNodes", [{"summaryId": "s-x"}]),
    ("generatedAt", None),
]


@pytest.mark.parametrize("record", MALFORMED + [{**valid_record(), k: v} for k, v in BROKEN_FIELDS])
def test_a_malformed_ds4_record_imports_as_pi_native_and_never_raises(record: Any) -> None:
    data = {"summary": "text", "tokensBefore": 3, "details": {"ds4ContextEngine": record}}
    (node,) = nodes_from_compaction_entry(SESSION, entry(data))
    assert node.kind == "branch" and node.summary_id == pi_summary_id("c0ffee01")
    assert node.metadata == {"malformedDs4Record": True}
    assert node.validation_issue_codes == (PI_SUMMARY_ISSUE,) and node.tokens_before == 3


def test_an_embedded_node_repeating_the_root_id_is_malformed() -> None:
    record = valid_record()
    record["embeddedNodes"][0]["summaryId"] = record["summaryId"]
    data = {"summary": "text", "details": {"ds4ContextEngine": record}}
    (node,) = nodes_from_compaction_entry(SESSION, entry(data))
    assert node.metadata["malformedDs4Record"] is True


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(ROOT_KEYS)), JSON_VALUES), JSON_VALUES)
def test_no_record_shape_makes_reading_raise(record: dict[str, Any], details: Any) -> None:
    for value in ({**record, "schemaVersion": 2}, record, details):
        data = {"summary": "s", "details": {"ds4ContextEngine": value}}
        nodes = nodes_from_compaction_entry(SESSION, entry(data))
        assert nodes and nodes[-1].content == "s" and nodes[-1].pi_entry_id == "c0ffee01"
    for value in (details, {"readFiles": details}):
        assert (
            len(nodes_from_compaction_entry(SESSION, entry({"summary": "s", "details": value})))
            == 1
        )


@pytest.mark.parametrize(
    ("data", "entry_type"),
    [
        ({"summary": ""}, "compaction"),
        ({"summary": None}, "compaction"),
        ({}, "compaction"),
        ({"summary": "text"}, "branch_summary"),
        ({"summary": "text"}, "message"),
    ],
)
def test_entries_without_a_compaction_summary_give_no_node(
    data: dict[str, Any], entry_type: str
) -> None:
    assert nodes_from_compaction_entry(SESSION, entry(data, entry_type=entry_type)) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-01-01T00:10:00Z", "2026-01-01T00:10:00.000Z"),
        ("2026-01-01T00:10:00.123456+00:00", "2026-01-01T00:10:00.123Z"),
        ("2026-01-01T02:10:00+02:00", "2026-01-01T00:10:00.000Z"),
        ("2026-01-01T00:10:00", "2026-01-01T00:10:00.000Z"),
        ("yesterday", "yesterday"),
        (None, ""),
        (12, ""),
    ],
)
def test_timestamps_are_normalized_to_utc_milliseconds(value: Any, expected: str) -> None:
    assert normalize_timestamp(value) == expected
