"""Evaluation: file localization from real commits (issue 11, the PROJECT set).

Cases: `bench/eval/project_cases.json` (built by `bench/eval/make_project_cases.py`; see there
for how a case is made): a real commit's message (`query`: identifiers, file names and paths
removed; `query_with_identifiers`: the message as written), the tree of its PARENT commit, and
the non-test `.py` files the commit changed (gold).

Per project the bundle (`--data DIR` or `DS4_EVAL_DATA`) is cloned once into a temp dir and
indexed by a `ProjectWorkspace` (trusted root, default settings, its own store). Cases are
grouped by parent; for each parent the clone is moved there (`git checkout --detach PARENT`)
and the workspace re-synced, incrementally (only the files the checkout rewrote are read
again), so every query runs against the parent's tree.

Ours: `describe_task` + `ProjectWorkspace.search` (what `ds4/retrieve` runs for project
scope), with `--max-results` (60) hits and `--max-tokens` (10,000,000) so the ranking below
the default page is visible (`--max-results 8 --max-tokens 20000` gives the defaults); files
ranked by their first hit. `unfloored`: the same ranking without the relevance floor. Same-run baseline: plain bm25 over whole files: a bare FTS5 table
(`unicode61`) with one row per file the discovery lists for the parent tree (the same files ours
may index), queried with the query's words OR-ed, `ORDER BY bm25`, first `--depth` (20) files.

Metrics per method and query column: Acc@1, Acc@5 (a gold file is first / among the first five
distinct files) and MRR (1 / rank of the first gold file among the first `--depth` distinct
files, 0 when none), over all cases and per project. `--json PATH` writes every case's ranks.

Two more columns check that the exact tiers still put a named file first (issue 11: requests
naming a path or a declared symbol, Acc@1 = 1.0): `path` is the query plus " in <the first gold
file's path>", `symbol` the query plus " (see `<name>`)" where the name is declared by the first
gold file and by no other file of the parent tree (the longest such name of 4+ characters, read
from the index; a case without one is left out of that column).

Unrelated requests (`eval/project_offtopic.json`: 20 requests no file of a software project
answers: a haiku, chit-chat, other programming languages, trivia) run at every 10th parent tree
of each project with the product's default budget (`project.maxResults`,
`context.maxProjectTokens`): the share that returns no snippet and the mean tokens returned
(the relevance floor), beside bm25 (which returns a file for any shared word).

Usage: python bench/project_eval.py --data DIR [--limit N] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "core"))
sys.path.insert(0, str(BENCH / "eval"))

from make_project_cases import clone, data_dir, git  # noqa: E402

from ds4_core.config import Config  # noqa: E402
from ds4_core.project.discovery import discover_project  # noqa: E402
from ds4_core.project.scoring import PROJECT_WEIGHTS  # noqa: E402
from ds4_core.project.search import search_project  # noqa: E402
from ds4_core.project.workspace import ProjectWorkspace  # noqa: E402
from ds4_core.retrieval import describe_task  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

CASES = BENCH / "eval" / "project_cases.json"
OFFTOPIC = BENCH / "eval" / "project_offtopic.json"
COLUMNS = ("query", "query_with_identifiers")
NAMED = ("path", "symbol")
OFFTOPIC_EVERY = 10
"""Unrelated requests run at every this many-th parent tree of a project."""
METHODS = ("ours", "unfloored", "bm25")
UNFLOORED = replace(PROJECT_WEIGHTS, relevance_floor=0.0)
"""`unfloored`: ours without the relevance floor (`search_project` with `relevance_floor` 0),
so the floor's cost on real requests is measured beside its effect on unrelated ones."""


def fts_or_query(request: str) -> str | None:
    words = list(dict.fromkeys(re.findall(r"\w+", request.lower())))
    return " OR ".join(f'"{w}"' for w in words) or None


def first_gold(found: Sequence[str], gold: Sequence[str], depth: int) -> int | None:
    """0-based rank of the first gold file among the first `depth` distinct files, else None."""
    for i, path in enumerate(list(dict.fromkeys(found))[:depth]):
        if path in gold:
            return i
    return None


def metrics(values: Sequence[int | None]) -> tuple[float, float, float]:
    n = len(values) or 1
    return (
        sum(r == 0 for r in values) / n,
        sum(r is not None and r < 5 for r in values) / n,
        sum(1 / (r + 1) for r in values if r is not None) / n,
    )


def select(cases: list[dict], limit: int | None) -> list[dict]:
    """The first `limit` cases, split evenly over the projects (all when None)."""
    if limit is None:
        return cases
    projects = list(dict.fromkeys(c["project"] for c in cases))
    share, extra = divmod(limit, len(projects))
    picked: list[dict] = []
    for i, project in enumerate(projects):
        own = [c for c in cases if c["project"] == project]
        picked.extend(own[: share + (i < extra)])
    return picked


def unique_symbol(store, project_path: str, gold: str) -> str | None:
    """The longest name (4+ characters; ties: alphabetical) declared by `gold` and by no other
    current file of the index, or None."""
    declared: dict[str, set[str]] = {}
    for path, symbols in store.connection().execute(
        "SELECT s.file_path, s.symbols FROM project_snippets AS s JOIN project_files AS pf "
        "ON pf.project_path = s.project_path AND pf.file_path = s.file_path "
        "WHERE s.project_path = ? AND s.stale = 0 AND pf.status = 'current' "
        "AND pf.content_hash = s.file_hash",
        (project_path,),
    ):
        for name in symbols.split():
            declared.setdefault(name, set()).add(path)
    names = [n for n, paths in declared.items() if paths == {gold} and len(n) >= 4]
    return min(names, key=lambda n: (-len(n), n)) if names else None


def bm25_files(bare: sqlite3.Connection, paths: list[str], text: str, depth: int) -> list[str]:
    """The first `depth` files of the bare FTS5 table for `text`'s words OR-ed."""
    query = fts_or_query(text)
    if not query:
        return []
    rows = bare.execute(
        "SELECT rowid FROM files WHERE files MATCH ? ORDER BY bm25(files) LIMIT ?",
        (query, depth),
    ).fetchall()
    return [paths[r] for (r,) in rows]


def run_offtopic(workspace, store, bare, paths, config, project: str) -> list[dict]:
    """Each unrelated request once: ours (with and without the floor) with the default budget,
    and how many files bm25 returns for it."""
    rows = []
    for text in json.loads(OFFTOPIC.read_text()):
        found = workspace.search(
            describe_task(text),
            max_results=config.project.max_results,
            max_tokens=config.context.max_project_tokens,
        )
        hits = found.retrieval.hits
        unfloored = search_project(
            store,
            str(workspace.root),
            describe_task(text),
            max_results=config.project.max_results,
            max_tokens=config.context.max_project_tokens,
            weights=UNFLOORED,
        ).hits
        rows.append(
            {
                "project": project,
                "request": text,
                "ours_hits": len(hits),
                "ours_tokens": sum(hit.tokens for hit in hits),
                "ours_below_floor": len(found.retrieval.below_floor),
                "unfloored_hits": len(unfloored),
                "unfloored_tokens": sum(hit.tokens for hit in unfloored),
                "bm25_files": len(bm25_files(bare, paths, text, config.project.max_results)),
            }
        )
    return rows


def run_project(
    project: str, cases: list[dict], bundle: Path, tmp: Path, args: argparse.Namespace
) -> tuple[list[dict], list[dict], dict[str, float]]:
    timing = {"clone": 0.0, "checkout": 0.0, "sync": 0.0, "bm25_build": 0.0, "queries": 0.0}
    begun = time.perf_counter()
    root = tmp / project
    clone(bundle, root)
    timing["clone"] = time.perf_counter() - begun
    config = Config()
    store = open_store(tmp / f"{project}-index.db")
    workspace = ProjectWorkspace(lambda: store, lambda: config)
    workspace.set_workspace(root, trusted=True)
    results: list[dict] = []
    offtopic: list[dict] = []
    parents = list(dict.fromkeys(c["parent"] for c in cases))
    try:
        for number, parent in enumerate(parents):
            begun = time.perf_counter()
            git(root, "checkout", "-q", "--detach", "--force", parent)
            timing["checkout"] += time.perf_counter() - begun
            begun = time.perf_counter()
            synced = workspace.sync()
            timing["sync"] += time.perf_counter() - begun
            if synced.status != "ready":
                raise SystemExit(f"{project} @ {parent[:10]}: sync {synced.status}: {synced}")
            begun = time.perf_counter()
            discovery = discover_project(
                root,
                max_files=config.project.max_files,
                max_total_bytes=config.project.max_total_bytes,
            )
            listed = {f.rel_path for f in discovery.files}
            bare = sqlite3.connect(":memory:")
            bare.execute("CREATE VIRTUAL TABLE files USING fts5(content)")
            paths = sorted(listed)
            bare.executemany(
                "INSERT INTO files (rowid, content) VALUES (?, ?)",
                ((i, (root / p).read_text("utf-8", errors="replace")) for i, p in enumerate(paths)),
            )
            timing["bm25_build"] += time.perf_counter() - begun
            begun = time.perf_counter()
            for case in (c for c in cases if c["parent"] == parent):
                row = {
                    "project": project,
                    "commit": case["commit"],
                    "gold": case["gold"],
                    "gold_listed": [g for g in case["gold"] if g in listed],
                    "files_synced": synced.files_indexed,
                }
                texts = {column: case[column] for column in COLUMNS}
                texts["path"] = f"{case['query']} in {case['gold'][0]}"
                symbol = unique_symbol(store, str(workspace.root), case["gold"][0])
                if symbol is not None:
                    texts["symbol"] = f"{case['query']} (see `{symbol}`)"
                for column, text in texts.items():
                    found = workspace.search(
                        describe_task(text),
                        max_results=args.max_results,
                        max_tokens=args.max_tokens,
                    )
                    ours = [hit.path for hit in found.retrieval.hits]
                    row[f"ours:{column}"] = first_gold(ours, case["gold"], args.depth)
                    row[f"ours_top:{column}"] = list(dict.fromkeys(ours))[:3]
                    unfloored = search_project(
                        store,
                        str(workspace.root),
                        describe_task(text),
                        max_results=args.max_results,
                        max_tokens=args.max_tokens,
                        weights=UNFLOORED,
                    )
                    row[f"unfloored:{column}"] = first_gold(
                        [hit.path for hit in unfloored.hits], case["gold"], args.depth
                    )
                    found_bm25 = bm25_files(bare, paths, text, args.depth)
                    row[f"bm25:{column}"] = first_gold(found_bm25, case["gold"], args.depth)
                results.append(row)
            if number % OFFTOPIC_EVERY == 0:
                offtopic.extend(run_offtopic(workspace, store, bare, paths, config, project))
            timing["queries"] += time.perf_counter() - begun
            bare.close()
    finally:
        store.close()
    return results, offtopic, timing


def table(title: str, rows: list[dict]) -> None:
    print(f"\n{title} ({len(rows)} cases)")
    print(f"  {'method':10} {'column':24} {'Acc@1':>7} {'Acc@5':>7} {'MRR':>7}")
    for column in (*COLUMNS, *NAMED):
        own = [r for r in rows if f"ours:{column}" in r]
        for method in METHODS:
            values = metrics([r[f"{method}:{column}"] for r in own])
            name = column if len(own) == len(rows) else f"{column} (n={len(own)})"
            print(f"  {method:10} {name:24} " + " ".join(f"{v:7.3f}" for v in values))


def offtopic_table(rows: list[dict]) -> None:
    """Share of unrelated requests with nothing returned, and mean tokens (ours)."""
    if not rows:
        return
    n = len(rows)
    print(f"\nunrelated requests ({n} runs: {len({r['request'] for r in rows})} requests)")
    print(f"  {'method':10} {'share with none':>14} {'mean tokens':>12} {'mean hits':>10}")
    for method in ("ours", "unfloored"):
        none = sum(r[f"{method}_hits"] == 0 for r in rows) / n
        tokens = sum(r[f"{method}_tokens"] for r in rows) / n
        hits = sum(r[f"{method}_hits"] for r in rows) / n
        print(f"  {method:10} {none:14.3f} {tokens:12.1f} {hits:10.2f}")
    bm25_none = sum(r["bm25_files"] == 0 for r in rows) / n
    bm25_hits = sum(r["bm25_files"] for r in rows) / n
    print(f"  {'bm25':10} {bm25_none:14.3f} {'-':>12} {bm25_hits:10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="directory holding the git bundles (or DS4_EVAL_DATA)")
    parser.add_argument("--cases", type=Path, default=CASES, help="case set (JSON)")
    parser.add_argument("--limit", type=int, help="first N cases, split evenly over projects")
    parser.add_argument("--max-results", type=int, default=60, help="hits asked of ours")
    parser.add_argument("--max-tokens", type=int, default=10_000_000, help="token cap of ours")
    parser.add_argument("--depth", type=int, default=20, help="distinct files ranked for MRR")
    parser.add_argument("--json", type=Path, help="write every case's ranks here")
    args = parser.parse_args()

    started = time.perf_counter()
    cases = select(json.loads(args.cases.read_text()), args.limit)
    projects = list(dict.fromkeys(c["project"] for c in cases))
    data = data_dir(args.data, projects)
    everything: list[dict] = []
    unrelated: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ds4-project-eval-") as tmp:
        for project in projects:
            own = [c for c in cases if c["project"] == project]
            begun = time.perf_counter()
            rows, offtopic, timing = run_project(
                project, own, data / f"{project}.bundle", Path(tmp), args
            )
            everything.extend(rows)
            unrelated.extend(offtopic)
            parents = len({c["parent"] for c in own})
            print(
                f"{project}: {len(own)} cases, {parents} parent trees, "
                f"{time.perf_counter() - begun:.1f} s ("
                + ", ".join(f"{k} {v:.1f} s" for k, v in timing.items())
                + ")"
            )
    table("all projects", everything)
    for project in projects:
        table(project, [r for r in everything if r["project"] == project])
    offtopic_table(unrelated)
    unlisted = [r for r in everything if len(r["gold_listed"]) < len(r["gold"])]
    print(
        f"\ncases with a gold file not indexable at the parent: {len(unlisted)}"
        + "".join(f"\n  {r['project']} {r['commit'][:10]} {r['gold']}" for r in unlisted[:10])
    )
    for column in COLUMNS:
        wins = sum(_better(r[f"ours:{column}"], r[f"bm25:{column}"]) for r in everything)
        losses = sum(_better(r[f"bm25:{column}"], r[f"ours:{column}"]) for r in everything)
        print(f"per case ({column}): ours ranks gold higher in {wins}, bm25 in {losses}")
    if args.json:
        args.json.write_text(
            json.dumps({"cases": everything, "unrelated": unrelated}, indent=1) + "\n"
        )
        print(f"wrote per-case ranks to {args.json}")
    print(f"elapsed {time.perf_counter() - started:.1f} s")


def _better(a: int | None, b: int | None) -> bool:
    return a is not None and (b is None or a < b)


if __name__ == "__main__":
    main()
