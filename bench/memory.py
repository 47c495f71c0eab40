"""What memory and pins cost a plan (issue 15, DS4 M9), over real `ds4-lsp` processes.

Two servers, each with its own database, plan the real pi-mono session (`examples/`) with the
same request, interleaved in one run:

- **with memory**: a second session of the same project (same `cwd`) holds 1,000 project
  memory claims and 5 pins' worth of durable context (`--items`), imported first; every plan
  of the pi-mono session then ranks the 1,000 claims for the request, renders the chosen ones
  and the pins, screens them for the remote destination and records them in the manifest;
- **baseline**: the same session and request on a server with no memory at all.

Also, in process: `the selection alone over the same 1,000 claims (`MemoryIndex`) (DS4's "memory-selection"
benchmark: 5.85 ms mean for 1,000 memories), `memory_plan.memory_supplements` (the store read,
selection and rendering of one plan) and a `ds4/remember` write against the 1,000 items (its
check replays them).

    .venv/bin/python bench/memory.py [--runs N] [--items N]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan import percentile  # noqa: E402  (bench/plan.py, next to this file)
from project_index import Client  # noqa: E402

from ds4_core.engine import ContextEngine  # noqa: E402
from ds4_core.memory.selection import MemoryIndex, PlannedItem  # noqa: E402
from ds4_core.requests import ModelSpec, PlanRequest, SessionRef  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SESSION = ROOT / "examples" / "pi-mono-v1-large-session.jsonl"
MODEL = {"provider": "anthropic", "id": "claude-sonnet-4-5"}
REQUEST = "where is the theme loaded?"
WORDS = (
    "theme loader config session editor footer model provider tool bash render diff cache "
    "agent prompt keybinding terminal markdown selector queue tokens compaction export branch"
).split()
PINS = 5


def claim_text(n: int) -> str:
    """A varied claim without conflicts: every keyed claim has its own key."""
    a, b, c = (
        WORDS[n % len(WORDS)],
        WORDS[(n * 7 + 3) % len(WORDS)],
        WORDS[(n * 13 + 5) % len(WORDS)],
    )
    if n % 3 == 0:
        return f"`{a}_{b}_{n}` defaults to {n % 11}"
    if n % 3 == 1:
        return f"the {a} code in packages/{b}/src/{c}.ts handles case {n}"
    return f"when the {a} changes, the {b} reloads its {c} ({n})"


def memory_session(path: Path, cwd: str, items: int) -> None:
    """A v3 session of the project `cwd` holding `items` memory adds and `PINS` pins."""
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "bench-memory",
            "timestamp": "2026-12-01T00:00:00.000Z",
            "cwd": cwd,
        }
    ]
    parent = None
    for n in range(items + PINS):
        entry_id = f"{n + 1:08x}"
        at = 1_764_547_200_000 + n * 1000
        if n < items:
            kind = "memory"
            item = {
                "id": f"mem-{n:016x}",
                "scope": "project",
                "projectPath": cwd,
                "claim": claim_text(n),
                "createdAt": at,
                "sourceEntryIds": [],
            }
        else:
            kind = "pin"
            item = {
                "id": f"pin-{n:016x}",
                "scope": "project",
                "projectPath": cwd,
                "content": f"Pinned rule {n}: keep the public API of packages/{WORDS[n % len(WORDS)]} stable.",
                "createdAt": at,
            }
        data = {
            "schemaVersion": 1,
            "mutationId": f"mu-{n:016x}",
            "createdAt": at,
            "operation": "add",
            "item": item,
        }
        lines.append(
            {
                "type": "custom",
                "customType": f"ds4-context-{kind}-v1",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2026-12-01T00:00:00.000Z",
                "data": data,
            }
        )
        parent = entry_id
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def timed(client: Client, method: str, params: object) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    result = client.request(method, params)
    return (time.perf_counter() - started) * 1000, result


def row(name: str, values: list[float]) -> str:
    return (
        f"{name:40} mean {statistics.fmean(values):7.2f}  p50 {percentile(values, 50):7.2f}  "
        f"p95 {percentile(values, 95):7.2f}  max {max(values):7.2f} ms"
    )


def in_process(items: int, runs: int, session: Path, memory_file: Path, base: Path) -> list[str]:
    """The selection alone (index built per call, and on a built index), and `ContextEngine.plan`
    with and without the memory, interleaved, in this process."""
    claims = [PlannedItem(f"mem-{n:016x}", claim_text(n), "project", n, n) for n in range(items)]
    built, selected = [], []
    for _ in range(runs):
        started = time.perf_counter()
        index = MemoryIndex(claims)
        middle = time.perf_counter()
        chosen = index.select(REQUEST, 12)
        built.append((time.perf_counter() - started) * 1000)
        selected.append((time.perf_counter() - middle) * 1000)
    engines = {
        "memory": ContextEngine(database_path=base / "in-process-memory.db"),
        "baseline": ContextEngine(database_path=base / "in-process-baseline.db"),
    }
    engines["memory"].memory(SessionRef(str(memory_file)))
    request = PlanRequest(
        session=SessionRef(str(session)), request=REQUEST, model=ModelSpec(**MODEL)
    )
    plans: dict[str, list[float]] = {name: [] for name in engines}
    for engine in engines.values():
        engine.plan(request)
    for run in range(runs):
        order = list(engines.items())
        for name, engine in order if run % 2 else order[::-1]:
            started = time.perf_counter()
            engine.plan(request)
            plans[name].append((time.perf_counter() - started) * 1000)
    for engine in engines.values():
        engine.close()
    with_ms, base_ms = plans["memory"], plans["baseline"]
    return [
        row(f"index + select, {items} claims", built),
        row("select on the built index", selected),
        f"  chose {len(chosen)}: {chosen[0].reason}",
        row("ContextEngine.plan with memory", with_ms),
        row("baseline: ContextEngine.plan, none", base_ms),
        f"  ratio p50 {percentile(with_ms, 50) / percentile(base_ms, 50):.2f}, extra p50 "
        f"{percentile(with_ms, 50) - percentile(base_ms, 50):.2f} ms",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--items", type=int, default=1000)
    args = parser.parse_args()
    cwd = json.loads(SESSION.open(encoding="utf-8").readline())["cwd"]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        session = base / SESSION.name
        shutil.copyfile(SESSION, session)
        memory_file = base / "memory.jsonl"
        memory_session(memory_file, cwd, args.items)
        servers = {}
        for name in ("memory", "baseline"):
            client = Client(base / f"{name}.db")
            client.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
            client.send("initialized", {}, notify=True)
            servers[name] = client
        started = time.perf_counter()
        listed = servers["memory"].request("ds4/memory", {"session": {"file": str(memory_file)}})
        import_ms = (time.perf_counter() - started) * 1000
        params = {"session": {"file": str(session)}, "request": REQUEST, "model": MODEL}
        for client in servers.values():
            client.request("ds4/plan", params)  # index and warm
        times: dict[str, list[float]] = {name: [] for name in servers}
        for run in range(args.runs):
            order = list(servers.items())
            for name, client in order if run % 2 else order[::-1]:  # each goes first in turn
                elapsed, planned = timed(client, "ds4/plan", params)
                times[name].append(elapsed)
                if name == "memory":
                    with_memory = planned
        manifest = servers["memory"].request(
            "ds4/manifest", {"id": with_memory["manifestId"], "view": "full"}
        )
        kinds = [item["kind"] for item in manifest["included"]]
        writes = []
        for n in range(10):
            elapsed, _ = timed(
                servers["memory"],
                "ds4/remember",
                {"session": {"file": str(memory_file)}, "claim": f"bench claim number {n} holds"},
            )
            writes.append(elapsed)
        for client in servers.values():
            client.close()
        local = in_process(args.items, args.runs, session, memory_file, base)
    print(f"{args.runs} interleaved plans of {SESSION.name}, request {REQUEST!r}")
    print(
        f"memory: {len(listed['memory'])} claims, {len(listed['pins'])} pins (import + list {import_ms:.0f} ms)"
    )
    print(
        f"plan with memory: {kinds.count('pin')} pins, {kinds.count('memory')} memory items included"
    )
    with_ms, base_ms = times["memory"], times["baseline"]
    print(row("ds4/plan with memory", with_ms))
    print(row("baseline: ds4/plan, no memory", base_ms))
    print(
        f"  ratio p50 {percentile(with_ms, 50) / percentile(base_ms, 50):.2f}, extra p50 {percentile(with_ms, 50) - percentile(base_ms, 50):.2f} ms"
    )
    print(row(f"ds4/remember against {args.items} items", writes))
    print("in process:")
    for line in local:
        print(line)


if __name__ == "__main__":
    main()
