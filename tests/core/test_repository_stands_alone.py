"""The repository stands alone: no tracked file cites material outside it.

Outside rules are stated in docs/reference.md (cited as `docs/reference.md §N`) and the design
rules in docs/architecture.md ("Design rules"). This test fails, naming file:line, on a path
outside the repository or a citation of the old reference files, on a `§N` that is not a section
of docs/reference.md, and on a `docs/architecture.md "<name>"` that names no heading there.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference.md"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Spelled in pieces so that this file does not match its own patterns.
OUTSIDE = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",
            "/" + "work/",
            r"(?<![\w/.-])" + r"DESIGN\.md",
            r"(?<![\w/.-])" + r"lsp-notes\.md",
            r"(?<![\w/.-])" + r"ds4-reference\.md",
            r"(?<![\w/.-])" + r"pi-session-format\.md",
        ]
    )
)
"""Paths outside the repository and the bare names of the reference files that lived there."""

SECTION_TOKEN = re.compile(r"§([PL]?\d+(?:\.\d+)*|[PL])(?![\w.]*\w)")
"""A `§N` token: §2, §3.12, §P8.6, §L1, and the part headings §P and §L."""

REFERENCE_SECTION = re.compile(
    r"^#{2,4} §(?P<heading>\S+) |\*\*§(?P<label>[PL]?\d+(?:\.\d+)*)[ *]", re.MULTILINE
)
"""Where docs/reference.md defines a section: a heading or a bold label starting with §N."""

ARCHITECTURE_CITATION = re.compile(
    r'docs/architecture\.md`?[ \t]*\n?[ \t]*"(?P<name>[^"<][^"]{0,79})"'
)
HEADING = re.compile(r"^#{1,4} (?P<name>.+?)\s*$", re.MULTILINE)

SKIPPED_SUFFIXES = (".jsonl", ".png", ".jpg", ".ico", ".vsix", ".lock", ".db")


def _tracked_text_files() -> list[tuple[str, str]]:
    """(repository-relative path, text) of every tracked file that is UTF-8 text."""
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:  # not a Git checkout
        pytest.skip(f"git ls-files is unavailable here: {exc}")
    files = []
    for raw in listing.split(b"\0"):
        rel = raw.decode()
        if not rel or rel.endswith(SKIPPED_SUFFIXES):
            continue
        path = ROOT / rel
        if not path.is_file():
            continue  # deleted in the working tree
        try:
            files.append((rel, path.read_text(encoding="utf-8")))
        except UnicodeDecodeError:
            continue
    return files


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _reference_sections() -> set[str]:
    text = REFERENCE.read_text(encoding="utf-8")
    return {m.group("heading") or m.group("label") for m in REFERENCE_SECTION.finditer(text)}


def test_no_path_or_citation_outside_the_repository() -> None:
    problems = [
        f"{rel}:{_line_of(text, match.start())}: {match.group(0)!r}"
        for rel, text in _tracked_text_files()
        if rel != THIS_FILE
        for match in OUTSIDE.finditer(text)
    ]
    assert not problems, (
        "cite docs/reference.md (outside rules) or docs/architecture.md (design rules) "
        "instead:\n" + "\n".join(problems)
    )


def test_reference_sections_cited_exist() -> None:
    sections = _reference_sections()
    assert {"2", "3.7", "P6", "L1"} <= sections  # the parser still understands the page
    problems = []
    for rel, text in _tracked_text_files():
        if (
            rel != "docs/reference.md"
            and "docs/reference.md" not in text
            and "reference.md)" not in text
        ):
            continue
        for match in SECTION_TOKEN.finditer(text):
            if match.group(1) not in sections:
                problems.append(f"{rel}:{_line_of(text, match.start())}: §{match.group(1)}")
    assert not problems, "no such section in docs/reference.md:\n" + "\n".join(problems)


def test_architecture_names_cited_exist() -> None:
    headings = {
        " ".join(m.group("name").split())
        for m in HEADING.finditer(ARCHITECTURE.read_text(encoding="utf-8"))
    }
    assert "Design rules" in headings
    problems = [
        f"{rel}:{_line_of(text, match.start())}: {match.group('name')!r}"
        for rel, text in _tracked_text_files()
        for match in ARCHITECTURE_CITATION.finditer(text)
        if " ".join(match.group("name").split()) not in headings
    ]
    assert not problems, "no such heading in docs/architecture.md:\n" + "\n".join(problems)
