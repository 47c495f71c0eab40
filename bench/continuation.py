"""Benchmark: the native-continuation decision (DS4 M12) over 1,000 items, and what it adds to
`ds4/plan` for an editor.

Two measurements, both in one run so they share the machine's state:

1. **In process**: the decision over 1,000 real messages (the bundled session's, repeated to
   reach 1,000): item hashes of every message (`continuation.item_hashes`) plus the prefix
   decision (`ContinuationStates.plan`: the previous request's 999 hashes and a 1-item output,
   so the whole prefix is compared and the answer is `delta`), and the decision alone on
   hashes computed before, and as the server runs it on the next plan of a session (the
   item hashes of unchanged message objects kept, `ItemHashCache`: 2 new messages hashed).
   Baselines in the same run: `json.dumps` of the same messages with
   sorted keys (serializing alone, no hash), and a plain comparison of two 1,000-hash lists.
   DS4 reports 2.88 ms mean (p99 5.39 ms) for its 1,000-item prefix (docs/reference.md §4).
2. **Over LSP**: `ds4/plan` round trips of a real `ds4-lsp` for a session grown the way Pi
   grows it (each step appends the request and a reply, `--turns` short turns first so the
   plan holds about `--messages` messages, all within the recent tail), two processes
   side by side, interleaved: `nativeContinuation` on (`model.api` `openai-responses`,
   `requestOptions` given) and off. Both report each call's usage with `ds4/usage`; the on
   side's report carries the answer (`outputItems`), so its plans are `delta`.

Usage: python bench/continuation.py [--runs 30] [--messages 1000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import RawClient, percentile  # noqa: E402  (bench/plan.py, next to this file)

from ds4_core.continuation import ContinuationStates, ItemHashCache, item_hashes  # noqa: E402
from ds4_core.sessions.context import build_session_context  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
KEY = ("bench-session", "openai", "gpt-x")
ON = {"nativeContinuation": {"enabled": True, "allowProviderStorage": True}}
MODEL = {"provider": "openai", "id": "gpt-x", "contextWindow": 400000}
OPTIONS = {"model": "gpt-x", "store": True, "tools": [{"type": "function", "name": "read"}]}


def real_messages(count: int) -> list[dict[str, Any]]:
    """`count` messages of the bundled session's active branch (repeated when it has fewer)."""
    branch = list(build_session_context(read_all(SESSION).entries).messages)
    return [branch[i % len(branch)] for i in range(count)]


def timed(fn: Any, runs: int) -> list[float]:
    """ms of each of `runs` calls of `fn()` after one warm-up call."""
    fn()
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1000)
    return out


def in_process(messages: list[dict[str, Any]], runs: int) -> dict[str, list[float]]:
    """Timings (ms) of the decision with hashing, the decision alone, and the baselines."""
    hashes = item_hashes(messages)
    previous, output = list(hashes[:-2]), [hashes[-2]]

    def decide(items: Any) -> None:
        states = ContinuationStates()
        states.plan(
            KEY,
            manifest_id="m1",
            items=previous,
            options="o",
            now_ms=0,
            max_age_ms=10**9,
            leaf_id=None,
            branch=frozenset(),
            session_file=None,
        )
        states.report_output("m1", "openai", "gpt-x", output, True)
        decision = states.plan(
            KEY,
            manifest_id="m2",
            items=items() if callable(items) else items,
            options="o",
            now_ms=1,
            max_age_ms=10**9,
            leaf_id=None,
            branch=frozenset(),
            session_file=None,
        )
        assert decision.mode == "delta", decision

    copy = list(hashes)
    kept = ItemHashCache()
    kept.hashes(messages)
    grown = [*messages[:-2], dict(messages[-2]), dict(messages[-1])]  # two new objects
    return {
        "decision (hash 1,000 items + prefix)": timed(
            lambda: decide(lambda: item_hashes(messages)), runs
        ),
        "decision, kept hashes (the next plan: 2 new)": timed(
            lambda: decide(lambda: kept.hashes(grown)), runs
        ),
        "decision alone (hashes given)": timed(lambda: decide(hashes), runs),
        "baseline: sorted json.dumps of the items": timed(
            lambda: [json.dumps(m, sort_keys=True) for m in messages], runs
        ),
        "baseline: compare two 1,000-hash lists": timed(lambda: copy == list(hashes), runs),
    }


def short_turn(number: int) -> list[dict[str, Any]]:
    """A user request and a one-line reply (Pi message shapes)."""
    return [
        {"role": "user", "content": f"Step {number}: rename helper_{number}.", "timestamp": 1},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": f"Renamed helper_{number} to tool_{number}."}],
            "provider": "openai",
            "model": "gpt-x",
            "stopReason": "stop",
            "timestamp": 2,
        },
    ]


class Session:
    """A Pi v3 session file grown entry by entry."""

    def __init__(self, path: Path) -> None:
        self.path, self.leaf, self.count = path, None, 0
        header = {"type": "session", "version": 3, "id": "bench-cont", "timestamp": "x", "cwd": "/"}
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def append(self, message: dict[str, Any]) -> None:
        self.count += 1
        entry_id = f"{self.count:08x}"
        entry = {"type": "message", "id": entry_id, "parentId": self.leaf, "timestamp": "t"}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({**entry, "message": message}) + "\n")
        self.leaf = entry_id


def start(db: Path, settings: dict[str, Any]) -> RawClient:
    client = RawClient(db)
    client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": None,
            "capabilities": {},
            "initializationOptions": {"settings": settings},
        },
    )
    client.send("initialized", {}, notify=True)
    return client


def over_lsp(messages: int, runs: int, workdir: Path) -> dict[str, Any]:
    """Round-trip ms of `ds4/plan` with continuation on and off (interleaved, one process
    each, one session file each grown alike), and the decisions the on side got."""
    sides: dict[str, dict[str, Any]] = {}
    for name, settings in (("on", ON), ("off", {})):
        session = Session(workdir / f"{name}.jsonl")
        for number in range(messages // 2):
            for message in short_turn(number):
                session.append(message)
        sides[name] = {
            "session": session,
            "client": start(workdir / f"{name}.db", settings),
            "timings": [],
            "modes": [],
        }
    for step in range(runs + 1):
        for name, side in sides.items():
            text, reply = (m for m in short_turn(10_000 + step))
            params = {
                "session": {"file": str(side["session"].path)},
                "request": text["content"],
                "model": {**MODEL, "api": "openai-responses"},
                "requestOptions": OPTIONS,
            }
            started = time.perf_counter()
            result = side["client"].request("ds4/plan", params)
            elapsed = (time.perf_counter() - started) * 1000
            if step:
                side["timings"].append(elapsed)
                side["modes"].append((result.get("continuation") or {}).get("mode"))
            side["messages"] = len(result["messages"])
            side["session"].append(text)
            side["session"].append(reply)
            report = {
                "manifestId": result["manifestId"],
                "provider": "openai",
                "model": "gpt-x",
                "usage": {"input": 1000, "output": 10},
            }
            if name == "on":  # both sides report usage; only this one the answer's output
                report |= {"outputItems": [reply], "hasResponseId": True}
            side["client"].send("ds4/usage", report, notify=True)
    for side in sides.values():
        side["client"].close()
    return sides


def row(label: str, values: list[float], baseline: list[float] | None = None) -> str:
    ratio = f"  x{statistics.median(values) / statistics.median(baseline):.2f}" if baseline else ""
    return (
        f"{label:<44} mean {statistics.mean(values):7.3f} ms  p50 {percentile(values, 50):7.3f}"
        f"  p95 {percentile(values, 95):7.3f}  p99 {percentile(values, 99):7.3f}{ratio}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    messages = real_messages(args.messages)
    size = len(json.dumps(messages).encode())
    print(f"in process: {len(messages)} messages ({size / 1e6:.2f} MB as JSON) of {SESSION.name}")
    inner = in_process(messages, max(args.runs, 100))
    baseline = inner["baseline: sorted json.dumps of the items"]
    for label, values in inner.items():
        print(row(label, values, baseline if label.startswith("decision") else None))
    print("(DS4 reports 2.88 ms mean, 5.39 ms p99 for its 1,000-item prefix)")
    with tempfile.TemporaryDirectory() as tmp:
        sides = over_lsp(args.messages, args.runs, Path(tmp))
    on, off = sides["on"]["timings"], sides["off"]["timings"]
    print(f"over LSP: ds4/plan of a {sides['on']['messages']}-message plan, {args.runs} runs")
    print(row("continuation off", off))
    print(row("continuation on", on, off))
    modes = sides["on"]["modes"]
    print(f"on side's decisions: {', '.join(f'{m}={modes.count(m)}' for m in sorted(set(modes)))}")


if __name__ == "__main__":
    main()
