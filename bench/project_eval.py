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
ranked by their first hit. Same-run baseline: plain bm25 over whole files: a bare FTS5 table
(`unicode61`) with one row per file the discovery lists for the parent tree (the same files ours
may index), queried with the query's words OR-ed, `ORDER BY bm25`, first `--depth` (20) files.

Metrics per method and query column: Acc@1, Acc@5 (a gold file is first / among the first five
distinct files) and MRR (1 / rank of the first gold file among the first `--depth` distinct
files, 0 when none), over all cases and per project. `--json PATH` writes every case's ranks.

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
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "core"))
sys.path.insert(0, str(BENCH / "eval"))

from make_project_cases import clone, data_dir, git  # noqa: E402

from ds4_core.config import Config  # noqa: E402
from ds4_core.project.discovery import discover_project  # noqa: E402
from ds4_core.project.workspace import ProjectWorkspace  # noqa: E402
from ds4_core.retrieval import describe_task  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

CASES = BENCH / "eval" / "project_cases.json"
COLUMNS = ("query", "query_with_identifiers")
METHODS = ("ours", "bm25")


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


def run_project(
    project: str, cases: list[dict], bundle: Path, tmp: Path, args: argparse.Namespace
) -> tuple[list[dict], dict[str, float]]:
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
    parents = list(dict.fromkeys(c["parent"] for c in cases))
    try:
        for parent in parents:
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
                for column in COLUMNS:
                    text = case[column]
                    found = workspace.search(
                        describe_task(text),
                        max_results=args.max_results,
                        max_tokens=args.max_tokens,
                    )
                    ours = [hit.path for hit in found.retrieval.hits]
                    row[f"ours:{column}"] = first_gold(ours, case["gold"], args.depth)
                    row[f"ours_top:{column}"] = list(dict.fromkeys(ours))[:3]
                    query = fts_or_query(text)
                    rows = (
                        bare.execute(
                            "SELECT rowid FROM files WHERE files MATCH ? "
                            "ORDER BY bm25(files) LIMIT ?",
                            (query, args.depth),
                        ).fetchall()
                        if query
                        else []
                    )
                    row[f"bm25:{column}"] = first_gold(
                        [paths[r] for (r,) in rows], case["gold"], args.depth
                    )
                results.append(row)
            timing["queries"] += time.perf_counter() - begun
            bare.close()
    finally:
        store.close()
    return results, timing


def table(title: str, rows: list[dict]) -> None:
    print(f"\n{title} ({len(rows)} cases)")
    print(f"  {'method':8} {'column':24} {'Acc@1':>7} {'Acc@5':>7} {'MRR':>7}")
    for column in COLUMNS:
        for method in METHODS:
            values = metrics([r[f"{method}:{column}"] for r in rows])
            print(f"  {method:8} {column:24} " + " ".join(f"{v:7.3f}" for v in values))


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
    with tempfile.TemporaryDirectory(prefix="ds4-project-eval-") as tmp:
        for project in projects:
            own = [c for c in cases if c["project"] == project]
            begun = time.perf_counter()
            rows, timing = run_project(project, own, data / f"{project}.bundle", Path(tmp), args)
            everything.extend(rows)
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
        args.json.write_text(json.dumps(everything, indent=1) + "\n")
        print(f"wrote per-case ranks to {args.json}")
    print(f"elapsed {time.perf_counter() - started:.1f} s")


def _better(a: int | None, b: int | None) -> bool:
    return a is not None and (b is None or a < b)


if __name__ == "__main__":
    main()
