"""The per-index-revision cache of project retrieval (`project/revision_cache.py`): values
survive only while no connection changed the database, on real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ds4_core.project import revision_cache
from ds4_core.project.discovery import discover_project
from ds4_core.project.index import sync_project
from ds4_core.project.search import search_project
from ds4_core.retrieval import describe_task
from ds4_core.store import open_store


@pytest.fixture(autouse=True)
def _fresh_cache():
    revision_cache.clear()
    yield
    revision_cache.clear()


def _db(tmp_path: Path) -> Path:
    path = tmp_path / "t.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE t (v INTEGER)")
    conn.close()
    return path


def _count(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])


def test_revision_moves_with_own_and_other_connections_writes(tmp_path):
    path = _db(tmp_path)
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None)
    first = revision_cache.revision(reader)
    assert revision_cache.revision(reader) == first
    writer.execute("INSERT INTO t VALUES (1)")
    second = revision_cache.revision(reader)
    assert second != first
    reader.execute("INSERT INTO t VALUES (2)")
    assert revision_cache.revision(reader) != second


def test_a_value_is_kept_until_another_connection_commits(tmp_path):
    path = _db(tmp_path)
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None)
    calls: list[int] = []

    def read() -> int:
        calls.append(1)
        return _count(reader)

    assert revision_cache.cached(reader, ("n",), read) == 0
    assert revision_cache.cached(reader, ("n",), read) == 0
    assert len(calls) == 1
    writer.execute("INSERT INTO t VALUES (1)")
    assert revision_cache.cached(reader, ("n",), read) == 1
    assert len(calls) == 2


def test_own_writes_and_deletes_invalidate(tmp_path):
    conn = sqlite3.connect(_db(tmp_path), isolation_level=None)
    assert revision_cache.cached(conn, ("n",), lambda: _count(conn)) == 0
    conn.execute("INSERT INTO t VALUES (1)")
    assert revision_cache.cached(conn, ("n",), lambda: _count(conn)) == 1
    conn.execute("DELETE FROM t")
    assert revision_cache.cached(conn, ("n",), lambda: _count(conn)) == 0


def test_a_later_connection_never_sees_an_earlier_ones_values(tmp_path):
    path = _db(tmp_path)
    first = sqlite3.connect(path, isolation_level=None)
    assert revision_cache.cached(first, ("n",), lambda: _count(first)) == 0
    first.close()
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("INSERT INTO t VALUES (1)")
    second = sqlite3.connect(path, isolation_level=None)
    assert revision_cache.cached(second, ("n",), lambda: _count(second)) == 1


def test_a_value_read_across_a_commit_is_not_kept(tmp_path):
    path = _db(tmp_path)
    reader = sqlite3.connect(path, isolation_level=None)
    writer = sqlite3.connect(path, isolation_level=None)

    def read_then_commit() -> int:
        value = _count(reader)
        writer.execute("INSERT INTO t VALUES (1)")
        return value

    assert revision_cache.cached(reader, ("n",), read_then_commit) == 0
    assert revision_cache.cached(reader, ("n",), lambda: _count(reader)) == 1


def test_a_value_read_inside_a_transaction_is_not_kept(tmp_path):
    conn = sqlite3.connect(_db(tmp_path), isolation_level=None)
    conn.execute("BEGIN")
    conn.execute("INSERT INTO t VALUES (1)")
    assert revision_cache.cached(conn, ("n",), lambda: _count(conn)) == 1
    conn.execute("ROLLBACK")
    assert revision_cache.cached(conn, ("n",), lambda: _count(conn)) == 0


def test_values_over_the_rowid_bound_are_not_kept(tmp_path, monkeypatch):
    conn = sqlite3.connect(_db(tmp_path), isolation_level=None)
    monkeypatch.setattr(revision_cache, "MAX_ROWIDS", 3)
    calls: list[int] = []

    def read() -> tuple[int, ...]:
        calls.append(1)
        return (1, 2, 3, 4)

    revision_cache.cached(conn, ("big",), read, len)
    revision_cache.cached(conn, ("big",), read, len)
    assert len(calls) == 2
    revision_cache.cached(conn, ("a",), lambda: (1, 2), len)
    revision_cache.cached(conn, ("b",), lambda: (1, 2), len)  # evicts "a" (4 > 3 rowids)
    assert revision_cache.cached(conn, ("a",), lambda: (9,), len) == (9,)


def _hits(store, project_path: str, query: str) -> list[tuple[str, float, str]]:
    result = search_project(
        store, project_path, describe_task(query), max_results=8, max_tokens=20_000
    )
    return [(hit.snippet_id, hit.score, hit.reason) for hit in result.hits]


def test_search_results_follow_an_index_change(tmp_path):
    """A cached concept must not outlive the windows it was read from: after a re-index, a
    search answers exactly as a search with an empty cache does."""
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "cache.py").write_text(
        '"""Invalidate cached entries."""\n\ndef invalidate_entries(cache):\n    cache.clear()\n'
    )
    (root / "pkg" / "other.py").write_text("def unrelated():\n    return 1\n")
    store = open_store(tmp_path / "index.db")
    try:
        project_path = sync_project(store, discover_project(root)).project_path
        query = "how are cached entries invalidated when the configuration reloads"
        before = _hits(store, project_path, query)
        assert before and before == _hits(store, project_path, query)
        (root / "pkg" / "reload.py").write_text(
            '"""Reload the configuration and invalidate cached entries."""\n\n'
            "def reload_configuration(cache):\n    invalidate_entries(cache)\n"
        )
        sync_project(store, discover_project(root))
        after = _hits(store, project_path, query)
        revision_cache.clear()
        assert after == _hits(store, project_path, query)
        assert after != before
    finally:
        store.close()
