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

Usage: python bench/artifacts.py [--runs 30] [--megabytes 5]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continuation import timed  # noqa: E402  (bench/continuation.py, next to this file)

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--megabytes", type=float, default=5.0)
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


if __name__ == "__main__":
    main()
