"""Benchmark: project retrieval over a synthetic 5,000-file project (docs/ds4-rules.md, "Project indexing").

Workload: a generated but realistic service in a temp dir: nine areas (billing, shipping,
catalog, ...), each with its own nouns plus a few generic ones; Python and TypeScript modules
(about 70 / 30 %), each with a purpose ("rounds the ledger when the receipt is overdue") written
into its docstring and comments, classes and functions named from it (`round_ledger_12`,
`roundLedgerForReceipt`), imports of other modules and 2-9 helper functions of four shapes on
nouns of its area; a test file for one module in six and a Markdown page for one in ten that
repeat the purpose at length. Indexed with the real pipeline (`discover_project` without Git +
`sync_project`) into a fresh store; the index time is reported.

Queries (deterministic): identifier questions ("where is `reconcile_ledger` called?"), prose
requests with no identifier that paraphrase a module's purpose with other inflections ("the
ledger is not reconciled after the payment became overdue"), and path requests. Each runs
`describe_task` + `search_project` (`--max-results` 8, `--max-tokens` 12000) once to warm
up, then `--runs` times; p50 / p95 / mean / max over all timed calls. "+ live hash" adds what
the workspace does before injection: read each hit's file from disk (`read_indexable`) and
hash it (`live_hash`); that is the workload of ds4's own benchmark ("5,000 files, exact + FTS
+ live hash", mean 12.28 ms).

Same-run baseline: a Python linear scan of the same queries over the file texts held in memory
(lower-cased in advance): every query term tested with `in` against every file, no ranking.

Quality (printed, not timed): for the prose queries, how often the module whose purpose they
paraphrase is the first file returned, and how often it is among the first three, while its
test file and doc page (which repeat the words more) are in the index too.

Usage: python bench/project_retrieval.py [--files 5000] [--runs 100]
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "core"))

from ds4_core.project.discovery import discover_project  # noqa: E402
from ds4_core.project.filters import read_indexable  # noqa: E402
from ds4_core.project.index import live_hash, sync_project  # noqa: E402
from ds4_core.project.search import search_project  # noqa: E402
from ds4_core.retrieval import describe_task  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

DS4_REFERENCE_MEAN_MS = 12.28
IDENTIFIER_QUERIES = 20
PROSE_QUERIES = 20
PATH_QUERIES = 10

AREA_NOUNS = {
    "billing": "invoice receipt ledger balance statement charge credit dunning tax vat".split(),
    "shipping": "shipment carrier parcel label tracking manifest pallet route depot".split(),
    "catalog": "product variant listing category attribute bundle image brand sku".split(),
    "accounts": "customer profile address consent password avatar nickname tenant".split(),
    "orders": "order cart checkout basket reservation fulfilment backorder quote".split(),
    "payments": "payment refund chargeback settlement payout wallet mandate capture".split(),
    "reports": "report export dashboard metric chart snapshot forecast digest".split(),
    "inventory": "warehouse stock bin replenishment supplier shelf lot batch".split(),
    "integrations": "webhook token subscription partner feed sync adapter callback".split(),
}
GENERIC_NOUNS = "user request response event job file record entry item value".split()
VERBS = (
    "validate reconcile calculate apply cancel retry archive merge split round convert "
    "schedule expire refresh lock release reserve settle import notify publish parse render "
    "resolve enqueue dispatch verify approve reject suspend restore compress encrypt".split()
)
ADJECTIVES = (
    "pending expired duplicate partial failed overdue stale missing negative frozen "
    "disputed orphaned delayed unpaid oversized unsigned draft".split()
)
PAST = {
    "apply": "applied", "split": "split", "merge": "merged", "cancel": "cancelled",
    "archive": "archived", "round": "rounded", "schedule": "scheduled", "expire": "expired",
    "release": "released", "reserve": "reserved", "settle": "settled",
    "validate": "validated", "notify": "notified", "calculate": "calculated",
    "reconcile": "reconciled", "convert": "converted", "refresh": "refreshed",
    "lock": "locked", "import": "imported", "retry": "retried", "publish": "published",
    "parse": "parsed", "render": "rendered", "resolve": "resolved", "enqueue": "enqueued",
    "dispatch": "dispatched", "verify": "verified", "approve": "approved",
    "reject": "rejected", "suspend": "suspended", "restore": "restored",
    "compress": "compressed", "encrypt": "encrypted",
}  # fmt: skip
AREAS = list(AREA_NOUNS)


def pick_noun(rng: random.Random, area: str) -> str:
    """A noun of `area` (70 %) or a generic one."""
    return rng.choice(AREA_NOUNS[area] if rng.random() < 0.7 else GENERIC_NOUNS)


@dataclass(frozen=True)
class Module:
    """One generated module and the purpose its prose query paraphrases."""

    path: str
    verb: str
    noun: str
    other: str
    adjective: str
    function: str
    test_path: str | None
    doc_path: str | None


def _camel(*words: str) -> str:
    return words[0] + "".join(w.capitalize() for w in words[1:])


def _pascal(*words: str) -> str:
    return "".join(w.capitalize() for w in words)


def _purpose(m: Module) -> str:
    return f"{m.verb}s the {m.noun} when the {m.other} is {m.adjective}"


def python_module(m: Module, rng: random.Random, imports: list[str], area: str) -> str:
    cls = _pascal(m.noun, m.verb.rstrip("e") + "er")
    lines = [f'"""{_purpose(m).capitalize()}."""', "", "from __future__ import annotations", ""]
    lines += ["import logging", "from dataclasses import dataclass", ""]
    lines += [f"from app.{imp} import *  # noqa: F403" for imp in imports]
    lines += ["", "log = logging.getLogger(__name__)", "", "", "@dataclass", f"class {cls}:"]
    lines += [f'    """{_purpose(m).capitalize()}; see `{m.function}`."""', ""]
    lines += [f"    {m.noun}_id: str", f"    {m.other}_state: str = {m.adjective!r}", ""]
    lines += [f"    def {m.function}(self, {m.noun}, {m.other}):"]
    lines += [f'        """{m.verb.capitalize()} the {m.noun} for a {m.adjective} {m.other}."""']
    lines += [f"        if {m.other}.state != {m.adjective!r}:", "            return None"]
    lines += [f"        # the {m.other} is {m.adjective}: {m.verb} the {m.noun} now"]
    lines += [f"        log.info('{m.verb} %s', {m.noun}.id)", f"        return {m.noun}", ""]
    for _ in range(rng.randint(2, 9)):
        verb, noun = rng.choice(VERBS), pick_noun(rng, area)
        adjective = rng.choice(ADJECTIVES)
        lines += [f"    def {verb}_{noun}_{rng.randint(1, 999)}(self, {noun}):"]
        lines += [f'        """{verb.capitalize()} a {adjective} {noun}."""']
        shape = rng.randrange(4)
        if shape == 0:
            lines += [f"        if getattr({noun}, 'state', None) == {adjective!r}:"]
            lines += [
                "            return None",
                f"        return sum(x.amount for x in {noun}.lines)",
            ]
        elif shape == 1:
            lines += [f"        for attempt in range({rng.randint(2, 6)}):"]
            lines += [f"            if self._try({noun}, attempt):", "                return True"]
            lines += [f"        log.warning('could not {verb} %s', {noun})", "        return False"]
        elif shape == 2:
            lines += [f"        key = ({noun}.id, {adjective!r})", "        if key in self._seen:"]
            lines += ["            return self._seen[key]", f"        self._seen[key] = {noun}"]
            lines += [f"        return {noun}"]
        else:
            lines += [f"        payload = {{'id': {noun}.id, 'state': {adjective!r}}}"]
            lines += [f"        return self._client.post('/{area}/{noun}', json=payload)"]
        lines.append("")
    return "\n".join(lines) + "\n"


def typescript_module(m: Module, rng: random.Random, imports: list[str], area: str) -> str:
    lines = [f"// {_purpose(m).capitalize()}."]
    lines += [f'import {{ {_pascal(i.rsplit(".", 1)[-1])} }} from "./{i}";' for i in imports]
    lines += ["", f"export interface {_pascal(m.noun, m.other)} {{", "  id: string;"]
    lines += ["  state: string;", "  amount: number;", "}", ""]
    lines += [f"/** {_purpose(m).capitalize()}. */"]
    lines += [f"export function {m.function}({m.noun}: {_pascal(m.noun, m.other)}): boolean {{"]
    lines += [f'  if ({m.noun}.state !== "{m.adjective}") {{', "    return false;", "  }"]
    lines += [f"  // {m.verb} the {m.noun}: the {m.other} is {m.adjective}", "  return true;"]
    lines += ["}", ""]
    for _ in range(rng.randint(2, 8)):
        verb, noun = rng.choice(VERBS), pick_noun(rng, area)
        lines += [f"export function {_camel(verb, noun)}{rng.randint(1, 999)}(items: number[]) {{"]
        lines += [f"  // {verb} every {rng.choice(ADJECTIVES)} {noun}"]
        lines += ["  return items.filter((x) => x > 0).reduce((a, b) => a + b, 0);", "}", ""]
    return "\n".join(lines) + "\n"


def test_module(m: Module) -> str:
    purpose = _purpose(m)
    past = PAST.get(m.verb, m.verb + "ed")
    return (
        f'"""Tests: it {purpose}."""\n\n'
        f"def test_{m.noun}_is_{past}_when_the_{m.other}_is_{m.adjective}():\n"
        f'    """The {m.noun} is {past} when the {m.other} is {m.adjective}; a {m.noun} is\n'
        f'    never left un{past} after the {m.other} became {m.adjective}."""\n'
        f"    {m.noun} = make_{m.noun}()\n"
        f"    {m.other} = make_{m.other}(state={m.adjective!r})\n"
        f"    assert {m.function}({m.noun}, {m.other})  # the {m.noun} is {past}\n"
    )


def doc_page(m: Module) -> str:
    past = PAST.get(m.verb, m.verb + "ed")
    return (
        f"# {m.noun.capitalize()} and {m.other}\n\n"
        f"When the {m.other} is {m.adjective}, the {m.noun} is {past}. A {m.adjective} "
        f"{m.other} always means a {past} {m.noun}; if the {m.noun} is not {past} after the "
        f"{m.other} became {m.adjective}, check the {m.noun} {m.verb} step.\n"
    )


def build_project(root: Path, files: int, seed: int = 7) -> tuple[list[Module], dict[str, str]]:
    """Write about `files` files under `root`; returns the modules and every file's text."""
    rng = random.Random(seed)
    modules: list[Module] = []
    texts: dict[str, str] = {}
    purposes: set[tuple[str, str, str, str]] = set()
    while len(texts) < files:
        n = len(modules)
        area = rng.choice(AREAS)
        verb, noun, other = rng.choice(VERBS), pick_noun(rng, area), pick_noun(rng, area)
        adjective = rng.choice(ADJECTIVES)
        if other == noun or (verb, noun, other, adjective) in purposes:
            continue
        purposes.add((verb, noun, other, adjective))
        typescript = rng.random() < 0.3
        stem = f"{noun}_{verb}_{n}"
        path = f"src/{area}/{stem}.ts" if typescript else f"src/{area}/{stem}.py"
        function = _camel(verb, noun, "for", other) if typescript else f"{verb}_{noun}_{n}"
        test_path = f"tests/{area}/test_{stem}.py" if n % 6 == 0 else None
        doc_path = f"docs/{area}/{stem}.md" if n % 10 == 0 else None
        m = Module(path, verb, noun, other, adjective, function, test_path, doc_path)
        modules.append(m)
        imports = [modules[rng.randrange(len(modules))].path for _ in range(rng.randint(0, 3))]
        imports = [p.split("/", 1)[1].rsplit(".", 1)[0].replace("/", ".") for p in imports]
        writer = typescript_module if typescript else python_module
        texts[path] = writer(m, rng, imports, area)
        if test_path:
            texts[test_path] = test_module(m)
        if doc_path:
            texts[doc_path] = doc_page(m)
    for rel, text in texts.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return modules, texts


def pick_queries(modules: list[Module]) -> list[tuple[str, str, str]]:
    """(kind, query, expected first path) triples, deterministic."""
    queries: list[tuple[str, str, str]] = []
    step = max(1, len(modules) // IDENTIFIER_QUERIES)
    for m in modules[::step][:IDENTIFIER_QUERIES]:
        queries.append(("identifier", f"where is `{m.function}` called?", m.path))
    documented = [m for m in modules if m.test_path and m.doc_path]
    step = max(1, len(documented) // PROSE_QUERIES)
    for m in documented[::step][:PROSE_QUERIES]:
        past = PAST.get(m.verb, m.verb + "ed")
        query = f"the {m.noun} is not {past} after the {m.other} became {m.adjective}"
        queries.append(("prose", query, m.path))
    step = max(1, len(modules) // PATH_QUERIES)
    for m in modules[step // 2 :: step][:PATH_QUERIES]:
        queries.append(("path", f"open {m.path} and explain it", m.path))
    return queries


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def baseline_scan(lowered: list[str], terms: list[str]) -> int:
    """Files whose lower-cased text contains any of `terms` (a linear scan, no ranking)."""
    needles = [t.lower() for t in terms]
    return sum(1 for text in lowered if any(n in text for n in needles))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--max-results", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=12000)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-project-"))
    try:
        root = workdir / "shop"
        started = time.perf_counter()
        modules, texts = build_project(root, args.files)
        generated_s = time.perf_counter() - started
        store = open_store(workdir / "index.db")
        started = time.perf_counter()
        discovery = discover_project(root, use_git=False, max_files=args.files + 1000)
        discovered_s = time.perf_counter() - started
        synced = sync_project(store, discovery)
        indexed_s = time.perf_counter() - started
        size_mb = sum(len(t.encode()) for t in texts.values()) / 1e6
        project_path = synced.project_path
        queries = pick_queries(modules)
        print(
            f"project: {len(texts):,} files ({size_mb:.1f} MB, generated in {generated_s:.1f} s), "
            f"{synced.snippets:,} windows; discovery {discovered_s * 1000:.0f} ms, "
            f"discovery + full index {indexed_s:.2f} s ({size_mb / indexed_s:.1f} MB/s, "
            f"{len(texts) / indexed_s:,.0f} files/s)"
        )
        print(
            f"{len(queries)} queries ({IDENTIFIER_QUERIES} identifier, {PROSE_QUERIES} prose, "
            f"{PATH_QUERIES} path) x {args.runs} warm runs"
        )

        def run(query: str, validate: bool) -> tuple[float, list[str]]:
            begun = time.perf_counter()
            result = search_project(
                store,
                project_path,
                describe_task(query),
                max_results=args.max_results,
                max_tokens=args.max_tokens,
            )
            if validate:
                hashes: dict[str, str | None] = {}
                for hit in result.hits:
                    if hit.path not in hashes:
                        text, _reason = read_indexable(root / hit.path, max_file_bytes=512_000)
                        hashes[hit.path] = live_hash(text) if text is not None else None
                    if hashes[hit.path] != hit.file_hash:
                        raise SystemExit(f"live hash mismatch for {hit.path}")
            if result.warnings:
                raise SystemExit(f"unexpected warnings: {result.warnings}")
            return (time.perf_counter() - begun) * 1000, [h.path for h in result.hits]

        quality: dict[str, list[int]] = {"identifier": [], "prose": [], "path": []}
        for kind, query, expected in queries:  # warm-up, and ranking quality
            _ms, found = run(query, True)
            ordered = list(dict.fromkeys(found))
            quality[kind].append(ordered.index(expected) if expected in ordered else 99)
        kinds = ("identifier", "prose", "path")
        timings: dict[str, list[float]] = {k: [] for k in kinds}
        validated: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(args.runs):
            for kind, query, _expected in queries:
                timings[kind].append(run(query, False)[0])
                validated[kind].append(run(query, True)[0])

        lowered = [text.lower() for text in texts.values()]
        scan: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(max(1, args.runs // 10)):
            for kind, query, _expected in queries:
                terms = list(describe_task(query).query_terms)
                begun = time.perf_counter()
                baseline_scan(lowered, terms)
                scan[kind].append((time.perf_counter() - begun) * 1000)
        store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    def row(label: str, values: list[float]) -> None:
        print(
            f"{label:40} {statistics.median(values):8.2f} {percentile(values, 95):8.2f} "
            f"{statistics.fmean(values):8.2f} {max(values):8.2f}"
        )

    print(f"{'':40} {'p50 ms':>8} {'p95 ms':>8} {'mean ms':>8} {'max ms':>8}")
    every = [v for k in kinds for v in timings[k]]
    every_validated = [v for k in kinds for v in validated[k]]
    every_scan = [v for k in kinds for v in scan[k]]
    row("search_project, all queries", every)
    for kind in kinds:
        row(f"  {kind}", timings[kind])
    row("search_project + live hash of hits", every_validated)
    for kind in kinds:
        row(f"  {kind}", validated[kind])
    row("baseline: Python linear scan", every_scan)
    for kind in kinds:
        row(f"  {kind}", scan[kind])
    print(
        f"ratio baseline/search_project at p50: "
        f"{statistics.median(every_scan) / statistics.median(every):.1f}x "
        "(the scan does no ranking, windows or rendering)"
    )
    print(f"reference: ds4 reports mean {DS4_REFERENCE_MEAN_MS} ms (exact + FTS + live hash)")
    for kind in kinds:
        ranks = quality[kind]
        first = sum(r == 0 for r in ranks)
        top3 = sum(r < 3 for r in ranks)
        print(
            f"quality, {kind}: expected file first in {first}/{len(ranks)}, "
            f"in the first three in {top3}/{len(ranks)}"
        )


if __name__ == "__main__":
    main()
