"""docs/architecture.md has one line per module of `core/ds4_core` and `ds4_lsp`, and no more.

The rule the test reads the document by:

* A tree is a fenced block (```) whose first line is a package path ending in `/`:
  `ds4_core/`, `ds4_lsp/` or a subpackage such as `ds4_core/engine/`. Other fenced blocks
  are ignored. `ds4_core/...` lives under `core/` in the repository, `ds4_lsp/...` at the top.
* In a tree, a line whose first word is a name ending in `.py` or `/` (letters, digits, `_`,
  `.` and `/` only) is an entry. Its parent is the nearest entry above it ending in `/` that
  is indented less; the block's first line is the root. So `  cli/` then `    parser.py`
  is `ds4_core/cli/parser.py`, and `  sessions/jsonl.py` directly under the root is
  `ds4_core/sessions/jsonl.py`.
* Every other line of a tree (a description wrapped onto the next line) is ignored, so a
  wrapped line must not start with a module name: it would be read as an entry, and the test
  would name it as a path that does not exist.

The test fails naming every module tracked by Git (`git ls-files`; every `.py` on disk when the
checkout has no Git) that no tree lists, and every entry of a tree that does not exist. An
`__init__.py` holding nothing but its docstring may be left out of the trees.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "architecture.md"
PACKAGES = {"ds4_core": "core/ds4_core", "ds4_lsp": "ds4_lsp"}

HEADER = re.compile(r"^(?:ds4_core|ds4_lsp)(?:/\w+)*/$")
ENTRY = re.compile(r"^( *)([\w./]+(?:\.py|/))(?:\s|$)")


def repository_path(documented: str) -> str:
    """The repository path of a documented package path (`ds4_core/x.py` ->
    `core/ds4_core/x.py`); a directory keeps its trailing `/`."""
    package, _, rest = documented.partition("/")
    return f"{PACKAGES[package]}/{rest}"


def tree_blocks(text: str) -> list[list[str]]:
    """The fenced blocks of `text` whose first line is a package path, as lists of lines."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                if current and HEADER.match(current[0]):
                    blocks.append(current)
                current = None
        elif current is not None:
            current.append(line)
    return blocks


def documented_paths(text: str) -> list[str]:
    """Every entry of every tree in `text`, as repository paths (directories end in `/`)."""
    found: list[str] = []
    for block in tree_blocks(text):
        root = repository_path(block[0])
        parents: list[tuple[int, str]] = []  # (indent, directory path), indent increasing
        for line in block[1:]:
            match = ENTRY.match(line)
            if not match:
                continue
            indent, name = len(match.group(1)), match.group(2)
            while parents and parents[-1][0] >= indent:
                parents.pop()
            path = (parents[-1][1] if parents else root) + name
            found.append(path)
            if name.endswith("/"):
                parents.append((indent, path))
    return found


def _docstring_only(path: Path) -> bool:
    """True when the module at `path` holds nothing but (at most) its docstring."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return not body


def package_modules() -> list[str]:
    """Every `.py` of the packages, as repository paths: Git's tracked files, or every file on
    disk when there is no Git checkout."""
    roots = list(PACKAGES.values())
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--", *roots],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        listed = [p.relative_to(ROOT).as_posix() for r in roots for p in (ROOT / r).rglob("*")]
    return sorted(p for p in listed if p.endswith(".py"))


def test_the_trees_are_read() -> None:
    paths = documented_paths(DOCUMENT.read_text(encoding="utf-8"))
    assert "core/ds4_core/engine/facade.py" in paths
    assert "core/ds4_core/cli/printers/plan.py" in paths
    assert "ds4_lsp/handlers/plan.py" in paths


def test_the_reading_rule() -> None:
    text = "\n".join(
        [
            "```",
            "ds4_core/",
            "  a.py               first",
            "                     wrapped, ignored",
            "  sub/               a package",
            "    b.py             nested",
            "  sub/c.py           flat form",
            "  d.py",
            "```",
            "```",
            "not a tree",
            "  e.py",
            "```",
        ]
    )
    assert documented_paths(text) == [
        "core/ds4_core/a.py",
        "core/ds4_core/sub/",
        "core/ds4_core/sub/b.py",
        "core/ds4_core/sub/c.py",
        "core/ds4_core/d.py",
    ]


def test_every_module_has_a_line() -> None:
    documented = set(documented_paths(DOCUMENT.read_text(encoding="utf-8")))
    modules = package_modules()
    assert modules, "no module found"
    missing = [
        path
        for path in modules
        if path not in documented
        and not (path.endswith("/__init__.py") and _docstring_only(ROOT / path))
    ]
    assert not missing, f"modules missing from docs/architecture.md: {missing}"


def test_every_line_names_a_module_that_exists() -> None:
    documented = documented_paths(DOCUMENT.read_text(encoding="utf-8"))
    stale = [
        path
        for path in documented
        if not ((ROOT / path).is_dir() if path.endswith("/") else (ROOT / path).is_file())
    ]
    assert not stale, f"docs/architecture.md names paths that do not exist: {stale}"
    twice = sorted({path for path in documented if documented.count(path) > 1})
    assert not twice, f"docs/architecture.md lists these more than once: {twice}"
