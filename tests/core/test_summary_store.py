"""The summary graph repository (`store.summaries`, migration 7) on real SQLite files.

docs/compaction.md "Storage" and "Graph rules"; docs/reference.md §3.11 (v5/v6 columns) and 3.13
(lifecycle: prepared in one transaction, then committed or failed).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ds4_core.compaction.nodes import SummaryNode
from ds4_core.store import MIGRATIONS, Store, open_store
from ds4_core.store import summaries as repo
from ds4_core.store.migrations import LATEST_VERSION, apply_migrations
from ds4_core.store.sessions import IndexState, delete_session, replace_session

SESSION = "sess-1"


def segment(
    summary_id: str,
    sources: tuple[str, ...] = ("e1", "e2"),
    *,
    operation_id: str | None = None,
    session_id: str = SESSION,
    created_at: str = "2026-01-01T00:00:00.000Z",
    lifecycle: str = "prepared",
) -> SummaryNode:
    return SummaryNode(
        summary_id=summary_id,
        session_id=session_id,
        kind="segment",
        content=f"## Objective\n- {summary_id}",
        source_hash="h-" + summary_id,
        graph_level=0,
        created_at=created_at,
        validation_status="valid",
        validation_issue_codes=("text-outside-bullets",),
        provider="ds4",
        model="offline-v1",
        first_kept_entry_id="k1",
        tokens_before=1234,
        reason="threshold",
        lifecycle=lifecycle,  # type: ignore[arg-type]
        operation_id=operation_id or summary_id,
        source_entry_ids=sources,
        metadata={"readFiles": ["a.py"], "modifiedFiles": [], "repairs": ["files-overwritten"]},
    )


def aggregate(
    summary_id: str,
    children: tuple[str, ...],
    level: int,
    *,
    created_at: str = "2026-01-01T00:00:00.000Z",
) -> SummaryNode:
    return SummaryNode(
        summary_id=summary_id,
        session_id=SESSION,
        kind="aggregate",
        content=f"## Objective\n- merged {summary_id}",
        source_hash="h-" + summary_id,
        graph_level=level,
        created_at=created_at,
        validation_status="valid",
        provider="ds4",
        model="merge-v1",
        operation_id=summary_id,
        child_ids=children,
        metadata={"readFiles": [], "modifiedFiles": []},
    )


def operation(index: int, previous_root: str | None) -> list[SummaryNode]:
    """The nodes the engine creates for compaction number `index` (segment [+ aggregate])."""
    created = f"2026-01-01T00:00:{index % 60:02d}.{index // 60:03d}Z"
    sources = (f"e{index}a", f"e{index}b")
    if previous_root is None:
        return [segment(f"s-{index}", sources, created_at=created)]
    root_id = f"a-{index}"
    seg = segment(f"s-{index}", sources, operation_id=root_id, created_at=created)
    level = index  # a chain: the level grows by one per operation
    return [seg, aggregate(root_id, (previous_root, seg.summary_id), level, created_at=created)]


def build_chain(store: Store, operations: int) -> list[str]:
    """Insert and commit `operations` chained compactions; returns the roots in order."""
    roots: list[str] = []
    previous: str | None = None
    for index in range(operations):
        nodes = operation(index, previous)
        repo.insert_prepared(store, nodes)
        repo.mark_committed(store, SESSION, nodes[-1].summary_id, f"pi-{index}")
        previous = nodes[-1].summary_id
        roots.append(previous)
    return roots


@pytest.fixture
def store(tmp_path: Path):
    opened = open_store(tmp_path / "db" / "context.db")
    yield opened
    opened.close()


def table_rows(store: Store) -> dict[str, list[tuple[object, ...]]]:
    conn = store.connection()
    return {
        table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
        for table in ("summaries", "summary_sources", "summary_edges")
    }


# --- migration 7 ---------------------------------------------------------------------------


def test_migration_7_creates_strict_summary_tables_without_a_session_foreign_key(
    store: Store,
) -> None:
    conn = store.connection()
    assert store.schema_version == LATEST_VERSION  # 7 and later
    for table in ("summaries", "summary_sources", "summary_edges"):
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
        assert sql.rstrip().endswith("STRICT")
    assert conn.execute("PRAGMA foreign_key_list(summaries)").fetchall() == []
    indexes = {row[1] for row in conn.execute("PRAGMA index_list(summaries)")}
    assert {"summaries_session_lifecycle", "summaries_operation", "summaries_summary"} <= indexes
    assert "summary_edges_child" in {
        row[1] for row in conn.execute("PRAGMA index_list(summary_edges)")
    }
    # every table is keyed by the session: (session_id, summary_id) and composite foreign keys
    primary_keys = {
        table: [
            row[1]
            for row in sorted(conn.execute(f"PRAGMA table_info({table})"), key=lambda r: r[5])
            if row[5]
        ]
        for table in ("summaries", "summary_sources", "summary_edges")
    }
    assert primary_keys == {
        "summaries": ["session_id", "summary_id"],
        "summary_sources": ["session_id", "summary_id", "position"],
        "summary_edges": ["session_id", "parent_id", "child_order"],
    }
    foreign_keys: dict[str, set[tuple[tuple[str, ...], tuple[str, ...], str]]] = {}
    for table in ("summary_sources", "summary_edges"):
        grouped: dict[int, list[tuple[object, ...]]] = {}
        for row in conn.execute(f"PRAGMA foreign_key_list({table})"):
            grouped.setdefault(row[0], []).append(row)
        foreign_keys[table] = {
            (
                tuple(str(r[3]) for r in sorted(rows, key=lambda r: r[1])),
                tuple(f"{r[2]}.{r[4]}" for r in sorted(rows, key=lambda r: r[1])),
                str(rows[0][6]),
            )
            for rows in grouped.values()
        }
    assert foreign_keys == {
        "summary_sources": {
            (
                ("session_id", "summary_id"),
                ("summaries.session_id", "summaries.summary_id"),
                "CASCADE",
            )
        },
        "summary_edges": {
            (
                ("session_id", "parent_id"),
                ("summaries.session_id", "summaries.summary_id"),
                "CASCADE",
            ),
            (
                ("session_id", "child_id"),
                ("summaries.session_id", "summaries.summary_id"),
                "NO ACTION",
            ),
        },
    }
    conn.execute(
        "INSERT INTO summaries (summary_id, session_id, summary_kind, content, source_hash, "
        "graph_level, created_at, validation_status, operation_id) "
        "VALUES ('x', 'no-such-session', 'segment', 'c', 'h', 0, 't', 'valid', 'x')"
    )
    row = conn.execute(
        "SELECT lifecycle_status, validation_issue_codes_json, metadata_json FROM summaries"
    ).fetchone()
    assert row == ("committed", "[]", "{}")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("summary_kind", "task-state"),
        ("graph_level", -1),
        ("validation_status", "ok"),
        ("lifecycle_status", "done"),
        ("graph_level", "one"),  # STRICT: a TEXT value in an INTEGER column
    ],
)
def test_schema_rejects_values_outside_the_contract(
    store: Store, column: str, value: object
) -> None:
    values = {
        "summary_id": "x",
        "session_id": SESSION,
        "summary_kind": "segment",
        "content": "c",
        "source_hash": "h",
        "graph_level": 0,
        "created_at": "t",
        "validation_status": "valid",
        "lifecycle_status": "prepared",
        "operation_id": "x",
        column: value,
    }
    with pytest.raises(sqlite3.IntegrityError):
        store.connection().execute(
            f"INSERT INTO summaries ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
            tuple(values.values()),
        )


def test_pi_entry_ids_are_unique_per_session_only(store: Store) -> None:
    repo.import_committed(store, [replace(segment("a"), pi_entry_id="p1")])
    repo.import_committed(store, [replace(segment("b", session_id="other"), pi_entry_id="p1")])
    with pytest.raises(sqlite3.IntegrityError):
        store.connection().execute(
            "INSERT INTO summaries (summary_id, session_id, summary_kind, content, source_hash, "
            "graph_level, created_at, validation_status, operation_id, pi_compaction_entry_id) "
            "VALUES ('c', ?, 'segment', 'c', 'h', 0, 't', 'valid', 'c', 'p1')",
            (SESSION,),
        )


def test_edges_keep_children_and_cascade_from_parents(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    repo.insert_prepared(store, operation(1, "s-0"))
    conn = store.connection()
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("DELETE FROM summaries WHERE summary_id = 's-1'")  # a parent points at it
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute(
            "INSERT INTO summary_edges (session_id, parent_id, child_order, child_id) "
            "VALUES (?, 'a-1', 9, 'a-1')",
            (SESSION,),
        )
    conn.execute("DELETE FROM summaries WHERE summary_id = 'a-1'")
    assert conn.execute("SELECT COUNT(*) FROM summary_edges").fetchone()[0] == 0
    conn.execute("DELETE FROM summaries WHERE summary_id = 's-1'")
    assert (
        conn.execute("SELECT COUNT(*) FROM summary_sources WHERE summary_id = 's-1'").fetchone()[0]
        == 0
    )


def test_an_existing_version_6_store_is_upgraded_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert [m.version for m in apply_migrations(conn, MIGRATIONS[:6])] == [1, 2, 3, 4, 5, 6]
    conn.execute(
        "INSERT INTO context_manifests (manifest_id, created_at, manifest_json) "
        "VALUES ('m1', '2026-01-01T00:00:00.000Z', '{}')"
    )
    conn.close()
    with open_store(path) as store:
        assert store.schema_version == LATEST_VERSION and store.notices == []
        conn = store.connection()
        assert conn.execute("SELECT manifest_id FROM context_manifests").fetchall() == [("m1",)]
        repo.insert_prepared(store, operation(0, None))
        assert repo.counts(store) == {"summaries": 1, "prepared": 1, "committed": 0, "failed": 0}


def test_summaries_survive_a_session_index_rebuild(store: Store) -> None:
    state = IndexState(SESSION, "/s.jsonl", "h", 1, 1.0, 1, 0, "c", 0, 0, "{}", "")
    replace_session(
        store,
        session_id=SESSION,
        session_file="/s.jsonl",
        project_path=None,
        header_json=json.dumps({"type": "session", "id": SESSION}),
        entries=[],
        state=state,
    )
    build_chain(store, 3)
    before = repo.export_graph(store, SESSION)
    assert delete_session(store, SESSION)
    assert repo.export_graph(store, SESSION) == before


# --- insert_prepared -------------------------------------------------------------------------


def test_prepared_nodes_read_back_equal_with_sources_and_ordered_children(store: Store) -> None:
    first = operation(0, None)
    second = operation(1, "s-0")
    repo.insert_prepared(store, first)
    repo.insert_prepared(store, [replace(n, lifecycle="committed") for n in second])
    assert repo.get_node(store, SESSION, "s-0") == first[0]
    seg, agg = second
    assert repo.get_node(store, SESSION, "s-1") == seg  # lifecycle forced back to prepared
    stored = repo.get_node(store, SESSION, "a-1")
    assert stored == agg and stored is not None and stored.child_ids == ("s-0", "s-1")
    assert repo.get_node(store, SESSION, "nope") is None


@pytest.mark.parametrize("failing_index", [0, 1])
def test_a_failure_between_node_inserts_leaves_no_partial_batch(
    store: Store, failing_index: int
) -> None:
    roots = build_chain(store, 3)
    before_rows = table_rows(store)
    before_export = repo.export_graph(store, SESSION)
    batch = operation(3, roots[-1])
    written: list[str] = []

    def crash(node: SummaryNode) -> None:
        written.append(node.summary_id)
        if len(written) == failing_index + 1:
            raise RuntimeError("injected crash")

    with pytest.raises(RuntimeError, match="injected crash"):
        repo.insert_prepared(store, batch, after_insert=crash)
    assert written == [n.summary_id for n in batch[: failing_index + 1]]
    assert table_rows(store) == before_rows
    assert repo.export_graph(store, SESSION) == before_export
    assert all(repo.get_node(store, SESSION, n.summary_id) is None for n in batch)
    repo.insert_prepared(store, batch)  # the store is still usable and the ids still free
    assert repo.counts(store)["prepared"] == 2


def test_invalid_batches_are_rejected_before_anything_is_written(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    before = table_rows(store)
    cases = [
        ([segment("s-0")], "already stored"),
        ([segment("x"), segment("x")], "repeated"),
        ([aggregate("a", ("s-0", "ghost"), 1)], "ghost"),
        ([aggregate("b", ("later", "s-0"), 1), segment("later")], "later"),
        ([replace(segment("y"), kind="task-state")], "kind"),  # type: ignore[arg-type]
        ([replace(segment("y"), graph_level=-1)], "graph_level"),
        ([replace(segment("y"), metadata={"x": object()})], "JSON"),
        ([aggregate("z", ("z",), 1)], "itself"),
    ]
    for batch, fragment in cases:
        with pytest.raises(ValueError, match=fragment):
            repo.insert_prepared(store, batch)
        assert table_rows(store) == before


# --- lifecycle -------------------------------------------------------------------------------


def test_committing_any_node_commits_the_whole_operation_and_records_the_entry_on_the_root(
    store: Store,
) -> None:
    repo.insert_prepared(store, operation(0, None))
    repo.mark_committed(store, SESSION, "s-0", "p0")
    repo.insert_prepared(store, operation(1, "s-0"))
    assert repo.mark_committed(store, SESSION, "s-1", "p1") == ["s-1", "a-1"]
    assert [n.lifecycle for n in repo.session_nodes(store, SESSION)] == ["committed"] * 3
    assert repo.node_for_entry(store, SESSION, "p1") == repo.get_node(store, SESSION, "a-1")
    assert repo.get_node(store, SESSION, "s-1").pi_entry_id is None  # type: ignore[union-attr]
    assert repo.mark_committed(store, SESSION, "a-1", "p1") == []  # idempotent
    # a recorded entry id is kept
    assert repo.mark_committed(store, SESSION, "a-1", "p-other") == []
    assert repo.node_for_entry(store, SESSION, "p-other") is None
    assert repo.mark_committed(store, SESSION, "unknown", "p9") == []
    assert repo.mark_failed(store, SESSION, "a-1", "too late") == []  # committed stays committed


def test_failed_operations_keep_their_reason_and_can_still_be_committed(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    repo.mark_committed(store, SESSION, "s-0")
    repo.insert_prepared(store, operation(1, "s-0"))
    assert repo.mark_failed(store, SESSION, "a-1", "client said so") == ["s-1", "a-1"]
    assert repo.mark_failed(store, SESSION, "s-1", "again") == []
    reasons = (
        store.connection()
        .execute("SELECT DISTINCT failure_reason FROM summaries WHERE operation_id = 'a-1'")
        .fetchall()
    )
    assert reasons == [("client said so",)]
    assert repo.counts(store) == {"summaries": 3, "prepared": 0, "committed": 1, "failed": 2}
    # the session file later proves the entry was written
    assert repo.mark_committed(store, SESSION, "a-1", "p1") == ["s-1", "a-1"]
    assert store.connection().execute(
        "SELECT COUNT(*) FROM summaries WHERE failure_reason IS NOT NULL"
    ).fetchone() == (0,)
    assert repo.mark_failed(store, SESSION, "unknown") == []


def test_leftover_prepared_batches_fail_at_startup(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    repo.mark_committed(store, SESSION, "s-0")
    repo.insert_prepared(store, operation(1, "s-0"))
    repo.insert_prepared(store, [segment("other", session_id="sess-2")])
    assert repo.fail_leftover_prepared(store) == 3
    assert repo.fail_leftover_prepared(store) == 0
    failed = repo.session_nodes(store, SESSION, lifecycles=["failed"])
    assert [n.summary_id for n in failed] == ["s-1", "a-1"]
    reason = (
        store.connection()
        .execute("SELECT failure_reason FROM summaries WHERE summary_id = 'other'")
        .fetchone()[0]
    )
    assert reason == repo.DEFAULT_LEFTOVER_REASON


def test_an_entry_id_held_by_another_node_is_not_given_twice(store: Store) -> None:
    repo.insert_prepared(store, [segment("x")])
    repo.mark_committed(store, SESSION, "x", "p1")
    repo.insert_prepared(store, [segment("y")])
    assert repo.mark_committed(store, SESSION, "y", "p1") == ["y"]  # committed, entry id left unset
    assert repo.node_for_entry(store, SESSION, "p1").summary_id == "x"  # type: ignore[union-attr]


# --- import_committed ------------------------------------------------------------------------


def committed_ops(count: int) -> list[list[SummaryNode]]:
    ops: list[list[SummaryNode]] = []
    previous: str | None = None
    for index in range(count):
        nodes = operation(index, previous)
        root = replace(nodes[-1], lifecycle="committed", pi_entry_id=f"pi-{index}")
        ops.append([replace(n, lifecycle="committed") for n in nodes[:-1]] + [root])
        previous = root.summary_id
    return ops


def test_import_is_idempotent_and_restores_the_committed_graph_exactly(
    store: Store, tmp_path: Path
) -> None:
    roots = build_chain(store, 4)
    live = repo.export_graph(store, SESSION)
    with open_store(tmp_path / "rebuilt.db") as rebuilt:
        inserted = [repo.import_committed(rebuilt, ops) for ops in committed_ops(4)]
        assert inserted[0] == ["s-0"] and inserted[3] == ["s-3", roots[3]]
        assert repo.export_graph(rebuilt, SESSION) == live
        for ops in committed_ops(4):
            assert repo.import_committed(rebuilt, ops) == []
        assert repo.export_graph(rebuilt, SESSION) == live
        assert repo.counts(rebuilt) == repo.counts(store)


def test_import_commits_stored_nodes_without_changing_what_they_say(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    repo.mark_failed(store, SESSION, "s-0", "timeout")
    original = repo.get_node(store, SESSION, "s-0")
    assert original is not None
    imported = replace(
        original,
        source_entry_ids=("zz",),
        lifecycle="committed",
        pi_entry_id="p0",
    )
    assert repo.import_committed(store, [imported]) == ["s-0"]
    assert repo.get_node(store, SESSION, "s-0") == replace(
        original, lifecycle="committed", pi_entry_id="p0"
    )
    assert repo.import_committed(store, [imported]) == []
    # the session file wins over an entry id reported earlier
    assert repo.import_committed(store, [replace(imported, pi_entry_id="p-other")]) == ["s-0"]
    assert repo.node_for_entry(store, SESSION, "p-other") is not None


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("graph_level", 4, "graph level 4"),
        ("source_hash", "h-other", "source hash 'h-other'"),
        ("created_at", "2026-02-02T00:00:00.000Z", "time '2026-02-02T00:00:00.000Z'"),
        ("kind", "branch", "kind 'branch'"),
    ],
)
def test_import_refuses_a_reused_id_with_another_hash_level_or_time(
    store: Store, field: str, value: object, named: str
) -> None:
    repo.insert_prepared(store, operation(0, None))
    before = repo.export_graph(store, SESSION)
    original = repo.get_node(store, SESSION, "s-0")
    assert original is not None
    with pytest.raises(ValueError, match="already stored .* with other fields") as caught:
        repo.import_committed(store, [replace(original, **{field: value})])
    assert named in str(caught.value)
    assert repo.export_graph(store, SESSION) == before


@pytest.mark.parametrize("level", [0, 1])
def test_an_aggregate_not_above_its_children_is_refused_on_insert_and_import(
    store: Store, level: int
) -> None:
    """Children at levels 0 and 1: the aggregate must be at level 2 or more."""
    roots = build_chain(store, 2)  # s-0 (level 0), then a-1 (level 1) over s-0 and s-1
    seg = segment("s-9", ("e9",), operation_id="a-9")
    bad = aggregate("a-9", (roots[-1], "s-9"), level)
    before = repo.export_graph(store, SESSION)
    with pytest.raises(ValueError, match="graph_level must be above each child's") as caught:
        repo.insert_prepared(store, [seg, bad])
    assert "a-9 (level" in str(caught.value) and "child a-1 at level 1" in str(caught.value)
    with pytest.raises(ValueError, match="graph_level is not above each child's"):
        repo.import_committed(store, [replace(seg, lifecycle="committed"), bad])
    assert repo.export_graph(store, SESSION) == before
    repo.insert_prepared(store, [seg, aggregate("a-9", (roots[-1], "s-9"), 2)])


def test_import_refuses_an_id_the_session_holds_with_another_text(store: Store) -> None:
    repo.insert_prepared(store, operation(0, None))
    before = repo.export_graph(store, SESSION)
    original = repo.get_node(store, SESSION, "s-0")
    assert original is not None
    with pytest.raises(ValueError, match="another text"):
        repo.import_committed(store, [replace(original, content="something else")])
    assert repo.export_graph(store, SESSION) == before
    assert repo.get_node(store, SESSION, "s-0") == original  # nothing of the import remains


def test_import_takes_an_entry_id_away_from_a_node_the_file_does_not_carry(store: Store) -> None:
    repo.insert_prepared(store, [segment("wrong")])
    repo.mark_committed(store, SESSION, "wrong", "p1")  # a client reported the wrong entry
    changed = repo.import_committed(store, [replace(segment("right"), pi_entry_id="p1")])
    assert changed == ["wrong", "right"]
    assert repo.node_for_entry(store, SESSION, "p1").summary_id == "right"  # type: ignore[union-attr]
    assert repo.get_node(store, SESSION, "wrong").pi_entry_id is None  # type: ignore[union-attr]


def test_import_rejects_children_that_exist_nowhere(store: Store) -> None:
    build_chain(store, 1)
    before = table_rows(store)
    orphan = [segment("s-9", operation_id="a-9"), aggregate("a-9", ("missing-root", "s-9"), 1)]
    with pytest.raises(ValueError, match="missing-root"):
        repo.import_committed(store, orphan)
    assert table_rows(store) == before
    forward = [aggregate("a-8", ("s-0", "s-8"), 1), segment("s-8")]
    with pytest.raises(ValueError, match="s-8"):
        repo.import_committed(store, forward)
    assert table_rows(store) == before


# --- sessions: a fork holds its own copy ----------------------------------------------------

FORK = "sess-fork"


def in_session(nodes: list[SummaryNode], session_id: str) -> list[SummaryNode]:
    return [replace(n, session_id=session_id) for n in nodes]


def test_the_same_ids_in_another_session_are_imported_as_that_sessions_own_nodes(
    store: Store,
) -> None:
    roots = build_chain(store, 3)
    original = repo.export_graph(store, SESSION)
    imported = [repo.import_committed(store, in_session(ops, FORK)) for ops in committed_ops(3)]
    assert imported == [["s-0"], ["s-1", "a-1"], ["s-2", "a-2"]]  # inserted, not "found"
    forked = repo.export_graph(store, FORK)
    assert forked["nodes"] and forked["edges"] == original["edges"]
    assert forked == json.loads(json.dumps(original).replace(f'"{SESSION}"', f'"{FORK}"'))
    assert repo.export_graph(store, SESSION) == original
    assert [n.session_id for n in repo.session_nodes(store, FORK)] == [FORK] * 5
    assert repo.get_node(store, FORK, roots[-1]) == replace(
        repo.get_node(store, SESSION, roots[-1]),  # type: ignore[arg-type]
        session_id=FORK,
    )
    assert repo.transitive_sources(store, FORK, roots[-1]) == repo.transitive_sources(
        store, SESSION, roots[-1]
    )
    assert repo.node_for_entry(store, FORK, "pi-2").session_id == FORK  # type: ignore[union-attr]
    # lifecycle changes stay in their session
    repo.insert_prepared(store, in_session(operation(3, roots[-1]), FORK))
    assert repo.mark_failed(store, FORK, "a-3", "cancelled") == ["s-3", "a-3"]
    assert repo.get_node(store, SESSION, "a-3") is None
    assert repo.mark_committed(store, SESSION, "a-3", "p9") == []
    assert repo.export_graph(store, SESSION) == original
    assert repo.transitive_sources(store, SESSION, "a-3") == []
    assert repo.transitive_sources(store, FORK, "a-3")[-2:] == ["e3a", "e3b"]


def test_children_must_be_in_the_same_session(store: Store) -> None:
    build_chain(store, 1)  # s-0 in SESSION only
    before = table_rows(store)
    seg, agg = in_session(operation(1, "s-0"), FORK)
    with pytest.raises(ValueError, match=r"s-0 \(child of a-1\)"):
        repo.insert_prepared(store, [seg, agg])
    with pytest.raises(ValueError, match=r"s-0 \(child of a-1\)"):
        repo.import_committed(store, [replace(seg, lifecycle="committed"), agg])
    with pytest.raises(ValueError, match="one session"):
        repo.insert_prepared(store, [segment("x"), segment("y", session_id=FORK)])
    with pytest.raises(ValueError, match="one session"):
        repo.import_committed(store, [segment("x"), segment("y", session_id=FORK)])
    with pytest.raises(ValueError, match="session_id"):
        repo.insert_prepared(store, [segment("x", session_id="")])
    assert table_rows(store) == before
    with pytest.raises(sqlite3.IntegrityError):  # the composite foreign key, below the checks
        store.connection().execute(
            "INSERT INTO summary_edges (session_id, parent_id, child_order, child_id) "
            "VALUES (?, 's-0', 0, 's-0-elsewhere')",
            (SESSION,),
        )
    repo.import_committed(store, [segment("c", session_id=FORK)])
    with pytest.raises(sqlite3.IntegrityError):  # `c` exists, but in another session
        store.connection().execute(
            "INSERT INTO summary_edges (session_id, parent_id, child_order, child_id) "
            "VALUES (?, 's-0', 0, 'c')",
            (SESSION,),
        )


def test_sessions_with_pending_finds_where_an_id_is_prepared_or_failed(store: Store) -> None:
    repo.insert_prepared(store, [segment("x")])
    repo.insert_prepared(store, [segment("x", session_id=FORK)])
    repo.import_committed(store, [segment("x", session_id="sess-3", lifecycle="committed")])
    assert repo.sessions_with_pending(store, "x") == [SESSION, FORK]
    repo.mark_failed(store, SESSION, "x")
    assert repo.sessions_with_pending(store, "x") == [SESSION, FORK]
    assert repo.sessions_with_pending(store, "x", include_failed=False) == [FORK]
    repo.mark_committed(store, FORK, "x")
    assert repo.sessions_with_pending(store, "x") == [SESSION]
    assert repo.sessions_with_pending(store, "unknown") == []


# --- reads -----------------------------------------------------------------------------------


def test_session_nodes_are_ordered_by_time_then_insertion_and_filtered(store: Store) -> None:
    repo.insert_prepared(store, [segment("late", created_at="2026-01-02T00:00:00.000Z")])
    repo.insert_prepared(store, [segment("z-early", created_at="2026-01-01T00:00:00.000Z")])
    repo.insert_prepared(store, [segment("a-early", created_at="2026-01-01T00:00:00.000Z")])
    repo.insert_prepared(store, [segment("elsewhere", session_id="sess-2")])
    repo.mark_committed(store, SESSION, "late")
    assert [n.summary_id for n in repo.session_nodes(store, SESSION)] == [
        "z-early",
        "a-early",
        "late",
    ]
    assert [n.summary_id for n in repo.session_nodes(store, SESSION, lifecycles=["committed"])] == [
        "late"
    ]
    assert repo.session_nodes(store, "nobody") == []
    with pytest.raises(ValueError, match="lifecycle"):
        repo.session_nodes(store, SESSION, lifecycles=["done"])


def test_transitive_sources_walk_children_depth_first_in_child_order(store: Store) -> None:
    repo.insert_prepared(store, [segment("s1", ("e1", "e2"))])
    repo.insert_prepared(store, [segment("s2", ("e3", "e2"))])
    repo.insert_prepared(store, [aggregate("a1", ("s1", "s2"), 1)])
    repo.insert_prepared(store, [segment("s3", ("e4",))])
    repo.insert_prepared(store, [aggregate("a2", ("a1", "s3"), 2)])
    repo.insert_prepared(store, [aggregate("b", ("s3", "a1"), 2)])  # shares a1 and s3
    assert repo.transitive_sources(store, SESSION, "a2") == ["e1", "e2", "e3", "e4"]
    assert repo.transitive_sources(store, SESSION, "b") == ["e4", "e1", "e2", "e3"]
    assert repo.transitive_sources(store, SESSION, "s2") == ["e3", "e2"]
    assert repo.transitive_sources(store, SESSION, "unknown") == []


def test_a_thousand_level_chain_is_walked_quickly_oldest_span_first(store: Store) -> None:
    roots = build_chain(store, 1001)
    assert repo.get_node(store, SESSION, roots[-1]).graph_level == 1000  # type: ignore[union-attr]
    started = time.perf_counter()
    sources = repo.transitive_sources(store, SESSION, roots[-1])
    elapsed = time.perf_counter() - started
    assert len(sources) == 2002
    assert sources[:4] == ["e0a", "e0b", "e1a", "e1b"] and sources[-1] == "e1000b"
    assert elapsed < 1.0, f"transitive_sources took {elapsed:.3f}s for a 1,000-level chain"


def test_export_lists_only_committed_nodes_sorted_by_id(store: Store) -> None:
    build_chain(store, 2)
    repo.insert_prepared(store, operation(2, "a-1"))
    graph = repo.export_graph(store, SESSION)
    assert [n["summary_id"] for n in graph["nodes"]] == ["a-1", "s-0", "s-1"]
    assert graph["edges"] == [["a-1", 0, "s-0"], ["a-1", 1, "s-1"]]
    assert json.loads(json.dumps(graph)) == graph  # JSON-ready
    assert graph["nodes"][0]["child_ids"] == ["s-0", "s-1"]
    assert graph["nodes"][0]["pi_entry_id"] == "pi-1"
