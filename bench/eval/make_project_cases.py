"""Build the PROJECT evaluation set (issue 11): file localization from real commits.

Input: a directory (`--data DIR`, or the environment variable `DS4_EVAL_DATA`) holding git
bundles of real Python projects (`marshmallow.bundle`, `httpx.bundle`). Each bundle is cloned
into a temp dir; nothing from the projects' source goes into this repository except the commit
messages, hashes and changed paths written to `project_cases.json`.

A case is a non-merge commit, taken newest first (`git log --no-merges`, each bundle's HEAD
branch), kept when all of these hold (a fixed filter, never by how any method does on it):
- it modifies 1-3 non-test `.py` files (gold), all present in the parent (status `M`; a commit
  that adds, deletes or renames a non-test `.py` file is skipped), and their diff is not
  whitespace-only (`git diff -w --ignore-blank-lines`);
- its subject is not a trivial one: version bump / release, changelog, typo, formatting or
  lint-only (black, isort, ruff, flake8, pre-commit, pyupgrade), dependency bump, revert, merge;
- the stripped query keeps at least 4 words, 3 of them with 4+ letters.
Test files: a directory `test`/`tests`/`testing`, a name `test_*.py`, `*_test.py` or
`conftest.py`. Documentation (`docs/`, `doc/`) does not count as gold either.

Query (`query`): subject + body (trailer lines such as `Co-authored-by:`, URLs and "Update
changelog" / "Add to AUTHORS" lines dropped; bounded to 600 characters), with identifiers
removed: backticked spans, issue numbers, tokens holding `_`, `(` or `)`, or `.`, `/`, `=`,
`<`, `>`, `#`, `@`, `:` between word characters, camelCase words, and every word
(case-insensitive) that names a file or directory of the parent tree (any path component of a
tracked file, with and without its extension) or a class / function declared in its non-test
`.py` files. `query_with_identifiers` is the original message (same bounding).

`--per-project N` (default 60) cases are taken from each bundle, newest first.

Usage: python bench/eval/make_project_cases.py --data DIR [--per-project 60] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "project_cases.json"
PROJECTS = ("marshmallow", "httpx")
MAX_MESSAGE_CHARS = 600
MAX_GOLD = 3

_TRIVIAL = re.compile(
    r"\b(bump|release|releasing|version|changelog|changes\.rst|authors|typo|typos|spelling|"
    r"format|formatting|reformat|black|isort|ruff|flake8|pre-commit|precommit|pyupgrade|lint|"
    r"linting|revert|merge|dependabot|pin|unpin)\b",
    re.IGNORECASE,
)
_TRAILER = re.compile(r"^\s*[A-Za-z-]+:\s|^\s*\*\s*\[x\]|https?://", re.IGNORECASE)
_HOUSEKEEPING = re.compile(r"^\W*(update|add|edit)\w* (the )?(changelog|authors)\W*$", re.I)
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_CODE_CHARS = re.compile(r"\w[_./(=<>#@:\\]\w|^[_@#]|_|\(|\)|[a-z][A-Z]|[A-Z]{2,}[a-z]")
_EDGE = "\"'.,;:!?()[]{}*-"
_DECL = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_TEST_DIRS = {"test", "tests", "testing"}


def data_dir(argument: str | None, projects: Sequence[str] = PROJECTS) -> Path:
    """The bundles' directory from `--data` or `DS4_EVAL_DATA`, holding `<project>.bundle` for
    each of `projects`; exits with a message if missing."""
    value = argument or os.environ.get("DS4_EVAL_DATA")
    if not value:
        raise SystemExit(
            "no data directory: pass --data DIR (the directory holding the projects' git "
            "bundles, e.g. marshmallow.bundle) or set DS4_EVAL_DATA"
        )
    path = Path(value).expanduser()
    missing = [p for p in projects if not (path / f"{p}.bundle").is_file()]
    if missing:
        raise SystemExit(f"{path}: missing bundle(s): {', '.join(f'{m}.bundle' for m in missing)}")
    return path


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def clone(bundle: Path, target: Path) -> None:
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(bundle), str(target)],
        check=True,
        capture_output=True,
    )


def is_test(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    return (
        any(p.lower() in _TEST_DIRS for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )


def is_gold_candidate(path: str) -> bool:
    top = path.split("/", 1)[0].lower()
    return path.endswith(".py") and not is_test(path) and top not in ("docs", "doc")


def bounded_message(message: str) -> str:
    lines = [ln.rstrip() for ln in message.strip().splitlines()]
    kept = [ln for ln in lines if not _TRAILER.search(ln) and not _HOUSEKEEPING.search(ln)]
    text = "\n".join(kept).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text[:MAX_MESSAGE_CHARS].rstrip()


def tree_names(repo: Path, commit: str) -> set[str]:
    """Lower-cased names of the parent tree: path components of tracked files (also without
    their extension) and classes / functions declared in its non-test `.py` files."""
    names: set[str] = set()
    files = git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
    for path in files:
        for part in path.split("/"):
            names.add(part.lower())
            if "." in part.strip("."):
                names.add(part.rsplit(".", 1)[0].lower())
    py = [p for p in files if p.endswith(".py") and not is_test(p)]
    if py:
        proc = subprocess.run(
            ["git", "-C", str(repo), "cat-file", "--batch"],
            input="".join(f"{commit}:{p}\n" for p in py).encode(),
            check=True,
            capture_output=True,
        )
        text = proc.stdout.decode("utf-8", "replace")
        names.update(m.lower() for m in _DECL.findall(text))
    names.discard("")
    return names


def strip_identifiers(message: str, names: set[str]) -> str:
    text = _CODE_SPAN.sub(" ", message)
    text = re.sub(r"\(#\d+\)|#\d+", " ", text)
    kept: list[str] = []
    for token in text.split():
        word = token.strip(_EDGE)
        if not word or _CODE_CHARS.search(word) or word.lower() in names:
            continue
        if not any(c.isalpha() for c in word):
            continue
        kept.append(word)
    return " ".join(kept)


def enough_words(query: str) -> bool:
    words = query.split()
    return len(words) >= 4 and sum(sum(c.isalpha() for c in w) >= 4 for w in words) >= 3


def project_cases(project: str, repo: Path, limit: int) -> tuple[list[dict], dict[str, int]]:
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    log = git(repo, "log", "--no-merges", "--format=%H %P").splitlines()
    cases: list[dict] = []
    names_cache: dict[str, set[str]] = {}
    for line in log:
        if len(cases) >= limit:
            break
        commit, *parents = line.split()
        if len(parents) != 1:
            skip("root or merge commit")
            continue
        parent = parents[0]
        status = git(repo, "diff", "--name-status", "--no-renames", parent, commit).splitlines()
        changed = [tuple(s.split("\t", 1)) for s in status if "\t" in s]
        gold_status = [(st, p) for st, p in changed if is_gold_candidate(p)]
        if not gold_status:
            skip("no non-test .py file changed")
            continue
        if any(st != "M" for st, _p in gold_status):
            skip("adds or deletes a non-test .py file")
            continue
        gold = sorted(p for _st, p in gold_status)
        if len(gold) > MAX_GOLD:
            skip(f"more than {MAX_GOLD} non-test .py files")
            continue
        message = git(repo, "log", "-1", "--format=%B", commit)
        subject = message.strip().splitlines()[0] if message.strip() else ""
        if _TRIVIAL.search(subject):
            skip("trivial subject (bump, release, changelog, typo, formatting, revert, ...)")
            continue
        if not git(repo, "diff", "-w", "--ignore-blank-lines", parent, commit, "--", *gold).strip():
            skip("whitespace-only change")
            continue
        original = bounded_message(message)
        if parent not in names_cache:
            names_cache[parent] = tree_names(repo, parent)
        query = strip_identifiers(original, names_cache[parent])
        if not enough_words(query):
            skip("fewer than 4 words after stripping")
            continue
        cases.append(
            {
                "project": project,
                "commit": commit,
                "parent": parent,
                "query": query,
                "query_with_identifiers": original,
                "gold": gold,
            }
        )
    return cases, skipped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help="directory holding the bundles (or DS4_EVAL_DATA)")
    parser.add_argument("--per-project", type=int, default=60, help="cases per project")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output JSON")
    args = parser.parse_args()
    data = data_dir(args.data)
    everything: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ds4-eval-cases-") as tmp:
        for project in PROJECTS:
            repo = Path(tmp) / project
            clone(data / f"{project}.bundle", repo)
            cases, skipped = project_cases(project, repo, args.per_project)
            everything.extend(cases)
            print(f"{project}: {len(cases)} cases; skipped on the way:", file=sys.stderr)
            for reason, count in sorted(skipped.items(), key=lambda kv: -kv[1]):
                print(f"  {count:5d}  {reason}", file=sys.stderr)
    args.out.write_text(json.dumps(everything, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(everything)} cases to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
