"""Benchmark: `ds4/retrieve` with `scopes: ["project"]` over a real `ds4-lsp` (issue 13).

Corpus and queries: those of `project_knowledge.py` (the first `--files` indexable real `.py`
files of this interpreter's stdlib and site-packages, copied to a temp dir; `--queries` path,
symbol and prose requests per kind, the same deterministic picks).

Server: `python -m ds4_lsp` of this checkout over stdio, its own database, the corpus as the
trusted workspace (`initializationOptions.trusted`), `project.maxFiles` and
`project.maxTotalBytes` raised to hold the corpus. The client registers for watched files as an
editor does (it answers the server's `client/registerCapability`), so no request sweeps the
project first; the bench waits until `ds4.projectStatus` reports every file indexed.

Timed: the round trip of each `ds4/retrieve` (`{"query": request, "scopes": ["project"]}`:
exact tiers, FTS concepts, whole-file pass for prose, live hash of every hit's file), from
writing the request to parsing the response (`json.loads`). The first pass over the queries is
reported on its own (`first`: no concept of the request was read before, except where queries
share words); then `--runs` passes (`warm`: the same requests again, so the per-revision cache
of `project/revision_cache.py` answers their FTS statements). Same-run baselines: the round trip
of a trivial request over the same process (`textDocument/hover` on a document that is not
open: JSON-RPC parsing, dispatch and the answer `null`, no engine call), and, in this process on
the server's database, the bare FTS5 statement of each request (the words the whole-file pass
uses, `request_words`: not stopwords, each quoted, OR-ed; `ORDER BY bm25 LIMIT 8` over the
windows, `project_snippets_fts`: about the least one full-text search of the request costs). Printed: p50 /
p95 / p99 / mean per kind and overall, the ratio to each baseline. Targets (issue 13):
p50 <= 5 ms, p99 <= 15 ms, prose included.

Usage: python bench/project_requests.py [--files 5000] [--runs 10] [--queries 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import RawClient  # noqa: E402  (bench/plan.py, next to this file)
from project_knowledge import (  # noqa: E402
    KINDS,
    TARGET_P50_MS,
    TARGET_P99_MS,
    bench_config,
    collect_corpus,
    describe_corpus,
    percentile,
    pick_queries,
    verdict,
    write_corpus,
)

from ds4_core.project.query import request_words  # noqa: E402

INDEX_TIMEOUT_S = 1800.0


class EditorClient(RawClient):
    """`RawClient` that answers the server's own requests (`client/registerCapability`,
    `window/workDoneProgress/create`, `workspace/configuration`) as an editor would, so the
    server registers its file watcher instead of sweeping the project before each request."""

    def receive(self) -> dict:
        assert self.proc.stdout is not None and self.proc.stdin is not None
        while True:
            length = 0
            while (line := self.proc.stdout.readline().strip()) != b"":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length == 0 and self.proc.poll() is not None:
                raise SystemExit(f"ds4-lsp exited with {self.proc.returncode}")
            message = json.loads(self.proc.stdout.read(length))
            if "method" in message and "id" in message:  # a request of the server's
                result = [None] if message["method"] == "workspace/configuration" else None
                body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
                data = body.encode()
                self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
                self.proc.stdin.flush()
                continue
            if message.get("id") == self.next_id and "method" not in message:
                return message


def timed(client: RawClient, method: str, params: object) -> tuple[float, dict]:
    """(round-trip ms, result) of one request."""
    started = time.perf_counter()
    result = client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def bare_fts(conn: sqlite3.Connection, request: str) -> float:
    """ms of the bare FTS5 statement of `request` (its `request_words` OR-ed, best 8 by
    bm25)."""
    words = request_words(request)
    query = " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or '""'
    started = time.perf_counter()
    conn.execute(
        "SELECT rowid, bm25(project_snippets_fts) AS s FROM project_snippets_fts "
        "WHERE project_snippets_fts MATCH ? ORDER BY s LIMIT 8",
        (query,),
    ).fetchall()
    return (time.perf_counter() - started) * 1000


def row(label: str, values: list[float], base: list[float] | None = None) -> str:
    ratio = f" {statistics.median(values) / statistics.median(base):7.1f}x" if base else ""
    return (
        f"  {label:40} {statistics.median(values):8.2f} {percentile(values, 95):8.2f} "
        f"{percentile(values, 99):8.2f} {statistics.fmean(values):8.2f}  ({len(values)}){ratio}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000, help="corpus size (files)")
    parser.add_argument("--runs", type=int, default=10, help="warm passes over the queries")
    parser.add_argument("--queries", type=int, default=20, help="queries per kind")
    args = parser.parse_args()

    corpus = collect_corpus(args.files)
    print(describe_corpus(corpus))
    config = bench_config(len(corpus.files))
    queries = pick_queries(corpus, args.queries)
    temp = Path(tempfile.mkdtemp(prefix="ds4-bench-requests-"))
    try:
        root = (temp / "project").resolve()
        write_corpus(root, corpus)
        db = temp / "lsp.db"
        client = EditorClient(db)
        settings = {
            "project": {
                "maxFiles": config.project.max_files,
                "maxTotalBytes": config.project.max_total_bytes,
            }
        }
        client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {
                    "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}}
                },
                "initializationOptions": {"trusted": True, "settings": settings},
            },
        )
        client.send("initialized", {}, notify=True)
        started = time.perf_counter()
        status_params = {"command": "ds4.projectStatus", "arguments": []}
        while True:
            _ms, status = timed(client, "workspace/executeCommand", status_params)
            if status.get("status") == "ready" and status.get("files") == len(corpus.files):
                break
            if time.perf_counter() - started > INDEX_TIMEOUT_S:
                raise SystemExit(f"the project was not indexed: {status}")
            time.sleep(0.5)
        print(
            f"indexed by ds4-lsp: {status['files']:,} files, {status['snippets']:,} windows "
            f"in {time.perf_counter() - started:.0f} s; watching files: "
            f"{status.get('editor', {}).get('watchingFiles')}"
        )

        first: dict[str, list[float]] = {kind: [] for kind in KINDS}
        warm: dict[str, list[float]] = {kind: [] for kind in KINDS}
        trivial: list[float] = []
        hover = {
            "textDocument": {"uri": (root / "not-open.py").as_uri()},
            "position": {"line": 0, "character": 0},
        }
        hits = 0
        for run in range(args.runs + 1):
            for kind, request, _expected in queries:
                ms, result = timed(
                    client, "ds4/retrieve", {"query": request, "scopes": ["project"]}
                )
                (first if run == 0 else warm)[kind].append(ms)
                hits += run == 0 and bool(result.get("project"))
                trivial.append(timed(client, "textDocument/hover", hover)[0])
        client.close()

        bare: list[float] = []
        conn = sqlite3.connect(db)
        for _ in range(args.runs):
            bare += [bare_fts(conn, request) for _kind, request, _expected in queries]
        conn.close()
    finally:
        shutil.rmtree(temp, ignore_errors=True)

    every_first = [v for kind in KINDS for v in first[kind]]
    every_warm = [v for kind in KINDS for v in warm[kind]]
    print(
        f'\nds4/retrieve scopes ["project"] round trips over stdio, {len(queries)} queries '
        f"(path / symbol / prose), first pass + {args.runs} warm passes; machine shared"
    )
    print(f"  {'':40} {'p50':>8} {'p95':>8} {'p99':>8} {'mean':>8}  (n)  p50 / trivial")
    print(row("first pass, all", every_first, trivial))
    for kind in KINDS:
        print(row(f"first pass, {kind}", first[kind], trivial))
    print(row("warm, all", every_warm, trivial))
    for kind in KINDS:
        print(row(f"warm, {kind}", warm[kind], trivial))
    print(row("baseline: trivial request (hover)", trivial))
    print(row("baseline: bare FTS5 statement (in process)", bare))
    print(f"  requests with a project item on the first pass: {hits}/{len(queries)}")
    for label, values in (("first pass", every_first), ("warm", every_warm)):
        print(
            f"  {label}: target p50 <= {TARGET_P50_MS:g} ms "
            f"{verdict(statistics.median(values), TARGET_P50_MS)}; p99 <= {TARGET_P99_MS:g} ms "
            f"{verdict(percentile(values, 99), TARGET_P99_MS)}; p99 / bare FTS5 p99 "
            f"{percentile(values, 99) / percentile(bare, 99):.1f}x"
        )


if __name__ == "__main__":
    main()
