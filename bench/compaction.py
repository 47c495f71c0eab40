"""Benchmark: compaction (`ContextEngine.compact`, offline summarizer; docs/compaction.md).

(a) Preparing a compaction of a ~1,000-message span. Workload: a v3 session built from the
    real 914-message v1 session (`pi-mono-v1-large-session.jsonl`): its entries, migrated by the
    reader, written out as v3 entries (8-hex ids, one linear parent chain), replicated until it
    holds `--span-messages` messages plus 200 (tool call ids renamed per copy, so every call
    still pairs with its own result). `firstKeptEntryId` is the first message after
    `--span-messages` messages where the engine accepts a cut (never between a tool call and
    its result), so the span is those messages. After indexing (timed apart), `--runs` warm
    calls (the session already parsed and indexed); each stores a `prepared` segment.
    Same-run baseline: reading the file and `json.loads` of every line (the floor of any work
    over the session), and the ratio.

(b) Cost and active prompt size of ONE more compaction after 10, 100 and 1,000 earlier ones.
    The chain is built for real on a synthetic v3 session of realistic exchanges (user request,
    assistant `bash`/`read`/`edit` tool call, its result, assistant reply): each round appends
    `--exchanges` K exchanges (default 8), compacts with `firstKeptEntryId` = the last appended
    exchange's user message (so each span is K exchanges, 4K messages: the previous round's last
    exchange and this round's first K-1), and appends the compaction entry in the format
    `ds4 compact --entry` prints (`ds4_core.cli.compaction_entry`); the next sync marks it
    committed. Each round's compaction is timed ("after append": the first call after the file
    grew; the engine's session cache parses only the appended bytes (`read_more`) and extends
    the branch's path (`PathIndex`: only the new entries are walked, but its entry index and
    the path's id list are copied, O(entries) with a small constant). At a snapshot (N compactions committed),
    before the new entry is appended, more compactions of the same state are timed (their
    batches stay prepared, the session is unchanged): 4 x `--extra` warm ones (the engine that
    built the chain: the session parsed, its context built and indexed) and `--extra` cold
    ones (a new engine on the same database: the whole file is read and parsed again). It
    reports the active root's tokens (the summary the model sees), the first N at which the
    root reaches `compaction.summaryTokenLimit`, the estimated tokens of a `plan` for
    "continue" with anthropic/claude-sonnet-4-5 (200,000 window) after the new entry, the size
    of the compaction entry appended, how many of the timed after-append calls ran a full
    (gen-2) garbage collection, and the ratios of the last snapshot to each earlier one (the
    issue asks for 1,000th / 10th; flat means <= 1.5). Warm compaction time, root tokens and
    plan tokens should stay flat once the root reaches its cap; the cold cost grows with the
    file (read whole), which grows with every compaction entry, and the after-append cost with
    the branch's path (walked to rebuild the context); they are printed separately.

Usage: python bench/compaction.py [--quick] [--runs 10] [--span-messages 1000] [--chain 1000]
       [--exchanges 8] [--extra 5] [--session FILE]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))

from ds4_core.cli import compaction_entry  # noqa: E402
from ds4_core.engine import ContextEngine  # noqa: E402
from ds4_core.requests import (  # noqa: E402
    CompactRequest,
    ModelSpec,
    PlanRequest,
    RequestError,
    SessionRef,
)
from ds4_core.results import CompactResult  # noqa: E402
from ds4_core.sessions.reader import read_all  # noqa: E402

DEFAULT_SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
SNAPSHOTS = (10, 100, 1000)
QUICK_SNAPSHOTS = (10, 50, 100)
PLAN_MODEL = ModelSpec(provider="anthropic", id="claude-sonnet-4-5", context_window=200_000)
FLAT_RATIO = 1.5
"""A ratio 1,000th / 10th at or under this counts as flat."""
CAP_SHARE = 0.95
"""The active root counts as at its cap from this share of the token limit on."""


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def stamp(second: int) -> str:
    """An ISO-8601 UTC timestamp `second` seconds after 2026-01-01."""
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(1_767_225_600 + second))


def timed_ms(call: Any, *args: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = call(*args)
    return (time.perf_counter() - started) * 1000, value


# ------------------------------------------------------------------------ (a) 1,000 messages


def _rename_tool_ids(record: dict[str, Any], suffix: str) -> None:
    """Give every tool call id in `record` (a message entry) the suffix `suffix`."""
    message = record.get("message")
    if not isinstance(message, dict) or not suffix:
        return
    if isinstance(message.get("toolCallId"), str):
        message["toolCallId"] += suffix
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "toolCall" and "id" in block:
                block["id"] = f"{block['id']}{suffix}"


def build_span_session(source: Path, target: Path, span_messages: int) -> list[str]:
    """Write a v3 session at `target` of the real session's entries, replicated until it holds
    `span_messages` messages and 200 more. Returns the ids of the user and assistant messages
    after the first `span_messages` messages, in order (candidate first kept entries)."""
    entries = [
        e
        for e in read_all(source).entries
        if e.entry_type in {"message", "model_change", "thinking_level_change"}
    ]
    header = {
        "type": "session",
        "version": 3,
        "id": "bench-compaction-span",
        "timestamp": stamp(0),
        "cwd": "/bench",
    }
    written = messages = 0
    parent: str | None = None
    candidates: list[str] = []
    copy = 0
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(header) + "\n")
        while messages < span_messages + 200:
            for entry in entries:
                record = json.loads(json.dumps(entry.data))  # a deep copy
                for key in ("id", "parentId", "timestamp"):
                    record.pop(key, None)
                _rename_tool_ids(record, f"-c{copy}" if copy else "")
                entry_id = f"{written + 1:08x}"
                record.update(id=entry_id, parentId=parent, timestamp=stamp(written))
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
                parent = entry_id
                written += 1
                if entry.entry_type != "message":
                    continue
                role = record["message"].get("role")
                if messages >= span_messages and role in ("user", "assistant"):
                    candidates.append(entry_id)
                messages += 1
                if messages >= span_messages + 200:
                    break
            copy += 1
    return candidates


def bench_span(source: Path, tmp: Path, span_messages: int, runs: int) -> dict[str, Any]:
    """(a): warm `compact` of a ~`span_messages` span, and the json.loads baseline.

    The first kept entry is the first candidate the engine accepts as a cut (one that does not
    separate a tool call from its result). Indexing the file is timed apart; the call that
    finds the cut (and parses the file) is not timed.
    """
    session = tmp / "span.jsonl"
    candidates = build_span_session(source, session, span_messages)
    engine = ContextEngine(database_path=tmp / "span.db")
    try:
        index_ms, _ = timed_ms(engine.index_session, str(session))
        for first_kept in candidates:
            request = CompactRequest(
                session=SessionRef(str(session)), first_kept_entry_id=first_kept
            )
            try:
                result = engine.compact(request).to_wire()  # also parses the file (once)
            except RequestError:
                continue  # not a valid cut: try the next message
            break
        else:
            raise SystemExit(f"no valid cut after {span_messages} messages")
        timings = [timed_ms(engine.compact, request)[0] for _ in range(runs)]
    finally:
        engine.close()
    baseline: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        with open(session, encoding="utf-8") as handle:
            for line in handle:
                json.loads(line)
        baseline.append((time.perf_counter() - started) * 1000)
    return {
        "file_mb": session.stat().st_size / 1e6,
        "span": result["span"],
        "summary_tokens": result["tokens"]["summary"],
        "validation": result["validation"]["status"],
        "index_ms": index_ms,
        "timings": timings,
        "baseline": baseline,
    }


# ------------------------------------------------------------------------ (b) the chain

TOOLS = ("bash", "read", "edit")


class ChainSession:
    """A v3 session file grown one exchange and one compaction entry at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self.leaf: str | None = None
        header = {
            "type": "session",
            "version": 3,
            "id": "bench-compaction-chain",
            "timestamp": stamp(0),
            "cwd": "/bench/app",
        }
        path.write_text(json.dumps(header) + "\n", encoding="utf-8")

    def _next_id(self) -> str:
        self.count += 1
        return f"{self.count:08x}"

    def append(self, records: list[dict[str, Any]]) -> int:
        """Append `records` as lines; returns the bytes written."""
        data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
        with self.path.open("ab") as handle:
            handle.write(data)
        self.leaf = records[-1]["id"]
        return len(data)

    def append_exchange(self, n: int) -> str:
        """Append exchange `n` (user, tool call, tool result, reply); returns the user entry id."""
        tool = TOOLS[n % len(TOOLS)]
        path = f"src/module_{n % 37}/handler_{n}.py"
        call_id = f"call-{n}"
        arguments: dict[str, Any] = {
            "bash": {"command": f"pytest tests/test_handler_{n}.py -q"},
            "read": {"path": path},
            "edit": {
                "path": path,
                "oldText": f"RETRIES = {n % 5}",
                "newText": f"RETRIES = {n % 5 + 1}",
            },
        }[tool]
        result_text = {
            "bash": f"{n % 9 + 3} passed, {n % 2} failed in 0.{n % 90 + 10}s\n"
            + f"FAILED tests/test_handler_{n}.py::test_timeout_{n} - TimeoutError\n" * (n % 2),
            "read": f'"""Handler {n}."""\nRETRIES = {n % 5}\n\ndef handle_{n}(event):\n'
            "    return dispatch(event, retries=RETRIES)\n",
            "edit": f"Successfully replaced text in {path}.",
        }[tool]
        base = self.count
        user_id, call_entry, result_entry, reply_id = (self._next_id() for _ in range(4))
        ids = [user_id, call_entry, result_entry, reply_id]
        parents = [self.leaf, user_id, call_entry, result_entry]
        messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": f"Step {n}: check {path} and keep handle_{n} retrying on "
                        f"timeouts; the limit stays at {n % 5 + 1} retries.",
                    }
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Looking at {path} first."},
                    {"type": "toolCall", "id": call_id, "name": tool, "arguments": arguments},
                ],
                "stopReason": "toolUse",
            },
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": tool,
                "content": [{"type": "text", "text": result_text}],
                "isError": tool == "bash" and n % 2 == 1,
            },
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "text",
                        "text": f"Done with step {n}: handle_{n} in {path} now retries "
                        f"{n % 5 + 1} times; next I will run the handler tests again.",
                    }
                ],
                "stopReason": "stop",
            },
        ]
        records = []
        for offset, (entry_id, parent, message) in enumerate(
            zip(ids, parents, messages, strict=True)
        ):
            message["timestamp"] = (1_767_225_600 + base + offset) * 1000
            if message["role"] == "assistant":
                message.update(
                    api="anthropic-messages", provider="anthropic", model="claude-sonnet-4-5"
                )
            records.append(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": stamp(base + offset),
                    "message": message,
                }
            )
        self.append(records)
        return user_id

    def append_compaction(self, result: CompactResult) -> int:
        """Append the compaction entry of `result` as `ds4 compact --entry` prints it; returns
        its size in bytes."""
        entry = compaction_entry(result)
        entry["id"] = self._next_id()  # unique in the session (random ids could collide)
        return self.append([entry])


def plan_tokens(engine: ContextEngine, session: Path) -> int:
    plan = engine.plan(
        PlanRequest(session=SessionRef(str(session)), request="continue", model=PLAN_MODEL)
    ).to_wire()
    return int(plan["estimatedTokens"])


def bench_chain(
    tmp: Path, snapshots: tuple[int, ...], extra: int, exchanges: int
) -> tuple[list[dict[str, Any]], list[int], int]:
    """(b): build the chain; at each snapshot (N compactions committed), measure the next one.

    Every round appends `exchanges` exchanges and compacts once, keeping from the last one's
    user message (timed: "after append", which includes parsing the appended bytes and
    rebuilding the branch's context), then appends that compaction's entry. At a snapshot round
    it also times 4 x `extra` warm compactions of the same state and `extra` cold ones (a new
    engine each), before the entry is appended, and plans "continue" after it.

    Returns the snapshot rows, the active root's tokens after every round (index = N earlier
    compactions) and the root's cap in tokens (`compaction.summaryTokenLimit`, at most
    `context.maxSummaryTokens`).
    """
    session_path = tmp / "chain.jsonl"
    db = tmp / "chain.db"
    chain = ChainSession(session_path)
    chain.append_exchange(0)
    numbered = 1
    engine = ContextEngine(database_path=db)
    limit = engine.config.compaction.summary_token_limit
    if engine.config.context.max_summary_tokens > 0:
        limit = min(limit, engine.config.context.max_summary_tokens)
    rows: list[dict[str, Any]] = []
    after_append_ms: list[float] = []
    after_append_gc: list[bool] = []
    root_by_round: list[int] = []
    full_collections = [0]

    def count_full_collections(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info.get("generation") == 2:
            full_collections[0] += 1

    gc.callbacks.append(count_full_collections)
    try:
        for done in range(max(snapshots) + 1):
            size_before = session_path.stat().st_size
            for _ in range(exchanges):
                first_kept = chain.append_exchange(numbered)
                numbered += 1
            request = CompactRequest(
                session=SessionRef(str(session_path)), first_kept_entry_id=first_kept
            )
            collections = full_collections[0]
            ms, typed = timed_ms(engine.compact, request)
            result = typed.to_wire()
            after_append_ms.append(ms)
            after_append_gc.append(full_collections[0] > collections)
            root_by_round.append(result["tokens"]["summary"])
            if result["span"]["messageCount"] != 4 * exchanges:
                raise SystemExit(f"unexpected span at compaction {done + 1}: {result['span']}")
            if done in snapshots:
                warm = [timed_ms(engine.compact, request) for _ in range(4 * extra)]
                cold: list[float] = []
                for _ in range(extra):
                    started = time.perf_counter()
                    fresh = ContextEngine(database_path=db)
                    try:
                        fresh.compact(request)
                    finally:
                        fresh.close()
                    cold.append((time.perf_counter() - started) * 1000)
                entry_bytes = chain.append_compaction(typed)
                rows.append(
                    {
                        "entry_kb": entry_bytes / 1e3,
                        "round_kb": (session_path.stat().st_size - size_before) / 1e3,
                        "earlier": done,
                        "after_append": after_append_ms[-10:],
                        "after_append_gc": sum(after_append_gc[-10:]),
                        "warm": [ms for ms, _ in warm],
                        "cold": cold,
                        "root_tokens": [r.tokens.summary for _, r in [(0, typed), *warm]],
                        "level": result["graphLevel"],
                        "span_tokens": result["span"]["tokens"],
                        "plan_tokens": plan_tokens(engine, session_path),
                        "file_mb": session_path.stat().st_size / 1e6,
                    }
                )
            else:
                chain.append_compaction(typed)
    finally:
        gc.callbacks.remove(count_full_collections)
        engine.close()
    return rows, root_by_round, limit


# ------------------------------------------------------------------------ report


def _values(value: float | list[float]) -> list[float]:
    return value if isinstance(value, list) else [value]


def machine_note() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="snapshots 10/50/100, fewer runs")
    parser.add_argument("--runs", type=int, default=None, help="warm runs of (a) (default 10)")
    parser.add_argument("--span-messages", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=None, help="compactions in (b) (1000)")
    parser.add_argument("--exchanges", type=int, default=8, help="exchanges per compaction (8)")
    parser.add_argument("--extra", type=int, default=None, help="measured per snapshot (5)")
    parser.add_argument("--session", type=Path, default=DEFAULT_SESSION)
    args = parser.parse_args()
    runs = args.runs or (3 if args.quick else 10)
    extra = args.extra or (3 if args.quick else 5)
    top = args.chain or (100 if args.quick else 1000)
    base = QUICK_SNAPSHOTS if args.quick and not args.chain else SNAPSHOTS
    snapshots = tuple(sorted({s for s in base if s < top} | {top}))
    started = time.perf_counter()
    print(f"compaction benchmark ({machine_note()})")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        span = bench_span(args.session, tmp, args.span_messages, runs)
        print(
            f"\n(a) compact a span of {span['span']['messageCount']:,} messages"
            f" ({span['span']['tokens']:,} tokens; {span['span']['sourceEntryCount']:,} entries;"
            f" file {span['file_mb']:.1f} MB), offline summarizer, {runs} warm runs"
        )
        print(
            f"    summary {span['summary_tokens']:,} tokens, validation {span['validation']};"
            f" indexing the file first (not timed below) {span['index_ms']:.0f} ms"
        )
        print(f"    {'':46} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9}")
        for name, values in (
            ("json.loads of every line (baseline)", span["baseline"]),
            ("engine.compact (warm)", span["timings"]),
        ):
            print(
                f"    {name:46} {statistics.median(values):9.1f} {percentile(values, 95):9.1f}"
                f" {max(values):9.1f}"
            )
        ratio = statistics.median(span["timings"]) / statistics.median(span["baseline"])
        print(f"    ratio compact / json.loads p50: {ratio:.1f}x")

        rows, roots, limit = bench_chain(tmp, snapshots, extra, args.exchanges)
    print(
        f"\n(b) one more compaction after N earlier ones ({args.exchanges} exchanges ="
        f" {4 * args.exchanges}-message spans; per snapshot {4 * extra} warm, {extra} cold,"
        " and the chain's last 10 after an append)"
    )
    print(
        f"    {'N':>5} {'level':>5} {'file MB':>8} {'warm p50':>9} {'warm p95':>9}"
        f" {'appd p50':>9} {'appd p95':>9} {'cold p50':>9} {'cold p95':>9}"
        f" {'root tok':>9} {'plan tok':>9} {'entry KB':>9}"
    )
    for row in rows:
        print(
            f"    {row['earlier']:>5} {row['level']:>5} {row['file_mb']:>8.2f}"
            + "".join(
                f" {statistics.median(row[key]):>9.1f} {percentile(row[key], 95):>9.1f}"
                for key in ("warm", "after_append", "cold")
            )
            + f" {statistics.median(row['root_tokens']):>9.0f} {row['plan_tokens']:>9,}"
            + f" {row['entry_kb']:>9.1f}"
        )
    print(
        "    warm: the session already parsed and its context built; appd (after append): the"
        " first compaction\n    after the file grew: only the appended bytes are parsed"
        " (read_more) and the branch's path\n    extended (PathIndex; it copies the entry index,"
        " O(entries) with a small constant); cold: a"
        " new engine (opens the database, reads and parses the whole file).\n    entry KB: the"
        " compaction entry appended at that snapshot (the round also appended"
        f" {rows[-1]['round_kb'] - rows[-1]['entry_kb']:.1f} KB of exchanges)."
    )
    print(
        "    after-append calls (of each snapshot's 10) during which Python ran a full (gen-2)"
        " garbage collection\n    (its cost grows with the objects alive, mostly the parsed"
        " session): " + ", ".join(f"N={row['earlier']:,}: {row['after_append_gc']}" for row in rows)
    )
    capped = next((n for n, tokens in enumerate(roots) if tokens >= CAP_SHARE * limit), None)
    print(
        f"\n    active root: {roots[0]:,} tokens after the first compaction; cap"
        f" (compaction.summaryTokenLimit) {limit:,};"
        + (
            f" first at >= {CAP_SHARE:.0%} of it after N = {capped:,} earlier compactions"
            f" ({roots[capped]:,} tokens), max {max(roots[capped:]):,} from there on"
            if capped is not None
            else f" not reached after {len(roots) - 1:,} compactions (max {max(roots):,})"
        )
    )
    last = rows[-1]
    for first in rows[:-1]:
        print(
            f"\n    ratios {last['earlier']:,}th / {first['earlier']:,}th"
            f" (flat means <= {FLAT_RATIO}):"
        )
        for name, key, note in (
            ("warm compact p50", "warm", ""),
            ("active root tokens", "root_tokens", ""),
            ("plan tokens", "plan_tokens", ""),
            (
                "after-append p50",
                "after_append",
                "  (copies the entry index and path ids: O(entries), small constant)",
            ),
            (
                "cold compact p50",
                "cold",
                f"  (reads the whole file: {first['file_mb']:.2f} -> {last['file_mb']:.2f} MB)",
            ),
        ):
            ratio = statistics.median(_values(last[key])) / statistics.median(_values(first[key]))
            verdict = "flat" if ratio <= FLAT_RATIO else "NOT flat"
            print(f"      {name:24} {ratio:6.2f}x  {verdict}{note}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
