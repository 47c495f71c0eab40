"""Benchmark: `ContextEngine.plan` of a session holding many large tool results (review 15A #7;
docs/artifacts.md "Planning").

A v3 session of N large tool results (each ~20,000 characters, above the default 12,000 inline
limit, so every one is offloaded) is planned once, then one user message is appended and the
session planned again, `--appends` times: what an agent loop pays per turn. With more large
results than a per-message cache holds, each new revision of the session would condense (and
re-hash) them all again. Baseline in the same run: the same session with `artifacts.enabled`
false (nothing offloaded). In process; one engine per case.

Usage: python bench/artifact_plans.py [--counts 60,70,200] [--appends 5] [--size 20000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ds4_core.engine import ContextEngine
from ds4_core.requests import ModelSpec, PlanRequest, SessionRef


def build(path: Path, count: int, size: int) -> str:
    """Write a session of `count` tool calls with large results; returns the leaf's id."""
    header = {"type": "session", "version": 3, "id": "many", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"}  # fmt: skip
    lines, parent = [json.dumps(header)], None

    def add(entry_id: str, message: dict[str, Any]) -> None:
        nonlocal parent
        entry = {"type": "message", "id": entry_id, "parentId": parent,
                 "timestamp": "2026-01-01T00:00:01.000Z", "message": message}  # fmt: skip
        lines.append(json.dumps(entry))
        parent = entry_id

    add("e0", {"role": "user", "content": "go", "timestamp": 1})
    for i in range(count):
        call = {"type": "toolCall", "id": f"c{i}", "name": "bash", "arguments": {}}
        add(f"a{i}", {"role": "assistant", "content": [call], "stopReason": "toolUse", "timestamp": 2})  # fmt: skip
        text = f"out{i} line\n" * (size // 10)
        add(f"r{i}", {"role": "toolResult", "toolCallId": f"c{i}", "toolName": "bash",
                      "content": [{"type": "text", "text": text}], "isError": False, "timestamp": 3})  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    assert parent is not None
    return parent


def plan(engine: ContextEngine, session: Path) -> None:
    request = PlanRequest(
        session=SessionRef(file=str(session)),
        messages=None,
        request="what failed?",
        model=ModelSpec(provider="acme", id="alpha", context_window=200000),
    )
    engine.plan(request)


def run(count: int, appends: int, size: int, enabled: bool) -> list[float]:
    """Milliseconds of each plan after an append (the first plan not counted)."""
    with tempfile.TemporaryDirectory() as folder:
        session = Path(folder) / "s.jsonl"
        parent = build(session, count, size)
        engine = ContextEngine(database_path=Path(folder) / "db" / "context.db")
        try:
            if not enabled:
                engine.update_settings({"artifacts": {"enabled": False}})
            plan(engine, session)
            times = []
            for j in range(appends):
                entry = {"type": "message", "id": f"x{j}", "parentId": parent,
                         "timestamp": "2026-01-01T00:00:02.000Z",
                         "message": {"role": "user", "content": "more", "timestamp": 4}}  # fmt: skip
                with session.open("a") as handle:
                    handle.write(json.dumps(entry) + "\n")
                parent = f"x{j}"
                start = time.perf_counter()
                plan(engine, session)
                times.append((time.perf_counter() - start) * 1000)
            return times
        finally:
            engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="60,70,200")
    parser.add_argument("--appends", type=int, default=5)
    parser.add_argument("--size", type=int, default=20000)
    args = parser.parse_args()
    print(f"plan after each append, {args.appends} appends, results of {args.size} characters")
    for count in (int(x) for x in args.counts.split(",")):
        for enabled in (False, True):
            times = run(count, args.appends, args.size, enabled)
            label = "artifacts on " if enabled else "baseline off"
            print(
                f"{count:4d} large results, {label}: median {statistics.median(times):8.1f} ms"
                f"  max {max(times):8.1f} ms  all {[round(t) for t in times]}"
            )


if __name__ == "__main__":
    main()
