"""What appending to a server-owned session costs a client, over a real `ds4-lsp` (issue 15).

A client without Pi sends each turn with `ds4/sessionAppend` (docs/sessions.md). This measures
the round trip of one append of 1 message and of 100 messages (a realistic mix of user,
assistant-with-tool-call and tool-result messages) to a session that grows to
about `--rounds * 101` entries, beside a same-run baseline: plain Python appending the very
bytes the server wrote for that request to another file (`open(O_APPEND)`, one `write`,
`fsync`, close), the floor of a durable append; and, for the share of the round trip
itself, a no-work request over the same process (`textDocument/hover` on a document that is
not open: JSON-RPC framing and the event loop, no engine call).

    .venv/bin/python bench/sessions.py [--rounds N] [--dir DIR]

`--dir` chooses where the database and the session live (a real disk: fsync on tmpfs costs
nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import percentile  # noqa: E402  (bench/plan.py, next to this file)
from project_index import Client  # noqa: E402

HOVER = {
    "textDocument": {"uri": "file:///nowhere/not-open.py"},
    "position": {"line": 0, "character": 0},
}


def messages(round_number: int, count: int) -> list[dict[str, Any]]:
    """`count` Pi messages: user, assistant with a tool call, tool result, repeated."""
    made: list[dict[str, Any]] = []
    for index in range(count):
        call = f"call_{round_number}_{index // 3}"
        kind = index % 3
        if kind == 0:
            made.append(
                {
                    "role": "user",
                    "content": f"Step {index}: fix the parser in src/parser_{index}.py",
                    "timestamp": 1764663032000 + index,
                }
            )
        elif kind == 1:
            made.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": "Reading the file."},
                        {"type": "toolCall", "id": call, "name": "read",
                         "arguments": {"path": f"src/parser_{index}.py"}},
                    ],
                    "api": "openai-responses",
                    "provider": "openai",
                    "model": "gpt-5",
                    "stopReason": "toolUse",
                    "timestamp": 1764663032000 + index,
                }
            )  # fmt: skip
        else:
            made.append(
                {
                    "role": "toolResult",
                    "toolCallId": call,
                    "toolName": "read",
                    "content": [{"type": "text", "text": "def parse(value):\n    return value\n"}],
                    "isError": False,
                    "timestamp": 1764663032000 + index,
                }
            )
    return made


def timed(client: Client, method: str, params: object) -> tuple[float, dict]:
    started = time.perf_counter()
    result = client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def plain_append(path: Path, data: bytes) -> float:
    """ms for a durable append of `data` to `path`: open, one write, fsync, close."""
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return (time.perf_counter() - started) * 1000


def row(name: str, values: list[float]) -> str:
    return (
        f"{name:40} p50 {percentile(values, 50):7.2f} ms  p95 {percentile(values, 95):7.2f} ms"
        f"  max {max(values):7.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        client = Client(Path(tmp) / "bench.db")
        client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        client.send("initialized", {}, notify=True)
        opened = client.request("ds4/sessionOpen", {"title": "bench", "cwd": tmp})
        session = {"file": opened["file"]}
        file = Path(opened["file"])
        baseline_file = Path(tmp) / "baseline.jsonl"
        timings: dict[str, list[float]] = {
            name: [] for name in ("one", "one-plain", "hundred", "hundred-plain", "no-work")
        }
        client.request("ds4/sessionAppend", {"session": session, "messages": messages(0, 3)})
        for round_number in range(1, args.rounds + 1):
            for name, count in (("one", 1), ("hundred", 100)):
                before = file.stat().st_size
                batch = messages(round_number, count)
                elapsed, _ = timed(
                    client, "ds4/sessionAppend", {"session": session, "messages": batch}
                )
                timings[name].append(elapsed)
                with file.open("rb") as handle:
                    handle.seek(before)
                    written = handle.read()
                timings[f"{name}-plain"].append(plain_append(baseline_file, written))
            timings["no-work"].append(timed(client, "textDocument/hover", HOVER)[0])
        entries = sum(1 for _ in file.open("rb")) - 1
        size_mb = file.stat().st_size / 1e6
        client.close()
    print(f"{args.rounds} rounds; the owned session grew to {entries} entries ({size_mb:.1f} MB)")
    one, hundred = timings["one"], timings["hundred"]
    print(row("ds4/sessionAppend, 1 message", one))
    print(row("baseline: append + fsync of its bytes", timings["one-plain"]))
    print(row("ds4/sessionAppend, 100 messages", hundred))
    print(row("baseline: append + fsync of its bytes", timings["hundred-plain"]))
    print(row("baseline: no-work request (hover)", timings["no-work"]))
    for name, values, plain in (
        ("1 message", one, timings["one-plain"]),
        ("100 messages", hundred, timings["hundred-plain"]),
    ):
        print(
            f"ratio, {name}: p50 {percentile(values, 50) / percentile(plain, 50):.1f}x, "
            f"p95 {percentile(values, 95) / percentile(plain, 95):.1f}x the plain append"
        )
        print(f"  per message at p50: {percentile(values, 50) / int(name.split()[0]):.3f} ms")


if __name__ == "__main__":
    main()
