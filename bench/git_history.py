"""Benchmark: the Git history index and the `git` retrieval scope on real histories.

Workload: the public histories of marshmallow and httpx, given as git bundles (`--data DIR`
or `DS4_EVAL_DATA`, as for `project_eval.py`; kept outside the repository), each cloned into a
temp dir.

1. Index: `sync_commits` of each history (up to `--max-commits`, default 5,000) into a fresh
   store, best of `--index-runs`; commits/s. Same-run baseline: the bare `git log` with the
   same format and options (output discarded). Also the no-op sync (HEAD unchanged).
2. Retrieval in process: `search_commits` for `--queries` requests made from random commits'
   subjects with identifiers, paths and numbers removed (as `project_eval.py` makes its
   prose queries), warm, `--runs` each; p50/p95. Same-run baseline: the bare FTS5 bm25
   statement over the same index with the same words OR-ed. Also printed (not tuned on):
   how often the commit a query was made from is first / in the top 5, and, for unrelated
   requests (chit-chat, other topics), the share that return no commit.
   `commit_file_scores` (the file-ranking signal) for the same requests' words, p50/p95.
3. Over a real `ds4-lsp` process (stdio, `bench/plan.py`'s raw client): `ds4/retrieve` with
   `scopes: ["git"]` on the httpx clone as a trusted workspace, p50/p95; baselines: the same
   requests with `scopes: ["project"]` over the same process (what every workspace request
   pays before searching: the freshness sweep), and in process (`search_commits`).

Usage: python bench/git_history.py --data DIR [--runs 20] [--queries 40]
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "core"))
sys.path.insert(0, str(BENCH / "eval"))
sys.path.insert(0, str(BENCH))

from make_project_cases import data_dir  # noqa: E402
from plan import RawClient  # noqa: E402

from ds4_core.project.commit_index import project_key, sync_commits  # noqa: E402
from ds4_core.project.commit_search import (  # noqa: E402
    BM25_WEIGHTS,
    commit_file_scores,
    request_concepts,
    search_commits,
)
from ds4_core.project.commits import LOG_OPTIONS, log_format  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

PROJECTS = ("marshmallow", "httpx")
UNRELATED = (
    "Write a haiku about the sea, please.",
    "Can you explain how Rust's borrow checker handles mutable references?",
    "thanks, that's all for today",
    "What is the capital of Australia?",
    "Recommend a good book about gardening.",
    "How do I make sourdough bread at home?",
    "Translate 'good morning' into Japanese.",
    "Summarize the plot of Hamlet in two sentences.",
    "What's the weather like on Mars?",
    "Tell me a joke about cats.",
)
_IDENTIFIERS = re.compile(
    r"`[^`]*`|\S*[/\\]\S*|\S+\.(?:py|md|rst|txt|toml|cfg)\b|\b\w*[_][\w]*\b|\b[a-z]+[A-Z]\w*\b"
    r"|#\d+|\(\s*\)|\b\d[\w.]*\b"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))]


def line(name: str, values: list[float]) -> str:
    return (
        f"{name}: p50 {statistics.median(values):.2f} ms, p95 {percentile(values, 95):.2f} ms, "
        f"max {max(values):.2f} ms ({len(values)} calls)"
    )


def clone(bundle: Path, target: Path) -> None:
    subprocess.run(
        ["git", "clone", "-q", str(bundle), str(target)], check=True, capture_output=True
    )


def bare_git_log(root: Path, limit: int) -> float:
    started = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(root), "log", *LOG_OPTIONS, f"--format={log_format('0' * 16)}",
         f"--max-count={limit}", "HEAD", "--"],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return (time.perf_counter() - started) * 1000


def make_queries(conn, project_path: str, count: int, seed: int = 11) -> list[tuple[str, str]]:
    """(request, hash) pairs from random commits' subjects with identifiers removed."""
    rows = conn.execute(
        "SELECT hash, subject FROM project_commits WHERE project_path = ? ORDER BY seq",
        (project_path,),
    ).fetchall()
    rng = random.Random(seed)
    rng.shuffle(rows)
    queries = []
    for hash_, subject in rows:
        text = " ".join(_IDENTIFIERS.sub(" ", subject).split())
        if len(request_concepts(text)) >= 3 and not text.lower().startswith(("merge", "bump")):
            queries.append((f"why did we {text[0].lower()}{text[1:]}?", hash_))
        if len(queries) >= count:
            break
    return queries


def bare_bm25(conn, project_path: str, text: str) -> None:
    concepts = request_concepts(text)
    if not concepts:
        return
    expression = " OR ".join(c.fts for c in concepts)
    conn.execute(
        "SELECT rowid, bm25(project_commits_fts, ?, ?, ?, ?) FROM project_commits_fts "
        "WHERE project_commits_fts MATCH ? ORDER BY 2 LIMIT 200",
        (*BM25_WEIGHTS, f"project_key : {project_key(project_path)} AND ({expression})"),
    ).fetchall()


def timed(call, runs: int) -> list[float]:
    call()
    values = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        values.append((time.perf_counter() - started) * 1000)
    return values


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="directory holding the git bundles (or DS4_EVAL_DATA)")
    parser.add_argument("--max-commits", type=int, default=5000)
    parser.add_argument("--index-runs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    data = data_dir(args.data, PROJECTS)
    with tempfile.TemporaryDirectory(prefix="ds4-git-bench-") as temp:
        base = Path(temp)
        roots = {}
        for project in PROJECTS:
            roots[project] = (base / project).resolve()
            clone(data / f"{project}.bundle", roots[project])
        print("== index (sync_commits, full read)")
        store = None
        for project, root in roots.items():
            best, commits = float("inf"), 0
            for run in range(args.index_runs):
                if store is not None:
                    store.close()
                store = open_store(base / f"index-{project}-{run}.db")
                started = time.perf_counter()
                result = sync_commits(store, root, max_commits=args.max_commits)
                best = min(best, (time.perf_counter() - started) * 1000)
                commits = result.total
            bare = min(bare_git_log(root, args.max_commits) for _ in range(args.index_runs))
            noop = timed(
                lambda r=root, s=store: sync_commits(s, r, max_commits=args.max_commits), 10
            )
            print(
                f"{project}: {commits} commits in {best:.0f} ms ({commits / best * 1000:.0f} "
                f"commits/s); bare git log {bare:.0f} ms (x{best / bare:.1f}); no-op sync "
                f"p50 {statistics.median(noop):.2f} ms"
            )
        assert store is not None
        store.close()
        store = open_store(base / "all.db")
        for root in roots.values():
            sync_commits(store, root, max_commits=args.max_commits)
        conn = store.connection()
        print("\n== git scope in process (search_commits, warm)")
        ours: list[float] = []
        bare: list[float] = []
        first = top5 = total = 0
        for root in roots.values():
            for text, hash_ in make_queries(conn, str(root), args.queries):

                def call(t=text, r=root):  # noqa: E306
                    return search_commits(conn, str(r), t, max_results=8, max_tokens=20000)

                ours += timed(call, args.runs)
                bare += timed(lambda t=text, r=root: bare_bm25(conn, str(r), t), args.runs)
                hashes = [h.hash for h in call().hits]
                total += 1
                first += hashes[:1] == [hash_]
                top5 += hash_ in hashes[:5]
        print(line("search_commits", ours))
        print(line("baseline: bare FTS5 bm25 statement", bare))
        print(f"self-retrieval ({total} queries from subjects, identifiers removed): "
              f"Acc@1 {first / total:.3f}, Acc@5 {top5 / total:.3f}")  # fmt: skip
        empty = 0
        for text in UNRELATED:
            empty += all(
                not search_commits(conn, str(r), text, max_results=8, max_tokens=20000).hits
                for r in roots.values()
            )
        print(f"unrelated requests with no commit: {empty}/{len(UNRELATED)}")
        signal: list[float] = []
        for root in roots.values():
            for text, _hash in make_queries(conn, str(root), args.queries):
                words = [c.label for c in request_concepts(text)]
                signal += timed(
                    lambda w=words, r=root: commit_file_scores(conn, str(r), w), args.runs
                )
        print(line("commit_file_scores (limit 50)", signal))

        print('\n== ds4/retrieve scopes ["git"] over stdio (httpx, trusted workspace)')
        root = roots["httpx"]
        queries = [text for text, _hash in make_queries(conn, str(root), args.queries)]
        client = RawClient(base / "lsp.db")
        client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {},
                "initializationOptions": {"trusted": True},
            },
        )
        client.send("initialized", {}, notify=True)
        started = time.perf_counter()
        warm = client.request("ds4/retrieve", {"query": queries[0], "scopes": ["git"]})
        print(f"first request (waits for the initial sync): "
              f"{(time.perf_counter() - started) * 1000:.0f} ms, gitStatus {warm['gitStatus']}")  # fmt: skip
        lsp: list[float] = []
        for text in queries:
            lsp += timed(
                lambda t=text: client.request("ds4/retrieve", {"query": t, "scopes": ["git"]}),
                args.runs,
            )
        project_lsp: list[float] = []
        for text in queries:
            project_lsp += timed(
                lambda t=text: client.request("ds4/retrieve", {"query": t, "scopes": ["project"]}),
                args.runs,
            )
        client.close()
        print(line("ds4/retrieve git over stdio", lsp))
        print(line("baseline: ds4/retrieve project over stdio (same requests)", project_lsp))
        inproc = []
        for text in queries:
            inproc += timed(
                lambda t=text: search_commits(conn, str(root), t, max_results=8, max_tokens=20000),
                args.runs,
            )
        print(line("baseline: search_commits in process (same requests)", inproc))
        store.close()


if __name__ == "__main__":
    main()
