"""Benchmark: what `ds4/retrieve` (history) and `ds4/plan` cost an editor as the session grows.

Issue 13: the cost of a request should grow with what is sent, not with how long the session
is. For each size in `--sizes` (default 5,000 and 50,000 message entries), a v3 session is built
from the real 914-message session (`examples/pi-mono-v1-large-session.jsonl`, replicated as
`bench/history_retrieval.py` does), a real `ds4-lsp` process is started over stdio as an editor
would, the first request indexes the session, and then, interleaved, `--runs` rounds of:

- `ds4/retrieve` with `scopes: ["history"]` and a query (24 of the session's own user messages
  and 16 identifier questions, `history_retrieval.pick_queries`);
- `ds4/plan` of the session with a new request (the same queries as requests), and the same
  with `messageRefs: true` (session messages answered as entry references);
- the baseline of the same process: `ds4/retrieve` with `scopes: []` and no session, a request
  that crosses the same JSON-RPC path and does no work (the transport's own round trip).

Then the same plans with history retrieval off (`retrieval.exact` and `retrieval.fts` false,
sent as `workspace/didChangeConfiguration`): what the planner, privacy, the manifest and the
transport cost apart from the FTS5 search. Then `--appends` times what an agent does every turn: two entries (a user request and an
assistant reply, as Pi writes them) appended to the session file, and the `ds4/plan` that
follows (it syncs the index, reads the new bytes, extends the context and plans).

Also measured in the same run: the issue's other baseline, a Python linear scan of every
message's lowercased text with `in` for the query's terms (in process, texts held in memory);
the floor of history retrieval, the bare FTS5 bm25 statement of its FTS pass on the server's
own index (in process, `history_retrieval.py`'s statement, same queries);
and the plan result's payload: its size in bytes, what `json.dumps` / `json.loads` of it cost
(the encode the server pays and the decode the client pays), and how many messages it holds.

Printed: p50/p95/p99 of each request per size, the ratio to the same-run baselines, and the
50,000 / 5,000 ratio of each request's p50 (target <= 1.5). Targets at 5,000 messages:
retrieve history p50 <= 3 ms and p95 <= 8 ms; plan p50 <= 15 ms.

Usage: python bench/scale.py [--sizes 5000,50000] [--runs 5] [--appends 20] [--session FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "bench"))

from history_retrieval import (  # noqa: E402
    baseline_scan,
    build_session,
    percentile,
    pick_queries,
)
from plan import RawClient  # noqa: E402

from ds4_core.retrieval import describe_task  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402

DEFAULT_SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
TARGET_RETRIEVE_P50_MS = 3.0
TARGET_RETRIEVE_P95_MS = 8.0
TARGET_PLAN_P50_MS = 15.0
TARGET_GROWTH = 1.5


def message_texts(session: Path) -> list[tuple[str, str]]:
    """(role, text) of every message entry of `session`, text as the plain string content."""
    texts: list[tuple[str, str]] = []
    for entry in read_all(session).entries:
        message = entry.data.get("message") if entry.entry_type == "message" else None
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            text = " ".join(
                str(block.get("text", "")) for block in content if isinstance(block, dict)
            )
        else:
            text = ""
        texts.append((str(message.get("role", "")), text))
    return texts


def timed(client: RawClient, method: str, params: object) -> tuple[float, dict]:
    """(round trip ms, result) of one request."""
    started = time.perf_counter()
    result = client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def last_entry_id(session: Path) -> str:
    """The id of the last entry of `session`."""
    with session.open("rb") as handle:
        handle.seek(max(0, session.stat().st_size - 65536))
        tail = handle.read().splitlines()
    return str(json.loads(tail[-1])["id"])


def append_turn(session: Path, parent: str, n: int) -> str:
    """Append a user request and an assistant reply under `parent` (Pi's v3 message entries);
    returns the reply's id."""
    user_id, reply_id = f"ap{n:06x}u", f"ap{n:06x}a"
    stamp = "2026-02-01T00:00:00.000Z"
    entries = [
        {
            "type": "message",
            "id": user_id,
            "parentId": parent,
            "timestamp": stamp,
            "message": {
                "role": "user",
                "content": [{"type": "text", "text": f"step {n}: rerun the parser tests"}],
                "timestamp": 1,
            },
        },
        {
            "type": "message",
            "id": reply_id,
            "parentId": user_id,
            "timestamp": stamp,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": f"step {n}: the parser tests pass"}],
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "stopReason": "stop",
                "timestamp": 2,
            },
        },
    ]
    with session.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(entry) + "\n" for entry in entries))
    return reply_id


def measure(session: Path, workdir: Path, runs: int, appends: int) -> dict[str, object]:
    """Every timing of one session size (see the module docstring)."""
    texts = message_texts(session)
    queries = [q for _kind, q in pick_queries(texts)]
    client = RawClient(workdir / "index.db")
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    client.send("initialized", {}, notify=True)
    ref = {"file": str(session)}
    started = time.perf_counter()
    first = client.request("ds4/retrieve", {"session": ref, "query": queries[0]})
    index_ms = (time.perf_counter() - started) * 1000
    if first.get("status") not in {"ok", "no-results", "below-floor"}:
        raise SystemExit(f"unexpected first retrieve status {first.get('status')!r}")
    retrieve: list[float] = []
    plan: list[float] = []
    refs: list[float] = []
    noop: list[float] = []
    payload: dict[str, float] = {}
    for run in range(runs + 1):  # run 0 warms every query up
        for query in queries:
            ms_noop, _ = timed(client, "ds4/retrieve", {"query": query, "scopes": []})
            ms_retrieve, _ = timed(
                client, "ds4/retrieve", {"session": ref, "query": query, "scopes": ["history"]}
            )
            ms_plan, result = timed(client, "ds4/plan", {"session": ref, "request": query})
            ms_refs, _ = timed(
                client, "ds4/plan", {"session": ref, "request": query, "messageRefs": True}
            )
            if result.get("mode") != "managed":
                raise SystemExit(f"unexpected plan mode {result.get('mode')!r}")
            if run == 0:
                continue
            noop.append(ms_noop)
            retrieve.append(ms_retrieve)
            plan.append(ms_plan)
            refs.append(ms_refs)
            if not payload:
                encodes, decodes = [], []
                for _ in range(7):
                    started = time.perf_counter()
                    body = json.dumps(result)
                    encodes.append((time.perf_counter() - started) * 1000)
                    started = time.perf_counter()
                    json.loads(body)
                    decodes.append((time.perf_counter() - started) * 1000)
                with_refs = client.request(
                    "ds4/plan", {"session": ref, "request": query, "messageRefs": True}
                )
                payload = {
                    "refs_bytes": len(json.dumps(with_refs).encode()),
                    "bytes": len(body.encode()),
                    "encode_ms": statistics.median(encodes),
                    "decode_ms": statistics.median(decodes),
                    "messages": len(result.get("messages", [])),
                }
    # the plan without history retrieval (`retrieval.exact` and `retrieval.fts` off): what the
    # planner, privacy, the manifest and the transport cost, apart from the FTS5 search
    client.send(
        "workspace/didChangeConfiguration",
        {"settings": {"ds4": {"retrieval": {"exact": False, "fts": False}}}},
        notify=True,
    )
    bare_plan: list[float] = []
    for run in range(runs + 1):
        for query in queries:
            ms_plan, _ = timed(client, "ds4/plan", {"session": ref, "request": query})
            if run:
                bare_plan.append(ms_plan)
    client.send(
        "workspace/didChangeConfiguration",
        {"settings": {"ds4": {"retrieval": {"exact": True, "fts": True}}}},
        notify=True,
    )
    appended: list[float] = []
    last_id = last_entry_id(session)
    for n in range(appends):
        last_id = append_turn(session, last_id, n)
        ms_plan, result = timed(client, "ds4/plan", {"session": ref, "request": queries[n % 8]})
        if result.get("mode") != "managed":
            raise SystemExit(f"unexpected plan mode {result.get('mode')!r} after an append")
        appended.append(ms_plan)
    client.close()
    lowered = [text.lower() for _role, text in texts]
    terms = [list(describe_task(q).query_terms) for q in queries]
    scan: list[float] = []
    for _ in range(max(1, runs)):
        for query_terms in terms:
            started = time.perf_counter()
            baseline_scan(lowered, query_terms)
            scan.append((time.perf_counter() - started) * 1000)
    bm25 = bare_bm25(workdir / "index.db", terms, runs)
    return {
        "bm25": bm25,
        "messages": len(texts),
        "mb": session.stat().st_size / 1e6,
        "index_ms": index_ms,
        "retrieve": retrieve,
        "plan": plan,
        "refs": refs,
        "noop": noop,
        "scan": scan,
        "payload": payload,
        "appended": appended,
        "bare_plan": bare_plan,
    }


def bare_bm25(db: Path, terms: list[list[str]], runs: int) -> list[float]:
    """ms of the bare FTS5 bm25 statement of the history FTS pass for each query's terms, on
    the index the server built (its only session)."""
    import sqlite3

    from ds4_core.retrieval import build_fts_query
    from ds4_core.retrieval.history import query_limit

    conn = sqlite3.connect(db)
    (session_id,) = conn.execute("SELECT session_id FROM entries LIMIT 1").fetchone()
    statement = (
        "SELECT f.rowid FROM entries_fts AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
        "WHERE entries_fts MATCH ? AND e.session_id = ? "
        "AND e.entry_type IN ('message', 'custom_message') "
        "ORDER BY bm25(entries_fts) LIMIT ?"
    )
    timings: list[float] = []
    for _ in range(max(1, runs)):
        for query_terms in terms:
            started = time.perf_counter()
            conn.execute(
                statement, (build_fts_query(query_terms), session_id, query_limit(12))
            ).fetchall()
            timings.append((time.perf_counter() - started) * 1000)
    conn.close()
    return timings


def row(label: str, values: list[float], baseline: list[float] | None = None) -> str:
    """One printed line: p50/p95/p99 and the p50 ratio to `baseline`."""
    p50 = statistics.median(values)
    ratio = f"{p50 / statistics.median(baseline):7.1f}x" if baseline else " " * 8
    return (
        f"  {label:46} {p50:8.2f} {percentile(values, 95):8.2f} {percentile(values, 99):8.2f}"
        f" {ratio}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,50000", help="message counts, comma separated")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds over all queries")
    parser.add_argument("--appends", type=int, default=20, help="append + plan rounds")
    parser.add_argument("--session", type=Path, default=DEFAULT_SESSION)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    results: dict[int, dict[str, object]] = {}
    for size in sizes:
        workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-scale-"))
        try:
            session = workdir / "session.jsonl"
            build_session(args.session, session, size)
            print(f"measuring {size:,} messages ...", file=sys.stderr, flush=True)
            results[size] = measure(session, workdir, args.runs, args.appends)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"{'':48} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} {'/ base':>8}")
    for result in results.values():
        noop, scan = result["noop"], result["scan"]
        assert isinstance(noop, list) and isinstance(scan, list)
        payload = result["payload"]
        assert isinstance(payload, dict)
        print(
            f"{result['messages']:,} messages ({result['mb']:.1f} MB), first request (indexes)"
            f" {result['index_ms']:.0f} ms, {len(noop):,} requests of each kind"
        )
        print(row("ds4/retrieve history (round trip)", result["retrieve"], noop))  # type: ignore[arg-type]
        print(row("ds4/plan (round trip)", result["plan"], noop))  # type: ignore[arg-type]
        print(row("ds4/plan with messageRefs", result["refs"], noop))  # type: ignore[arg-type]
        print(row("ds4/plan, history retrieval off", result["bare_plan"], noop))  # type: ignore[arg-type]
        if result["appended"]:
            print(row("ds4/plan right after a 2-entry append", result["appended"], noop))  # type: ignore[arg-type]
        print(row("baseline: ds4/retrieve scopes [] (no work)", noop))
        print(row("baseline: Python linear scan (in process)", scan))
        print(row("floor: bare FTS5 bm25 statement (in process)", result["bm25"]))  # type: ignore[arg-type]
        print(
            f"  plan result: {payload['bytes'] / 1024:,.0f} KiB of JSON, {payload['messages']}"
            f" messages; json.dumps {payload['encode_ms']:.2f} ms, json.loads"
            f" {payload['decode_ms']:.2f} ms; with messageRefs"
            f" {payload['refs_bytes'] / 1024:,.1f} KiB"
        )
        retrieve = result["retrieve"]
        assert isinstance(retrieve, list)
        print(
            f"  retrieve vs linear scan p50: {statistics.median(retrieve) / statistics.median(scan):.2f}x"
        )
    small, large = min(results), max(results)
    if small == 5000:
        result = results[small]
        retrieve, plan = result["retrieve"], result["plan"]
        assert isinstance(retrieve, list) and isinstance(plan, list)
        checks = [
            ("retrieve history p50", statistics.median(retrieve), TARGET_RETRIEVE_P50_MS),
            ("retrieve history p95", percentile(retrieve, 95), TARGET_RETRIEVE_P95_MS),
            ("plan p50", statistics.median(plan), TARGET_PLAN_P50_MS),
        ]
        for label, value, target in checks:
            verdict = "met" if value <= target else "MISSED"
            print(f"target {label} <= {target} ms at 5,000: {value:.2f} ms, {verdict}")
    if large != small:
        for kind in ("retrieve", "plan", "appended", "bare_plan", "bm25", "noop"):
            a, b = results[small][kind], results[large][kind]
            assert isinstance(a, list) and isinstance(b, list)
            if not a or not b:
                continue
            ratio = statistics.median(b) / statistics.median(a)
            if kind in ("bm25", "noop"):
                verdict = "the same run's floor / baseline, for comparison"
            else:
                verdict = f"target <= {TARGET_GROWTH}: " + (
                    "met" if ratio <= TARGET_GROWTH else "MISSED"
                )
            print(f"growth {kind} p50 {large:,} / {small:,} messages: {ratio:.2f}x ({verdict})")


if __name__ == "__main__":
    main()
