"""Benchmark: historical retrieval over 5,000 indexed messages (docs/ds4-rules.md, "Historical retrieval").

Workload: a synthetic v3 session built from the real 914-message v1 session
(`pi-mono-v1-large-session.jsonl`): its entries, migrated by the reader, are written out as v3
entries (8-hex ids, one linear parent chain, increasing timestamps), replicated until the file
holds `--messages` message entries (each replica with its own tool call ids, `~r<n>` appended:
repeated ids would link replicas into turns thousands of messages long), and indexed with `sync_session` into a fresh store in a temp
dir. All entries are on the active branch.

Queries: the session's own user messages (prose, often naming files and identifiers; what a
real request looks like) and identifier queries ("where is `X` used?") for files and symbols
that occur in the session, taken at regular intervals so the set is deterministic. Each query
runs `describe_task` + `retrieve_history` (exact + FTS, `--max-results` 12, `--max-tokens`
16000: the defaults of `retrieval.maxResults` / `context.maxRetrievedHistoryTokens`) once to
warm up, then `--runs` times; p50 / p95 / max are over all timed calls.

Same-run baseline: a plain Python linear scan of the same queries: every query term
(`query_terms`) tested with `in` against all message texts, lowercased in advance and held in
memory (the cheapest form a scan can take; it does no ranking at all). Also printed: the bare
FTS5 statement of the FTS pass (`entries_fts MATCH ? ... ORDER BY bm25 LIMIT ?`, same session
filter) for the same queries, the floor under which the FTS pass cannot go.

Reference: ds4 reports p50 4.53 ms for its retrieval benchmark. Targets: p50 <= 2 ms,
p95 <= 5 ms.

Usage: python bench/history_retrieval.py [--messages 5000] [--runs 100] [--session FILE]
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

from ds4_core.retrieval import build_fts_query, describe_task, retrieve_history  # noqa: E402
from ds4_core.retrieval.history import query_limit  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402
from ds4_core.sessions.sync import sync_session  # noqa: E402
from ds4_core.store import branch_entry_ids, open_store  # noqa: E402

DEFAULT_SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
DS4_REFERENCE_P50_MS = 4.53
TARGET_P50_MS = 2.0
TARGET_P95_MS = 5.0
PROSE_QUERIES = 24
IDENTIFIER_QUERIES = 16


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def build_session(source: Path, target: Path, messages: int) -> int:
    """Write a v3 session at `target` with `messages` message entries built from `source`.

    Returns the number of entries written (messages plus the other entry types in between).
    """
    entries = [
        e
        for e in read_all(source).entries
        if e.entry_type in {"message", "model_change", "thinking_level_change"}
    ]
    if not any(e.entry_type == "message" for e in entries):
        raise SystemExit(f"{source} has no message entries")
    header = {
        "type": "session",
        "version": 3,
        "id": "bench-history-retrieval",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/bench",
    }
    written = 0
    count = 0
    replica = 0
    parent: str | None = None
    base_ms = 1_767_225_600_000  # 2026-01-01T00:00:00Z
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(header) + "\n")
        while count < messages:
            for entry in entries:
                if count >= messages:
                    break
                entry_id = f"{written + 1:08x}"
                stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(base_ms / 1000 + written))
                record = {
                    key: value
                    for key, value in entry.data.items()
                    if key not in {"id", "parentId", "timestamp"}
                }
                record.update(id=entry_id, parentId=parent, timestamp=f"{stamp}.000Z")
                if replica and isinstance(record.get("message"), dict):
                    record["message"] = with_tool_ids(record["message"], f"~r{replica}")
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                parent = entry_id
                written += 1
                count += entry.entry_type == "message"
            replica += 1
    return written


def with_tool_ids(message: dict, suffix: str) -> dict:
    """`message` with its tool call ids (`toolCall` blocks, a result's `toolCallId`) ending in
    `suffix`: each replica of the session gets its own ids, as a real long session has (Pi's
    ids come from the provider and do not repeat), so no call links two replicas."""
    copy = dict(message)
    if isinstance(copy.get("toolCallId"), str):
        copy["toolCallId"] += suffix
    content = copy.get("content")
    if isinstance(content, list):
        copy["content"] = [
            {**block, "id": block["id"] + suffix}
            if isinstance(block, dict)
            and block.get("type") == "toolCall"
            and isinstance(block.get("id"), str)
            else block
            for block in content
        ]
    return copy


def pick_queries(texts: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """(kind, query) pairs: user messages (prose) and identifier questions, deterministic."""
    users = [t for role, t in texts if role == "user" and len(t) >= 20]
    users = list(dict.fromkeys(users))
    step = max(1, len(users) // PROSE_QUERIES)
    prose = [("prose", t[:2000]) for t in users[::step][:PROSE_QUERIES]]
    identifiers: list[str] = []
    for _role, text in texts:
        descriptor = describe_task(text[:4000])
        for value in (*descriptor.files, *descriptor.symbols):
            if len(value) >= 6 and value not in identifiers:
                identifiers.append(value)
    step = max(1, len(identifiers) // IDENTIFIER_QUERIES)
    chosen = identifiers[::step][:IDENTIFIER_QUERIES]
    return prose + [("identifier", f"where is `{value}` used?") for value in chosen]


def baseline_scan(lowered: list[str], terms: list[str]) -> int:
    """Entries whose lowercased text contains any of `terms` (a linear scan)."""
    needles = [t.lower() for t in terms]
    return sum(1 for text in lowered if any(n in text for n in needles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--max-results", type=int, default=12)
    parser.add_argument("--max-tokens", type=int, default=16000)
    parser.add_argument("--session", type=Path, default=DEFAULT_SESSION)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-retrieval-"))
    try:
        session = workdir / "session.jsonl"
        written = build_session(args.session, session, args.messages)
        store = open_store(workdir / "index.db")
        synced = sync_session(store, session)
        session_id = synced.session_id or ""
        conn = store.connection()
        rows = conn.execute(
            "SELECT role, searchable_text FROM entries WHERE session_id = ? "
            "AND entry_type = 'message' ORDER BY seq",
            (session_id,),
        ).fetchall()
        branch = set(branch_entry_ids(store, session_id))
        queries = pick_queries([(role or "", text) for role, text in rows])
        print(
            f"session: {len(rows):,} messages ({written:,} entries, "
            f"{session.stat().st_size / 1e6:.1f} MB) from {args.session.name}; "
            f"indexed in {synced.duration_ms:.0f} ms; {len(queries)} queries "
            f"({sum(k == 'prose' for k, _ in queries)} prose, "
            f"{sum(k == 'identifier' for k, _ in queries)} identifier) x {args.runs} runs"
        )

        def run(query: str) -> tuple[float, int, list[str]]:
            started = time.perf_counter()
            descriptor = describe_task(query)
            result = retrieve_history(
                store,
                session_id,
                descriptor,
                branch_entry_ids=branch,
                exclude_entry_ids=frozenset(),
                max_results=args.max_results,
                max_tokens=args.max_tokens,
            )
            return (time.perf_counter() - started) * 1000, len(result.hits), result.warnings

        for _kind, query in queries:  # warm-up
            _ms, _hits, warnings = run(query)
            if warnings:
                raise SystemExit(f"unexpected warnings: {warnings}")
        timings: dict[str, list[float]] = {"prose": [], "identifier": []}
        hits_total = 0
        for _ in range(args.runs):
            for kind, query in queries:
                ms, hits, _warnings = run(query)
                timings[kind].append(ms)
                hits_total += hits

        lowered = [text.lower() for _role, text in rows]
        terms = [list(describe_task(q).query_terms) for _k, q in queries]
        scan: dict[str, list[float]] = {"prose": [], "identifier": []}
        for _ in range(max(1, args.runs // 10)):
            for (kind, _query), query_terms in zip(queries, terms, strict=True):
                started = time.perf_counter()
                baseline_scan(lowered, query_terms)
                scan[kind].append((time.perf_counter() - started) * 1000)
        ranked_sql = (
            "SELECT f.rowid FROM entries_fts AS f CROSS JOIN entries AS e ON e.rowid = f.rowid "
            "WHERE entries_fts MATCH ? AND e.session_id = ? "
            "AND e.entry_type IN ('message', 'custom_message') "
            "ORDER BY bm25(entries_fts) LIMIT ?"
        )
        limit = query_limit(args.max_results)
        bm25: dict[str, list[float]] = {"prose": [], "identifier": []}
        for _ in range(max(1, args.runs // 10)):
            for (kind, _query), query_terms in zip(queries, terms, strict=True):
                fts_query = build_fts_query(query_terms)
                started = time.perf_counter()
                conn.execute(ranked_sql, (fts_query, session_id, limit)).fetchall()
                bm25[kind].append((time.perf_counter() - started) * 1000)
        store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    every = timings["prose"] + timings["identifier"]
    every_scan = scan["prose"] + scan["identifier"]
    every_bm25 = bm25["prose"] + bm25["identifier"]
    print(f"hits per query (mean): {hits_total / len(every):.1f}")
    print(f"{'':34} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for label, values in (
        ("retrieve_history, all queries", every),
        ("  prose (user messages)", timings["prose"]),
        ("  identifier questions", timings["identifier"]),
        ("baseline: Python linear scan", every_scan),
        ("  prose", scan["prose"]),
        ("  identifier", scan["identifier"]),
        ("floor: bare FTS5 bm25 statement", every_bm25),
        ("  prose", bm25["prose"]),
        ("  identifier", bm25["identifier"]),
    ):
        print(
            f"{label:34} {statistics.median(values):8.2f} {percentile(values, 95):8.2f} "
            f"{max(values):8.2f}"
        )
    p50 = statistics.median(every)
    p95 = percentile(every, 95)
    print(
        f"ratio baseline/retrieve_history at p50: {statistics.median(every_scan) / p50:.1f}x "
        f"(the scan does no ranking, no excerpts, no evidence rendering)"
    )
    print(f"reference: ds4 reports p50 {DS4_REFERENCE_P50_MS} ms")
    print(
        f"targets: p50 <= {TARGET_P50_MS} ms: {'met' if p50 <= TARGET_P50_MS else 'MISSED'}; "
        f"p95 <= {TARGET_P95_MS} ms: {'met' if p95 <= TARGET_P95_MS else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
