"""The derived SQLite store: files, pragmas, migrations, move-aside, FTS sync, repositories.

Every test uses a real SQLite file under `tmp_path` (docs/architecture.md "Storage rules";
docs/reference.md §3.11).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds4_core.store import (
    LATEST_VERSION,
    MIGRATIONS,
    IndexedEntry,
    IndexState,
    Store,
    branch_entry_ids,
    count_manifests,
    default_database_path,
    delete_session,
    entry_count,
    get_manifest,
    latest_manifest,
    load_entries,
    open_store,
    replace_session,
    resolve_database_path,
    save_manifest,
    session_header,
)
from ds4_core.store.database import ForeignDatabaseError
from ds4_core.store.migrations import apply_migrations, split_statements


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def make_entry(
    entry_id: str, text: str, seq: int, parent_id: str | None = None, session_id: str = "s1"
) -> IndexedEntry:
    return IndexedEntry(
        entry_key=f"{session_id}:{entry_id}",
        entry_id=entry_id,
        parent_id=parent_id,
        entry_type="message",
        role="user",
        created_at="2026-01-01T00:00:00.000Z",
        seq=seq,
        line_number=seq + 2,
        searchable_text=text,
        token_estimate=len(text) // 4,
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
    )


def index_session(
    store: Store,
    entries: list[IndexedEntry],
    session_id: str = "s1",
    session_file: str = "/sessions/s1.jsonl",
) -> int:
    state = IndexState(session_id, session_file, "h", 1, 1.0, 1, 0, "c", 0, 0, "{}", "")
    return replace_session(
        store,
        session_id=session_id,
        session_file=session_file,
        project_path="/proj",
        header_json=json.dumps({"type": "session", "id": session_id}),
        entries=entries,
        state=state,
    )


def fts_keys(store: Store, query: str) -> list[str]:
    rows = (
        store.connection()
        .execute(
            "SELECT entry_key FROM entries_fts WHERE entries_fts MATCH ? ORDER BY rank", (query,)
        )
        .fetchall()
    )
    return [row[0] for row in rows]


def quote_term(term: str) -> str:
    """FTS5 string quoting as docs/architecture.md "Storage rules" requires: wrap in quotes,
    double inner quotes."""
    return '"' + term.replace('"', '""') + '"'


@pytest.fixture
def store(tmp_path: Path):
    opened = open_store(tmp_path / "db" / "context.db")
    yield opened
    opened.close()


# --- files, modes, pragmas ----------------------------------------------------------------


def test_new_database_is_private_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "context.db"
    with open_store(path) as store:
        index_session(store, [make_entry("e1", "hello", 0)])
        conn = store.connection()
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert store.notices == []
        assert mode(tmp_path / "a") == 0o700
        assert mode(tmp_path / "a" / "b") == 0o700
        for name in ("context.db", "context.db-wal", "context.db-shm"):
            assert mode(path.parent / name) == 0o600, name


def test_busy_timeout_comes_from_the_setting(tmp_path: Path) -> None:
    with open_store(tmp_path / "c.db", busy_timeout_ms=1234) as store:
        assert store.connection().execute("PRAGMA busy_timeout").fetchone()[0] == 1234


def test_existing_directory_modes_are_left_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    with open_store(shared / "context.db"):
        pass
    assert mode(shared) == 0o755
    assert mode(shared / "context.db") == 0o600


def test_reads_work_from_other_threads_and_writes_serialise(store: Store) -> None:
    index_session(store, [make_entry("e1", "hello", 0)])
    errors: list[BaseException] = []
    counts: list[int] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                save_manifest(
                    store,
                    {
                        "id": f"m-{n}-{i}",
                        "sessionId": "s1",
                        "createdAt": f"2026-01-01T00:00:{n:02d}.{i:03d}Z",
                    },
                    "{}",
                )
                counts.append(entry_count(store, "s1"))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert counts == [1] * 60
    assert count_manifests(store) == 60


def test_a_failed_write_changes_nothing(store: Store) -> None:
    index_session(store, [make_entry("e1", "hello", 0)])
    with pytest.raises(RuntimeError), store.write() as conn:
        conn.execute("DELETE FROM entries")
        raise RuntimeError("boom")
    assert entry_count(store, "s1") == 1
    assert fts_keys(store, "hello") == ["s1:e1"]


# --- migrations ----------------------------------------------------------------------------


def test_migrations_are_recorded_with_their_checksums(tmp_path: Path) -> None:
    with open_store(tmp_path / "c.db") as store:
        rows = (
            store.connection()
            .execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
            .fetchall()
        )
        assert store.schema_version == LATEST_VERSION == len(MIGRATIONS)
    expected = [
        (m.version, m.name, hashlib.sha256(f"{m.version}\n{m.name}\n{m.sql}".encode()).hexdigest())
        for m in MIGRATIONS
    ]
    assert rows == expected
    assert [m.name for m in MIGRATIONS] == [
        "initial-session-index",
        "context-manifests",
        "entries-fts-vocab",
        "project-knowledge-index",
        "project-sent-snippets",
        "project-files-fts",
        "summary-graph",
        "project-commits",
        "entries-subwords",
        "model-calibration",
        "memory-and-pins",
        "artifact-references",
    ]


def test_reopening_applies_nothing_and_an_old_schema_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert [m.version for m in apply_migrations(conn, MIGRATIONS[:1])] == [1]
    conn.close()
    with open_store(path) as store:
        assert store.schema_version == LATEST_VERSION
        applied = (
            store.connection()
            .execute("SELECT version, applied_at FROM schema_migrations ORDER BY version")
            .fetchall()
        )
        assert store.notices == []
    with open_store(path) as store:
        again = (
            store.connection()
            .execute("SELECT version, applied_at FROM schema_migrations ORDER BY version")
            .fetchall()
        )
    assert again == applied and [v for v, _ in applied] == list(range(1, LATEST_VERSION + 1))


def test_a_failing_migration_leaves_the_database_unchanged(tmp_path: Path) -> None:
    from ds4_core.store.migrations import Migration

    conn = sqlite3.connect(tmp_path / "c.db", isolation_level=None)
    broken = (
        *MIGRATIONS,
        Migration(LATEST_VERSION + 1, "broken", "CREATE TABLE x (a INTEGER);\nNOT SQL;"),
    )
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, broken)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_trigger_bodies_are_not_split() -> None:
    statements = split_statements(MIGRATIONS[0].sql)
    triggers = [s for s in statements if s.startswith("CREATE TRIGGER")]
    assert len(triggers) == 3 and all(s.endswith("END;") for s in triggers)


def _moved_aside(directory: Path, reason: str) -> list[Path]:
    """Moved-aside main files (their -wal/-shm, if any, are left out)."""
    return sorted(
        p
        for p in directory.iterdir()
        if f"context.db.{reason}-" in p.name and not p.name.endswith(("-wal", "-shm"))
    )


def test_a_newer_database_is_moved_aside_with_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    with open_store(path) as store:
        index_session(store, [make_entry("e1", "hello", 0)])
        store.connection().execute("PRAGMA user_version = 99")
    with open_store(path) as store:
        assert store.schema_version == LATEST_VERSION
        assert entry_count(store, "s1") == 0
        [notice] = store.notices
    [moved] = _moved_aside(tmp_path, "newer-schema")
    assert str(moved) in notice and "newer" in notice and str(path) in notice
    old = sqlite3.connect(moved)
    assert old.execute("PRAGMA user_version").fetchone()[0] == 99
    assert old.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1
    old.close()


def test_a_file_that_is_not_sqlite_is_refused_and_left_untouched(tmp_path: Path) -> None:
    """A session file passed as --db by mistake must never be renamed, chmod-ed or replaced."""
    path = tmp_path / "session.jsonl"
    content = b'{"type":"session","version":3,"id":"s"}\n' * 200
    path.write_bytes(content)
    path.chmod(0o644)
    with pytest.raises(ForeignDatabaseError, match="not an SQLite database"):
        open_store(path)
    assert path.read_bytes() == content
    assert mode(path) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["session.jsonl"]


def test_a_corrupt_database_of_ours_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    with open_store(path):
        pass
    damaged = path.read_bytes()[:100] + b"\xff" * 8000  # our header, garbage pages
    path.write_bytes(damaged)
    with open_store(path) as store:
        assert store.schema_version == LATEST_VERSION
        [notice] = store.notices
    [moved] = _moved_aside(tmp_path, "corrupt")
    assert moved.read_bytes() == damaged
    assert "moved aside" in notice and str(moved) in notice


def test_a_tampered_migration_checksum_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "context.db"
    with open_store(path) as store:
        store.connection().execute("UPDATE schema_migrations SET checksum = 'x' WHERE version = 1")
    with open_store(path) as store:
        [notice] = store.notices
        assert "checksum" in notice
        assert store.schema_version == LATEST_VERSION
    assert len(_moved_aside(tmp_path, "checksum-mismatch")) == 1


def test_an_unrelated_sqlite_database_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "app.sqlite"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE notes (body TEXT)")
    other.commit()
    other.close()
    before = path.read_bytes()
    with pytest.raises(ForeignDatabaseError, match="did not create"):
        open_store(path)
    assert path.read_bytes() == before
    assert not _moved_aside(tmp_path, "unrecognized")


# --- locations ---------------------------------------------------------------------------


def test_default_path_follows_xdg() -> None:
    assert default_database_path({"XDG_DATA_HOME": "/data", "HOME": "/home/u"}) == Path(
        "/data/ds4-lsp/context.db"
    )
    assert default_database_path({"XDG_DATA_HOME": "relative", "HOME": "/home/u"}) == Path(
        "/home/u/.local/share/ds4-lsp/context.db"
    )
    assert default_database_path({"HOME": "/home/u"}) == Path(
        "/home/u/.local/share/ds4-lsp/context.db"
    )


def test_database_path_precedence() -> None:
    env = {"HOME": "/home/u", "DS4_DB": "/env/db", "XDG_DATA_HOME": "/data"}
    assert resolve_database_path("/cli/db", "/init/db", env, "/set/db") == Path("/cli/db")
    assert resolve_database_path(None, "/init/db", env, "/set/db") == Path("/init/db")
    assert resolve_database_path(None, "", env, "/set/db") == Path("/env/db")
    no_env = {"HOME": "/home/u", "XDG_DATA_HOME": "/data"}
    assert resolve_database_path(None, None, no_env, "~/x.db") == Path("/home/u/x.db")
    assert resolve_database_path(None, None, no_env, "rel.db") == Path("/data/ds4-lsp/rel.db")
    assert resolve_database_path(None, None, no_env) == Path("/data/ds4-lsp/context.db")
    assert resolve_database_path("~/cli.db", None, no_env) == Path("/home/u/cli.db")


# --- entries and FTS ------------------------------------------------------------------------


def test_fts_follows_inserts_updates_and_deletes(store: Store) -> None:
    index_session(
        store, [make_entry("e1", "alpha retry budget", 0), make_entry("e2", "beta", 1, "e1")]
    )
    assert fts_keys(store, "retry") == ["s1:e1"]
    index_session(store, [make_entry("e1", "gamma", 0), make_entry("e3", "retry again", 1)])
    assert fts_keys(store, "retry") == ["s1:e3"]
    assert fts_keys(store, "beta") == []
    assert delete_session(store, "s1")
    assert fts_keys(store, "retry") == [] and fts_keys(store, "gamma") == []
    conn = store.connection()
    conn.execute("INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)")
    assert conn.execute("SELECT COUNT(*) FROM entries_fts").fetchone()[0] == 0


def test_duplicate_ids_in_a_replacement_resolve_last_wins(store: Store) -> None:
    count = index_session(store, [make_entry("e1", "first", 0), make_entry("e1", "second", 1)])
    assert count == 1
    [row] = load_entries(store, "s1")
    assert (row.searchable_text, row.seq) == ("second", 1)
    store.connection().execute(
        "INSERT INTO entries_fts (entries_fts, rank) VALUES ('integrity-check', 1)"
    )
    assert fts_keys(store, "first") == [] and fts_keys(store, "second") == ["s1:e1"]


NASTY_TERMS = [
    'say "hi"',
    "a AND b",
    "x OR",
    "NEAR(a b)",
    "col:value",
    "-minus",
    "star*",
    "(unbalanced",
    "^caret",
    "'single'",
    '""',
    "NOT",
]


@pytest.mark.parametrize("term", NASTY_TERMS)
def test_user_terms_with_quotes_and_operators_are_bound_parameters(store: Store, term: str) -> None:
    index_session(
        store,
        [make_entry("e1", f"the user wrote {term} here", 0), make_entry("e2", "unrelated text", 1)],
    )
    keys = fts_keys(store, quote_term(term))
    if any(ch.isalnum() for ch in term):
        assert keys == ["s1:e1"]
    else:
        assert keys == []


@settings(
    max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)
@given(term=st.text(min_size=1, max_size=30))
def test_no_user_text_causes_an_fts_syntax_error(store: Store, term: str) -> None:
    if "\x00" in term:
        return  # SQLite text parameters end at NUL; callers strip it
    fts_keys(store, quote_term(term))  # must not raise


def test_peewee_models_query_the_same_tables(store: Store) -> None:
    index_session(store, [make_entry("e1", "alpha budget", 0), make_entry("e2", "alpha", 1)])
    models = store.models
    assert models.Entry.select().count() == 2
    hits = (
        models.EntryFTS.select(models.EntryFTS.entry_key, models.EntryFTS.bm25().alias("s"))
        .where(models.EntryFTS.match(quote_term("budget")))
        .order_by(models.EntryFTS.bm25())
    )
    assert [h.entry_key for h in hits] == ["s1:e1"]


def test_session_header_and_branch_walk(store: Store) -> None:
    entries = [
        make_entry("a", "root", 0),
        make_entry("b", "child", 1, "a"),
        make_entry("c", "other branch", 2, "a"),
        make_entry("d", "leaf", 3, "b"),
    ]
    index_session(store, entries)
    assert session_header(store, "s1") == {"type": "session", "id": "s1"}
    assert branch_entry_ids(store, "s1") == ["a", "b", "d"]
    assert branch_entry_ids(store, "s1", "c") == ["a", "c"]
    assert branch_entry_ids(store, "s1", "zzz") == []
    assert branch_entry_ids(store, "nope") == []


def test_branch_walk_survives_cycles_and_orphans(store: Store) -> None:
    index_session(
        store,
        [
            make_entry("x", "x", 0, "y"),
            make_entry("y", "y", 1, "x"),
            make_entry("o", "orphan", 2, "missing"),
        ],
    )
    assert branch_entry_ids(store, "s1", "y") == ["x", "y"]
    assert branch_entry_ids(store, "s1") == ["o"]


def test_a_file_taken_over_by_another_session_replaces_it(store: Store) -> None:
    index_session(store, [make_entry("e1", "old", 0)], session_id="s1", session_file="/f")
    index_session(
        store, [make_entry("e1", "new", 0, session_id="s2")], session_id="s2", session_file="/f"
    )
    assert entry_count(store, "s1") == 0 and entry_count(store, "s2") == 1
    assert fts_keys(store, "old") == []


# --- manifests ------------------------------------------------------------------------------


def test_only_the_latest_128_manifests_are_kept(store: Store) -> None:
    for i in range(130):
        manifest = {
            "id": f"m-{i:03d}",
            "sessionId": "s1" if i % 2 else "s2",
            "createdAt": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z",
            "estimatedTokens": i,
            "promptHash": f"p{i}",
        }
        save_manifest(store, manifest, json.dumps(manifest))
    assert count_manifests(store) == 128
    assert get_manifest(store, "m-000") is None and get_manifest(store, "m-001") is None
    assert get_manifest(store, "m-002")["estimatedTokens"] == 2
    assert latest_manifest(store, "s1")["id"] == "m-129"
    assert latest_manifest(store, "s2")["id"] == "m-128"
    assert latest_manifest(store, "nobody") is None
    row = (
        store.connection()
        .execute(
            "SELECT session_id, estimated_tokens, prompt_hash FROM context_manifests "
            "WHERE manifest_id = 'm-129'"
        )
        .fetchone()
    )
    assert row == ("s1", 129, "p129")


def test_saving_a_manifest_again_replaces_it(store: Store) -> None:
    save_manifest(store, {"id": "m1", "sessionId": "s1"}, json.dumps({"id": "m1", "v": 1}))
    save_manifest(store, {"id": "m1", "sessionId": "s1"}, json.dumps({"id": "m1", "v": 2}))
    assert count_manifests(store) == 1 and get_manifest(store, "m1") == {"id": "m1", "v": 2}
    with pytest.raises(ValueError, match="'id'"):
        save_manifest(store, {"sessionId": "s1"}, "{}")


def test_move_aside_takes_the_wal_and_shm_along(tmp_path: Path) -> None:
    from ds4_core.store import move_aside

    path = tmp_path / "context.db"
    for suffix, body in (("", b"db"), ("-wal", b"wal"), ("-shm", b"shm")):
        Path(f"{path}{suffix}").write_bytes(body)
    moved = move_aside(path, "corrupt")
    assert moved.name.startswith("context.db.corrupt-") and moved.name.endswith("Z")
    assert [Path(f"{moved}{s}").read_bytes() for s in ("", "-wal", "-shm")] == [
        b"db",
        b"wal",
        b"shm",
    ]
    assert not any(Path(f"{path}{s}").exists() for s in ("", "-wal", "-shm"))
    path.write_bytes(b"again")
    second = move_aside(path, "corrupt")  # same second: a counter keeps both
    assert second != moved and second.read_bytes() == b"again" and moved.read_bytes() == b"db"


def test_session_listing_and_counts(store: Store) -> None:
    from ds4_core.store import counts, list_sessions

    index_session(store, [make_entry("e1", "a", 0), make_entry("e2", "b", 1)])
    [row] = list_sessions(store)
    assert row["session_id"] == "s1" and row["session_file"] == "/sessions/s1.jsonl"
    assert row["entry_count"] == 2 and row["project_path"] == "/proj"
    assert counts(store) == {"sessions": 1, "entries": 2}
