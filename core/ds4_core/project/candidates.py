"""Candidate generation of project retrieval: the SQL (FTS5 and LIKE) and the exact tiers.

`_Search` holds one `search_project` call's connection, the windows read (`_Window`) and its
warnings; the tiers (`_path_tier`, `_declared_tier`, `_literal_tier`) mark the windows they
find. The statements here are also used by the FTS pass (`project/fts_pass.py`). Rules in the
docstring of `project/search.py`; every user term is a bound parameter.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ds4_core.retrieval.descriptor import fts_phrase, has_token_characters, replace_lone_surrogates
from ds4_core.retrieval.literal import LiteralTerm, fold
from ds4_core.store.sql import LIKE_ESCAPE, MAX_IN_VALUES, chunked, like_literal, placeholders

from .revision_cache import cached
from .scoring import Tier
from .windows import fts_terms_for

EXACT_ROW_LIMIT = 200
"""Rows each exact-tier term may read (best bm25 first)."""
BM25_WEIGHTS = (1.0, 2.5, 2.0, 1.0)
"""bm25 column weights: content, file_path, symbols, search_text."""

_VALID = (
    "s.project_path = ? AND s.stale = 0 AND pf.status = 'current' AND pf.content_hash = s.file_hash"
)
_FILE_JOIN = (
    "JOIN project_files AS pf ON pf.project_path = s.project_path AND pf.file_path = s.file_path"
)
_VALID_FLAG = (
    "(s.project_path = ?3 AND s.stale = 0 AND pf.status = 'current' "
    "AND pf.content_hash = s.file_hash)"
)
"""`_VALID` as a column (NULL when the snippet or file row is missing), project path ?3."""
_WINDOW_COLUMNS = (
    "s.rowid, s.snippet_id, s.file_path, s.file_hash, s.start_line, s.end_line, "
    "s.symbols, s.token_estimate, pf.modified, pf.tracked, pf.git_commit"
)
"""A window's columns without its text (`_Search.load_text` reads that for the few that need
it: windows are read by the hundred, and only a few are quoted)."""
_TEXT_COLUMNS = _WINDOW_COLUMNS + ", s.content"
_BM25 = "bm25(project_snippets_fts, {}, {}, {}, {})".format(*BM25_WEIGHTS)
_FIRST_CUT = (
    f"(SELECT rowid AS id, {_BM25} AS score FROM project_snippets_fts "
    "WHERE project_snippets_fts MATCH ?1 ORDER BY score LIMIT ?2) AS r "
    "LEFT JOIN project_snippets AS s ON s.rowid = r.id LEFT JOIN project_files AS pf "
    "ON pf.project_path = s.project_path AND pf.file_path = s.file_path ORDER BY r.score"
)
"""The best rows of the FTS index for a query (?1, at most ?2), valid or not, each with its
snippet and file: so the caller knows both how many matched (up to ?2) and which are valid."""
_EXACT_SQL = f"SELECT {_WINDOW_COLUMNS}, {_VALID_FLAG} FROM {_FIRST_CUT}"
_EXACT_TEXT_SQL = f"SELECT {_TEXT_COLUMNS}, {_VALID_FLAG} FROM {_FIRST_CUT}"
_EXACT_JOIN_FIRST_SQL = (
    f"SELECT {_WINDOW_COLUMNS} FROM project_snippets_fts AS f "
    f"CROSS JOIN project_snippets AS s ON s.rowid = f.rowid {_FILE_JOIN} "
    f"WHERE project_snippets_fts MATCH ? AND {_VALID} ORDER BY {_BM25} LIMIT ?"
)
_EXACT_JOIN_FIRST_TEXT_SQL = _EXACT_JOIN_FIRST_SQL.replace(_WINDOW_COLUMNS, _TEXT_COLUMNS, 1)
_CONTENT_SCAN_SQL = (
    f"SELECT {_TEXT_COLUMNS} FROM project_snippets AS s {_FILE_JOIN} "
    f"WHERE {_VALID} AND s.content LIKE ? {LIKE_ESCAPE} LIMIT ?"
)
_SYMBOLS_SCAN_SQL = (
    f"SELECT {_WINDOW_COLUMNS} FROM project_snippets AS s {_FILE_JOIN} "
    f"WHERE {_VALID} AND (' ' || s.symbols || ' ') LIKE ? {LIKE_ESCAPE} LIMIT ?"
)
_CONCEPT_SQL = f"SELECT r.id, s.file_path, r.score, {_VALID_FLAG} FROM {_FIRST_CUT}"
_ROWIDS_SQL = (
    "SELECT group_concat(rowid) FROM project_snippets_fts WHERE project_snippets_fts MATCH ?"
)
_CONCEPT_JOIN_FIRST_SQL = (
    f"SELECT s.rowid, s.file_path, {_BM25} FROM project_snippets_fts AS f "
    f"CROSS JOIN project_snippets AS s ON s.rowid = f.rowid {_FILE_JOIN} "
    f"WHERE project_snippets_fts MATCH ? AND {_VALID} ORDER BY 3 LIMIT ?"
)
_FILE_WINDOWS_SQL = (
    f"SELECT {_WINDOW_COLUMNS} FROM project_snippets AS s {_FILE_JOIN} "
    f"WHERE {_VALID} AND s.file_path = ? ORDER BY s.start_line"
)
_FILE_TEXT_SQL = (
    "SELECT t.file_path, bm25(project_file_texts_fts) AS score FROM project_file_texts_fts AS f "
    "CROSS JOIN project_file_texts AS t ON t.rowid = f.rowid "
    "JOIN project_files AS pf ON pf.project_path = t.project_path AND pf.file_path = t.file_path "
    "WHERE project_file_texts_fts MATCH ? AND t.project_path = ? AND pf.status = 'current' "
    "AND pf.content_hash = t.content_hash ORDER BY score LIMIT ?"
)
_WINDOW_COLUMN_COUNT = _WINDOW_COLUMNS.count(",") + 1


# ----------------------------------------------------------------------------- search state


@dataclass(eq=False)
class _Window:
    rowid: int
    path: str
    snippet_id: str = ""
    file_hash: str = ""
    start_line: int = 0
    end_line: int = 0
    content: str | None = None
    symbols: str = ""
    token_estimate: int = 0
    modified: bool = False
    tracked: bool = False
    git_commit: str | None = None
    tiers: dict[Tier, list[str]] = field(default_factory=dict)  # tier -> terms, in order
    concepts: dict[int, float] = field(default_factory=dict)  # concept index -> -bm25
    fts_score: float | None = None
    loaded: bool = False  # the row's columns (`_WINDOW_COLUMNS`) are read
    _folded: bytes | None = None

    def load(self, row: Sequence[Any]) -> None:
        """Take a `_WINDOW_COLUMNS` row (or `_TEXT_COLUMNS`: then the text too)."""
        if len(row) > _WINDOW_COLUMN_COUNT and self.content is None:
            self.content = row[_WINDOW_COLUMN_COUNT]
        if self.loaded:
            return
        self.loaded = True
        (
            _rowid,
            self.snippet_id,
            self.path,
            self.file_hash,
            self.start_line,
            self.end_line,
            symbols,
            token_estimate,
            modified,
            tracked,
            self.git_commit,
        ) = row[:_WINDOW_COLUMN_COUNT]
        self.symbols = symbols or ""
        self.token_estimate = int(token_estimate or 0)
        self.modified = bool(modified)
        self.tracked = bool(tracked)

    def folded(self) -> bytes:
        """The folded text (`fold`); the text must have been read (`_Search.load_text`)."""
        if self._folded is None:
            self._folded = fold(replace_lone_surrogates(self.content or ""))
        return self._folded

    def add(self, tier: Tier, term: str) -> None:
        terms = self.tiers.setdefault(tier, [])
        if term not in terms:
            terms.append(term)

    @property
    def relevance(self) -> float:
        return sum(self.concepts.values())


class _Search:
    """One `search_project` call: the connection, the windows read, warnings."""

    def __init__(self, conn: sqlite3.Connection, project_path: str) -> None:
        self.conn = conn
        self.project_path = project_path
        self.windows: dict[int, _Window] = {}
        self.warnings: list[str] = []
        self.index_usable = True
        self.present: list[frozenset[int]] = []  # per concept: rowids of the rows it matches

    def window(self, rowid: int, path: str) -> _Window:
        found = self.windows.get(rowid)
        if found is None:
            found = self.windows[rowid] = _Window(rowid, path)
        return found

    def rows(self, sql: str, params: Sequence[Any]) -> list[_Window]:
        found = []
        for row in self.conn.execute(sql, params):
            window = self.window(row[0], row[2])
            window.load(row)
            found.append(window)
        return found

    def fts_failed(self, where: str, exc: sqlite3.Error) -> None:
        self.index_usable = False
        self.warnings.append(
            f"ds4: full-text search of the project index failed in the {where} ({exc}); "
            "project results come from exact matches only. If this persists, rebuild the "
            "project index (ds4.rebuildIndex)."
        )

    def by_index(self, fts_query: str, limit: int, *, text: bool = False) -> list[_Window] | None:
        """Valid windows matching `fts_query`, best bm25 first (with their text when `text`);
        None after an FTS5 error.

        bm25 ranks the whole FTS index first and only the best `limit` rows are joined to
        their snippet and file (the join costs more than bm25 per row); when that first cut is
        full and rows of other projects or stale rows take half of it or more, the join-first
        statement runs instead.
        """
        if not self.index_usable:
            return None
        try:
            cut = self.conn.execute(
                _EXACT_TEXT_SQL if text else _EXACT_SQL, (fts_query, limit, self.project_path)
            ).fetchall()
            found = []
            for row in cut:
                if row[-1]:
                    window = self.window(row[0], row[2])
                    window.load(row[:-1])
                    found.append(window)
            if len(cut) >= limit and len(found) < limit // 2:
                sql = _EXACT_JOIN_FIRST_TEXT_SQL if text else _EXACT_JOIN_FIRST_SQL
                found = self.rows(sql, (fts_query, self.project_path, limit))
            return found
        except sqlite3.Error as exc:
            self.fts_failed("exact pass", exc)
            return None

    def load_missing(self, windows: Iterable[_Window]) -> None:
        """Read the columns (not the text) of `windows` not read yet."""
        missing = [w.rowid for w in windows if not w.loaded]
        for chunk in chunked(missing):
            marks = placeholders(len(chunk))
            self.rows(
                f"SELECT {_WINDOW_COLUMNS} FROM project_snippets AS s {_FILE_JOIN} "
                f"WHERE s.rowid IN ({marks})",
                chunk,
            )

    def load_text(self, windows: Iterable[_Window]) -> None:
        """Read the text of `windows` that have none yet."""
        missing = {w.rowid: w for w in windows if w.content is None}
        rowids = list(missing)
        for chunk in chunked(rowids):
            marks = placeholders(len(chunk))
            for rowid, content in self.conn.execute(
                f"SELECT rowid, content FROM project_snippets WHERE rowid IN ({marks})", chunk
            ):
                missing[rowid].content = content


# ----------------------------------------------------------------------------- tiers


def _normalise_file_term(term: str, project_path: str) -> str:
    path = term.replace("\\", "/")
    root = project_path.replace("\\", "/").rstrip("/") + "/"
    if path.startswith(root):
        path = path[len(root) :]
    if len(path) > 1 and path[1] == ":" and path[0].isalpha():
        path = path[2:]
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        parts = parts[len(parts) - parts[::-1].index("..") :]
    return "/".join(parts)


def _paths_by_name(search: _Search) -> dict[str, tuple[str, ...]]:
    """The current files of the project by file name (last segment), in path order; kept per
    index revision (`revision_cache`). The caller must not change it."""
    conn = search.conn

    def read() -> dict[str, tuple[str, ...]]:
        by_name: dict[str, list[str]] = {}
        for (path,) in conn.execute(
            "SELECT file_path FROM project_files WHERE project_path = ? AND status = 'current' "
            "ORDER BY file_path",
            (search.project_path,),
        ):
            by_name.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        return {name: tuple(paths) for name, paths in by_name.items()}

    return cached(conn, ("paths by name", search.project_path), read, len)


def _path_tier(search: _Search, files: Sequence[str]) -> tuple[set[str], set[str]]:
    """Mark the windows of files named by path or basename (`Tier.PATH`, `Tier.BASENAME`); the
    named files, and the file names (last segments) of the terms that found one."""
    named: dict[str, tuple[Tier, str]] = {}
    found_names: set[str] = set()
    for term in files:
        rel = _normalise_file_term(replace_lone_surrogates(term), search.project_path)
        if not rel:
            continue
        base = rel.rsplit("/", 1)[-1]
        found: dict[str, Tier] = {}
        # every path equal to `rel` or ending in "/" + `rel` has the file name `base`
        for path in _paths_by_name(search).get(base, ()):
            if path == rel or ("/" in rel and path.endswith("/" + rel)):
                found[path] = Tier.PATH
            elif path.rsplit("/", 1)[-1] == base:
                found[path] = Tier.BASENAME
        if found:
            found_names.add(replace_lone_surrogates(term).replace("\\", "/").rsplit("/", 1)[-1])
        if Tier.PATH in found.values():
            # the term names these files by path: other files of the same name are not meant
            # (and `__init__.py` alone would read the windows of hundreds of files)
            found = {path: tier for path, tier in found.items() if tier == Tier.PATH}
        for path, tier in found.items():
            if path not in named or named[path][0] < tier:
                named[path] = (tier, term)
    for path, (tier, term) in named.items():
        for window in search.rows(_FILE_WINDOWS_SQL, (search.project_path, path)):
            window.add(tier, term)
    return set(named), found_names


def _declaring(search: _Search, name: str) -> list[_Window]:
    """Valid windows whose `symbols` hold `name` exactly (FTS5 on `symbols`, else LIKE)."""
    clean = replace_lone_surrogates(name)
    if not has_token_characters(clean):
        return []
    rows = search.by_index(f"symbols : {fts_phrase(clean)}", EXACT_ROW_LIMIT)
    if rows is None:
        pattern = like_literal(f" {clean} ")
        if pattern is None:
            return []
        rows = search.rows(
            _SYMBOLS_SCAN_SQL, (search.project_path, f"%{pattern}%", EXACT_ROW_LIMIT)
        )
    return [w for w in rows if clean in w.symbols.split()]


def _declared_tier(search: _Search, declared: Sequence[tuple[str, str | None]]) -> None:
    """Windows that declare a name the request mentions (`Tier.DECLARED_SYMBOL`). For a qualified name
    (`ConfigWatcher.poll`), the window declares its last segment and the first one occurs
    in the window or is declared in the same file."""
    for name, owner in declared:
        windows = _declaring(search, name)
        if owner is not None and windows:
            owner_term = LiteralTerm.of(owner)
            owner_files = {w.path for w in _declaring(search, owner)}
            search.load_text(w for w in windows if w.path not in owner_files)
            windows = [
                w for w in windows if w.path in owner_files or owner_term.occurs_in(w.folded())
            ]
        for window in windows:
            window.add(Tier.DECLARED_SYMBOL, name if owner is None else f"{owner}.{name}")


def _literal_tier(
    search: _Search, terms: Sequence[str], tier: Tier, within: Sequence[str] | None = None
) -> None:
    """Windows whose content holds a term literally (`Tier.PHRASE`, `Tier.SYMBOL_TEXT`).

    Candidates come from FTS5 (an ASCII term: its words in sequence in `content`, the last
    as a prefix; any other term: its `fts_terms_for` phrases, which also reach CJK bigrams in
    `search_text`), else from a LIKE scan; each is then checked with `LiteralTerm`. With
    `within`, only the windows of those files are candidates (a LIKE scan of them).
    """
    for term in terms:
        literal = LiteralTerm.of(term)
        clean = replace_lone_surrogates(term)
        rows = (
            _literal_candidates(search, literal, clean)
            if within is None
            else _literal_candidates_within(search, clean, within)
        )
        if rows is None:
            continue
        search.load_text(rows)
        for window in rows:
            if literal.occurs_in(window.folded()):
                window.add(tier, term)


def _literal_candidates(search: _Search, literal: LiteralTerm, clean: str) -> list[_Window] | None:
    """Candidate windows of `_literal_tier` from FTS5, else from a LIKE scan of the project."""
    if literal.prefilter is not None:
        fts_query: str | None = f"content : {literal.prefilter}"
    else:
        phrases = [] if clean.isascii() else fts_terms_for(clean)
        fts_query = " OR ".join(phrases) if phrases else None
    rows = search.by_index(fts_query, EXACT_ROW_LIMIT, text=True) if fts_query else None
    if rows is None:
        pattern = like_literal(clean)
        if pattern is None:
            return None
        rows = search.rows(
            _CONTENT_SCAN_SQL, (search.project_path, f"%{pattern}%", EXACT_ROW_LIMIT)
        )
    return rows


def _literal_candidates_within(
    search: _Search, clean: str, within: Sequence[str]
) -> list[_Window] | None:
    """Candidate windows of `_literal_tier` among those of the files `within` (LIKE scan)."""
    pattern = like_literal(clean)
    paths = list(within)[:MAX_IN_VALUES]
    if pattern is None or not paths:
        return None
    marks = placeholders(len(paths))
    return search.rows(
        f"SELECT {_TEXT_COLUMNS} FROM project_snippets AS s {_FILE_JOIN} "
        f"WHERE {_VALID} AND s.file_path IN ({marks}) AND s.content LIKE ? {LIKE_ESCAPE}",
        (search.project_path, *paths, f"%{pattern}%"),
    )
