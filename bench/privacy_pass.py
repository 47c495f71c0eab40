"""Benchmark: the privacy pass over 1,000 messages, beside the same run's plan without it.

Two measurements, both in one run so they share the machine's state:

1. **In process**: the sanitizer alone (`Sanitizer.message` over each of the first 1,000
   messages of the bundled real session, at most; it has 914, about 0.9 MB of JSON, much of it
   tool output: for a remote destination: markers parsed, placeholders written, secrets
   redacted), cold (an empty redaction cache) and warm (the next plan of the session), against
   `plan_context` over the same messages with privacy off. DS4 reports a 1.75 ms mean for its pass over a 1,000-message payload
   (docs/reference.md §4).
2. **Over LSP**: `ds4/plan` of the same messages (sent as `messages`, so no session sync is
   timed) by a real `ds4-lsp` process, round trip, with `privacy.enabled` true and false, for
   an `openai` model (remote).

Usage: python bench/privacy_pass.py [--runs 30] [--messages 1000]
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

from ds4_core.config import DEFAULT_CONFIG  # noqa: E402
from ds4_core.planner import calculate_budget, plan_context  # noqa: E402
from ds4_core.planner.budget import ModelProfile  # noqa: E402
from ds4_core.privacy import sanitizer as sanitizer_module  # noqa: E402
from ds4_core.privacy.policy import destination  # noqa: E402
from ds4_core.privacy.sanitizer import RedactionCache, Sanitizer  # noqa: E402
from ds4_core.sessions.context import build_session_context  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"


def session_messages(limit: int) -> list[dict[str, Any]]:
    """The first `limit` messages of the bundled session's active branch, ending with a user
    message (the planner needs one)."""
    messages = list(build_session_context(read_all(SESSION).entries).messages)[:limit]
    messages.append({"role": "user", "content": "what changed in the parser?", "timestamp": 1})
    return messages


def in_process(messages: list[dict[str, Any]], runs: int) -> dict[str, float]:
    """Mean and p95 ms of the sanitizer pass, cold (an empty redaction cache: every string
    redacted) and warm (the strings redacted before, as for the next plan of a session), and
    of a plan without privacy."""
    target = destination(DEFAULT_CONFIG, "openai")
    profile = ModelProfile("openai", "gpt-4o", 128000)
    budget = calculate_budget(profile, DEFAULT_CONFIG)
    timings: dict[str, list[float]] = {"cold": [], "warm": [], "plan": []}
    for _ in range(runs):
        sanitizer_module.REDACTIONS = RedactionCache()
        for phase in ("cold", "warm"):
            sanitizer = Sanitizer(target)
            started = time.perf_counter()
            for message in messages:
                sanitizer.message(message)
            timings[phase].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        plan_context(messages, fixed_tokens=0, budget=budget, config=DEFAULT_CONFIG)
        timings["plan"].append((time.perf_counter() - started) * 1000)
    return {
        f"{name}_{stat}_ms": value
        for name, values in timings.items()
        for stat, value in (("mean", statistics.fmean(values)), ("p95", percentile(values, 95)))
    }


def over_lsp(messages: list[dict[str, Any]], runs: int, enabled: bool) -> list[float]:
    """Round-trip ms of `ds4/plan` with `privacy.enabled` = `enabled` (after one warm-up)."""
    with tempfile.TemporaryDirectory() as tmp:
        client = RawClient(Path(tmp) / "bench.db")
        client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": None,
                "capabilities": {},
                "initializationOptions": {"settings": {"privacy": {"enabled": enabled}}},
            },
        )
        client.send("initialized", {}, notify=True)
        client.send(
            "workspace/didChangeConfiguration",
            {"settings": {"ds4": {"privacy": {"enabled": enabled}}}},
            notify=True,
        )
        params = {"messages": messages, "model": {"provider": "openai", "id": "gpt-4o"}}
        timings: list[float] = []
        for index in range(runs + 1):
            started = time.perf_counter()
            result = client.request("ds4/plan", params)
            if index:
                timings.append((time.perf_counter() - started) * 1000)
            assert result["privacy"]["enabled"] is enabled, result["privacy"]
        client.close()
        return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--messages", type=int, default=1000)
    args = parser.parse_args()
    messages = session_messages(args.messages)
    size = len(json.dumps(messages).encode())
    print(f"{len(messages)} messages ({size / 1e6:.1f} MB as JSON) of {SESSION.name}")
    inner = in_process(messages, args.runs)
    for phase in ("cold", "warm"):
        print(
            f"in process  privacy pass, {phase}  mean {inner[f'{phase}_mean_ms']:.2f} ms  "
            f"p95 {inner[f'{phase}_p95_ms']:.2f} ms   (DS4 reports a 1.75 ms mean)"
        )
    print(
        f"in process  plan, no privacy  mean {inner['plan_mean_ms']:.2f} ms  "
        f"p95 {inner['plan_p95_ms']:.2f} ms"
    )
    on = over_lsp(messages, args.runs, True)
    off = over_lsp(messages, args.runs, False)
    for name, timings in (("privacy on ", on), ("privacy off", off)):
        print(
            f"ds4/plan over LSP, {name}  p50 {percentile(timings, 50):.1f} ms  "
            f"p95 {percentile(timings, 95):.1f} ms"
        )
    print(f"p50 ratio on/off {percentile(on, 50) / percentile(off, 50):.2f}")


if __name__ == "__main__":
    main()
