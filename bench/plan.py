"""Benchmark: `ds4/plan` round trip over stdio for the real 914-message Pi session.

Starts `python -m ds4_lsp` as an editor would, initializes it, then sends `ds4/plan` for
`examples/pi-mono-v1-large-session.jsonl` with a new request, `--runs` times after `--warmup`
warm-up calls. Baseline measured in the same run: the same plan computed in process by
`ContextEngine.plan` (no JSON-RPC, no process boundary), so the ratio shows what the protocol
adds. Target: round trip p50 <= 50 ms.

Also measured: the token estimator (`chars-v2`, ds4_core.tokens) over every message of the
session, as is and with its letters mapped to Chinese and to Cyrillic, beside the `chars-v1`
rule (ceil(UTF-16 units / 4)) on the same messages in the same run.

Usage: python bench/plan.py [--runs 50] [--warmup 5] [--session FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUEST = "Let's get back to porting user-message-selector.ts: which patterns from oauth-selector did we follow?"


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(name: str, values: list[float]) -> tuple[str, float, float, float]:
    return name, statistics.median(values), percentile(values, 95), max(values)


class RawClient:
    """A minimal JSON-RPC client over the server's stdio, parsing responses with `json.loads`
    as an editor's native JSON parser would (pygls's client turns every nested object into a
    namedtuple, which would dominate the measurement)."""

    def __init__(self, db: Path, command: list[str] | None = None) -> None:
        """Start `command` (default: this interpreter's `python -m ds4_lsp`) with `DS4_DB=db`."""
        self.proc = subprocess.Popen(
            [*(command or [sys.executable, "-m", "ds4_lsp"]), "--log-level", "warning"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "DS4_DB": str(db)},
        )
        self.next_id = 0

    def send(self, method: str, params: object, *, notify: bool = False) -> None:
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
        if not notify:
            self.next_id += 1
            message["id"] = self.next_id
        body = json.dumps(message).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def receive(self) -> dict:
        """The next message from the server that is a response to our last request."""
        assert self.proc.stdout is not None
        while True:
            length = 0
            while (line := self.proc.stdout.readline().strip()) != b"":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            message = json.loads(self.proc.stdout.read(length))
            if message.get("id") == self.next_id and "method" not in message:
                return message

    def request(self, method: str, params: object) -> dict:
        self.send(method, params)
        response = self.receive()
        if "error" in response:
            raise SystemExit(f"{method} failed: {response['error']}")
        return response["result"]

    def close(self) -> None:
        self.request("shutdown", None)
        self.send("exit", None, notify=True)
        self.proc.wait(timeout=10)


def lsp_round_trips(session: Path, db: Path, runs: int, warmup: int) -> tuple[list[float], int]:
    client = RawClient(db)
    client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    client.send("initialized", {}, notify=True)
    params = {"session": {"file": str(session)}, "request": REQUEST}
    timings: list[float] = []
    size = 0
    for i in range(warmup + runs):
        started = time.perf_counter()
        result = client.request("ds4/plan", params)
        elapsed = (time.perf_counter() - started) * 1000
        if i == 0:
            if result["mode"] != "managed":
                raise SystemExit(f"unexpected plan mode {result['mode']!r}")
            size = len(json.dumps(result))
        if i >= warmup:
            timings.append(elapsed)
    client.close()
    return timings, size


def in_process(session: Path, db: Path, runs: int, warmup: int) -> list[float]:
    from ds4_core.engine import ContextEngine
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


def session_messages(session: Path) -> list[dict]:
    """The AgentMessages of every `message` entry of a Pi session file, in file order."""
    messages = []
    for line in session.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line) if line.strip() else {}
        if entry.get("type") == "message" and isinstance(entry.get("message"), dict):
            messages.append(entry["message"])
    return messages


def transliterated(value: object, table: dict[int, str]) -> object:
    """`value` with the letters of every string mapped through `table` (lengths kept)."""
    if isinstance(value, str):
        return value.translate(table)
    if isinstance(value, list):
        return [transliterated(v, table) for v in value]
    if isinstance(value, dict):
        return {k: transliterated(v, table) for k, v in value.items()}
    return value


def estimator_costs(session: Path, runs: int) -> list[tuple[str, float, float, int, int]]:
    """(text, chars-v1 p50 ms, chars-v2 p50 ms, chars-v1 tokens, chars-v2 tokens) of
    `estimate_messages_tokens` over the session's messages, as is, in Chinese, in Cyrillic."""
    import math

    from ds4_core import tokens

    def chars_v1(text: str) -> int:
        return math.ceil(tokens.utf16_length(text) / 4) if text else 0

    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    variants = {
        "as is": session_messages(session),
        "letters as CJK ideographs": None,
        "letters as Cyrillic": None,
    }
    base = variants["as is"]
    variants["letters as CJK ideographs"] = transliterated(
        base, {ord(c): chr(0x4E00 + i * 7) for i, c in enumerate(letters)}
    )
    variants["letters as Cyrillic"] = transliterated(
        base, {ord(c): chr(0x0430 + i % 32) for i, c in enumerate(letters)}
    )
    current = tokens.estimate_text_tokens
    rows = []
    for name, messages in variants.items():
        timings: dict[str, list[float]] = {"v1": [], "v2": []}
        totals: dict[str, int] = {}
        for _ in range(runs):
            for label, rule in (("v1", chars_v1), ("v2", current)):
                tokens.estimate_text_tokens = rule  # the message rules look it up per call
                try:
                    started = time.perf_counter()
                    totals[label] = tokens.estimate_messages_tokens(messages)  # type: ignore[arg-type]
                    timings[label].append((time.perf_counter() - started) * 1000)
                finally:
                    tokens.estimate_text_tokens = current
        rows.append(
            (
                name,
                statistics.median(timings["v1"]),
                statistics.median(timings["v2"]),
                totals["v1"],
                totals["v2"],
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--session", type=Path, default=ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        session = Path(tmp) / args.session.name
        shutil.copyfile(args.session, session)
        db = Path(tmp) / "bench.db"
        baseline = in_process(session, db, args.runs, args.warmup)
        lsp, size = lsp_round_trips(session, db, args.runs, args.warmup)
    rows = [
        summarize("in-process ContextEngine.plan (baseline)", baseline),
        summarize("ds4/plan over stdio", lsp),
    ]
    print(
        f"ds4/plan benchmark: {args.session.name}, {args.runs} runs after {args.warmup} warm-up;"
        f" result {size / 1024:.0f} KiB of JSON"
    )
    print(f"{'':44} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9}")
    for name, p50, p95, worst in rows:
        print(f"{name:44} {p50:9.2f} {p95:9.2f} {worst:9.2f}")
    ratio = rows[1][1] / rows[0][1] if rows[0][1] else float("nan")
    print(
        f"ratio stdio/in-process p50: {ratio:.2f}x   target: stdio p50 <= 50 ms -> {'met' if rows[1][1] <= 50 else 'NOT met'}"
    )
    costs = estimator_costs(args.session, max(5, args.runs // 5))
    print("\ntoken estimator over every message of the session (estimate_messages_tokens)")
    print(
        f"{'messages':28} {'chars-v1 ms':>12} {'chars-v2 ms':>12} {'cost':>6}"
        f" {'chars-v1 tok':>13} {'chars-v2 tok':>13}"
    )
    for name, v1_ms, v2_ms, v1_tokens, v2_tokens in costs:
        print(
            f"{name:28} {v1_ms:12.2f} {v2_ms:12.2f} {v2_ms / v1_ms:5.2f}x"
            f" {v1_tokens:13,} {v2_tokens:13,}"
        )


if __name__ == "__main__":
    main()
