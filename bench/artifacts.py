"""Benchmark: condensing a 5 MB tool result (DS4 M8; docs/artifacts.md).

One process, one run, so every line shares the machine's state. A synthetic build log of
about 5 MB (compiler-style lines with paths, warnings, a few errors and one secret to
redact) is:

1. **condensed** (`condense.condense_tool_result`: counts, paths, redacted head and tail
   excerpts within the default 6,000-character budget) -- the figure DS4 reports, 15.97 ms
   mean (p99 20.13 ms) for its 5 MB condensation (docs/reference.md §4);
2. **offloaded** as planning would (`offload.offload_tool_result`: UTF-8 encoding, SHA-256,
   the store's dedup path with its re-hash of the object on disk, then condensation);
3. **baseline**: `hashlib.sha256` of the same 5 MB (already encoded), the least any
   content-addressed store must do.

Then **search** (issue 15, second increment): the same 5 MB as a stored artifact, searched
with `ds4/artifactSearch` over a real `ds4-lsp` process (stdio, the client of bench/plan.py):
by `artifactId` for a query found nowhere (the whole object read, re-hashed, decoded and
scanned), for one found every 500 lines (stops after the default 12 matches, with their
excerpts), and by `session` (a session whose tool result is those 5 MB; the session synced,
its branch's references read, then the same scan). Same-run baseline: a plain Python scan of
the same bytes in this process, `data.decode().lower().find(query)`, without hashing. The four
are interleaved, one of each per round, so a change of load on a shared machine hits all.

Usage: python bench/artifacts.py [--runs 30] [--megabytes 5] [--search-runs 20]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continuation import timed  # noqa: E402  (bench/continuation.py, next to this file)
from plan import RawClient  # noqa: E402  (bench/plan.py, next to this file)

from ds4_core.artifacts.condense import condense_tool_result  # noqa: E402
from ds4_core.artifacts.offload import offload_tool_result  # noqa: E402
from ds4_core.artifacts.store import ArtifactStore  # noqa: E402
from ds4_core.config import DEFAULT_CONFIG  # noqa: E402


def build_log(megabytes: float) -> str:
    """About `megabytes` MB of compiler-style output, with one secret near the start."""
    secret = "sk-" + "bench" + "Q1w2E3r4T5y6U7i8O9p0"
    lines = [f"error: request failed with key {secret}"]
    size, i = len(lines[0]), 0
    while size < megabytes * 1_000_000:
        if i % 500 == 499:
            line = f"src/module{i % 97}/file{i % 13}.rs:{i}:7: error[E0308]: mismatched types"
        else:
            line = f"src/module{i % 97}/file{i % 13}.rs:{i}:3: warning: unused variable `x{i}`"
        lines.append(line)
        size += len(line) + 1
        i += 1
    return "\n".join(lines)


def summary(name: str, samples: list[float], baseline: float | None) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    mean = statistics.fmean(samples)
    ratio = f"{mean / baseline:.2f}x" if baseline else "-"
    return f"| {name} | {mean:.2f} ms | {p99:.2f} ms | {ratio} |"


NOWHERE = "zqx-found-nowhere"
EVERY_500 = "E0308"


def search_over_lsp(message: dict[str, object], data: bytes, runs: int) -> None:
    """`ds4/artifactSearch` round trips on a real server beside the plain-scan baseline;
    `message` is the toolResult holding `data` as text."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        artifact_id = ArtifactStore(root / "artifacts").put(data).artifact_id
        session = root / "s.jsonl"
        header = {
            "type": "session",
            "version": 3,
            "id": "bench",
            "timestamp": "2026-01-01T00:00:00Z",
        }
        entry = {
            "type": "message",
            "id": "e1",
            "parentId": None,
            "timestamp": "2026-01-01T00:00:01Z",
        }
        session.write_text(
            json.dumps(header) + "\n" + json.dumps({**entry, "message": message}) + "\n"
        )
        client = RawClient(root / "context.db")
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        client.send("initialized", {}, notify=True)
        by_id = {"query": NOWHERE, "artifactId": artifact_id}
        by_session = {"query": NOWHERE, "session": {"file": str(session)}}
        found = client.request("ds4/artifactSearch", by_session)  # sync the session once
        assert found["searched"] == [{"artifactId": artifact_id, "status": "ok"}], found
        few = client.request("ds4/artifactSearch", {**by_id, "query": EVERY_500})
        assert len(few["matches"]) == 12 and few["truncated"], few

        def round_trip(params: dict[str, object]) -> None:
            client.request("ds4/artifactSearch", params)

        cases = [
            (
                "baseline: decode + lower + find (no hash, in process)",
                lambda: data.decode().lower().find(NOWHERE),
            ),
            ("by id, found nowhere (whole object)", lambda: round_trip(by_id)),
            (
                "by id, found every 500 lines (12 matches)",
                lambda: round_trip({**by_id, "query": EVERY_500}),
            ),
            ("by session, found nowhere", lambda: round_trip(by_session)),
        ]
        samples: list[list[float]] = [[] for _ in cases]
        for _ in range(runs):  # interleaved: each round sees the same load on the machine
            for k, (_, call) in enumerate(cases):
                started = time.perf_counter()
                call()
                samples[k].append((time.perf_counter() - started) * 1000)
        rows = [(name, samples[k]) for k, (name, _) in enumerate(cases)]
        baseline = samples[0]
        client.close()
    base = statistics.median(baseline)
    print(f"\nds4/artifactSearch over ds4-lsp, {len(data):,} bytes, {runs} interleaved rounds")
    print("| measurement | p50 | mean | p99 | p50 vs baseline |\n|---|---|---|---|---|")
    for name, values in rows:
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        p50 = statistics.median(values)
        print(
            f"| {name} | {p50:.2f} ms | {statistics.fmean(values):.2f} ms | {p99:.2f} ms "
            f"| {p50 / base:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--megabytes", type=float, default=5.0)
    parser.add_argument("--search-runs", type=int, default=20)
    args = parser.parse_args()
    text = build_log(args.megabytes)
    data = text.encode("utf-8")
    message = {
        "role": "toolResult",
        "toolCallId": "call_bench",
        "toolName": "bash",
        "content": [{"type": "text", "text": text}],
        "isError": True,
    }
    settings = DEFAULT_CONFIG.artifacts
    artifact_id = hashlib.sha256(data).hexdigest()
    with tempfile.TemporaryDirectory() as folder:
        store = ArtifactStore(Path(folder) / "artifacts")
        first = time.perf_counter()
        store.put(data)
        first_ms = (time.perf_counter() - first) * 1000
        baseline = timed(lambda: hashlib.sha256(data).hexdigest(), args.runs)
        condensed = timed(
            lambda: condense_tool_result(
                message, artifact_id=artifact_id, excerpt_chars=settings.excerpt_chars, text=text
            ),
            args.runs,
        )
        offloaded = timed(lambda: offload_tool_result(message, store, settings), args.runs)
    base = statistics.fmean(baseline)
    print(f"{len(text):,} characters, {len(data):,} bytes, {args.runs} runs")
    print("| measurement | mean | p99 | vs baseline |\n|---|---|---|---|")
    print(summary("baseline: sha256 of the bytes", baseline, base))
    print(summary("condense (DS4: 15.97 ms mean, 20.13 ms p99)", condensed, base))
    print(summary("offload (encode, sha256, dedup re-hash, condense)", offloaded, base))
    print(f"first store write (temp file, fsync, rename): {first_ms:.2f} ms")
    if args.search_runs > 0:
        search_over_lsp(message, data, args.search_runs)


if __name__ == "__main__":
    main()
