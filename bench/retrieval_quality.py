"""Benchmark: file-level quality of project retrieval on real code we did not write (issue 3).

Corpus: the same real `.py` files as `project_knowledge.py` (`--files`, default 5,000: the
running interpreter's standard library, then its site-packages, then the base interpreter's;
see there), copied to a temp dir (no Git) and indexed with `discover_project` +
`sync_project`.

Pairs (request, the file that answers it), built from the corpus's own docstrings: every
module, class and function docstring of a non-test, non-doc file (`file_role` "source": the
stdlib's `test/` packages are left out, since a request describing behaviour asks for its
implementation) gives its first sentence with identifiers removed: the defining name (module
file stem or package name, class name, function name, and the enclosing class of a method),
anything in backticks or after a Sphinx role, and every word that looks like code (holds `_`,
`.`, `/`, `(`, `=`, `<`, `>` or an inner capital as in `camelCase`), so the request is prose,
not a name lookup. Kept when at least 4 words are left, 3 of them with 4+ letters, and the
request (case-insensitive) occurs in one file only (so the answer is unambiguous). `--pairs`
of them are sampled with a fixed seed from the candidates sorted by path and line; the
pairs are never filtered by how either method does on them.

Ours: `describe_task` + `search_project` with generous limits (60 hits, 10,000,000 tokens);
files ranked by their first hit. Same-run baseline: plain bm25 over whole files: a bare FTS5
table with one row per file (its text, FTS5's default `unicode61` tokenizer), queried with the
request's words OR-ed, `ORDER BY bm25`. Metrics per method: Acc@1, Acc@5 (the file is first /
among the first five files) and MRR over the first `--depth` (20) files (0 when not among
them); ratio ours / baseline; per-kind break-down; a few failures of ours.

Usage: python bench/retrieval_quality.py [--files 5000] [--pairs 200] [--seed 3] [--depth 20]
"""

from __future__ import annotations

import argparse
import ast
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent / "core"))
sys.path.insert(0, str(BENCH))

from project_knowledge import (  # noqa: E402
    Corpus,
    bench_config,
    collect_corpus,
    describe_corpus,
    first_sentence,
    module_tree,
    write_corpus,
)

from ds4_core.project.discovery import discover_project  # noqa: E402
from ds4_core.project.index import sync_project  # noqa: E402
from ds4_core.project.search import file_role, search_project  # noqa: E402
from ds4_core.retrieval import describe_task  # noqa: E402
from ds4_core.store import open_store  # noqa: E402

OUR_MAX_RESULTS = 60
OUR_MAX_TOKENS = 10_000_000
KINDS = ("module", "class", "function")
_CODE_SPAN = re.compile(r"(?::[\w.-]+:)?`+[^`]*`+")
_CODE_CHARS = re.compile(r"[_./(=<>\\]|[a-z][A-Z]|[A-Z]{2,}[a-z]{2,}")
_CALL = re.compile(r"\w\(")
_EDGE_PUNCTUATION = "\"'.,;:!?()[]{}*-"


@dataclass(frozen=True)
class Pair:
    """A request and the file that answers it."""

    kind: str
    request: str
    path: str
    name: str
    line: int


def prose_request(sentence: str, names: set[str]) -> str | None:
    """`sentence` without identifiers (module docstring), or None when too little is left."""
    text = _CODE_SPAN.sub(" ", sentence)
    kept: list[str] = []
    for token in text.split():
        word = token.strip(_EDGE_PUNCTUATION)
        if not word or _CODE_CHARS.search(word) or _CALL.search(token) or word.lower() in names:
            continue
        kept.append(word)
    letters = [w for w in kept if any(c.isalpha() for c in w)]
    if len(letters) < 4 or sum(len(w) >= 4 for w in letters) < 3:
        return None
    return " ".join(kept)


def _module_names(path: str) -> set[str]:
    parts = path.rsplit("/", 2)
    stem = parts[-1].removesuffix(".py")
    names = {stem.lower()}
    if stem == "__init__" and len(parts) >= 2:
        names.add(parts[-2].lower())
    return names


def candidate_pairs(corpus: Corpus) -> list[Pair]:
    """Every usable (request, file) pair of the corpus, sorted by path and line."""
    found: list[Pair] = []
    for f in corpus.files:
        if file_role(f.rel_path) != "source":
            continue
        tree = module_tree(f.text)
        if tree is None:
            continue
        module_names = _module_names(f.rel_path)
        sentence = first_sentence(ast.get_docstring(tree))
        if sentence and (request := prose_request(sentence, module_names)):
            found.append(Pair("module", request, f.rel_path, f.rel_path, 1))
        stack: list[tuple[ast.AST, str | None]] = [(tree, None)]
        while stack:
            node, enclosing = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                    names = {child.name.lower()} | ({enclosing.lower()} if enclosing else set())
                    sentence = first_sentence(ast.get_docstring(child))
                    if sentence and (request := prose_request(sentence, names)):
                        kind = "class" if isinstance(child, ast.ClassDef) else "function"
                        found.append(Pair(kind, request, f.rel_path, child.name, child.lineno))
                    scope = child.name if isinstance(child, ast.ClassDef) else enclosing
                    stack.append((child, scope))
                else:
                    stack.append((child, enclosing))
    files_per_request: dict[str, set[str]] = {}
    for pair in found:
        files_per_request.setdefault(pair.request.lower(), set()).add(pair.path)
    unique = [p for p in found if len(files_per_request[p.request.lower()]) == 1]
    seen: set[str] = set()
    result: list[Pair] = []
    for pair in sorted(unique, key=lambda p: (p.path, p.line, p.name)):
        if pair.request.lower() not in seen:  # the same sentence twice in one file: once
            seen.add(pair.request.lower())
            result.append(pair)
    return result


def ranks(found: Sequence[str], expected: str, depth: int) -> int | None:
    """0-based rank of `expected` among the first `depth` files of `found`, else None."""
    ordered = list(dict.fromkeys(found))[:depth]
    return ordered.index(expected) if expected in ordered else None


def metrics(values: Sequence[int | None]) -> tuple[float, float, float]:
    """(Acc@1, Acc@5, MRR) of 0-based ranks (None: not found)."""
    n = len(values) or 1
    acc1 = sum(r == 0 for r in values) / n
    acc5 = sum(r is not None and r < 5 for r in values) / n
    mrr = sum(1 / (r + 1) for r in values if r is not None) / n
    return acc1, acc5, mrr


def fts_or_query(request: str) -> str | None:
    words = list(dict.fromkeys(re.findall(r"\w+", request.lower())))
    return " OR ".join(f'"{w}"' for w in words) or None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5000, help="corpus size (files)")
    parser.add_argument("--pairs", type=int, default=200, help="(request, file) pairs")
    parser.add_argument("--seed", type=int, default=3, help="seed of the pair sample")
    parser.add_argument("--depth", type=int, default=20, help="files ranked for MRR")
    parser.add_argument("--failures", type=int, default=8, help="failures of ours to print")
    args = parser.parse_args()

    started = time.perf_counter()
    corpus = collect_corpus(args.files)
    print(describe_corpus(corpus))
    candidates = candidate_pairs(corpus)
    pairs = sorted(
        random.Random(args.seed).sample(candidates, min(args.pairs, len(candidates))),
        key=lambda p: (p.path, p.line),
    )
    by_kind = Counter(p.kind for p in pairs)
    print(
        f"pairs: {len(pairs)} sampled (seed {args.seed}) of {len(candidates):,} candidates "
        f"({', '.join(f'{by_kind[k]} {k}' for k in KINDS)} docstrings) from "
        f"{len({p.path for p in candidates}):,} source files"
    )

    config = bench_config(len(corpus.files))
    workdir = Path(tempfile.mkdtemp(prefix="ds4-bench-quality-"))
    try:
        root = workdir / "project"
        write_corpus(root, corpus)
        store = open_store(workdir / "index.db")
        begun = time.perf_counter()
        discovery = discover_project(
            root,
            max_files=config.project.max_files,
            max_total_bytes=config.project.max_total_bytes,
        )
        synced = sync_project(store, discovery)
        print(
            f"indexed {synced.files_indexed:,} files, {synced.snippets:,} windows in "
            f"{time.perf_counter() - begun:.1f} s"
        )

        bare = sqlite3.connect(workdir / "bare.db", isolation_level=None)
        bare.execute("CREATE VIRTUAL TABLE files USING fts5(content)")
        bare.execute("BEGIN")
        bare.executemany(
            "INSERT INTO files (rowid, content) VALUES (?, ?)",
            ((i, f.text) for i, f in enumerate(corpus.files)),
        )
        bare.execute("COMMIT")
        paths = [f.rel_path for f in corpus.files]

        ours: list[int | None] = []
        base: list[int | None] = []
        our_files: list[list[str]] = []
        our_ms: list[float] = []
        base_ms: list[float] = []
        for pair in pairs:
            begun = time.perf_counter()
            result = search_project(
                store,
                synced.project_path,
                describe_task(pair.request),
                max_results=OUR_MAX_RESULTS,
                max_tokens=OUR_MAX_TOKENS,
            )
            our_ms.append((time.perf_counter() - begun) * 1000)
            found = list(dict.fromkeys(hit.path for hit in result.hits))
            our_files.append(found)
            ours.append(ranks(found, pair.path, args.depth))
            query = fts_or_query(pair.request)
            begun = time.perf_counter()
            rows = (
                bare.execute(
                    "SELECT rowid FROM files WHERE files MATCH ? ORDER BY bm25(files) LIMIT ?",
                    (query, args.depth),
                ).fetchall()
                if query
                else []
            )
            base_ms.append((time.perf_counter() - begun) * 1000)
            base.append(ranks([paths[r] for (r,) in rows], pair.path, args.depth))
        bare.close()
        store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nfile-level retrieval quality, {len(pairs)} pairs (MRR over the first {args.depth}):")
    print(f"{'':44} {'Acc@1':>7} {'Acc@5':>7} {'MRR':>7} {'mean ms':>8}")
    ours_m, base_m = metrics(ours), metrics(base)
    print(f"  {'ours: search_project (files by first hit)':42} " + _cells(ours_m, our_ms))
    print(f"  {'baseline: bm25 over whole files (FTS5)':42} " + _cells(base_m, base_ms))
    ratios = " ".join(
        f"{o / b:7.2f}" if b else f"{'inf':>7}" for o, b in zip(ours_m, base_m, strict=True)
    )
    print(f"  {'ratio ours / baseline':42} {ratios}")
    for kind in KINDS:
        picked = [i for i, p in enumerate(pairs) if p.kind == kind]
        if not picked:
            continue
        o = metrics([ours[i] for i in picked])
        b = metrics([base[i] for i in picked])
        print(
            f"  {kind} docstrings ({len(picked)}): ours {o[0]:.2f} / {o[1]:.2f} / {o[2]:.3f}, "
            f"baseline {b[0]:.2f} / {b[1]:.2f} / {b[2]:.3f}"
        )
    wins = sum(_better(o, b) for o, b in zip(ours, base, strict=True))
    losses = sum(_better(b, o) for o, b in zip(ours, base, strict=True))
    print(f"  per pair: ours ranks the file higher in {wins}, the baseline in {losses}")
    verdict = "beats" if ours_m[2] > base_m[2] and ours_m[0] >= base_m[0] else "DOES NOT beat"
    print(f"  ours {verdict} the baseline (MRR {ours_m[2]:.3f} vs {base_m[2]:.3f})")

    failures = [
        (p, o, b, f)
        for p, o, b, f in zip(pairs, ours, base, our_files, strict=True)
        if o is None or o >= 5
    ]
    print(f"\nfailures of ours (file not in the first five): {len(failures)}; the first few:")
    for pair, o, b, found in failures[: args.failures]:
        print(f"  [{pair.kind} {pair.name}] {pair.request!r}")
        print(
            f"    expected {pair.path}: ours rank {_rank(o)}, baseline rank {_rank(b)}; "
            f"ours first: {', '.join(found[:2]) or '(no hits)'}"
        )
    print(f"\ntotal bench time {time.perf_counter() - started:.0f} s")


def _cells(values: tuple[float, float, float], ms: Sequence[float]) -> str:
    return f"{values[0]:7.3f} {values[1]:7.3f} {values[2]:7.3f} {statistics.fmean(ms):8.2f}"


def _better(a: int | None, b: int | None) -> bool:
    return a is not None and (b is None or a < b)


def _rank(r: int | None) -> str:
    return str(r + 1) if r is not None else "-"


if __name__ == "__main__":
    main()
