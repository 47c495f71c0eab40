"""ds4_core is runtime-neutral: it never imports pygls, lsprotocol or ds4_lsp
(docs/architecture.md "Runtime-neutral core")."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ds4_core

FORBIDDEN = ("pygls", "lsprotocol", "ds4_lsp")
CORE = Path(ds4_core.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Top-level names of every module `path` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_core_source_file_imports_the_lsp_stack() -> None:
    """No file under ds4_core imports pygls, lsprotocol or ds4_lsp, even lazily."""
    sources = sorted(CORE.rglob("*.py"))
    assert len(sources) > 5
    offenders = {
        str(path.relative_to(CORE)): sorted(imported_modules(path) & set(FORBIDDEN))
        for path in sources
        if imported_modules(path) & set(FORBIDDEN)
    }
    assert offenders == {}


def test_importing_every_core_module_loads_no_lsp_module() -> None:
    """In a fresh interpreter, importing all of ds4_core leaves pygls/lsprotocol unloaded."""
    script = (
        "import importlib, pkgutil, sys, ds4_core\n"
        "for info in pkgutil.walk_packages(ds4_core.__path__, 'ds4_core.'):\n"
        "    if not info.name.endswith('__main__'):\n"
        "        importlib.import_module(info.name)\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
