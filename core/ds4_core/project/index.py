"""Keeping the project index in sync with the workspace (docs/project-knowledge.md `index.py`).

One module: the readers of the index (`file_state`, `load_snippets`, `project_state`, ...) and
`sync_project` share the row shapes (`FileState`, `SnippetRow`), the table statements and the
incremental rule below; the batch writer of `sync_project` is most of the length.

Incremental rule (docs/reference.md §3.9): a stored file is unchanged when its status is
`current` and its size, mtime, git-modified flag and git HEAD are all equal to what discovery
reports (and, for an open editor buffer, the buffer's hash equals the stored one). Anything
else is read again (or the buffer text is used) and hashed; equal content only refreshes the
file's metadata, different content is re-windowed: a new window whose text equals one of the
file's current rows takes that row over (re-pointed to its new id, file hash and lines: no FTS
work, `_keep_unchanged`), a window whose id is stored is revived, the others are inserted, and
the current rows no new window claims are marked stale. Files that disappeared (or can no longer be indexed: now a secret, binary,
oversized, excluded...) are marked `deleted` and their snippets stale.

Decisions:

* `content_hash` / `file_hash` is SHA-256 of the decoded text as UTF-8 (`live_hash`), not of
  the raw bytes, so the text of an open buffer and the file it was saved to hash the same
  (a UTF-8 BOM or UTF-16 encoding does not count as a change).
* Text taken from an open buffer is stored with `mtime_ns = LIVE_MTIME_NS` (-1): the disk may
  differ, so the next sync without that buffer re-reads the file (cheap when equal).
* Stale snippets of a file are kept for its `STALE_GENERATIONS_KEPT` most recent earlier
  contents; older ones are deleted, so an editor syncing on every change cannot grow the
  index without bound. Going back to a kept content (undo) revives its snippets without FTS
  work (same snippet ids, `ON CONFLICT DO UPDATE`).
* Snippet ids stay DS4's (they include the file hash, docs/reference.md §3.10), so a re-pointed
  row changes id. Nothing looks up an index row by an old id: manifests and stale-snippet
  diagnostics keep their own copy of what was sent (`project_sent_snippets`), and
  `indexed_lines` reads the current rows by the file's hash. After an edit the current rows,
  the whole-file text and the search results equal a from-scratch index of the same content
  (tests/core/test_project_reindex.py); only rowids and `indexed_at` differ.
* A sync of more than `READER_THREAD_MIN_FILES` files reads, checks (`read_indexable`),
  hashes and windows them on a reader thread (`_read_ahead`, at most `READ_AHEAD_FILES`
  ahead, in order) while the calling thread writes: SQLite releases the GIL while FTS5
  tokenizes, so the two overlap. The reader never touches the store; an exception it meets is
  raised in the caller, and a failing writer stops it. An edit (a few files) stays on the
  calling thread and reuses the symbols and search text of its stored windows
  (`_known_windows`), which depend only on the path and the window's text.
* Work is written in batches (`BATCH_FILES` files or `BATCH_CHARS` characters of snippet text),
  one `store.write()` transaction each, files read outside the write lock; a file's rows are
  always written in one transaction, and `project_states` in the last one. A failed write
  rolls back its batch: those files keep their previous rows (and are retried next sync).
* Lines over `windows.MAX_LINE_CHARS` (5,000) characters are cut (`cut_long_lines`) in
  the windows and the whole-file text, never in `content_hash` (the hash of the file as it
  is); a sync that does so lists the file in `long_line_files` with the number of lines cut.
* Every current file also has one `project_file_texts` row (whole-file full text: its path
  words, content and identifier sub-words; `file_text`), written and deleted with the file's
  row. A current file without one (an index built before migration 6) is read again on the
  next sync even when unchanged, and only gets that row when its content is the same.
* Snippets are inserted with multi-row `INSERT ... VALUES` statements with bound parameters:
  each statement writing through the FTS5 trigger makes FTS5 flush, so one row per statement
  is several times slower (see `store.sessions`).
"""

from __future__ import annotations

import json
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from ds4_core.lines import split_lines
from ds4_core.privacy.secrets import secret_reason
from ds4_core.project.filters import decode_text, read_indexable
from ds4_core.project.windows import (
    MAX_LINE_CHARS,
    MAX_WINDOWS_PER_FILE,
    TRUNCATION_MARKER,
    content_line_count,
    cut_long_lines,
    declared_symbols,
    search_text,
    snippet_id,
    window_lines,
)
from ds4_core.retrieval.descriptor import replace_lone_surrogates
from ds4_core.store.database import Store, utc_now_iso
from ds4_core.store.sql import MAX_IN_VALUES, chunked, placeholders
from ds4_core.tokens import estimate_text_tokens, sha256_hex

if TYPE_CHECKING:
    from ds4_core.project.discovery import DiscoveredFile, Discovery

DEFAULT_MAX_FILE_BYTES = 512_000
"""`project.maxFileBytes` default (docs/reference.md §2); discovery applies it too."""

SNIPPET_TOKEN_OVERHEAD = 48
"""tokenEstimate = chars-v2 tokens of the content + 48 (docs/reference.md §3.10)."""

LIVE_MTIME_NS = -1
"""`mtime_ns` of a file indexed from an open editor buffer (the disk may differ)."""

STALE_GENERATIONS_KEPT = 2
"""Earlier contents per file whose stale snippets are kept."""

BATCH_FILES = 256
BATCH_CHARS = 8_000_000
"""A write transaction holds at most this many files / characters of snippet text."""

READER_THREAD_MIN_FILES = 8
"""A sync of more files than this reads, hashes and windows them on a reader thread."""

READ_AHEAD_FILES = 256
READ_AHEAD_CHARS = 16_000_000
"""How far the reader thread may be ahead of the writer, in files and in characters of
prepared snippet and whole-file text (bounds the memory held)."""

MAX_PARTIAL_FILES_LISTED = 50
"""`IndexSync.partial_files` lists at most this many paths."""

_SNIPPET_COLUMNS = (
    "snippet_id, project_path, file_path, file_hash, start_line, end_line, content, symbols, "
    "search_text, token_estimate, stale, indexed_at"
)
_SNIPPET_COLUMN_COUNT = 12
_FILE_COLUMNS = (
    "project_path, file_path, content_hash, size_bytes, mtime_ns, language, git_commit, "
    "modified, tracked, status, indexed_at"
)
_TEXT_COLUMN_COUNT = 4

LANGUAGES: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
    ".cjs": "javascript", ".jsx": "javascriptreact", ".ts": "typescript", ".mts": "typescript",
    ".cts": "typescript", ".tsx": "typescriptreact", ".go": "go", ".rs": "rust", ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".swift": "swift", ".c": "c",
    ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".lua": "lua", ".sh": "shellscript",
    ".bash": "shellscript", ".zsh": "shellscript", ".ps1": "powershell", ".sql": "sql",
    ".md": "markdown", ".mdx": "markdown", ".rst": "restructuredtext", ".txt": "plaintext",
    ".json": "json", ".jsonc": "jsonc", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml",
    ".ini": "ini", ".xml": "xml", ".html": "html", ".htm": "html", ".css": "css",
    ".scss": "scss", ".less": "less", ".vue": "vue", ".svelte": "svelte", ".dart": "dart",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml",
    ".clj": "clojure", ".r": "r", ".jl": "julia", ".zig": "zig", ".proto": "proto",
    ".graphql": "graphql", ".tf": "terraform", ".nix": "nix",
}  # fmt: skip
"""File extension (lower case) -> LSP language id (ds4 maps about 35 extensions)."""

_LANGUAGE_FILE_NAMES = {
    "dockerfile": "dockerfile",
    "makefile": "makefile",
    "gnumakefile": "makefile",
    "cmakelists.txt": "cmake",
}


def language_for(file_path: str) -> str | None:
    """The LSP language id of `file_path` from its name or extension, or None."""
    name = PurePosixPath(file_path).name.lower()
    if name in _LANGUAGE_FILE_NAMES:
        return _LANGUAGE_FILE_NAMES[name]
    return LANGUAGES.get(PurePosixPath(name).suffix)


def live_hash(text: str) -> str:
    """SHA-256 hex of `text` as UTF-8: the `content_hash` of an indexed file with this text.

    Lone UTF-16 surrogates (possible in editor JSON) count as U+FFFD, as they are stored.
    """
    try:
        return sha256_hex(text.encode("utf-8"))
    except UnicodeEncodeError:
        return sha256_hex(replace_lone_surrogates(text).encode("utf-8"))


# ----------------------------------------------------------------------------- read API


@dataclass(frozen=True)
class IndexSync:
    """What one `sync_project` did.

    Attributes:
        project_path: the canonical project root (the key of every stored row).
        files_indexed: files whose content was (re-)windowed and written.
        files_unchanged: files left as they were (by size/mtime/modified/HEAD, or by an
            equal content hash after a re-read; such files may get their metadata refreshed).
        files_deleted: files newly marked `deleted` (gone, or no longer indexable).
        files_skipped: discovery's skipped paths plus files refused when read.
        snippets: snippets written (inserted, updated or revived) by this sync.
        duration_ms: wall time of the sync.
        truncated: discovery stopped at a cap (not every file was seen).
        partial_files: files (re-)windowed by this sync whose end was not windowed: longer
            than `MAX_WINDOWS_PER_FILE` windows (relative paths, sorted, at most
            `MAX_PARTIAL_FILES_LISTED`). Only the sync that windows a file reports it.
        long_line_files: (path, lines cut) of the files (re-)windowed by this sync with lines
            over `MAX_LINE_CHARS` characters, which the index holds cut (sorted, at most
            `MAX_PARTIAL_FILES_LISTED`).
    """

    project_path: str
    files_indexed: int
    files_unchanged: int
    files_deleted: int
    files_skipped: int
    snippets: int
    duration_ms: float
    truncated: bool
    partial_files: tuple[str, ...] = ()
    long_line_files: tuple[tuple[str, int], ...] = ()


class FileState(NamedTuple):
    """One row of `project_files`. `mtime_ns` is `LIVE_MTIME_NS` for buffer text."""

    project_path: str
    file_path: str
    content_hash: str
    size_bytes: int
    mtime_ns: int
    language: str | None
    git_commit: str | None
    modified: bool
    tracked: bool
    status: Literal["current", "deleted"]
    indexed_at: str


class SnippetRow(NamedTuple):
    """One row of `project_snippets`; `symbols` split from its space-separated column."""

    snippet_id: str
    project_path: str
    file_path: str
    file_hash: str
    start_line: int
    end_line: int
    content: str
    symbols: tuple[str, ...]
    search_text: str
    token_estimate: int
    stale: bool
    indexed_at: str


class ProjectState(NamedTuple):
    """One row of `project_states` (`changed_paths` decoded from its JSON column)."""

    project_path: str
    git_root: str | None
    git_branch: str | None
    git_head: str | None
    dirty: bool
    changed_paths: tuple[str, ...]
    indexed_at: str


def _file_from_row(row: Sequence[Any]) -> FileState:
    return FileState(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6],
        bool(row[7]), bool(row[8]), row[9], row[10],
    )  # fmt: skip


def _snippet_from_row(row: Sequence[Any]) -> SnippetRow:
    return SnippetRow(
        row[0], row[1], row[2], row[3], row[4], row[5], row[6],
        tuple(row[7].split()), row[8], row[9], bool(row[10]), row[11],
    )  # fmt: skip


def file_state(store: Store, project_path: str, path: str) -> FileState | None:
    """The stored `project_files` row of `path` (relative POSIX path), or None."""
    row = (
        store.connection()
        .execute(
            f"SELECT {_FILE_COLUMNS} FROM project_files WHERE project_path = ? AND file_path = ?",
            (project_path, path),
        )
        .fetchone()
    )
    return _file_from_row(row) if row is not None else None


def load_snippets(
    store: Store, project_path: str, path: str, *, include_stale: bool = False
) -> list[SnippetRow]:
    """Snippets of `path` ordered by start line (then stale last, then id); only current ones
    unless `include_stale`."""
    where = "" if include_stale else " AND stale = 0"
    rows = (
        store.connection()
        .execute(
            f"SELECT {_SNIPPET_COLUMNS} FROM project_snippets "
            f"WHERE project_path = ? AND file_path = ?{where} "
            "ORDER BY start_line, stale, snippet_id",
            (project_path, path),
        )
        .fetchall()
    )
    return [_snippet_from_row(row) for row in rows]


def snippets_by_id(store: Store, snippet_ids: Iterable[str]) -> dict[str, SnippetRow]:
    """`{snippet_id: row}` for those of `snippet_ids` that are stored (stale ones included)."""
    ids = list(dict.fromkeys(snippet_ids))
    found: dict[str, SnippetRow] = {}
    conn = store.connection()
    for chunk in chunked(ids):
        marks = placeholders(len(chunk))
        for row in conn.execute(
            f"SELECT {_SNIPPET_COLUMNS} FROM project_snippets WHERE snippet_id IN ({marks})", chunk
        ):
            found[row[0]] = _snippet_from_row(row)
    return found


def indexed_lines(
    store: Store, project_path: str, file_path: str
) -> tuple[str, dict[int, str]] | None:
    """What the index holds of a current file, without reading it: `(content_hash, {line:
    text})`, the lines (1-based, overlong ones cut, breaks left out) as its current windows
    hold them. Lines of skipped blank windows, past the window cap or after a truncation are
    missing. None when the file is not current in the index."""
    conn = store.connection()
    row = conn.execute(
        "SELECT content_hash FROM project_files WHERE project_path = ? AND file_path = ? "
        "AND status = 'current'",
        (project_path, file_path),
    ).fetchone()
    if row is None:
        return None
    digest = str(row[0])
    lines: dict[int, str] = {}
    for start, content in conn.execute(
        "SELECT start_line, content FROM project_snippets WHERE project_path = ? "
        "AND file_path = ? AND file_hash = ? AND stale = 0",
        (project_path, file_path, digest),
    ):
        held = split_lines(content)
        if content.endswith(TRUNCATION_MARKER):
            held = held[:-2]  # the marker and the line it cut
        for offset, line in enumerate(held):
            lines.setdefault(int(start) + offset, line)
    return digest, lines


def project_state(store: Store, project_path: str) -> ProjectState | None:
    """The stored `project_states` row (git facts of the last full sync), or None."""
    row = (
        store.connection()
        .execute(
            "SELECT project_path, git_root, git_branch, git_head, dirty, changed_paths_json, "
            "indexed_at FROM project_states WHERE project_path = ?",
            (project_path,),
        )
        .fetchone()
    )
    if row is None:
        return None
    changed = json.loads(row[5])
    return ProjectState(
        row[0], row[1], row[2], row[3], bool(row[4]), tuple(str(p) for p in changed), row[6]
    )


class IndexCounts(NamedTuple):
    """Sizes of one project's index."""

    files: int
    deleted_files: int
    snippets: int
    stale_snippets: int


def index_counts(store: Store, project_path: str) -> IndexCounts:
    """Current / deleted files and current / stale snippets of `project_path`."""
    conn = store.connection()
    files = dict(
        conn.execute(
            "SELECT status, COUNT(*) FROM project_files WHERE project_path = ? GROUP BY status",
            (project_path,),
        ).fetchall()
    )
    snippets = dict(
        conn.execute(
            "SELECT stale, COUNT(*) FROM project_snippets WHERE project_path = ? GROUP BY stale",
            (project_path,),
        ).fetchall()
    )
    return IndexCounts(
        int(files.get("current", 0)),
        int(files.get("deleted", 0)),
        int(snippets.get(0, 0)),
        int(snippets.get(1, 0)),
    )


# ----------------------------------------------------------------------------- sync


@dataclass
class _Work:
    """One file's pending write. `kind`: `index` (snippets given), `meta` (same content,
    refresh the row), `delete` (mark deleted)."""

    kind: Literal["index", "meta", "delete"]
    file_path: str
    had_row: bool
    file_row: tuple[Any, ...] | None = None
    snippets: list[tuple[Any, ...]] | None = None
    chars: int = 0
    text_row: tuple[str, str, str, str] | None = None  # a `project_file_texts` row
    partial: bool = False  # `index` only: the file's end was not windowed (window cap)
    lines_cut: int = 0  # `index` only: lines over MAX_LINE_CHARS cut in the index


def _snippet_rows(
    project_path: str,
    file_path: str,
    text: str,
    file_hash: str,
    now: str,
    known: dict[str, tuple[str, str]] | None = None,
) -> tuple[list[tuple[Any, ...]], int, str]:
    """Rows (in `_SNIPPET_COLUMNS` order) for the windows of `text`, their total chars, and
    the file's `file_text` (built from the windows' `search_text`, so it is computed once).
    `known`: window text -> (symbols, search_text column) of stored windows of this file,
    used instead of computing them again (both depend only on the path and the text)."""
    rows: list[tuple[Any, ...]] = []
    extras: dict[str, None] = {}
    chars = 0
    path_words = search_text(file_path)
    for window in window_lines(text):
        content = window.text
        reused = known.get(content) if known else None
        if reused is not None:
            symbols, column = reused
            extra = _extra_of(column, path_words)
        else:
            symbols = " ".join(declared_symbols(content))
            extra = search_text(content)
            column = f"{path_words}\n{extra}" if path_words and extra else path_words or extra
        if extra:
            extras.update(dict.fromkeys(extra.split("\n")))
        rows.append(
            (
                snippet_id(project_path, file_path, file_hash, window.start_line, window.end_line),
                project_path,
                file_path,
                file_hash,
                window.start_line,
                window.end_line,
                content,
                symbols,
                column,
                estimate_text_tokens(content) + SNIPPET_TOKEN_OVERHEAD,
                0,
                now,
            )
        )
        chars += len(content) + len(extra)
    return rows, chars, _join_text(path_words, text, "\n".join(extras))


def file_text(file_path: str, text: str) -> str:
    """The whole-file full text indexed for `file_path` (`project_file_texts.text`): its path
    words, its content and the identifier sub-words of its content (`search_text`; a sync
    that windows the file writes those of its windows instead, computed once)."""
    return _join_text(search_text(file_path), text, search_text(text))


def _join_text(path_words: str, text: str, extra: str) -> str:
    return "\n".join(part for part in (path_words, text, extra) if part)


def _text_row(
    project_path: str, file_path: str, content_hash: str, text: str
) -> tuple[str, str, str, str]:
    return (project_path, file_path, content_hash, file_text(file_path, text))


def _missing_texts(
    conn: sqlite3.Connection, project_path: str, paths: Collection[str] | None
) -> set[str]:
    """Current stored files of the project (of `paths` when given) without a
    `project_file_texts` row."""
    sql = (
        "SELECT pf.file_path FROM project_files AS pf LEFT JOIN project_file_texts AS t "
        "ON t.project_path = pf.project_path AND t.file_path = pf.file_path "
        "WHERE pf.project_path = ? AND pf.status = 'current' AND t.rowid IS NULL"
    )
    if paths is None:
        return {row[0] for row in conn.execute(sql, (project_path,))}
    missing: set[str] = set()
    for chunk in chunked(list(paths)):
        marks = placeholders(len(chunk))
        missing.update(
            row[0]
            for row in conn.execute(f"{sql} AND pf.file_path IN ({marks})", (project_path, *chunk))
        )
    return missing


@lru_cache(maxsize=8)
def _upsert_texts_sql(rows: int) -> str:
    values = ", ".join([f"({placeholders(_TEXT_COLUMN_COUNT)})"] * rows)
    return (
        "INSERT INTO project_file_texts (project_path, file_path, content_hash, text) "
        f"VALUES {values} ON CONFLICT (project_path, file_path) DO UPDATE SET "
        "content_hash = excluded.content_hash, text = excluded.text"
    )


def _live_text_reason(text: str, max_file_bytes: int) -> tuple[str | None, str | None]:
    """The checks `read_indexable` applies to disk bytes, applied to buffer text:
    `(text, None)` or `(None, reason)`."""
    try:  # the common case: no lone surrogate, so the text is already what is stored
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        text = replace_lone_surrogates(text)
        data = text.encode("utf-8")
    if len(data) > max_file_bytes:
        return None, "oversized"
    decoded, reason = decode_text(data)
    if decoded is None:
        return None, reason
    secret = secret_reason(decoded)
    if secret is not None:
        return None, f"secret: {secret}"
    # The buffer itself (not `decoded`, which drops a leading U+FEFF), so its hash is
    # `live_hash(text)` as the LSP layer computes it.
    return text, None


def _load_stored(
    conn: sqlite3.Connection, project_path: str, paths: Collection[str] | None
) -> dict[str, FileState]:
    sql = f"SELECT {_FILE_COLUMNS} FROM project_files WHERE project_path = ?"
    if paths is None:
        return {row[1]: _file_from_row(row) for row in conn.execute(sql, (project_path,))}
    stored: dict[str, FileState] = {}
    ordered = list(paths)
    for chunk in chunked(ordered):
        marks = placeholders(len(chunk))
        for row in conn.execute(f"{sql} AND file_path IN ({marks})", (project_path, *chunk)):
            stored[row[1]] = _file_from_row(row)
    return stored


@lru_cache(maxsize=8)
def _insert_snippets_sql(rows: int) -> str:
    values = ", ".join([f"({placeholders(_SNIPPET_COLUMN_COUNT)})"] * rows)
    return (
        f"INSERT INTO project_snippets ({_SNIPPET_COLUMNS}) VALUES {values} "
        "ON CONFLICT (snippet_id) DO UPDATE SET content = excluded.content, "
        "symbols = excluded.symbols, search_text = excluded.search_text, "
        "token_estimate = excluded.token_estimate, stale = 0, indexed_at = excluded.indexed_at"
    )


_UPSERT_FILE_SQL = (
    f"INSERT INTO project_files ({_FILE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (project_path, file_path) DO UPDATE SET content_hash = excluded.content_hash, "
    "size_bytes = excluded.size_bytes, mtime_ns = excluded.mtime_ns, "
    "language = excluded.language, git_commit = excluded.git_commit, "
    "modified = excluded.modified, tracked = excluded.tracked, status = excluded.status, "
    "indexed_at = excluded.indexed_at"
)


def _prune_stale(conn: sqlite3.Connection, project_path: str, paths: Sequence[str]) -> None:
    """Delete stale snippets of `paths` beyond the `STALE_GENERATIONS_KEPT` newest contents."""
    drop: list[tuple[str, str]] = []
    for chunk in chunked(paths):
        marks = placeholders(len(chunk))
        rows = conn.execute(
            "SELECT file_path, file_hash FROM project_snippets "
            f"WHERE project_path = ? AND stale = 1 AND file_path IN ({marks}) "
            "GROUP BY file_path, file_hash "
            "ORDER BY file_path, MAX(indexed_at) DESC, MAX(rowid) DESC",
            (project_path, *chunk),
        ).fetchall()
        seen: dict[str, int] = {}
        for file_path, file_hash in rows:
            seen[file_path] = seen.get(file_path, 0) + 1
            if seen[file_path] > STALE_GENERATIONS_KEPT:
                drop.append((file_path, file_hash))
    for pairs in chunked(drop, MAX_IN_VALUES // 2):
        values = ", ".join("(?, ?)" for _ in pairs)
        conn.execute(
            "DELETE FROM project_snippets WHERE project_path = ? AND stale = 1 "
            f"AND (file_path, file_hash) IN (VALUES {values})",
            (project_path, *(value for pair in pairs for value in pair)),
        )


def _write_batch(
    store: Store,
    project_path: str,
    batch: Sequence[_Work],
    now: str,
    state_row: tuple[Any, ...] | None,
) -> int:
    """Write `batch` in one transaction; returns the snippet rows written."""
    written = 0
    with store.write() as conn:
        replaced = [w.file_path for w in batch if w.had_row and w.kind in ("index", "delete")]
        gone = [w.file_path for w in batch if w.had_row and w.kind == "delete"]
        for chunk in chunked(gone):
            marks = placeholders(len(chunk))
            conn.execute(
                "UPDATE project_snippets SET stale = 1 "
                f"WHERE project_path = ? AND stale = 0 AND file_path IN ({marks})",
                (project_path, *chunk),
            )
        inserts: list[tuple[Any, ...]] = []
        for w in batch:
            if w.kind != "index" or not w.snippets:
                continue
            if w.had_row:
                pending, repointed = _keep_unchanged(conn, project_path, w, now)
                inserts.extend(pending)
                written += repointed
            else:
                inserts.extend(w.snippets)
        stale_old = [
            w.file_path for w in batch if w.had_row and w.kind == "index" and not w.snippets
        ]
        for chunk in chunked(stale_old):  # re-windowed to nothing (white space only)
            marks = placeholders(len(chunk))
            conn.execute(
                "UPDATE project_snippets SET stale = 1 "
                f"WHERE project_path = ? AND stale = 0 AND file_path IN ({marks})",
                (project_path, *chunk),
            )
        file_rows = [w.file_row for w in batch if w.file_row is not None]
        if file_rows:
            conn.executemany(_UPSERT_FILE_SQL, file_rows)
        deleted = [w.file_path for w in batch if w.kind == "delete"]
        for chunk in chunked(deleted):
            marks = placeholders(len(chunk))
            conn.execute(
                f"UPDATE project_files SET status = 'deleted', indexed_at = ? "
                f"WHERE project_path = ? AND file_path IN ({marks})",
                (now, project_path, *chunk),
            )
            conn.execute(
                f"DELETE FROM project_file_texts WHERE project_path = ? AND file_path IN ({marks})",
                (project_path, *chunk),
            )
        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        per_text = max(1, min(100, limit // _TEXT_COLUMN_COUNT))
        texts = iter(w.text_row for w in batch if w.text_row is not None)
        while text_rows := list(islice(texts, per_text)):
            conn.execute(
                _upsert_texts_sql(len(text_rows)), [value for row in text_rows for value in row]
            )
        per_statement = max(1, min(1000, limit // _SNIPPET_COLUMN_COUNT))
        rows = iter(inserts)
        while chunk_rows := list(islice(rows, per_statement)):
            conn.execute(
                _insert_snippets_sql(len(chunk_rows)),
                [value for row in chunk_rows for value in row],
            )
            written += len(chunk_rows)
        if replaced:  # after the inserts, so a revived content is not counted as stale
            _prune_stale(conn, project_path, replaced)
        if state_row is not None:
            conn.execute(
                "INSERT INTO project_states (project_path, git_root, git_branch, git_head, "
                "dirty, changed_paths_json, indexed_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (project_path) DO UPDATE SET git_root = excluded.git_root, "
                "git_branch = excluded.git_branch, git_head = excluded.git_head, "
                "dirty = excluded.dirty, changed_paths_json = excluded.changed_paths_json, "
                "indexed_at = excluded.indexed_at",
                state_row,
            )
    return written


def _keep_unchanged(
    conn: sqlite3.Connection, project_path: str, work: _Work, now: str
) -> tuple[list[tuple[Any, ...]], int]:
    """Reconcile the current snippet rows of a re-windowed, already indexed file with its new
    windows (`work.snippets`) without FTS work for what did not change: a new window whose
    id is stored (the same content indexed before: undo, or a forced re-read) is revived by
    the insert's upsert; one whose text, symbols and search text equal a current row's is
    re-pointed (that row takes the new id, file hash and lines; its FTS columns are the new
    window's already, so FTS5 does nothing); the other current rows become stale. Returns
    (the rows still to insert, the rows re-pointed)."""
    rows = work.snippets or []
    old = conn.execute(
        "SELECT rowid, snippet_id, content, symbols, search_text FROM project_snippets "
        "WHERE project_path = ? AND file_path = ? AND stale = 0",
        (project_path, work.file_path),
    ).fetchall()
    new_ids = [row[0] for row in rows]
    stored_ids: set[str] = set()
    for chunk in chunked(new_ids):
        stored_ids.update(
            found
            for (found,) in conn.execute(
                f"SELECT snippet_id FROM project_snippets WHERE snippet_id IN "
                f"({placeholders(len(chunk))})",
                chunk,
            )
        )
    # (text, symbols, search text): the FTS columns (with the path) -> rowids of the current
    # rows no new window claims by id
    free: dict[tuple[str, str, str], list[int]] = {}
    for rowid, old_id, content, symbols, column in old:
        if old_id not in stored_ids:
            free.setdefault((content, symbols, column), []).append(rowid)
    pending: list[tuple[Any, ...]] = []
    repoint: list[tuple[Any, ...]] = []
    for row in rows:
        rowids = free.get((row[6], row[7], row[8])) if row[0] not in stored_ids else None
        if rowids:
            repoint.append((row[0], row[3], row[4], row[5], row[9], now, rowids.pop()))
        else:
            pending.append(row)
    stale = [rowid for rowids in free.values() for rowid in rowids]
    for chunk in chunked(stale):
        conn.execute(
            f"UPDATE project_snippets SET stale = 1 WHERE rowid IN ({placeholders(len(chunk))})",
            chunk,
        )
    if repoint:
        conn.executemany(
            "UPDATE project_snippets SET snippet_id = ?, file_hash = ?, start_line = ?, "
            "end_line = ?, token_estimate = ?, indexed_at = ? WHERE rowid = ?",
            repoint,
        )
    return pending, len(repoint)


def _known_windows(
    conn: sqlite3.Connection,
    project_path: str,
    files: Iterable[DiscoveredFile],
    stored: dict[str, FileState],
) -> dict[str, dict[str, tuple[str, str]]]:
    """path -> {window text: (symbols, search_text column)} of the stored snippets (current
    or stale) of those of `files` that have a stored row."""
    known: dict[str, dict[str, tuple[str, str]]] = {}
    for f in files:
        if f.rel_path not in stored:
            continue
        known[f.rel_path] = {
            content: (symbols, column)
            for content, symbols, column in conn.execute(
                "SELECT content, symbols, search_text FROM project_snippets "
                "WHERE project_path = ? AND file_path = ?",
                (project_path, f.rel_path),
            )
        }
    return known


def _extra_of(column: str, path_words: str) -> str:
    """The window's own search text from its `search_text` column (which `_snippet_rows`
    builds as the path words, a line break and it, or just either when the other is empty)."""
    if not path_words:
        return column
    if column == path_words:
        return ""
    return column[len(path_words) + 1 :]


def _read_ahead(
    files: Sequence[DiscoveredFile],
    plan: Callable[[DiscoveredFile], _Work | None],
    depth: int = READ_AHEAD_FILES,
    max_chars: int = READ_AHEAD_CHARS,
) -> Generator[tuple[DiscoveredFile, _Work | None], None, None]:
    """`(f, plan(f))` for each of `files` in order, `plan` running on a reader thread at most
    `depth` files and about `max_chars` characters of prepared text (`_Work.chars`; one file
    always fits) ahead of the consumer. An exception of `plan` is raised here; closing the
    generator (or an exception in the consumer) stops the reader and waits for it."""
    results: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    room = threading.Condition()
    ahead = 0  # characters the reader handed over that the consumer has not taken yet

    def put(item: tuple[str, Any]) -> bool:
        while not stop.is_set():
            try:
                results.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        nonlocal ahead
        try:
            for f in files:
                if stop.is_set():
                    return
                work = plan(f)
                chars = work.chars if work is not None else 0
                with room:
                    while ahead > 0 and ahead + chars > max_chars and not stop.is_set():
                        room.wait(0.05)
                    ahead += chars
                if not put(("file", (f, work))):
                    return
        except BaseException as exc:  # handed to the consumer, raised there
            put(("error", exc))
            return
        put(("end", None))

    reader = threading.Thread(target=read, name="ds4-project-reader", daemon=True)
    reader.start()
    try:
        while True:
            kind, value = results.get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            work = value[1]
            with room:
                ahead -= work.chars if work is not None else 0
                room.notify()
            yield value
    finally:
        stop.set()
        reader.join()


def _relative(root: Path, path: str) -> str:
    """`path` (relative POSIX, or absolute under `root`) as a relative POSIX path."""
    candidate = Path(path)
    if candidate.is_absolute():
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            return path
    return PurePosixPath(path).as_posix()


def sync_project(
    store: Store,
    discovery: Discovery,
    *,
    live_text: Callable[[str], str | None] = lambda _: None,
    force: bool = False,
    only: Collection[str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
    progress: Callable[[int, int], None] | None = None,
) -> IndexSync:
    """Bring the stored index of `discovery.root` in line with `discovery` (and open buffers).

    Args:
        store: the open store (migration 4 applied).
        discovery: what exists now (`discover_project`, or a partial discovery of `only`).
        live_text: text of an open editor buffer by relative path, else None; it replaces the
            disk text (checked like disk text: size, binary, minified, secrets).
        force: re-read and re-window every file (snippet ids are stable, so unchanged windows
            cost no FTS work).
        only: restrict the work to these relative (or absolute, under the root) paths: a path
            listed in `discovery.files` is synced, one in `discovery.skipped` or missing from
            both is marked deleted when stored; nothing else is touched and `project_states`
            is not updated.
        max_file_bytes: files (and buffers, as UTF-8) above this many bytes are skipped.
        progress: called with (files done, files total) after each file.

    Returns the counts of what was done. A file that cannot be read never raises (it counts
    as skipped); errors of the store propagate, and the batch that failed is rolled back.
    """
    started = time.perf_counter()
    root = discovery.root
    project_path = str(root)
    git = discovery.git
    head = git.head if git is not None else None
    now = utc_now_iso()
    wanted: set[str] | None = None
    if only is not None:
        wanted = {_relative(root, p) for p in only}
    files: list[DiscoveredFile] = [
        f for f in discovery.files if wanted is None or f.rel_path in wanted
    ]
    skipped_paths = [p for p, _reason in discovery.skipped if wanted is None or p in wanted]
    stored = _load_stored(store.connection(), project_path, wanted)
    missing_texts = _missing_texts(store.connection(), project_path, wanted)

    indexed = unchanged = deleted = skipped = written = 0
    skipped += len(skipped_paths)
    partial: list[str] = []
    long_lines: list[tuple[str, int]] = []
    batch: list[_Work] = []
    batch_chars = 0
    total = len(files)

    def flush(state_row: tuple[Any, ...] | None = None) -> None:
        nonlocal batch, batch_chars, written
        if batch or state_row is not None:
            written += _write_batch(store, project_path, batch, now, state_row)
        batch, batch_chars = [], 0

    def add(work: _Work) -> None:
        nonlocal batch_chars
        batch.append(work)
        batch_chars += work.chars
        if len(batch) >= BATCH_FILES or batch_chars >= BATCH_CHARS:
            flush()

    def plan(f: DiscoveredFile) -> _Work | None:
        """What to write for `f` (None: unchanged, nothing to write). Reads, hashes and
        windows the file when needed; touches no store, so it may run on the reader thread."""
        before = stored.get(f.rel_path)
        current = before is not None and before.status == "current"
        needs_text = f.rel_path in missing_texts
        buffer = live_text(f.rel_path)
        if buffer is not None:
            if (
                current
                and not force
                and not needs_text
                and before is not None
                and before.content_hash == live_hash(buffer)
            ):
                if _same_git_facts(before, f, head):
                    return None
                # same text: refresh the git facts, keep size and mtime
                row = _file_row(
                    project_path, f, head, now, before.content_hash, before.size_bytes,
                    before.mtime_ns,
                )  # fmt: skip
                return _Work("meta", f.rel_path, had_row=True, file_row=row)
            text, _reason = _live_text_reason(buffer, max_file_bytes)
            size_bytes = len(buffer.encode("utf-8", "replace"))
            return _prepare(
                project_path, f, head, now, text, before, force, size_bytes, LIVE_MTIME_NS,
                needs_text, known.get(f.rel_path),
            )  # fmt: skip
        if (
            current
            and not force
            and not needs_text
            and before is not None
            and before.size_bytes == f.size_bytes
            and before.mtime_ns == f.mtime_ns
            and before.modified == bool(f.modified)
            and before.git_commit == head
        ):
            return None
        text, _reason = read_indexable(root / f.rel_path, max_file_bytes=max_file_bytes)
        return _prepare(
            project_path, f, head, now, text, before, force, f.size_bytes, f.mtime_ns,
            needs_text, known.get(f.rel_path),
        )  # fmt: skip

    # Few files (an editor edit): the windows of their current rows, to reuse the symbols
    # and search text of unchanged windows. Many files: read, hash and window them on a
    # reader thread while this one writes (SQLite releases the GIL while it works).
    known: dict[str, dict[str, tuple[str, str]]] = {}
    if len(files) <= READER_THREAD_MIN_FILES:
        if not force:  # a forced sync computes everything again (e.g. after an upgrade)
            known = _known_windows(store.connection(), project_path, files, stored)
        planned: Generator[tuple[DiscoveredFile, _Work | None], None, None] = (
            (f, plan(f)) for f in files
        )
    else:
        planned = _read_ahead(files, plan)
    present: set[str] = set()
    try:
        for done, (f, work) in enumerate(planned, start=1):
            present.add(f.rel_path)
            before = stored.get(f.rel_path)
            current = before is not None and before.status == "current"
            if work is None:
                unchanged += 1
            elif work.kind == "index":
                indexed += 1
                if work.partial:
                    partial.append(f.rel_path)
                if work.lines_cut:
                    long_lines.append((f.rel_path, work.lines_cut))
            elif work.kind == "meta":
                unchanged += 1
            else:
                skipped += 1
                if not current:
                    work = None  # never indexed (or already deleted): nothing to write
                else:
                    deleted += 1
            if work is not None:
                add(work)
            if progress is not None:
                progress(done, total)
    finally:
        planned.close()  # stops the reader thread when the writer failed

    # Stored files that are gone or no longer indexable.
    skipped_set = set(skipped_paths)
    skipped_dirs = tuple(p for p in skipped_set if p.endswith("/"))
    for path, before in stored.items():
        if before.status != "current" or path in present:
            continue
        if wanted is not None and path not in wanted:
            continue
        gone = (
            path in skipped_set
            or path.startswith(skipped_dirs)
            or not discovery.truncated
            or not os.path.lexists(root / path)
        )
        if gone:
            batch.append(_Work("delete", path, had_row=True))
            deleted += 1
    state_row: tuple[Any, ...] | None = None
    if wanted is None:
        state_row = (
            project_path,
            None,  # git_root: GitState does not report the repository root
            git.branch if git is not None else None,
            head,
            int(bool(git.dirty)) if git is not None else 0,
            json.dumps(list(git.changed_paths) if git is not None else [], ensure_ascii=False),
            now,
        )
    flush(state_row)
    return IndexSync(
        project_path=project_path,
        files_indexed=indexed,
        files_unchanged=unchanged,
        files_deleted=deleted,
        files_skipped=skipped,
        snippets=written,
        duration_ms=(time.perf_counter() - started) * 1000.0,
        truncated=bool(discovery.truncated),
        partial_files=tuple(sorted(partial)[:MAX_PARTIAL_FILES_LISTED]),
        long_line_files=tuple(sorted(long_lines)[:MAX_PARTIAL_FILES_LISTED]),
    )


def _same_git_facts(before: FileState, f: DiscoveredFile, head: str | None) -> bool:
    return (
        before.modified == bool(f.modified)
        and before.tracked == bool(f.tracked)
        and before.git_commit == head
    )


def _file_row(
    project_path: str,
    f: DiscoveredFile,
    head: str | None,
    now: str,
    content_hash: str,
    size_bytes: int,
    mtime_ns: int,
) -> tuple[Any, ...]:
    """A `project_files` row (`_FILE_COLUMNS` order) with status `current`."""
    return (
        project_path, f.rel_path, content_hash, size_bytes, mtime_ns, language_for(f.rel_path),
        head, int(bool(f.modified)), int(bool(f.tracked)), "current", now,
    )  # fmt: skip


def _prepare(
    project_path: str,
    f: DiscoveredFile,
    head: str | None,
    now: str,
    text: str | None,
    before: FileState | None,
    force: bool,
    size_bytes: int,
    mtime_ns: int,
    needs_text: bool = False,
    known: dict[str, tuple[str, str]] | None = None,
) -> _Work:
    """The write for one file read from disk or a buffer (`text`; None when refused);
    `needs_text`: the file has no `project_file_texts` row yet; `known`: `_known_windows` of
    the file (window text -> its symbols and search text), reused for unchanged windows."""
    if text is None:
        return _Work("delete", f.rel_path, had_row=before is not None)
    content_hash = live_hash(text)
    row = _file_row(project_path, f, head, now, content_hash, size_bytes, mtime_ns)
    if (
        not force
        and before is not None
        and before.status == "current"
        and before.content_hash == content_hash
    ):
        text_row = (
            _text_row(project_path, f.rel_path, content_hash, cut_long_lines(text)[0])
            if needs_text
            else None
        )
        return _Work("meta", f.rel_path, had_row=True, file_row=row, text_row=text_row)
    # `text` holds no lone surrogate: disk text is decoded with errors="replace" and buffer
    # text went through `_live_text_reason`.
    text, lines_cut = cut_long_lines(text, MAX_LINE_CHARS)
    snippets, chars, whole = _snippet_rows(project_path, f.rel_path, text, content_hash, now, known)
    # At the window cap, a last window ending before the last line means the rest was cut.
    partial = len(snippets) >= MAX_WINDOWS_PER_FILE and snippets[-1][5] < content_line_count(text)
    return _Work(
        "index", f.rel_path, had_row=before is not None, file_row=row, snippets=snippets,
        chars=chars + len(whole), text_row=(project_path, f.rel_path, content_hash, whole),
        partial=partial, lines_cut=lines_cut,
    )  # fmt: skip


__all__ = [
    "BATCH_CHARS",
    "BATCH_FILES",
    "DEFAULT_MAX_FILE_BYTES",
    "LANGUAGES",
    "LIVE_MTIME_NS",
    "MAX_PARTIAL_FILES_LISTED",
    "STALE_GENERATIONS_KEPT",
    "FileState",
    "IndexCounts",
    "ProjectState",
    "IndexSync",
    "SnippetRow",
    "file_state",
    "file_text",
    "index_counts",
    "indexed_lines",
    "language_for",
    "live_hash",
    "load_snippets",
    "project_state",
    "snippets_by_id",
    "sync_project",
]
