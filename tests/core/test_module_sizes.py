"""No module over 600 lines without a reason at its top (docs/architecture.md, "Module size").

A module under `core/ds4_core` or `ds4_lsp` longer than `MAX_LINES` lines must have a module
docstring holding a line that starts with `One module:` and gives the reason it is not split.
Nothing is exempt by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (ROOT / "core" / "ds4_core", ROOT / "ds4_lsp")
MAX_LINES = 600
MARKER = "One module:"


def _has_reason(source: str) -> bool:
    """True when the module docstring of `source` has a line starting with `MARKER`."""
    docstring = ast.get_docstring(ast.parse(source), clean=True) or ""
    return any(line.strip().startswith(MARKER) for line in docstring.splitlines())


def oversized_without_reason() -> list[str]:
    """`path: lines` of every module over `MAX_LINES` lines without a reason, sorted."""
    found = []
    for package in PACKAGES:
        for path in sorted(package.rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            lines = len(source.splitlines())
            if lines > MAX_LINES and not _has_reason(source):
                found.append(f"{path.relative_to(ROOT).as_posix()}: {lines} lines")
    return found


def test_the_packages_are_found() -> None:
    for package in PACKAGES:
        assert (package / "__init__.py").is_file(), package


def test_the_marker_is_read_from_the_module_docstring() -> None:
    assert _has_reason('"""Summary.\n\nOne module: one state machine.\n"""\nx = 1\n')
    assert not _has_reason('"""Summary."""\n# One module: a comment is not the docstring\n')
    assert not _has_reason('x = 1\n"""One module: not the module docstring"""\n')


def test_no_module_is_over_600_lines_without_a_reason() -> None:
    assert oversized_without_reason() == [], (
        f"split these modules along their responsibilities, or write a line starting with "
        f"{MARKER!r} in the module docstring saying why each stays one module"
    )
