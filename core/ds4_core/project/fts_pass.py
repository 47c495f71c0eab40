"""The FTS tier of project retrieval: concept pass, whole-file pass, file ranking, relevance.

Each query concept's FTS5 matches give windows their concept scores (`_concept_pass`); files
are ranked by their evidence, in a prose request also by whole-file bm25, their size, their
role and an outside prior (`_rank_files`); the best windows of the best files get their FTS
tier score, and each ranked file its relevance for the floor (`_file_coverage`). The numbers
are pure functions in `project/scoring.py`; the rules are in the docstring of
`project/search.py` ("Concepts", "Files first", "Floor").
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ds4_core.retrieval.descriptor import fts_phrase
from ds4_core.store.sql import chunked, placeholders

from .candidates import (
    _CONCEPT_JOIN_FIRST_SQL,
    _CONCEPT_SQL,
    _FILE_JOIN,
    _FILE_TEXT_SQL,
    _ROWIDS_SQL,
    _VALID,
    _Search,
    _Window,
)
from .query import QueryPlan, _Concept, _files_naming
from .revision_cache import cached
from .scoring import (
    PROJECT_WEIGHTS,
    FileSignals,
    ProjectWeights,
    combine_file_scores,
    concept_idf,
    concept_window_score,
    file_evidence,
    file_relevance,
    fts_tier,
    presence_score,
    role_factor,
    size_contenders,
    sized_scores,
    top_files,
    window_relevance,
)

CONCEPT_ROW_LIMIT = 200
"""Rows each FTS concept may read (best bm25 first)."""
COMMON_SHARE = 0.05
COMMON_MIN_ROWS = 2000
"""In an index of at least this many rows, a concept found in more than `COMMON_SHARE` of
them is common: not ranked by bm25, only counted where it occurs (see `_concept_pass`)."""
MIN_RANKED_CONCEPTS = 2
FILL_SHARE = 0.25
"""In a prose request (no identifier, file or phrase), at least `MIN_RANKED_CONCEPTS`
concepts are ranked by bm25 (the rarest), among those found in at most `FILL_SHARE` of the
rows; in any request, at least one."""
FLOOR_MIN_ROWS = 1000
"""The relevance floor weighs a concept by its idf as if the index had at least this many
rows: in a handful of windows, document frequencies cannot tell a common word from a rare one
(a word missing from 3 windows would outweigh one found in 2 of them four times)."""
FILE_TEXT_MIN_FILES = 50
"""Files (at least; more when more files get an FTS tier) read from the whole-file bm25."""


def _concept_rows(search: _Search, query: str) -> tuple[tuple[int, str, float], ...]:
    """(rowid, path, bm25) of the `CONCEPT_ROW_LIMIT` best valid windows matching `query`
    (the same two statements as `_Search.by_index`)."""
    conn = search.conn

    def read() -> tuple[tuple[int, str, float], ...]:
        cut = conn.execute(_CONCEPT_SQL, (query, CONCEPT_ROW_LIMIT, search.project_path)).fetchall()
        rows = [row[:3] for row in cut if row[3]]
        if len(cut) >= CONCEPT_ROW_LIMIT and len(rows) < CONCEPT_ROW_LIMIT // 2:
            rows = conn.execute(
                _CONCEPT_JOIN_FIRST_SQL, (query, search.project_path, CONCEPT_ROW_LIMIT)
            ).fetchall()
        return tuple((int(rowid), path, float(bm25)) for rowid, path, bm25 in rows)

    return cached(conn, ("concept rows", search.project_path, query), read, len)


def _matching_rows(conn: sqlite3.Connection, query: str) -> frozenset[int]:
    """The rowids of every row of the FTS index matching `query` (any project, valid or not:
    only counted and intersected with windows read otherwise); kept per index revision."""

    def read() -> frozenset[int]:
        (listed,) = conn.execute(_ROWIDS_SQL, (query,)).fetchone()
        return frozenset(map(int, listed.split(","))) if listed else frozenset()

    return cached(conn, ("matching rows", query), read, len)


def _concept_pass(
    search: _Search,
    concepts: Sequence[_Concept],
    *,
    prose: bool,
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> tuple[list[float], list[float]]:
    """Run each concept's FTS queries and record its score in the windows it matches.

    FTS5's bm25 clamps the inverse document frequency of a phrase found in more than half
    the rows to ~0, which in a small project silences its commonest (and often most
    telling) words. So a window's score for concept c is `idf(c) * bm25(c, w) / max_w
    bm25(c, w)`: bm25 only orders the windows of one concept (term frequency, length,
    column weights), and `idf(c) = ln(1 + (N - n + 0.5) / (n + 0.5))` (always positive),
    with N the rows of the index and n those matching.

    bm25 costs about 2 us per matching row, and a common word matches most rows. So each
    concept first lists the rows it matches (rowids only, cheap); bm25 then ranks the
    `CONCEPT_ROW_LIMIT` best rows of each concept that is not common (in an index of
    `COMMON_MIN_ROWS` or more, found in more than `COMMON_SHARE` of the rows; the rarest is
    ranked anyway, and in a `prose` request the `MIN_RANKED_CONCEPTS` rarest of those in at
    most `FILL_SHARE` of the rows). Every window found by a ranked concept
    or an exact tier also gets `presence_score(idf(c))` for each concept it contains
    without a bm25 score (a common one, or one whose best rows it is not among).

    Returns:
        `(weights, information)`, one number per concept: its idf as a ranking weight (0 when
        it matched nothing), and its idf as information for the relevance floor (with N at
        least `FLOOR_MIN_ROWS`; also for a concept that matched nothing: `concept_idf(N, 0)`,
        the most informative; all 0 after an FTS5 error or without concepts).
    """
    ranking = [0.0] * len(concepts)
    information = [0.0] * len(concepts)
    if not concepts or not search.index_usable:
        return ranking, information
    conn = search.conn
    try:
        total = cached(
            conn,
            ("snippet rows",),
            lambda: int(conn.execute("SELECT count(*) FROM project_snippets").fetchone()[0]),
        )
        present = [_matching_rows(conn, concept.query) for concept in concepts]
        search.present = present
        found = sorted((i for i, rows in enumerate(present) if rows), key=lambda i: len(present[i]))
        rare = [
            i for i in found if total < COMMON_MIN_ROWS or len(present[i]) <= COMMON_SHARE * total
        ]
        fill = [i for i in found if len(present[i]) <= FILL_SHARE * total]
        wanted = min(len(fill), MIN_RANKED_CONCEPTS) if prose else 1
        ranked = found[: max(len(rare), wanted, 1)]
        for index in found:
            ranking[index] = concept_idf(total, len(present[index]))
        floor_rows = max(total, FLOOR_MIN_ROWS)
        information = [concept_idf(floor_rows, len(rows)) for rows in present]
        for index in ranked:
            rows = _concept_rows(search, concepts[index].query)
            best = max((-float(row[2]) for row in rows), default=0.0)
            for rowid, path, bm25 in rows:
                search.window(rowid, path).concepts[index] = concept_window_score(
                    ranking[index], -float(bm25), best
                )
        windows = search.windows
        for index in found:
            presence = presence_score(ranking[index], weights)
            for rowid in present[index].intersection(windows):
                held = windows[rowid].concepts
                if index not in held:
                    held[index] = presence
    except sqlite3.Error as exc:
        search.fts_failed("FTS pass", exc)
        return [0.0] * len(concepts), [0.0] * len(concepts)
    return ranking, information


def _role(plan: QueryPlan, weights: ProjectWeights) -> Callable[[str], float]:
    """The role factor of a path in this request (`scoring.role_factor`)."""
    return lambda path: role_factor(
        path, about_tests=plan.about_tests, about_docs=plan.about_docs, weights=weights
    )


def _file_evidence(
    search: _Search, ranking: Sequence[float], plan: QueryPlan, weights: ProjectWeights
) -> tuple[dict[str, float], dict[str, list[_Window]]]:
    """Each file's FTS evidence from its windows' concept scores (`scoring.file_evidence`;
    module docstring, "Files first"), and those windows by file."""
    windows_by_file: dict[str, list[_Window]] = {}
    if sum(ranking) <= 0:
        return {}, windows_by_file
    best_by_file: dict[str, dict[int, float]] = {}
    for window in search.windows.values():
        if not window.concepts:
            continue
        windows_by_file.setdefault(window.path, []).append(window)
        best = best_by_file.setdefault(window.path, {})
        for index, score in window.concepts.items():
            if score > best.get(index, 0.0):
                best[index] = score
    naming = _files_naming(plan.concepts, best_by_file)
    return file_evidence(best_by_file, ranking, naming, weights), windows_by_file


def _words_query(plan: QueryPlan) -> str:
    """The request's words, each quoted, OR-ed (FTS5 MATCH text)."""
    return " OR ".join(fts_phrase(word) for word in plan.request_words)


def _file_text_pass(search: _Search, plan: QueryPlan, limit: int) -> dict[str, float]:
    """`{path: -bm25}` of the `limit` best current files of the project for all the request's
    words OR-ed (`project_file_texts_fts`: one row per file); {} without words, or after an
    FTS5 error (with a warning)."""
    if not plan.request_words or not search.index_usable:
        return {}
    query = _words_query(plan)
    conn = search.conn
    try:
        rows = cached(
            conn,
            ("file texts", search.project_path, query, limit),
            lambda: tuple(conn.execute(_FILE_TEXT_SQL, (query, search.project_path, limit))),
            len,
        )
    except sqlite3.Error as exc:
        search.fts_failed("whole-file pass", exc)
        return {}
    return {path: -float(score) for path, score in rows}


BYTES_PER_LINE = 40
"""A source line's usual size with its newline: a file's lines for the size prior are
estimated as its size in bytes over this (`project_files.size_bytes`, one indexed read)."""


def _rows_of_files(search: _Search, sql: str, paths: Sequence[str]) -> Iterator[Any]:
    """The rows of `sql` (parameters: the project path, then the paths; `{marks}` stands for
    their placeholders) for `paths`, read in chunks of bound parameters."""
    for chunk in chunked(list(paths)):
        yield from search.conn.execute(
            sql.format(marks=placeholders(len(chunk))), (search.project_path, *chunk)
        )


def _file_lines(search: _Search, paths: Sequence[str]) -> dict[str, int]:
    """`{path: lines}` of the current files `paths`, estimated from their size in bytes
    (`BYTES_PER_LINE`)."""
    sql = (
        "SELECT file_path, size_bytes FROM project_files WHERE project_path = ? "
        "AND status = 'current' AND file_path IN ({marks})"
    )
    return {path: int(size) // BYTES_PER_LINE for path, size in _rows_of_files(search, sql, paths)}


def _file_rows(search: _Search, paths: Sequence[str]) -> dict[str, set[int]]:
    """`{path: rowids}` of the valid windows of the current files `paths`."""
    sql = (
        f"SELECT s.rowid, s.file_path FROM project_snippets AS s {_FILE_JOIN} "
        f"WHERE {_VALID} AND s.file_path IN ({{marks}})"
    )
    rows: dict[str, set[int]] = {}
    for rowid, path in _rows_of_files(search, sql, paths):
        rows.setdefault(path, set()).add(int(rowid))
    return rows


def _presence_windows(
    search: _Search,
    ranking: Sequence[float],
    files: Mapping[str, set[int]],
    paths: Sequence[str],
    weights: ProjectWeights,
) -> None:
    """Create the valid windows of `paths` (files no window of which a concept reached: found
    by the whole-file pass or the file prior only; their rowids from `files`) without their
    text, and give each `presence_score(idf(c))` for every concept it contains
    (`_Search.present`, as `_concept_pass` does for windows found otherwise)."""
    for path in paths:
        for rowid in sorted(files.get(path, ())):
            window = search.window(rowid, path)
            for index, rows in enumerate(search.present):
                if index not in window.concepts and rowid in rows:
                    window.concepts[index] = presence_score(ranking[index], weights)


def _file_coverage(
    search: _Search,
    plan: QueryPlan,
    information: Sequence[float],
    windows_by_file: Mapping[str, Sequence[_Window]],
    paths: Sequence[str],
) -> dict[str, float]:
    """`{path: relevance}` of the ranked files `paths` (`scoring.file_relevance`): how much of
    the request's information (`information`, one number per concept of `plan`) the concepts
    held by the file's windows that the passes read hold (`windows_by_file`; each concept
    once), and the share of the concepts found in any window of the project that a pass read
    (the request's words the project knows); 1 for a file holding a name in code
    (`_Concept.code`: as an exact match). {} without information (no concept, or an FTS5
    error)."""
    if not paths or sum(information) <= 0 or not search.present:
        return {}
    held = {
        path: {i for window in windows_by_file.get(path, ()) for i in window.concepts}
        for path in paths
    }
    concepts = sum(1 for value in information if value > 0)
    found = set(search.windows)  # valid windows of this project that any pass read
    known_concepts = {i for indexes in held.values() for i in indexes} | {
        i
        for i, rows in enumerate(search.present)
        if information[i] > 0 and not rows.isdisjoint(found)
    }
    known = len(known_concepts) / concepts
    code = {i for i, concept in enumerate(plan.concepts) if concept.code}
    return {
        path: 1.0
        if code.intersection(indexes)
        else file_relevance(window_relevance(indexes, information), known)
        for path, indexes in held.items()
    }


def _rank_files(
    search: _Search,
    ranking: Sequence[float],
    plan: QueryPlan,
    limit: int,
    *,
    prose: bool,
    information: Sequence[float] = (),
    file_prior: Mapping[str, float] | None = None,
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> dict[str, float]:
    """Rank the files (module docstring, "Files first") and give the best window (and a
    close second) of the first `limit` files their FTS tier score.

    A file's score (`scoring.combine_file_scores`) sums its whole-file bm25 for all the
    request's words relative to the best file's (`_file_text_pass`; in a prose request only),
    `evidence_share` times its window evidence relative to the
    best file's, and `prior_weight` times its `file_prior` (0..1; e.g. Git history); times its
    size factor (`scoring.size_prior` of its lines, `_file_lines`) and its role factor (`scoring.role_factor`:
    tests, docs and change logs the request is not about count less). A file's windows are
    then ranked by their concept relevance (`_presence_windows` for a file no concept
    reached).

    Returns:
        `{path: relevance}` of the ranked files that got an FTS tier, best first: each file's
        relevance to the request's `information` (`_file_coverage`, 0..1). The prior ranks
        files but is not relevance: it is relative (the best file of any request with a
        matching commit has prior 1), so it cannot tell an unrelated request.
    """
    evidence, windows_by_file = _file_evidence(search, ranking, plan, weights)
    texts = _file_text_pass(search, plan, max(FILE_TEXT_MIN_FILES, limit)) if prose else {}
    prior = {path: value for path, value in (file_prior or {}).items() if value > 0}
    scores = combine_file_scores(FileSignals(texts, evidence, prior), _role(plan, weights), weights)
    contenders = size_contenders(scores, limit, weights)
    lines = _file_lines(search, contenders)
    ranked = top_files(sized_scores({p: scores[p] for p in contenders}, lines, weights), limit)
    unreached = {path for path in ranked if path not in windows_by_file}
    if unreached:
        files = _file_rows(search, sorted(unreached))
        _presence_windows(search, ranking, files, sorted(unreached), weights)
        for window in search.windows.values():
            if window.path in unreached:
                windows_by_file.setdefault(window.path, []).append(window)
    chosen = [path for path in ranked if path in windows_by_file]
    for rank, path in enumerate(chosen):
        for window, points in fts_tier(rank, windows_by_file[path], weights):
            window.fts_score = points
    coverage = _file_coverage(search, plan, information, windows_by_file, chosen)
    return {path: coverage.get(path, 0.0) for path in chosen}
