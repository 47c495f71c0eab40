"""Versioned, checksummed schema migrations for the derived SQLite store.

Rules (docs/reference.md §3.11):

* Every migration is `(version, name, sql)`; its checksum is
  `sha256(f"{version}\\n{name}\\n{sql}")` (lower-case hex) and is recorded with the version, the
  name and the UTC time in `schema_migrations(version, name, checksum, applied_at)`.
* `PRAGMA user_version` holds the highest applied version.
* All pending migrations run in ONE write transaction (`BEGIN IMMEDIATE`), so a crash or a
  concurrent process never sees a half-migrated schema.
* A database whose `user_version` is newer than `LATEST_VERSION`, or whose recorded checksum of
  an applied migration differs from ours, is not ours to use: `check_applied` reports it and
  `store.database.open_store` moves the file aside and starts a fresh one.

The schema itself (column lists from docs/architecture.md "store"):

* `sessions`, `entries` (key `entry_key = session_id || ':' || entry_id`, because Pi's 8-hex ids
  are unique only inside one session; docs/reference.md §3.11 v2), `entries_fts` (FTS5 external
  content over `entries`, kept in sync by triggers), `session_index_state` (the byte-offset
  checkpoint of docs/reference.md §3.12, plus `resume_json` for `ResumeState`);
* `context_manifests` (docs/reference.md §3.15; the v4 columns folded in);
* `project_states`, `project_files`, `project_snippets`, `project_snippets_fts` (migration 4,
  docs/project-knowledge.md "Storage");
* `project_file_texts`, `project_file_texts_fts` (migration 6: whole-file full text).
* `summaries`, `summary_sources`, `summary_edges` (migration 7: the summary graph,
  docs/compaction.md "Storage").
* `entries_subwords` (migration 9: sub-words of history entries, `sessions.subwords`).
* `context_mutations`, `memory_items`, `pins` (migration 11: memory and pins,
  `store.memory_schema`, docs/memory.md "Storage").
* `artifact_refs` (migration 12: the artifact of each large tool result of an indexed session,
  `store.artifact_schema`, docs/artifacts.md "References").

FTS5 external content caveats (SQLite documentation, "External Content Tables"): the index is
keyed by `entries.rowid`, and `entries` has a TEXT primary key, so its rowids are implicit. Never
`VACUUM` without rebuilding the index afterwards (`INSERT INTO entries_fts(entries_fts)
VALUES('rebuild')`), since VACUUM may renumber implicit rowids; and never write `entries` with
`INSERT OR REPLACE` (REPLACE deletes without firing the delete trigger unless recursive triggers
are on). Use `INSERT ... ON CONFLICT DO UPDATE` or an explicit DELETE + INSERT instead.

The update trigger fires only when the rowid or `searchable_text` changes: an external-content
FTS5 index holds tokens of its indexed column only (UNINDEXED values are read from `entries`),
so re-indexing an unchanged session costs no FTS work.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from ds4_core.tokens import sha256_hex

from .artifact_schema import ARTIFACT_REFS_SQL
from .calibration_schema import CALIBRATION_SQL
from .commit_schema import PROJECT_COMMITS_SQL
from .memory_schema import MEMORY_SQL
from .subword_schema import ENTRIES_SUBWORDS_SQL

MIGRATIONS_TABLE_SQL = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    checksum TEXT NOT NULL,
    applied_at TEXT NOT NULL
) STRICT"""


@dataclass(frozen=True)
class Migration:
    """One schema migration.

    Attributes:
        version: 1-based, strictly increasing.
        name: a short kebab-case name (recorded in `schema_migrations`).
        sql: one or more SQL statements separated by `;` (trigger bodies allowed).
    """

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 hex of `f"{version}\\n{name}\\n{sql}"` (docs/reference.md §3.11)."""
        return sha256_hex(f"{self.version}\n{self.name}\n{self.sql}")


_INITIAL_SESSION_INDEX = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY,
    session_file TEXT NOT NULL UNIQUE,
    project_path TEXT,
    header_json TEXT NOT NULL,
    indexed_at TEXT NOT NULL
) STRICT;

CREATE TABLE entries (
    entry_key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions(session_id) ON DELETE CASCADE,
    entry_id TEXT NOT NULL,
    parent_id TEXT,
    entry_type TEXT NOT NULL,
    role TEXT,
    created_at TEXT,
    seq INTEGER NOT NULL,
    line_number INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    searchable_text TEXT NOT NULL,
    token_estimate INTEGER NOT NULL,
    indexed_at TEXT NOT NULL,
    UNIQUE (session_id, entry_id),
    CHECK (entry_key = session_id || ':' || entry_id)
) STRICT;

CREATE INDEX entries_session_seq ON entries (session_id, seq);

CREATE VIRTUAL TABLE entries_fts USING fts5(
    searchable_text,
    entry_key UNINDEXED,
    session_id UNINDEXED,
    content='entries',
    content_rowid='rowid',
    tokenize='unicode61 remove_diacritics 2'
);

CREATE TRIGGER entries_fts_after_insert AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts (rowid, searchable_text, entry_key, session_id)
    VALUES (new.rowid, new.searchable_text, new.entry_key, new.session_id);
END;

CREATE TRIGGER entries_fts_after_delete AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, searchable_text, entry_key, session_id)
    VALUES ('delete', old.rowid, old.searchable_text, old.entry_key, old.session_id);
END;

CREATE TRIGGER entries_fts_after_update AFTER UPDATE ON entries
WHEN old.rowid IS NOT new.rowid OR old.searchable_text IS NOT new.searchable_text BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, searchable_text, entry_key, session_id)
    VALUES ('delete', old.rowid, old.searchable_text, old.entry_key, old.session_id);
    INSERT INTO entries_fts (rowid, searchable_text, entry_key, session_id)
    VALUES (new.rowid, new.searchable_text, new.entry_key, new.session_id);
END;

CREATE TABLE session_index_state (
    session_id TEXT PRIMARY KEY REFERENCES sessions(session_id) ON DELETE CASCADE,
    session_file TEXT NOT NULL,
    header_hash TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    file_mtime_ms REAL NOT NULL,
    checkpoint_offset INTEGER NOT NULL,
    checkpoint_hash_start INTEGER,
    checkpoint_hash TEXT,
    indexed_entries INTEGER NOT NULL,
    malformed_lines INTEGER NOT NULL,
    resume_json TEXT NOT NULL,
    indexed_at TEXT NOT NULL
) STRICT;
"""

_CONTEXT_MANIFESTS = """
CREATE TABLE context_manifests (
    manifest_id TEXT PRIMARY KEY,
    session_id TEXT,
    branch_leaf_id TEXT,
    created_at TEXT NOT NULL,
    provider TEXT,
    model TEXT,
    context_window INTEGER,
    output_reserve INTEGER,
    hard_input_limit INTEGER,
    target_input_tokens INTEGER,
    estimated_tokens INTEGER,
    actual_tokens INTEGER,
    pi_reported_tokens INTEGER,
    prompt_hash TEXT,
    policy_version TEXT,
    planner_version TEXT,
    manifest_json TEXT NOT NULL
) STRICT;

CREATE INDEX context_manifests_session_created ON context_manifests (session_id, created_at);

CREATE INDEX context_manifests_prompt_hash ON context_manifests (prompt_hash);
"""

_ENTRIES_FTS_VOCAB = """
CREATE VIRTUAL TABLE entries_fts_vocab USING fts5vocab(entries_fts, 'row');
"""
"""Per-term document counts of `entries_fts` (SQLite FTS5 "fts5vocab" 'row' table); retrieval
uses them to leave terms with almost no bm25 weight out of the OR query."""

_PROJECT_KNOWLEDGE_INDEX = """
CREATE TABLE project_states (
    project_path TEXT PRIMARY KEY,
    git_root TEXT,
    git_branch TEXT,
    git_head TEXT,
    dirty INTEGER NOT NULL CHECK (dirty IN (0, 1)),
    changed_paths_json TEXT NOT NULL,
    indexed_at TEXT NOT NULL
) STRICT;

CREATE TABLE project_files (
    project_path TEXT NOT NULL,
    file_path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    language TEXT,
    git_commit TEXT,
    modified INTEGER NOT NULL CHECK (modified IN (0, 1)),
    tracked INTEGER NOT NULL CHECK (tracked IN (0, 1)),
    status TEXT NOT NULL CHECK (status IN ('current', 'deleted')),
    indexed_at TEXT NOT NULL,
    PRIMARY KEY (project_path, file_path)
) STRICT;

CREATE TABLE project_snippets (
    snippet_id TEXT PRIMARY KEY,
    project_path TEXT NOT NULL,
    file_path TEXT NOT NULL,
    file_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL CHECK (start_line >= 1),
    end_line INTEGER NOT NULL CHECK (end_line >= start_line),
    content TEXT NOT NULL,
    symbols TEXT NOT NULL,
    search_text TEXT NOT NULL,
    token_estimate INTEGER NOT NULL,
    stale INTEGER NOT NULL CHECK (stale IN (0, 1)),
    indexed_at TEXT NOT NULL
) STRICT;

CREATE INDEX project_snippets_file ON project_snippets (project_path, file_path, stale);

CREATE VIRTUAL TABLE project_snippets_fts USING fts5(
    content,
    file_path,
    symbols,
    search_text,
    content='project_snippets',
    content_rowid='rowid',
    tokenize='unicode61 remove_diacritics 2'
);

CREATE VIRTUAL TABLE project_snippets_fts_vocab USING fts5vocab(project_snippets_fts, 'row');

CREATE TRIGGER project_snippets_fts_after_insert AFTER INSERT ON project_snippets BEGIN
    INSERT INTO project_snippets_fts (rowid, content, file_path, symbols, search_text)
    VALUES (new.rowid, new.content, new.file_path, new.symbols, new.search_text);
END;

CREATE TRIGGER project_snippets_fts_after_delete AFTER DELETE ON project_snippets BEGIN
    INSERT INTO project_snippets_fts
        (project_snippets_fts, rowid, content, file_path, symbols, search_text)
    VALUES ('delete', old.rowid, old.content, old.file_path, old.symbols, old.search_text);
END;

CREATE TRIGGER project_snippets_fts_after_update AFTER UPDATE ON project_snippets
WHEN old.rowid IS NOT new.rowid OR old.content IS NOT new.content
    OR old.file_path IS NOT new.file_path OR old.symbols IS NOT new.symbols
    OR old.search_text IS NOT new.search_text BEGIN
    INSERT INTO project_snippets_fts
        (project_snippets_fts, rowid, content, file_path, symbols, search_text)
    VALUES ('delete', old.rowid, old.content, old.file_path, old.symbols, old.search_text);
    INSERT INTO project_snippets_fts (rowid, content, file_path, symbols, search_text)
    VALUES (new.rowid, new.content, new.file_path, new.symbols, new.search_text);
END;
"""
"""Project knowledge (docs/project-knowledge.md "Storage"; docs/reference.md §3.11 v7).

`project_snippets_fts` is external content over `project_snippets` with the same caveats as
`entries_fts` (no VACUUM without a rebuild, no INSERT OR REPLACE); marking snippets stale or
reviving them changes no indexed column, so it costs no FTS work. Stale snippets stay in the
FTS index: searches join `project_snippets` and keep `stale = 0`. `project_snippets_fts_vocab`
gives per-term row counts for IDF-based query pruning, as `entries_fts_vocab` does."""

_PROJECT_SENT_SNIPPETS = """
CREATE TABLE project_sent_snippets (
    manifest_id TEXT NOT NULL REFERENCES context_manifests(manifest_id) ON DELETE CASCADE,
    snippet_id TEXT NOT NULL,
    project_path TEXT NOT NULL,
    file_path TEXT NOT NULL,
    file_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    content TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    PRIMARY KEY (manifest_id, snippet_id)
) STRICT;

CREATE INDEX project_sent_snippets_file
    ON project_sent_snippets (project_path, file_path, sent_at);
"""
"""Which project snippets each stored manifest sent (lines and text as sent), for stale-snippet
diagnostics; rows go with their manifest (ds4_core/project/sent.py)."""

_PROJECT_FILE_TEXTS = """
CREATE TABLE project_file_texts (
    project_path TEXT NOT NULL,
    file_path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (project_path, file_path)
) STRICT;

CREATE VIRTUAL TABLE project_file_texts_fts USING fts5(
    text,
    content='project_file_texts',
    content_rowid='rowid',
    tokenize='unicode61 remove_diacritics 2'
);

CREATE TRIGGER project_file_texts_fts_after_insert AFTER INSERT ON project_file_texts BEGIN
    INSERT INTO project_file_texts_fts (rowid, text) VALUES (new.rowid, new.text);
END;

CREATE TRIGGER project_file_texts_fts_after_delete AFTER DELETE ON project_file_texts BEGIN
    INSERT INTO project_file_texts_fts (project_file_texts_fts, rowid, text)
    VALUES ('delete', old.rowid, old.text);
END;

CREATE TRIGGER project_file_texts_fts_after_update AFTER UPDATE ON project_file_texts
WHEN old.rowid IS NOT new.rowid OR old.text IS NOT new.text BEGIN
    INSERT INTO project_file_texts_fts (project_file_texts_fts, rowid, text)
    VALUES ('delete', old.rowid, old.text);
    INSERT INTO project_file_texts_fts (rowid, text) VALUES (new.rowid, new.text);
END;
"""
"""Whole-file full text of the current project files (project retrieval's file ranking for
prose requests: bm25 over one row per file). `text` is the file's path words, its content and
the identifier sub-words of its content (`windows.search_text`), so `shipping method` finds
`getShippingMethod`. One row per current file (deleted files lose theirs), written in the same
transaction as the file's `project_files` row; `content_hash` is the hash of the content it was
built from. External content with the same caveats as `entries_fts` (no VACUUM without a
rebuild, no INSERT OR REPLACE). A database migrated from version 5 has no rows yet: the next
sync re-reads every file without one."""

_SUMMARY_GRAPH = """
CREATE TABLE summaries (
    session_id TEXT NOT NULL,
    summary_id TEXT NOT NULL,
    summary_kind TEXT NOT NULL CHECK (summary_kind IN ('segment', 'aggregate', 'branch')),
    content TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    graph_level INTEGER NOT NULL CHECK (graph_level >= 0),
    created_at TEXT NOT NULL,
    validation_status TEXT NOT NULL
        CHECK (validation_status IN ('valid', 'warning', 'invalid')),
    validation_issue_codes_json TEXT NOT NULL DEFAULT '[]',
    provider TEXT,
    model TEXT,
    first_kept_entry_id TEXT,
    tokens_before INTEGER,
    compaction_reason TEXT,
    lifecycle_status TEXT NOT NULL DEFAULT 'committed'
        CHECK (lifecycle_status IN ('prepared', 'committed', 'failed')),
    pi_compaction_entry_id TEXT,
    operation_id TEXT NOT NULL,
    failure_reason TEXT,
    metadata_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (session_id, summary_id),
    UNIQUE (session_id, pi_compaction_entry_id)
) STRICT;

CREATE INDEX summaries_session_lifecycle ON summaries (session_id, lifecycle_status);

CREATE INDEX summaries_operation ON summaries (session_id, operation_id);

CREATE INDEX summaries_summary ON summaries (summary_id);

CREATE TABLE summary_sources (
    session_id TEXT NOT NULL,
    summary_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    entry_id TEXT NOT NULL,
    PRIMARY KEY (session_id, summary_id, position),
    FOREIGN KEY (session_id, summary_id) REFERENCES summaries (session_id, summary_id)
        ON DELETE CASCADE
) STRICT;

CREATE TABLE summary_edges (
    session_id TEXT NOT NULL,
    parent_id TEXT NOT NULL,
    child_order INTEGER NOT NULL,
    child_id TEXT NOT NULL,
    PRIMARY KEY (session_id, parent_id, child_order),
    FOREIGN KEY (session_id, parent_id) REFERENCES summaries (session_id, summary_id)
        ON DELETE CASCADE,
    FOREIGN KEY (session_id, child_id) REFERENCES summaries (session_id, summary_id),
    CHECK (parent_id <> child_id)
) STRICT;

CREATE INDEX summary_edges_child ON summary_edges (session_id, child_id);
"""
"""The summary graph (docs/compaction.md "Storage"; docs/reference.md §3.11 v1 + v5 + v6 folded
into one migration). One `summaries` row per node: kind, level, content, provenance
(`source_hash`), validation, provider/model, the compaction it belongs to, and its lifecycle
(`prepared` -> `committed` | `failed`; rows imported from a session file are `committed`).
Rows are keyed by `(session_id, summary_id)`: a session forked by Pi (`/fork`,
`parentSession`) copies the compaction entries of its path, ids included, and gets its own rows
for them, so each session's graph is complete and independent. Every table carries the session,
and an edge joins two nodes of the SAME session (composite foreign keys).
`session_id` has NO foreign key to `sessions`: nodes must survive a session index rebuild
(committed ones are re-imported idempotently from the compaction entries anyway). Pi entry ids
are unique only per session, so `pi_compaction_entry_id` is unique per session (NULLs are
distinct in SQLite UNIQUE constraints, so any number of rows may have none). `operation_id` is
the summary id of the root of the operation that created the row (the unit committed or failed
together), within the row's session. `summaries_summary` finds the sessions holding an id (the
`ds4/compactCommitted` / `ds4/compactFailed` notifications name no session).
`summary_sources` holds the entries a node summarizes directly, in span order;
`summary_edges` the ordered children of an aggregate. A child may not be deleted while a parent
points at it (no cascade on `child_id`); deleting a parent removes its edges. The implicit rowid
of `summaries` is the insertion order used to break `created_at` ties."""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial-session-index", _INITIAL_SESSION_INDEX),
    Migration(2, "context-manifests", _CONTEXT_MANIFESTS),
    Migration(3, "entries-fts-vocab", _ENTRIES_FTS_VOCAB),
    Migration(4, "project-knowledge-index", _PROJECT_KNOWLEDGE_INDEX),
    Migration(5, "project-sent-snippets", _PROJECT_SENT_SNIPPETS),
    Migration(6, "project-files-fts", _PROJECT_FILE_TEXTS),
    Migration(7, "summary-graph", _SUMMARY_GRAPH),
    Migration(8, "project-commits", PROJECT_COMMITS_SQL),
    Migration(9, "entries-subwords", ENTRIES_SUBWORDS_SQL),
    Migration(10, "model-calibration", CALIBRATION_SQL),
    Migration(11, "memory-and-pins", MEMORY_SQL),
    Migration(12, "artifact-references", ARTIFACT_REFS_SQL),
)
"""All migrations in version order. Never edit an entry once released: add a new one."""

LATEST_VERSION = MIGRATIONS[-1].version
"""The schema version this code creates and understands."""


@dataclass(frozen=True)
class SchemaProblem:
    """Why an existing database cannot be used as is.

    Attributes:
        reason: a short slug used in the moved-aside file name (`newer-schema`,
            `checksum-mismatch`, `unrecognized`, `corrupt`).
        detail: one sentence for the user, without the file path.
    """

    reason: str
    detail: str


def split_statements(sql: str) -> list[str]:
    """Split `sql` into complete statements (trigger bodies stay whole).

    Uses `sqlite3.complete_statement`, so a `;` inside a `BEGIN ... END` trigger body or a string
    literal does not split. We cannot use `executescript`, which commits any open transaction
    first and would break the one-transaction rule.

    Raises:
        ValueError: if text after the last complete statement is not a complete statement.
    """
    statements: list[str] = []
    pending = ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statement = pending.strip()
            if statement.rstrip(";").strip():
                statements.append(statement)
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete SQL statement at the end of a migration: {pending.strip()!r}")
    return statements


def _table_exists(conn: sqlite3.Connection, name: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
    ).fetchone()
    return row is not None


def user_version(conn: sqlite3.Connection) -> int:
    """`PRAGMA user_version` of the connection's main database."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def check_applied(
    conn: sqlite3.Connection, migrations: Iterable[Migration] = MIGRATIONS
) -> SchemaProblem | None:
    """Compare what the database says was applied with `migrations`.

    Returns `None` when the database is empty or a consistent prefix of `migrations` (pending
    migrations may remain); otherwise the problem. Read-only.

    Raises:
        sqlite3.DatabaseError: when the file is not a database or is corrupt (callers treat
            `SQLITE_NOTADB` / `SQLITE_CORRUPT` as "move aside").
    """
    known = {m.version: m for m in migrations}
    latest = max(known, default=0)
    version = user_version(conn)
    if version > latest:
        return SchemaProblem(
            "newer-schema",
            f"it has schema version {version}, newer than this version of ds4 supports "
            f"({latest}); it was probably written by a newer ds4-lsp",
        )
    if not _table_exists(conn, "schema_migrations"):
        if version == 0:
            other = conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' LIMIT 1"
            ).fetchone()
            if other is None:
                return None  # a fresh, empty database
            return SchemaProblem(
                "unrecognized",
                f"it is an SQLite database that ds4 did not create (it has a table {other[0]!r} "
                "and no schema_migrations table)",
            )
        return SchemaProblem(
            "corrupt", f"it has schema version {version} but no schema_migrations table"
        )
    rows = conn.execute(
        "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
    ).fetchall()
    for row_version, name, checksum in rows:
        migration = known.get(row_version)
        if migration is None:
            return SchemaProblem(
                "newer-schema",
                f"it records migration {row_version} ({name!r}), which this version of ds4 does "
                "not know; it was probably written by a newer ds4-lsp",
            )
        if checksum != migration.checksum or name != migration.name:
            return SchemaProblem(
                "checksum-mismatch",
                f"the recorded checksum of migration {row_version} ({name!r}) does not match "
                "this version of ds4, so its schema cannot be trusted",
            )
    applied = [row[0] for row in rows]
    if applied != list(range(1, len(applied) + 1)) or (applied[-1] if applied else 0) != version:
        return SchemaProblem(
            "corrupt",
            f"its recorded migrations {applied} do not match its schema version {version}",
        )
    return None


def pending_migrations(
    conn: sqlite3.Connection, migrations: Iterable[Migration] = MIGRATIONS
) -> list[Migration]:
    """Migrations with a version above the database's `user_version`, in order."""
    version = user_version(conn)
    return sorted((m for m in migrations if m.version > version), key=lambda m: m.version)


def apply_migrations(
    conn: sqlite3.Connection, migrations: Iterable[Migration] = MIGRATIONS
) -> list[Migration]:
    """Apply every pending migration in ONE `BEGIN IMMEDIATE` transaction.

    `conn` must be in autocommit mode (`isolation_level=None`, as peewee uses it) with no open
    transaction. The pending set is re-read after the write lock is taken, so two processes
    migrating the same file at once apply each migration exactly once. On any error the whole
    transaction is rolled back and the error propagates; the database is left as it was.

    Returns the migrations applied (empty when already up to date).
    """
    all_migrations = list(migrations)
    if not pending_migrations(conn, all_migrations):
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        pending = pending_migrations(conn, all_migrations)
        conn.execute(MIGRATIONS_TABLE_SQL)
        applied_at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        for migration in pending:
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum, applied_at) "
                "VALUES (?, ?, ?, ?)",
                (migration.version, migration.name, migration.checksum, applied_at),
            )
        if pending:
            # PRAGMA takes no bound parameters; the value is our own integer.
            conn.execute(f"PRAGMA user_version = {int(pending[-1].version)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return pending
