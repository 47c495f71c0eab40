"""Project retrieval: rank indexed project windows for a request, and quote them as data.

Rules from docs/reference.md §3.10 ("Project ranking", rendering) and docs/project-knowledge.md,
plus the issue's demand that prose requests find the files that implement what they describe.

This module runs the search and selects the hits. The parts live next to it: the query plan
and its FTS concepts in `project/query.py`, the SQL and FTS5 statements and the exact tiers in
`project/candidates.py`, the FTS tier (concept pass, whole-file pass, file ranking) in
`project/fts_pass.py`, the results and their quoted rendering in `project/hits.py`. The numbers
(points, weights, shares) and the rank order are pure functions in `project/scoring.py`
(`ProjectWeights`), which this docstring describes with their defaults.

**When it runs.** `max_results` or `max_tokens` <= 0: status `disabled`. A descriptor without
query terms: `no-query`. A lone generic keyword (one plain word, no identifier, file, phrase or
error; a capitalised or all-caps English word such as `Cache` counts as that word; words of
conversation such as `great`, `thanks`, `hello` do not count, so "Thanks, that worked great!"
is one): `generic`, nothing is read. No current file indexed for the project: `no-index`.

**Tiers** (a window's primary score is its best tier):

| match | score | how |
|---|---|---|
| exact relative path | 140 | a descriptor file equal to the path, or to its trailing segments |
| exact basename | 125 | a descriptor file's last segment is the file name (none matches by path) |
| declared symbol | 115 | the window declares the name (`symbols` column; case-sensitive) |
| exact phrase | 90 | a quoted phrase (or backticked text with spaces) in the content |
| symbol text | 85 | an identifier in the content, starting a word (`LiteralTerm`) |
| FTS | 60..20 | by rank r of the window's *file*: `20 + 40 * 0.9 ** r` (60, 56, 52.4, ...) |

Then: +2 per further exact match (at most +6), + (FTS tier - 20) / 10 when a window of an exact
tier also has FTS evidence, +10 when the file is modified in the working tree, +3 when it is
tracked by Git; a window of an exact tier loses min(12, token_estimate / 250) (an FTS-only
window does not: its file's rank already weighed the file); a test or documentation window of
an exact tier loses 10 (not when the request is about tests or docs, or names the file).
Scores are rounded to 6 decimals. Order: score, then modified first, path, start line, snippet
id.

**Identifiers.** The descriptor's symbols, backticked names and error codes. A symbol that is only
a capitalised or all-caps word (`The`, `Check`, `README`, `JSON`; never backticked) is *weak*:
ds4's descriptor makes any PascalCase word a symbol, so the first word of every sentence would
otherwise match every window; a weak symbol only counts when a window declares it.

**Concepts.** Each query concept (an identifier, file, phrase or keyword; at most 16) is one
FTS5 query over `content`, `file_path`, `symbols` and `search_text` (bm25 column weights 1,
2.5, 2, 1): identifiers as themselves and their sub-words (`fts_terms_for`: `shipping method`
finds `getShippingMethod`), plain keywords by a light stem as a prefix (`keyword_stem`:
`invalidated` -> `"invalidat" *`, so it also finds `invalidate_cache`; `suppression` ->
`"suppress" *`, `proxies` -> `"prox" *`) or their usual short form in code (`configuration` ->
`config`), each CJK bigram of a CJK keyword as a concept of its own (a sentence need not appear
verbatim). A concept's weight is its idf over the index (always positive; FTS5's own idf is ~0
for a word in half the rows, which in a small project is most telling words); its score in a
window is that weight times the window's bm25 relative to the concept's best window (or times
0.4 when it only occurs there: see `_concept_pass` for how common concepts are kept cheap).

**Files first.** A file's *evidence*: each concept counts once, with its best window
(`m(c, f)`), plus half its weight when the file's path names it (`config_watcher.py` for
`config`): `sum_c (m(c, f) + path(c, f)) * (0.5 + 0.5 * coverage)`, where coverage is the share
of the concept weight the file matches anywhere. So a file that touches every concept beats one
that repeats one word. In a prose request (no identifier, file or phrase) the file ranking also
uses bm25 over whole files (`project_file_texts_fts`, migration 6: one row per current file
with its path words, content and identifier sub-words) for ALL the request's words
(`request_words`: lower-case words of 2+ characters that are not stopwords, unstemmed, each
quoted, OR-ed) for the `FILE_TEXT_MIN_FILES` (or more) best files. A file's score
(`scoring.combine_file_scores`) is

    (text + 0.5 * evidence + 0.25 * prior) * (0.5 + 0.5 * size) * role

with `text` its whole-file bm25 relative to the best file's (0 outside prose requests), `evidence`
relative to the best file's, `prior` the caller's `file_prior` for it (0..1; e.g. how well its past
Git commits match the request), `size` = ln(1 + lines) / ln(1 + 2000), at most 1, lines estimated
as bytes / 40 (longer files are more often the answer; bm25's length normalisation pushes the other
way; only the files that can still rank once sized are looked up), and `role` 0.25 for a test file
(request not about tests) or a documentation file, change logs included (request not about docs:
they describe the code in the request's own words), 0.5 for a configuration or data file (`.toml`,
`.yaml`, `.ini`, `.cfg`, `.json`, dot-files), else 1. Files are ranked by score; the best
`FTS_MIN_FILES` (at least; 3 x `max_results` when more) get an FTS tier: their best window by
concept relevance, and the second best when it scores at least half as much (2 points less); a file
only the whole-file pass or the prior found gives each window the presence share of the concepts it
holds. The exact tiers stay above the FTS tier, so identifier and path requests rank as before.

**Floor.** A window's *relevance* (0..1, the scale of `ProjectRetrieval.below_floor` and of
`ProjectWeights.relevance_floor`) is 1 for a window of an exact tier and, for an FTS window,
its file's relevance (`scoring.file_relevance`): the mean of (a) the share of the request's
information the file holds (in any of its windows: each concept once, weighted by its idf, a
concept the index lacks counting as the rarest: `concept_idf(N, 0)`, N at least 1,000 so
that a tiny index does not make every missing word dominate) and (b) the share of the
request's concepts the project knows (found in any window a pass read or in a ranked file; each
counts the same); 1 for a file holding a name in code (a word mixing letters with digits or
`_`, e.g. `sha256`). The `file_prior` ranks files but is not relevance (a relative prior gives
its best file 1 for any request). When no window reaches the floor (0.55), the request is not
about this project: nothing is sent, and the `MAX_BELOW_FLOOR` best windows (by relevance,
then rank) are returned as `below_floor` with the tokens each would have cost. When one does,
the ranking and the budget decide. An unrelated request ("Write a haiku about the sea")
matches a few common words of the project and none of its own rare ones, so it stays under the
floor.

**Selection.** Windows are taken in rank order, files first: an FTS-only window of a file that
already has a hit waits until every ranked file had its turn (a page of 20 hits holds up to 20
files), then the waiting windows follow in rank order. A window with the same text as a
selected one is an exact duplicate, one overlapping a selected window of the same file by half
or more of the shorter one's lines is collapsed, at most 2 windows per file (4 for a file the
request names). Each hit's `tokens` are the `chars-v2` tokens of its rendered message (with the
indexed Git HEAD); selection stops at `max_results` hits, or at the first hit that does not fit
in what is left of `max_tokens`.

The FTS reads (each concept's matching rows and bm25 cut, the whole-file pass, the row count,
the project's files by name for the path tier) are kept per index revision by
`project/revision_cache.py`: the same answers, read once until any connection changes the
database.

Only non-stale snippets of current files whose hash is the file's current hash are read. Every
user term reaches SQLite as a bound parameter; FTS5 text is built only from quoted phrases
(`fts_phrase`, `fts_terms_for`, `LiteralTerm.prefilter`) plus our own ` *`, `OR` and column
filters, so no input can inject FTS5 syntax. An FTS5 error never escapes: the exact tiers fall
back to a LIKE scan, the FTS tier is skipped, and a warning says so.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import replace

from ds4_core.retrieval.descriptor import TaskDescriptor
from ds4_core.retrieval.floor import MAX_BELOW_FLOOR, BelowFloor
from ds4_core.store.database import Store

from .candidates import (
    _declared_tier,
    _literal_tier,
    _path_tier,
    _Search,
    _Window,
)
from .fts_pass import _concept_pass, _rank_files
from .hits import (
    BEGIN_MARKER,
    END_MARKER,
    ProjectHit,
    ProjectRetrieval,
    ProjectStats,
    ProjectStatus,
    project_hit_tokens,
    project_source_text,
    render_project_snippet,
)
from .query import QueryPlan, keyword_stem, plan_query, request_words
from .scoring import (
    PROJECT_WEIGHTS,
    ProjectWeights,
    RankingContext,
    ScoredWindow,
    Tier,
    file_role,
    rank_windows,
)

MAX_WINDOWS_PER_FILE = 2
MAX_WINDOWS_NAMED_FILE = 4
OVERLAP_SHARE = 0.5
"""Windows of one file sharing this share of the shorter one's lines are collapsed."""
FTS_MIN_FILES = 24
"""Files (at least; 3 x max_results when more) whose windows get an FTS tier score."""
_TEXT_BATCH = 16
"""Ranked windows whose text is read at once during selection."""


# ----------------------------------------------------------------------------- selection


def _overlaps(a: _Window, b: _Window) -> bool:
    shared = min(a.end_line, b.end_line) - max(a.start_line, b.start_line) + 1
    if shared <= 0:
        return False
    shorter = min(a.end_line - a.start_line + 1, b.end_line - b.start_line + 1)
    return shared >= OVERLAP_SHARE * shorter


# ----------------------------------------------------------------------------- entry point


def search_project(
    store: Store,
    project_path: str,
    descriptor: TaskDescriptor,
    *,
    max_results: int,
    max_tokens: int,
    folder: str | None = None,
    file_prior: Mapping[str, float] | None = None,
    weights: ProjectWeights = PROJECT_WEIGHTS,
) -> ProjectRetrieval:
    """Rank the indexed windows of `project_path` for `descriptor` (module docstring).

    Args:
        store: an open store; read through the calling thread's connection.
        project_path: the canonical project root, as the index stores it.
        descriptor: the request's `TaskDescriptor` (`describe_task`).
        max_results: most hits (<= 0: status `disabled`).
        max_tokens: `chars-v2` budget for all rendered hits (<= 0: `disabled`).
        folder: the workspace folder's name to give every hit (`ProjectHit.folder`; it is
            quoted and counted in `tokens`), or None for a single-folder workspace.
        file_prior: an outside prior per file (POSIX path relative to the project root ->
            0..1, e.g. how well the file's past commits match the request), weighted by
            `ProjectWeights.prior_weight` in the file ranking; values outside 0..1 are
            clamped, paths that are not current indexed files are ignored. None: no prior.
        weights: the ranking weights (`ProjectWeights`; the defaults are the product's).

    Returns:
        `ProjectRetrieval`; hits in rank order, the sum of their `tokens` <= `max_tokens`, at
        most `max_results` of them; `below_floor` the best windows under the relevance floor
        (`MAX_BELOW_FLOOR` at most, best first). Never raises for any descriptor.

    Raises:
        sqlite3.Error: from the project tables themselves (never from FTS5: its errors become a
            warning and an exact-only result).
    """
    started = time.perf_counter()

    def elapsed_ms() -> float:
        return (time.perf_counter() - started) * 1000

    if max_results <= 0 or max_tokens <= 0:
        return ProjectRetrieval("disabled", stats=ProjectStats(latency_ms=elapsed_ms()))
    if not descriptor.query_terms:
        return ProjectRetrieval("no-query", stats=ProjectStats(latency_ms=elapsed_ms()))
    plan = plan_query(descriptor)
    if plan.generic:
        return ProjectRetrieval("generic", stats=ProjectStats(latency_ms=elapsed_ms()))
    project_path = str(project_path)
    conn = store.connection()
    state = conn.execute(
        "SELECT git_head FROM project_states WHERE project_path = ?", (project_path,)
    ).fetchone()
    git_head: str | None = state[0] if state else None
    indexed = conn.execute(
        "SELECT 1 FROM project_files WHERE project_path = ? AND status = 'current' LIMIT 1",
        (project_path,),
    ).fetchone()
    if indexed is None:
        return ProjectRetrieval(
            "no-index", stats=ProjectStats(latency_ms=elapsed_ms()), git_head=git_head
        )

    search = _Search(conn, project_path)
    named, file_names = _path_tier(search, plan.files)
    # A file name the path tier found (`decoder.py`) is that file: not a qualified symbol
    # (`py` declared by a window mentioning `decoder`), and only looked for as text in the
    # files it names (a file that names itself in its text is the likelier one).
    qualified = {(n.rsplit(".", 1)[-1], n.split(".", 1)[0]) for n in file_names if "." in n}
    _declared_tier(search, [d for d in plan.declared if d not in qualified])
    _literal_tier(search, plan.phrases, Tier.PHRASE)
    _literal_tier(search, [i for i in plan.identifiers if i not in file_names], Tier.SYMBOL_TEXT)
    _literal_tier(
        search, [i for i in plan.identifiers if i in file_names], Tier.SYMBOL_TEXT, sorted(named)
    )
    prose = not (plan.files or plan.identifiers or plan.phrases)
    ranking, information = _concept_pass(search, plan.concepts, prose=prose, weights=weights)
    limit = max(FTS_MIN_FILES, 3 * max_results)
    file_relevance = _rank_files(
        search,
        ranking,
        plan,
        limit,
        prose=prose,
        information=information,
        file_prior=file_prior,
        weights=weights,
    )

    candidates = [w for w in search.windows.values() if w.tiers or w.fts_score is not None]
    search.load_missing(candidates)
    context = RankingContext(
        about_tests=plan.about_tests,
        about_docs=plan.about_docs,
        named_files=named,
        concept_labels=[concept.label for concept in plan.concepts],
    )
    scored = rank_windows((w for w in candidates if w.loaded), context, weights)
    relevance = {
        id(item): 1.0 if item.window.tiers else file_relevance.get(item.window.path, 0.0)
        for item in scored
    }
    # The floor is the request's: when no candidate carries `relevance_floor` of it, nothing
    # is sent; when one does, the ranking and the budget decide (module docstring, "Floor").
    floor = weights.relevance_floor
    relevant = max(relevance.values(), default=0.0) >= floor
    above, below = (scored, []) if relevant else ([], scored)
    hits, counts = _select(search, above, named, max_results, max_tokens, folder, git_head)
    stats = ProjectStats(
        candidates=len(candidates),
        files=len({w.path for w in candidates}),
        duplicates=counts[0],
        overlapping=counts[1],
        per_file_capped=counts[2],
        concepts=len(plan.concepts),
        latency_ms=elapsed_ms(),
    )
    return ProjectRetrieval(
        "ok",
        hits,
        stats,
        search.warnings,
        git_head,
        _below_floor(search, below, relevance, floor, git_head, folder),
    )


def _hit(item: ScoredWindow[_Window], folder: str | None) -> ProjectHit:
    window = item.window
    return ProjectHit(
        snippet_id=window.snippet_id,
        path=window.path,
        start_line=window.start_line,
        end_line=window.end_line,
        file_hash=window.file_hash,
        score=item.score,
        reason=item.reason,
        text=window.content or "",
        tokens=0,
        modified=window.modified,
        tracked=window.tracked,
        git_commit=window.git_commit,
        folder=folder,
    )


def _select(
    search: _Search,
    scored: list[ScoredWindow[_Window]],
    named: Collection[str],
    max_results: int,
    max_tokens: int,
    folder: str | None,
    git_head: str | None,
) -> tuple[list[ProjectHit], tuple[int, int, int]]:
    """The hits, in two passes over `scored` (rank order; module docstring, "Selection"):
    the first defers an FTS-only window of a file that already has a hit, the second takes
    the deferred ones in rank order. Returns the hits and the (duplicates, overlapping,
    per-file capped) counts."""
    hits: list[ProjectHit] = []
    seen_text: set[str] = set()
    per_file: dict[str, list[_Window]] = {}
    duplicates = overlapping = capped = used = 0
    deferred: list[ScoredWindow[_Window]] = []
    for second_pass, queue in ((False, scored), (True, deferred)):
        for position, item in enumerate(queue):
            if len(hits) >= max_results:
                break
            window = item.window
            taken = per_file.setdefault(window.path, [])
            if not second_pass and taken and not window.tiers:
                deferred.append(item)  # files first: its file's other windows can wait
                continue
            if window.content is None:  # read the text of the next windows in rank order
                search.load_text(s.window for s in queue[position : position + _TEXT_BATCH])
            if window.content is None:
                continue  # its row is gone
            text = window.content
            if text in seen_text:
                duplicates += 1
                continue
            if any(_overlaps(window, other) for other in taken):
                overlapping += 1
                continue
            limit = MAX_WINDOWS_NAMED_FILE if window.path in named else MAX_WINDOWS_PER_FILE
            if len(taken) >= limit:
                capped += 1
                continue
            hit = _hit(item, folder)
            tokens = project_hit_tokens(hit, git_head)
            if used + tokens > max_tokens:
                return hits, (duplicates, overlapping, capped)
            used += tokens
            seen_text.add(text)
            taken.append(window)
            hits.append(replace(hit, tokens=tokens))
    return hits, (duplicates, overlapping, capped)


def _below_floor(
    search: _Search,
    below: list[ScoredWindow[_Window]],
    relevance: Mapping[int, float],
    floor: float,
    git_head: str | None,
    folder: str | None,
) -> tuple[BelowFloor, ...]:
    """The `MAX_BELOW_FLOOR` best windows under the floor (by relevance, then rank order), with
    the tokens each would have cost."""
    best = sorted(enumerate(below), key=lambda pair: (-relevance[id(pair[1])], pair[0]))
    kept = [item for _, item in best[:MAX_BELOW_FLOOR]]
    search.load_text(item.window for item in kept)
    return tuple(
        BelowFloor(
            kind="project",
            source_id=item.window.snippet_id,
            score=round(relevance[id(item)], 6),
            floor=floor,
            tokens=project_hit_tokens(_hit(item, folder), git_head),
        )
        for item in kept
    )


__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "ProjectHit",
    "ProjectRetrieval",
    "ProjectStats",
    "ProjectStatus",
    "QueryPlan",
    "file_role",
    "keyword_stem",
    "plan_query",
    "project_hit_tokens",
    "project_source_text",
    "render_project_snippet",
    "request_words",
    "search_project",
]
