"""The schema of the commit-history index (migration `project-commits`, docs/project-knowledge.md
"Git history"): kept in its own module so `migrations.py` stays one screenful per migration.

Tables, all keyed by the canonical workspace folder `project_path`:

* `project_commits`: one row per indexed commit: `hash`, `seq` (the order of indexing, higher is
  newer; the oldest rows by `seq` are dropped beyond `project.maxCommits`), `committed_at`
  (Unix seconds), `subject`, `body` (empty when `withheld`), `files_json` (a JSON array of the
  changed paths kept, relative to the folder), `files_total` (how many Git listed), `withheld`
  (the secret detector's reason when the message was withheld, else NULL), and the FTS columns
  `project_key` (one token naming the folder, so a MATCH stays inside it) and `extra_words`
  (the words of the changed paths and the camelCase / snake_case sub-words of the
  message's identifiers, so `link urls` meets `linkUrl`).
* `project_commits_fts`: FTS5 over `project_key`, `subject`, `body`, `extra_words`, external
  content, tokenizer `porter unicode61 remove_diacritics 2`, so word forms meet (`parsing`
  finds `parse`); kept in step by triggers (no INSERT OR REPLACE, as for `entries_fts`).
* `project_commit_files`: `(project_path, file_path, hash)`, indexed by file path: the commits
  that changed a file.
* `project_commit_state`: per folder, the HEAD the index was built at, the limit it was built
  with, the folder's prefix below the repository's top and when it was indexed.
"""

from __future__ import annotations

PROJECT_COMMITS_SQL = """
CREATE TABLE project_commits (
    project_path TEXT NOT NULL,
    hash TEXT NOT NULL,
    seq INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    files_json TEXT NOT NULL,
    files_total INTEGER NOT NULL CHECK (files_total >= 0),
    withheld TEXT,
    project_key TEXT NOT NULL,
    extra_words TEXT NOT NULL,
    PRIMARY KEY (project_path, hash)
) STRICT;

CREATE INDEX project_commits_seq ON project_commits (project_path, seq);

CREATE VIRTUAL TABLE project_commits_fts USING fts5(
    project_key,
    subject,
    body,
    extra_words,
    content='project_commits',
    content_rowid='rowid',
    tokenize='porter unicode61 remove_diacritics 2'
);

CREATE TRIGGER project_commits_fts_after_insert AFTER INSERT ON project_commits BEGIN
    INSERT INTO project_commits_fts (rowid, project_key, subject, body, extra_words)
    VALUES (new.rowid, new.project_key, new.subject, new.body, new.extra_words);
END;

CREATE TRIGGER project_commits_fts_after_delete AFTER DELETE ON project_commits BEGIN
    INSERT INTO project_commits_fts
        (project_commits_fts, rowid, project_key, subject, body, extra_words)
    VALUES ('delete', old.rowid, old.project_key, old.subject, old.body, old.extra_words);
END;

CREATE TABLE project_commit_files (
    project_path TEXT NOT NULL,
    file_path TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (project_path, file_path, hash)
) STRICT, WITHOUT ROWID;

CREATE INDEX project_commit_files_hash ON project_commit_files (project_path, hash);

CREATE TABLE project_commit_state (
    project_path TEXT PRIMARY KEY,
    head TEXT NOT NULL,
    max_commits INTEGER NOT NULL,
    prefix TEXT NOT NULL,
    indexed_at TEXT NOT NULL
) STRICT;
"""
"""SQL of the `project-commits` migration (module docstring). Rows are only inserted and
deleted, never updated, so the FTS index needs no update trigger."""

__all__ = ["PROJECT_COMMITS_SQL"]
