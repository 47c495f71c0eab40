"""Benchmark: `ds4/plan` round trip over stdio for the real 914-message Pi session.

Starts `python -m ds4_lsp` as an editor would, initializes it, then sends `ds4/plan` for
`examples/pi-mono-v1-large-session.jsonl` with a new request, `--runs` times after `--warmup`
warm-up calls. Baseline measured in the same run: the same plan computed in process by
`ContextEngine.plan` (no JSON-RPC, no process boundary), so the ratio shows what the protocol
adds. Target: round trip p50 <= 50 ms.

Usage: python bench/plan.py [--runs 50] [--warmup 5] [--session FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
REQUEST = "Let's get back to porting user-message-selector.ts: which patterns from oauth-selector did we follow?"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(name: str, values: list[float]) -> tuple[str, float, float, float]:
    return name, statistics.median(values), percentile(values, 95), max(values)


async def lsp_round_trips(session: Path, db: Path, runs: int, warmup: int) -> list[float]:
    client = LanguageClient("ds4-bench", "0.1.0")
    await client.start_io(sys.executable, "-m", "ds4_lsp", env={**os.environ, "DS4_DB": str(db)})
    await client.initialize_async(
        types.InitializeParams(capabilities=types.ClientCapabilities(), initialization_options={"trusted": False})
    )
    client.initialized(types.InitializedParams())
    params = {"session": {"file": str(session)}, "request": REQUEST}
    timings: list[float] = []
    for i in range(warmup + runs):
        started = time.perf_counter()
        result = await client.protocol.send_request_async("ds4/plan", params)
        elapsed = (time.perf_counter() - started) * 1000
        if i == 0 and result.mode != "managed":
            raise SystemExit(f"unexpected plan mode {result.mode!r}")
        if i >= warmup:
            timings.append(elapsed)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return timings


def in_process(session: Path, db: Path, runs: int, warmup: int) -> list[float]:
    from ds4_core import ContextEngine
    from ds4_core.requests import PlanRequest, SessionRef

    engine = ContextEngine(database_path=db)
    timings: list[float] = []
    for i in range(warmup + runs):
        started = time.perf_counter()
        engine.plan(PlanRequest(session=SessionRef(str(session)), request=REQUEST))
        if i >= warmup:
            timings.append((time.perf_counter() - started) * 1000)
    engine.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--session", type=Path, default=ROOT / "examples" / "pi-mono-v1-large-session.jsonl")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / args.session.name
        shutil.copyfile(args.session, session)
        db = Path(tmp) / "bench.db"
        baseline = in_process(session, db, args.runs, args.warmup)
        lsp = asyncio.run(lsp_round_trips(session, db, args.runs, args.warmup))
    rows = [summarize("in-process ContextEngine.plan (baseline)", baseline), summarize("ds4/plan over stdio", lsp)]
    print(f"ds4/plan benchmark: {args.session.name}, {args.runs} runs after {args.warmup} warm-up")
    print(f"{'':44} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9}")
    for name, p50, p95, worst in rows:
        print(f"{name:44} {p50:9.2f} {p95:9.2f} {worst:9.2f}")
    ratio = rows[1][1] / rows[0][1] if rows[0][1] else float("nan")
    print(f"ratio stdio/in-process p50: {ratio:.2f}x   target: stdio p50 <= 50 ms -> {'met' if rows[1][1] <= 50 else 'NOT met'}")


if __name__ == "__main__":
    main()
