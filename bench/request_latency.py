"""Benchmark: what an editor waits for, per request, against a same-run baseline server.

Starts two real `ds4-lsp` processes over stdio, as an editor would: the one of this checkout
(`python -m ds4_lsp`) and a baseline (`--baseline-lsp`, e.g. the `ds4-lsp` of a checkout of
the previous release; without it the baseline is this checkout again, which measures noise).
Both get the same trusted workspace (`--workspace`, default this repository) and their own
database. Then, for every question of `bench/eval/history_cases.json` (74 real requests about
the bundled 914-message session, answerable and not), each server answers, in turns:

* `ds4/retrieve` with `scopes: ["history"]` (the session's index),
* `ds4/retrieve` with `scopes: ["project"]` (the workspace's index, live-validated),
* `ds4/retrieve` with `scopes: ["git"]` when the server knows that scope,
* `ds4/plan` of the session with the question as the new request,

`--runs` times after one warm-up pass (which also waits for the first project sync). Reported
per request kind: p50, p95 and max round-trip ms of each server, and the p95 ratio. Target
(issue 11): no request kind slower at p95 than the baseline's (ratio <= 1.0, within noise).

Usage: python bench/request_latency.py [--baseline-lsp PATH] [--workspace DIR] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import RawClient, percentile  # noqa: E402  (bench/plan.py, next to this file)

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "bench" / "eval" / "history_cases.json"
SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"


def start(command: list[str] | None, db: Path, workspace: Path) -> RawClient:
    """A server initialized on `workspace` (trusted), its database at `db`."""
    client = RawClient(db, command)
    client.request(
        "initialize",
        {
            "processId": None,
            "rootUri": workspace.as_uri(),
            "capabilities": {},
            "initializationOptions": {"trusted": True},
        },
    )
    client.send("initialized", {}, notify=True)
    return client


def supports_git_scope(client: RawClient) -> bool:
    """Whether the server accepts `scopes: ["git"]` (older servers answer InvalidParams)."""
    client.send("ds4/retrieve", {"query": "why", "scopes": ["git"]})
    return "error" not in client.receive()


def requests_for(question: str, git: bool) -> list[tuple[str, str, dict]]:
    """(kind, method, params) of the requests one question makes."""
    session = {"file": str(SESSION)}
    kinds = [
        ("retrieve history", "ds4/retrieve", {"session": session, "query": question}),
        ("retrieve project", "ds4/retrieve", {"query": question, "scopes": ["project"]}),
        ("plan", "ds4/plan", {"session": session, "request": question}),
    ]
    if git:
        kinds.insert(2, ("retrieve git", "ds4/retrieve", {"query": question, "scopes": ["git"]}))
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-lsp", help="the baseline server's ds4-lsp executable")
    parser.add_argument("--workspace", type=Path, default=ROOT, help="trusted workspace root")
    parser.add_argument("--runs", type=int, default=3, help="timed passes over the questions")
    args = parser.parse_args()
    questions = [case["question"] for case in json.loads(CASES.read_text())["cases"]]
    temp = Path(tempfile.mkdtemp(prefix="ds4-latency-"))
    try:
        servers = {
            "this": start(None, temp / "this.db", args.workspace.resolve()),
            "baseline": start(
                [args.baseline_lsp] if args.baseline_lsp else None,
                temp / "baseline.db",
                args.workspace.resolve(),
            ),
        }
        git = {name: supports_git_scope(client) for name, client in servers.items()}
        timings: dict[tuple[str, str], list[float]] = {}
        for run in range(args.runs + 1):
            for question in questions:
                for name, client in servers.items():
                    for kind, method, params in requests_for(question, git[name]):
                        started = time.perf_counter()
                        client.request(method, params)
                        elapsed = (time.perf_counter() - started) * 1000
                        if run > 0:
                            timings.setdefault((kind, name), []).append(elapsed)
        for client in servers.values():
            client.close()
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    print(f"{len(questions)} requests x {args.runs} runs per kind; workspace {args.workspace}")
    print(f"{'request':18} {'server':9} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'p95 ratio':>9}")
    kinds = sorted(
        {kind for kind, _ in timings}, key=lambda k: list(dict(timings).keys()).index((k, "this"))
    )
    for kind in kinds:
        base = timings.get((kind, "baseline"))
        for name in ("this", "baseline"):
            values = timings.get((kind, name))
            if not values:
                print(f"{kind:18} {name:9} {'(not supported)':>36}")
                continue
            ratio = (
                f"{percentile(values, 95) / percentile(base, 95):9.2f}"
                if base and name == "this"
                else ""
            )
            print(
                f"{kind:18} {name:9} {percentile(values, 50):8.2f} {percentile(values, 95):8.2f}"
                f" {max(values):8.2f} {ratio}"
            )


if __name__ == "__main__":
    main()
