"""Benchmark: the secret check every indexed file passes (`ds4_core.privacy.secrets.secret_reason`).

Workloads:
* real code: up to `--files` `.py` files of the interpreter's standard library (the same
  corpus as `project_knowledge.py`), checked one by one, in MB/s;
* hostile files of `project.maxFileBytes` (512,000 bytes by default), built to make the
  keyword rules work hardest: lines of `HEURISTIC_LINE_CHARS` characters made of nothing but
  keywords (`pwd`, `secret`, `password is \\``, `# pass: `, `pw `, `token`, `pass=`), and one
  line of the whole size (`secret` repeated), each checked `--runs` times: p50 ms and ms per MB.

Same-run baseline: `bytes.find` of every anchor over the same text (the floor of an anchored
scan), and `str.split("\\n")` of it.
Target: every hostile file checks in O(size): its ms per MB within 20x of real code's, so
that a file committed to hurt the indexer costs at most a second or so.

The same workloads also time the two other readings of the shared patterns
(`ds4_core.privacy`): `secret_spans` (where the secrets are) and `redact_secrets` (what a
remote model is sent), which must stay linear too.

Usage: python bench/secret_scan.py [--files 2000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import sysconfig
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))

from ds4_core.privacy.redaction import redact_secrets  # noqa: E402
from ds4_core.privacy.secrets import HEURISTIC_LINE_CHARS, secret_reason, secret_spans  # noqa: E402

FILE_BYTES = 512_000
HOSTILE_UNITS = ("pwd", "secret", "password is `", "# pass: ", "pw ", "token", "pass=")
ANCHORS = ("pass", "pw", "secret", "token", "api", "auth", "access", "private", "sk-", "ghp_")


def hostile_files() -> dict[str, str]:
    """Name -> text of `FILE_BYTES` characters built to make the keyword rules work hardest."""
    files = {}
    for unit in HOSTILE_UNITS:
        line = unit * (HEURISTIC_LINE_CHARS // len(unit))
        files[f"lines of {unit!r}"] = (line + "\n") * (FILE_BYTES // (len(line) + 1))
    files["one line of 'secret'"] = "secret" * (FILE_BYTES // 6)
    return files


def real_files(limit: int) -> list[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for path in sorted(stdlib.rglob("*.py")):
        if len(texts) >= limit:
            break
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if len(data) <= FILE_BYTES:
            texts.append(data.decode("utf-8", "replace"))
    return texts


def time_ms(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def baseline(text: str) -> None:
    data = text.lower().encode("utf-8", "surrogatepass")
    for anchor in ANCHORS:
        index = data.find(anchor.encode())
        while index >= 0:
            index = data.find(anchor.encode(), index + 1)
    text.split("\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    corpus = real_files(args.files)
    size_mb = sum(len(t) for t in corpus) / 1e6
    real_ms = time_ms(lambda: [secret_reason(t) for t in corpus], max(1, args.runs // 2))
    base_ms = time_ms(lambda: [baseline(t) for t in corpus], max(1, args.runs // 2))
    real_per_mb = real_ms / size_mb
    spans_ms = time_ms(lambda: [secret_spans(t) for t in corpus], max(1, args.runs // 2))
    redact_ms = time_ms(lambda: [redact_secrets(t) for t in corpus], max(1, args.runs // 2))
    print(
        f"real code: {len(corpus)} stdlib files, {size_mb:.1f} MB: {real_ms:.0f} ms, "
        f"{real_per_mb:.1f} ms/MB (baseline anchor scan {base_ms / size_mb:.1f} ms/MB); "
        f"secret_spans {spans_ms / size_mb:.1f} ms/MB, redact_secrets {redact_ms / size_mb:.1f} ms/MB"
    )
    print(f"\nhostile files of {FILE_BYTES:,} characters ({args.runs} runs, p50):")
    worst = 0.0
    for name, text in hostile_files().items():
        ms = time_ms(lambda text=text: secret_reason(text), args.runs)
        base = time_ms(lambda text=text: baseline(text), args.runs)
        spans = time_ms(lambda text=text: secret_spans(text), args.runs)
        redact = time_ms(lambda text=text: redact_secrets(text), args.runs)
        per_mb = ms / (len(text) / 1e6)
        worst = max(worst, per_mb, spans / (len(text) / 1e6), redact / (len(text) / 1e6))
        print(
            f"  {name:28} {ms:8.1f} ms  {per_mb:8.1f} ms/MB  (baseline {base:6.1f} ms)  "
            f"spans {spans:7.1f} ms  redact {redact:7.1f} ms"
        )
    ratio = worst / real_per_mb
    print(
        f"\ntarget: worst hostile ms/MB (any of the three) within 20x of real code's "
        f"secret_reason: x{ratio:.1f} {'met' if ratio <= 20 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
