"""What a usage report costs the user, over a real `ds4-lsp` process (issue 14).

An editor sends `ds4/usage` after each provider response and then plans the next call. This
measures, on the real pi-mono session (`examples/`), per round:

- **usage applied**: from sending the `ds4/usage` notification to the server's log line saying
  it was recorded (manifest updated, sample stored, the profile's calibration recomputed);
- **plan after a report**: the next `ds4/plan` round trip, which waits for the report it
  follows to be recorded and reads the profile's calibration from SQLite;

beside two same-run baselines: a `ds4/manifest` by id round trip (a small read of the same
manifest table) and a `ds4/plan` round trip with no report before it.

    .venv/bin/python bench/usage.py [--rounds N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import percentile  # noqa: E402  (bench/plan.py, next to this file)
from project_index import Client  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
MODEL = {"provider": "anthropic", "id": "claude-sonnet-4-5"}


def timed(client: Client, method: str, params: object) -> tuple[float, dict]:
    started = time.perf_counter()
    result = client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def usage_applied(client: Client, manifest_id: str, estimated: int) -> float:
    """ms from sending `ds4/usage` to its log line (`ds4/usage: manifest=...`)."""
    report = {
        "manifestId": manifest_id,
        "provider": MODEL["provider"],
        "model": MODEL["id"],
        "usage": {"input": 7, "output": 231, "cacheRead": round(estimated * 1.25), "cacheWrite": 0},
        "stopReason": "stop",
    }
    started = time.perf_counter()
    client.send("ds4/usage", report, notify=True)
    while True:
        arrived, params = client.until("window/logMessage")
        if str(params.get("message", "")).startswith("ds4/usage: manifest="):
            return (arrived - started) * 1000


def row(name: str, values: list[float]) -> str:
    return f"{name:34} p50 {percentile(values, 50):8.2f} ms  p95 {percentile(values, 95):8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / SESSION.name
        shutil.copyfile(SESSION, session)
        client = Client(Path(tmp) / "bench.db")
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        client.send("initialized", {}, notify=True)
        params = {"session": {"file": str(session)}, "request": "where is the theme loaded?"}
        params["model"] = MODEL
        client.request("ds4/plan", params)  # index and warm
        applied, after, plain, manifest = [], [], [], []
        for _ in range(args.rounds):
            elapsed, planned = timed(client, "ds4/plan", params)
            plain.append(elapsed)  # no report since the last plan
            elapsed, _ = timed(client, "ds4/plan", params)
            plain.append(elapsed)
            applied.append(usage_applied(client, planned["manifestId"], planned["estimatedTokens"]))
            elapsed, _ = timed(client, "ds4/manifest", {"id": planned["manifestId"]})
            manifest.append(elapsed)
            elapsed, last = timed(client, "ds4/plan", params)
            after.append(elapsed)
        client.close()
    print(f"{args.rounds} rounds on {SESSION.name} ({last['budget']['calibrationRatio']} ratio)")
    print(row("ds4/usage applied (notify -> log)", applied))
    print(row("baseline: ds4/manifest by id", manifest))
    print(row("ds4/plan after a report", after))
    print(row("baseline: ds4/plan, no report", plain))


if __name__ == "__main__":
    main()
