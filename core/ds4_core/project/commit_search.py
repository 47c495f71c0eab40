"""Ranking indexed commits for a request: the `git` retrieval scope and a file-ranking signal.

A request's informative words (`request_concepts`: words of two or more letters or digits,
lower-cased, without stopwords, question words and file-extension words; a camelCase or
snake_case identifier also matches its sub-words) are looked up in `project_commits_fts`,
whose porter tokenizer makes `parsing`, `parsed` and `parse` meet. For a folder with N indexed
commits, each concept gets the weight `idf = ln(1 + (N - df + 0.5) / (df + 0.5))` (`df`: the
commits holding it; a word no commit holds keeps the largest weight), and a commit is scored:

    coverage = (sum of the weights of the concepts it holds) / (sum of all concepts' weights)
    score    = coverage * (0.7 + 0.3 * bm25 / best bm25) + 0.25 when it changed a named file

A commit that changed a file the request names ("why did app.py change?") scores at least
`GIT_FLOOR`: the request is about that file's history, even when the file's name is in every
commit and so weighs nothing.

`bm25` is FTS5's, with the subject weighing 3, the path and sub-words 1.5, the body 1 (higher
is better here; the best candidate has `bm25 / best bm25` = 1). The score lies in 0..1.25.
A commit scoring under `GIT_FLOOR` is never sent, so a request whose words the history barely
holds ("write a haiku about the sea") gets no commits; the best of those are recorded as
`BelowFloor(kind="git")` for the manifest.

`commit_file_scores` turns the same commit scores into a score per file for project file
ranking (see its docstring).
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..retrieval.descriptor import FILLER_WORDS, STOPWORDS, file_paths, fts_phrase
from ..retrieval.floor import MAX_BELOW_FLOOR, BelowFloor
from ..store.sql import chunked, placeholders
from .commit_hits import FILES_SHOWN, CommitHit, CommitRetrieval, commit_hit_tokens, iso_seconds
from .commit_index import identifier_parts, identifiers, project_key
from .scoring import concept_idf

GIT_FLOOR = 0.45
"""Least score (0..1.25 scale) a commit needs to be sent: under it, less than about half of
the request's weight is in the commit."""
NAMED_FILE_BOOST = 0.25
"""Added to the score of a commit that changed a file the request names."""
CANDIDATE_LIMIT = 200
"""Commits scored per request (the best by bm25)."""
MAX_CONCEPTS = 16
"""Request concepts looked up (the first ones, in request order)."""
BM25_WEIGHTS = (0.0, 3.0, 1.0, 1.5)
"""bm25 column weights: project key, subject, body, path and sub-words."""

_QUESTION_WORDS = frozenset(
    """
    a an and are as at be been but by can cannot did do for had has he her his how i if in is
    it its me my no not of on or our out she so the they to up us was we who whom whose why
    will you explain explained tell show know need wondering happened reason reasons
    hello hi hey thank thanks ok okay yes sure great nice cool bye today tomorrow yesterday
    all any each every other more most such only own same too very via per one two
    py js ts tsx jsx md rst txt json yaml yml toml cfg ini html css sh go rs java rb
    """.split()
)
"""Words that say nothing about what a commit changed (function, question and conversational
words, common file extensions), beside `descriptor.STOPWORDS` and `FILLER_WORDS`."""
_IGNORED_WORDS = STOPWORDS | FILLER_WORDS | _QUESTION_WORDS
"""Words `request_concepts` never takes for a concept."""
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?")


@dataclass(frozen=True, slots=True)
class Concept:
    """One thing a request asks about: `label` (lower-case, shown in reasons) and `fts`, its
    FTS5 query (a quoted token, or an identifier OR its sub-words as a phrase)."""

    label: str
    fts: str


def request_concepts(text: str) -> list[Concept]:
    """The informative concepts of a request, in order, without repeats (module docstring);
    at most `MAX_CONCEPTS`."""
    ignored = _IGNORED_WORDS
    concepts: dict[str, Concept] = {}
    covered: set[str] = set()
    for identifier in identifiers(text):
        parts = identifier_parts(identifier)
        label = identifier.lower()
        if len(parts) > 1 and label not in concepts:
            whole = label.replace("_", "")
            concepts[label] = Concept(
                label, f"({fts_phrase(whole)} OR {fts_phrase(' '.join(parts))})"
            )
            covered.update([label, whole, *parts])
    for raw in _WORD.findall(text):
        word = re.sub(r"['’]s?$", "", raw).lower()
        if len(word) < 2 or word in ignored or word in covered or word.isdigit():
            continue
        concepts.setdefault(word, Concept(word, fts_phrase(word)))
    return list(concepts.values())[:MAX_CONCEPTS]


@dataclass(frozen=True, slots=True)
class _Scored:
    rowid: int
    score: float
    matched: tuple[str, ...]


def _scope(conn: sqlite3.Connection, project_path: str) -> str:
    """The FTS5 expression that keeps a MATCH inside the folder: its `project_key` token,
    or nothing when the store holds the history of this folder alone (the key would make
    FTS5 intersect every query with a doclist of all the folder's commits for nothing)."""
    folders = conn.execute("SELECT project_path FROM project_commit_state LIMIT 2").fetchall()
    if len(folders) == 1 and folders[0][0] == project_path:
        return ""
    return f"project_key : {project_key(project_path)} AND "


def _concept_rows(
    conn: sqlite3.Connection, scope: str, concepts: Sequence[Concept]
) -> list[set[int]]:
    """The rowids of the folder's commits holding each concept (`scope`: `_scope`)."""
    found = []
    for concept in concepts:
        rows = conn.execute(
            "SELECT rowid FROM project_commits_fts WHERE project_commits_fts MATCH ?",
            (f"{scope}{concept.fts}",),
        )
        found.append({int(rowid) for (rowid,) in rows})
    return found


def _score_commits(
    conn: sqlite3.Connection, project_path: str, concepts: Sequence[Concept], limit: int
) -> tuple[list[_Scored], int]:
    """The best `limit` commits by bm25 for `concepts`, each with its coverage-based score
    (module docstring, without the named-file boost), best first; and the folder's commit
    count."""
    total = int(
        conn.execute(
            "SELECT count(*) FROM project_commits WHERE project_path = ?", (project_path,)
        ).fetchone()[0]
    )
    if not concepts or total == 0:
        return [], total
    scope = _scope(conn, project_path)
    rows = _concept_rows(conn, scope, concepts)
    weights = [concept_idf(total, len(r)) for r in rows]
    whole = sum(weights)
    present = [c.fts for c, r in zip(concepts, rows, strict=True) if r]
    if not present or whole <= 0:
        return [], total
    ranked = conn.execute(
        "SELECT rowid, -bm25(project_commits_fts, ?, ?, ?, ?) AS relevance "
        "FROM project_commits_fts WHERE project_commits_fts MATCH ? "
        "ORDER BY relevance DESC, rowid DESC LIMIT ?",
        (*BM25_WEIGHTS, f"{scope}({' OR '.join(present)})", limit),
    ).fetchall()
    best = max((float(r[1]) for r in ranked), default=0.0)
    scored = []
    for rowid, relevance in ranked:
        held = [i for i, r in enumerate(rows) if rowid in r]
        coverage = sum(weights[i] for i in held) / whole
        closeness = float(relevance) / best if best > 0 else 0.0
        scored.append(
            _Scored(
                int(rowid),
                coverage * (0.7 + 0.3 * closeness),
                tuple(concepts[i].label for i in held),
            )
        )
    return scored, total


def _named_files(text: str) -> list[str]:
    """The file paths a request names (`descriptor.file_paths`), as POSIX, without `./`."""
    return [path.replace("\\", "/").removeprefix("./") for path in file_paths(text)]


def _changes_named(files: Sequence[str], named: Sequence[str]) -> str | None:
    """The first of `files` a request's `named` path designates (equal, or its tail after a
    `/`), else None."""
    for path in files:
        for name in named:
            if path == name or path.endswith("/" + name):
                return path
    return None


def search_commits(
    conn: sqlite3.Connection,
    project_path: str,
    text: str,
    *,
    max_results: int,
    max_tokens: int,
    folder: str | None = None,
) -> CommitRetrieval:
    """The commits of the folder `project_path` that answer the request `text`, best first
    (module docstring), at most `max_results` of them within `max_tokens` (`chars-v2` tokens
    of their quoted blocks; a commit that does not fit is skipped, a smaller one may follow).
    Ties: newer commit first, then hash. `folder` names the workspace folder in each hit.

    Raises:
        sqlite3.Error: from the commit tables.
    """
    started = time.perf_counter()
    if max_results <= 0 or max_tokens <= 0:
        return CommitRetrieval("disabled")
    concepts = request_concepts(text)
    if not concepts:
        return CommitRetrieval("no-query")
    scored, total = _score_commits(conn, project_path, concepts, CANDIDATE_LIMIT)
    if total == 0:
        return CommitRetrieval("no-index")
    named = _named_files(text)
    rows = _commit_rows(conn, [s.rowid for s in scored])
    ranked: list[tuple[float, int, str, _Scored, str | None]] = []
    for item in scored:
        row = rows.get(item.rowid)
        if row is None:
            continue
        changed = _changes_named(row[3], named) if named else None
        score = item.score + NAMED_FILE_BOOST if changed else item.score
        score = round(max(score, GIT_FLOOR) if changed else score, 6)
        ranked.append((score, row[1], row[0], item, changed))
    ranked.sort(key=lambda r: (-r[0], -r[1], r[2]))
    hits: list[CommitHit] = []
    below: list[BelowFloor] = []
    used = 0
    for score, _date, _hash, item, changed in ranked:
        if score < GIT_FLOOR:
            if len(below) >= MAX_BELOW_FLOOR:
                break  # ranked best first: every later one is below the floor too
            hit = _hit(rows[item.rowid], score, item.matched, changed, folder)
            below.append(BelowFloor("git", hit.hash, score, GIT_FLOOR, hit.tokens))
            continue
        if len(hits) >= max_results:
            continue  # only to reach the below-floor ones
        hit = _hit(rows[item.rowid], score, item.matched, changed, folder)
        if used + hit.tokens > max_tokens:
            continue
        used += hit.tokens
        hits.append(hit)
    return CommitRetrieval(
        "ok",
        hits,
        tuple(below),
        candidates=len(ranked),
        latency_ms=round((time.perf_counter() - started) * 1000, 3),
    )


_Row = tuple[str, int, str, tuple[str, ...], int, str | None, str]
"""hash, committed_at, subject, files, files_total, withheld, body."""


def _commit_rows(conn: sqlite3.Connection, rowids: Sequence[int]) -> dict[int, _Row]:
    """`{rowid: _Row}` of `project_commits` rows (in chunks of `MAX_IN_VALUES` rowids)."""
    found: dict[int, _Row] = {}
    for chunk in chunked(rowids):
        marks = placeholders(len(chunk))
        for rowid, hash_, date, subject, files, total, withheld, body in conn.execute(
            "SELECT rowid, hash, committed_at, subject, files_json, files_total, withheld, body "
            f"FROM project_commits WHERE rowid IN ({marks})",
            chunk,
        ):
            found[int(rowid)] = (
                str(hash_),
                int(date),
                str(subject),
                tuple(json.loads(files)),
                int(total),
                withheld,
                str(body),
            )
    return found


def _hit(
    row: _Row, score: float, matched: Sequence[str], changed: str | None, folder: str | None
) -> CommitHit:
    """The `CommitHit` of a commit row, with its reason and token count."""
    hash_, date, subject, files, total, withheld, body = row
    reason = "words: " + ", ".join(matched) if matched else "no words"
    if changed:
        reason += f"; changed {changed}"
    message = subject + ("\n\n" + body if body else "")
    draft = CommitHit(
        hash=hash_,
        committed_at=iso_seconds(date),
        subject=subject,
        message=message,
        files=files[:FILES_SHOWN],
        files_total=total,
        score=score,
        reason=reason,
        withheld=withheld,
        tokens=0,
        folder=folder,
    )
    return _with_tokens(draft)


def _with_tokens(hit: CommitHit) -> CommitHit:
    return replace(hit, tokens=commit_hit_tokens(hit))


def commit_file_scores(
    conn: sqlite3.Connection, project_path: str, words: Sequence[str], limit: int = 50
) -> dict[str, float]:
    """A file-ranking signal from the commit history: how strongly the commits that match
    `words` point at each file.

    Args:
        conn: a connection to the store holding the folder's commit index.
        project_path: the canonical workspace folder (`project_commits.project_path`).
        words: the request's informative words (any case; identifiers are split into their
            sub-words as in the git scope; stopwords are dropped here too).
        limit: how many commits are used (the best `limit` by bm25, then scored by
            coverage as in the git scope; no floor).

    Returns:
        `{path: score}`: POSIX paths relative to the folder, only files that still exist
        (a `current` row of `project_files`), each score in (0, 1] with the best file at
        exactly 1.0. A commit of score `s` (0..1) that changed `n` files (as Git listed them)
        adds `s / sqrt(n)` to each of its files, so a commit touching many files says less
        about each; the sums are divided by the largest. Empty when nothing matches, the
        folder has no commit index, or `words` holds no informative word.

    Raises:
        sqlite3.Error: from the commit or project tables.
    """
    concepts = request_concepts(" ".join(words))
    scored, _total = _score_commits(conn, project_path, concepts, max(1, limit))
    if not scored:
        return {}
    by_rowid = {item.rowid: item.score for item in scored}
    sums: dict[str, float] = {}
    marks = placeholders(len(by_rowid))
    for rowid, files, total in conn.execute(
        f"SELECT rowid, files_json, files_total FROM project_commits WHERE rowid IN ({marks})",
        list(by_rowid),
    ):
        share = by_rowid[int(rowid)] / math.sqrt(max(1, int(total)))
        for path in json.loads(files):
            sums[path] = sums.get(path, 0.0) + share
    if not sums:
        return {}
    existing: set[str] = set()
    paths = sorted(sums)
    for chunk in chunked(paths):
        existing.update(
            path
            for (path,) in conn.execute(
                "SELECT file_path FROM project_files WHERE project_path = ? AND status = "
                f"'current' AND file_path IN ({placeholders(len(chunk))})",
                (project_path, *chunk),
            )
        )
    kept = {path: value for path, value in sums.items() if path in existing}
    top = max(kept.values(), default=0.0)
    if top <= 0:
        return {}
    return {path: round(value / top, 6) for path, value in sorted(kept.items())}


__all__ = [
    "GIT_FLOOR",
    "NAMED_FILE_BOOST",
    "Concept",
    "commit_file_scores",
    "request_concepts",
    "search_commits",
]
