"""Benchmark: indexing a real Pi session into the SQLite store (docs/ds4-rules.md, "Incremental session").

Workload: the real 914-message v1 session (`pi-mono-v1-large-session.jsonl`) replicated to at
least `--size-mb` MB by repeating its non-header lines (a v1 file has no ids: the reader numbers
entries `v1-<n>`, so every repeated line is a distinct entry).

Measured:
* full index (`sync_session` into a fresh database: read, migrate v1, searchable text, insert
  rows + FTS5) in MB/s of JSONL and entries/s, `--runs` runs, each into a new database;
* forced rebuild of the unchanged file over its existing index (rows are upserted; unchanged
  text costs no FTS work);
* incremental sync after appending one entry, `--appends` times: p50 / p95 / max in ms;
* no-op sync of the unchanged file right after the appends (it checks the indexed prefix for
  in-place rewrites: over 4 MiB the last block and 8 rolling blocks on the request path, the
  rest in a background pass, `ds4_core.sessions.prefix.check`), `--appends` times: p50 / p95
  in ms, beside the same-run cost of reading and sha256-hashing the file once (what every sync
  cost before issue 13); and again once the file is settled (its last change older than
  `prefix.RACY_MARGIN_NS`) and a background pass has matched, when the unchanged stat stamp,
  ctime included, spares the read.

Same-run baselines, printed as ratios: `json.loads` of every line of the file (the floor of
any Python reader); a bare SQLite loop inserting the same searchable texts into a plain table
(no FTS) and into a plain FTS5 table; one `BEGIN IMMEDIATE; INSERT; COMMIT` of one row.
Targets (issue 13): full index >= 30 MB/s; append p95 <= 10 ms.

Over a real `ds4-lsp` process on stdio (`--lsp-appends`, 0 skips it; bench/plan.py's
`RawClient`), with its own database: the first `ds4/retrieve` (scopes `["history"]`) of the
session, which indexes it in full and parses it for the session cache, beside the same request
once warm; `ds4.rebuildIndex` (a forced re-read of the session, its `durationMs` too); then,
`--lsp-appends` times, one message entry appended as Pi appends it (a new id, under the current
leaf; in a v1 file, without ids, as the reader numbers them) and the `ds4/retrieve` an editor sends next (it
syncs the index and the session cache), each followed by the same request on the unchanged
file as the same-run baseline: p50 / p95 / p99 and the ratio.

Usage: python bench/session_index.py [--size-mb 50] [--runs 3] [--appends 100] [--session FILE]
       [--lsp-appends 50]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "bench"))

from history_retrieval import with_tool_ids  # noqa: E402
from plan import RawClient  # noqa: E402  (bench/plan.py, next to this file)

from ds4_core.sessions.prefix import RACY_MARGIN_NS, wait_for_background  # noqa: E402
from ds4_core.sessions.reader import SessionReader  # noqa: E402
from ds4_core.sessions.searchable import searchable_text  # noqa: E402
from ds4_core.sessions.sync import sync_session  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

DEFAULT_SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"


def time_noop_syncs(store, session: Path, runs: int) -> list[float]:
    """ms of each of `runs` syncs of the unchanged `session` (each must be a no-op)."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        result = sync_session(store, session)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.outcome == "noop", result
    return samples


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def build_session(source: Path, target: Path, size_mb: float) -> tuple[int, list[bytes]]:
    """Write `source` replicated to >= `size_mb` MB at `target` (each replica with its own tool
    call ids, `renamed`); returns (bytes, body lines)."""
    lines = source.read_bytes().split(b"\n")
    header, body = lines[0], [line for line in lines[1:] if line.strip()]
    body_bytes = sum(len(line) + 1 for line in body)
    copies = max(1, -(-int(size_mb * 1e6 - len(header) - 1) // body_bytes))
    with open(target, "wb") as handle:
        handle.write(header + b"\n")
        for copy in range(copies):
            lines = body if copy == 0 else [renamed(line, f"~r{copy}") for line in body]
            handle.write(b"\n".join(lines) + b"\n")
    return target.stat().st_size, body


def renamed(line: bytes, suffix: str) -> bytes:
    """A session line whose tool call ids end in `suffix` (`history_retrieval.with_tool_ids`):
    each replica gets its own ids, as a real session has, so no tool call links two replicas
    into one atomic group."""
    if b"toolCall" not in line:
        return line
    entry = json.loads(line)
    if isinstance(entry.get("message"), dict):
        entry["message"] = with_tool_ids(entry["message"], suffix)
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def baseline_json(path: Path) -> float:
    """Seconds to `json.loads` every line of `path`."""
    started = time.perf_counter()
    loads = json.loads
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                loads(line)
    return time.perf_counter() - started


def baseline_sqlite(texts: list[str], workdir: Path, fts: bool) -> float:
    """Seconds to insert `texts` in one transaction into a plain table (or a plain FTS5 table)."""
    path = workdir / ("bare-fts.db" if fts else "bare.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    if fts:
        conn.execute(
            "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')"
        )
        sql = "INSERT INTO t (rowid, body) VALUES (?, ?)"
    else:
        conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, body TEXT NOT NULL) STRICT")
        sql = "INSERT INTO t (k, body) VALUES (?, ?)"
    started = time.perf_counter()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(sql, ((i if fts else f"k{i}", text) for i, text in enumerate(texts, 1)))
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    path.unlink()
    return elapsed


def baseline_one_row(workdir: Path, runs: int) -> list[float]:
    """ms per `BEGIN IMMEDIATE; INSERT one row; COMMIT` on a WAL database."""
    path = workdir / "one.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, body TEXT NOT NULL) STRICT")
    timings = []
    for i in range(runs):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", (f"k{i}", "x" * 500))
        conn.execute("COMMIT")
        timings.append((time.perf_counter() - started) * 1000)
    conn.close()
    return timings


LSP_QUERY = "why did the session index rebuild after the file was rewritten"


def over_lsp(session: Path, db: Path, append_lines: list[bytes], appends: int) -> None:
    """The LSP section of the module docstring: prints its rows."""
    mb = session.stat().st_size / 1e6
    client = RawClient(db)
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    client.send("initialized", {}, notify=True)
    params = {"session": {"file": str(session)}, "query": LSP_QUERY, "scopes": ["history"]}

    def round_trip(method: str, request: object) -> tuple[float, dict]:
        started = time.perf_counter()
        result = client.request(method, request)
        return (time.perf_counter() - started) * 1000, result

    first_ms, _ = round_trip("ds4/retrieve", params)
    warm = [round_trip("ds4/retrieve", params)[0] for _ in range(5)]
    rebuild_ms, rebuilt = round_trip("workspace/executeCommand", {"command": "ds4.rebuildIndex"})
    server_ms = rebuilt["results"][0]["durationMs"]
    print(f"\nover a real ds4-lsp (stdio), {mb:.1f} MB session:")
    print(
        f"first ds4/retrieve (full index + session parse + retrieve): {first_ms:.0f} ms; "
        f"warm, unchanged file: p50 {statistics.median(warm):.1f} ms "
        f"(so index + parse ~{mb / ((first_ms - statistics.median(warm)) / 1000):.1f} MB/s)"
    )
    print(
        f"ds4.rebuildIndex (forced re-read): round trip {rebuild_ms:.0f} ms "
        f"({mb / (rebuild_ms / 1000):.1f} MB/s), server durationMs {server_ms:.0f} ms"
    )
    grown: list[float] = []
    same: list[float] = []
    parent = json.loads(session.read_bytes().rsplit(b"\n", 2)[-2]).get("id")
    for i in range(appends):
        # a message as Pi appends it: a new id, under the current leaf (a v1 file has no ids:
        # the reader numbers its entries, each the child of the one before)
        entry = json.loads(renamed(append_lines[i % len(append_lines)], f"~lsp{i}"))
        if parent is not None:
            entry.update(id=f"lsp{i:05x}", parentId=parent)
            parent = entry["id"]
        with open(session, "ab") as handle:
            handle.write(json.dumps(entry).encode() + b"\n")
        grown.append(round_trip("ds4/retrieve", params)[0])
        same.append(round_trip("ds4/retrieve", params)[0])
    client.close()
    g = [statistics.median(grown), percentile(grown, 95), percentile(grown, 99)]
    b = [statistics.median(same), percentile(same, 95), percentile(same, 99)]
    print(
        f"ds4/retrieve after appending one entry ({appends} runs): p50 {g[0]:.1f} ms, "
        f"p95 {g[1]:.1f} ms, p99 {g[2]:.1f} ms"
    )
    print(
        f"baseline, the same request on the unchanged file right after: p50 {b[0]:.1f} ms, "
        f"p95 {b[1]:.1f} ms, p99 {b[2]:.1f} ms (ratio p50 x{g[0] / b[0]:.2f}, "
        f"p95 x{g[1] / b[1]:.2f}, p99 x{g[2] / b[2]:.2f}; the append adds p50 "
        f"{g[0] - b[0]:.1f} ms, p95 {g[1] - b[1]:.1f} ms)"
    )


def baseline_one_fts_row(texts: list[str], workdir: Path, runs: int) -> list[float]:
    """ms per `BEGIN IMMEDIATE; INSERT one row; COMMIT` into a plain FTS5 table already holding
    `texts` (the bare statement under an append's index write), on a WAL database."""
    path = workdir / "one-fts.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='unicode61 remove_diacritics 2')"
    )
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO t (body) VALUES (?)", ((text,) for text in texts))
    conn.execute("COMMIT")
    messages = [text for text in texts if len(text) > 200][:50] or texts[:50]
    timings = []
    for i in range(runs):
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (body) VALUES (?)", (messages[i % len(messages)],))
        conn.execute("COMMIT")
        timings.append((time.perf_counter() - started) * 1000)
    conn.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=float, default=50.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--appends", type=int, default=100)
    parser.add_argument("--session", type=Path, default=DEFAULT_SESSION)
    parser.add_argument("--lsp-appends", type=int, default=50)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-index-"))
    try:
        session = workdir / "session.jsonl"
        size, body = build_session(args.session, session, args.size_mb)
        mb = size / 1e6
        session_mb = mb
        print(f"session: {mb:.1f} MB ({args.session.name} replicated), workdir {workdir}")

        full_s: list[float] = []
        entries = 0
        for run in range(args.runs):
            store = open_store(workdir / f"index-{run}.db")
            started = time.perf_counter()
            result = sync_session(store, session)
            full_s.append(time.perf_counter() - started)
            entries = result.entries_total
            assert result.outcome == "rebuild", result
            store.close()

        store = open_store(workdir / "index-0.db")
        started = time.perf_counter()
        forced = sync_session(store, session, force=True)
        forced_s = time.perf_counter() - started
        assert forced.entries_total == entries

        append_lines = [line for line in body if b'"type":"message"' in line][:50]
        append_ms: list[float] = []
        for i in range(args.appends):
            with open(session, "ab") as handle:
                handle.write(append_lines[i % len(append_lines)] + b"\n")
            started = time.perf_counter()
            result = sync_session(store, session)
            append_ms.append((time.perf_counter() - started) * 1000)
            assert result.outcome == "incremental" and result.entries_added == 1, result
        noop_ms = time_noop_syncs(store, session, args.appends)
        # Once the file's last change is older than the racy margin, one more full check
        # records its stat stamp and later no-op syncs read nothing (sessions.prefix).
        time.sleep(RACY_MARGIN_NS / 1e9 + 0.2)
        sync_session(store, session)
        wait_for_background()
        settled_ms = time_noop_syncs(store, session, args.appends)
        store.close()
        started = time.perf_counter()
        hashlib.sha256(session.read_bytes()).hexdigest()
        hash_ms = (time.perf_counter() - started) * 1000

        json_s = baseline_json(session)
        texts = [searchable_text(entry) for entry in SessionReader(session).entries()]
        bare_s = baseline_sqlite(texts, workdir, fts=False)
        bare_fts_s = baseline_sqlite(texts, workdir, fts=True)
        one_row_ms = baseline_one_row(workdir, args.appends)
        one_fts_ms = baseline_one_fts_row(texts, workdir, args.appends)
        if args.lsp_appends > 0:
            build_session(args.session, session, args.size_mb)  # as it was before the appends
            over_lsp(session, workdir / "lsp.db", append_lines, args.lsp_appends)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    best = min(full_s)
    median = statistics.median(full_s)
    text_mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    rows = [
        (
            "full index (median of runs)",
            f"{mb / median:.1f} MB/s",
            f"{entries / median:,.0f} entries/s",
            f"{median * 1000:.0f} ms",
        ),
        (
            "full index (best run)",
            f"{mb / best:.1f} MB/s",
            f"{entries / best:,.0f} entries/s",
            f"{best * 1000:.0f} ms",
        ),
        (
            "forced rebuild (unchanged file)",
            f"{mb / forced_s:.1f} MB/s",
            f"{entries / forced_s:,.0f} entries/s",
            f"{forced_s * 1000:.0f} ms",
        ),
        ("baseline: json.loads per line", f"{mb / json_s:.1f} MB/s", "", f"{json_s * 1000:.0f} ms"),
        (
            "baseline: bare SQLite insert (no FTS)",
            f"{mb / bare_s:.1f} MB/s",
            "",
            f"{bare_s * 1000:.0f} ms",
        ),
        (
            "baseline: bare FTS5 insert",
            f"{mb / bare_fts_s:.1f} MB/s",
            "",
            f"{bare_fts_s * 1000:.0f} ms",
        ),
    ]
    print(
        f"\n{entries:,} entries, {text_mb:.1f} MB of searchable text; runs: "
        + ", ".join(f"{s * 1000:.0f} ms" for s in full_s)
    )
    print(f"{'workload':40s} {'throughput':>12s} {'entries/s':>16s} {'time':>10s}")
    for name, rate, per_entry, elapsed in rows:
        print(f"{name:40s} {rate:>12s} {per_entry:>16s} {elapsed:>10s}")
    print(
        "\nratios (full index median time / baseline time): "
        f"json.loads x{median / json_s:.1f}, bare insert x{median / bare_s:.1f}, "
        f"bare FTS5 x{median / bare_fts_s:.1f}"
    )

    p50, p95 = statistics.median(append_ms), percentile(append_ms, 95)
    b50, b95 = statistics.median(one_row_ms), percentile(one_row_ms, 95)
    print(
        f"\nincremental sync after appending one entry ({args.appends} runs): "
        f"p50 {p50:.2f} ms, p95 {p95:.2f} ms, max {max(append_ms):.2f} ms"
    )
    print(
        f"baseline one-row write transaction: p50 {b50:.2f} ms, p95 {b95:.2f} ms "
        f"(ratio p50 x{p50 / b50:.1f}, p95 x{p95 / b95:.1f})"
    )
    f50, f95 = statistics.median(one_fts_ms), percentile(one_fts_ms, 95)
    print(
        f"baseline one-row write transaction into an FTS5 table of the same {entries:,} texts: "
        f"p50 {f50:.2f} ms, p95 {f95:.2f} ms (ratio p50 x{p50 / f50:.1f}, p95 x{p95 / f95:.1f})"
    )
    print(
        f"no-op sync of the unchanged {session_mb:.1f} MB file ({args.appends} runs): "
        f"p50 {statistics.median(noop_ms):.2f} ms, p95 {percentile(noop_ms, 95):.2f} ms "
        f"(baseline: read + sha256 of the whole file once {hash_ms:.2f} ms)"
    )
    print(
        f"no-op sync once the file is settled (stat stamp trusted, {args.appends} runs): "
        f"p50 {statistics.median(settled_ms):.2f} ms, p95 {percentile(settled_ms, 95):.2f} ms"
    )
    ok_full = mb / median >= 30
    ok_append = p95 <= 10
    print(
        f"\ntargets: full index >= 30 MB/s: {'met' if ok_full else 'NOT met'}; "
        f"append p95 <= 10 ms: {'met' if ok_append else 'NOT met'} (in process)"
    )


if __name__ == "__main__":
    main()
