"""File roles of project retrieval: test, documentation, configuration, or source. Pure.

A request about code is usually answered by source; tests and documentation repeat its words
and configuration files hold its settings (docs/project-knowledge.md, "How files are ranked").
`scoring.role_factor` turns a role into the factor on a file's score.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

FileRole = Literal["source", "test", "doc"]

_TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "specs", "testing", "__mocks__"})
_TEST_NAME = re.compile(
    r"(?:test_.+|.+_tests?\.[a-z0-9]+|.+\.(?:test|spec)\.[a-z0-9]+|conftest\.py"
    r"|.+(?:Test|Tests|Spec)\.[A-Za-z0-9]+)",
)
_DOC_DIRS = frozenset({"doc", "docs", "documentation"})
_DOC_EXTENSIONS = frozenset({"md", "markdown", "mdx", "rst", "txt", "adoc", "asciidoc"})
_DOC_NAMES = ("readme", "changelog", "changes", "license", "contributing", "history", "news")


def file_role(path: str) -> FileRole:
    """Whether `path` is a test file, documentation, or anything else (`source`).

    Tests: a directory `test(s)`, `__tests__`, `spec(s)`, `testing`, `__mocks__`, or a name
    `test_*`, `*_test.*`, `*_tests.*`, `*.test.*`, `*.spec.*`, `*Test.*`, `*Tests.*`,
    `*Spec.*`, `conftest.py`. Docs: a directory `doc(s)` / `documentation`, an extension
    `md markdown mdx rst txt adoc asciidoc`, or a name starting `README`, `CHANGELOG`,
    `CHANGES`, `LICENSE`, `CONTRIBUTING`, `HISTORY`, `NEWS` without an extension (`NEWS`,
    `LICENSE-MIT`): `src/history.py` is source.
    """
    parts = path.split("/")
    name = parts[-1]
    directories = [part.lower() for part in parts[:-1]]
    if any(d in _TEST_DIRS for d in directories) or _TEST_NAME.fullmatch(name):
        return "test"
    lowered = name.lower()
    extension = lowered.rsplit(".", 1)[-1] if "." in lowered else ""
    if (
        any(d in _DOC_DIRS for d in directories)
        or extension in _DOC_EXTENSIONS
        or (lowered.startswith(_DOC_NAMES) and not extension)
    ):
        return "doc"
    return "source"


@lru_cache(maxsize=65536)
def _cached_role(path: str) -> FileRole:
    return file_role(path)


def role_is_demoted(role: FileRole, *, about_tests: bool, about_docs: bool) -> bool:
    """A test file in a request not about tests, or a doc file in one not about docs."""
    return (role == "test" and not about_tests) or (role == "doc" and not about_docs)


def is_demoted(path: str, *, about_tests: bool, about_docs: bool) -> bool:
    """`role_is_demoted` of `file_role(path)` (cached by path)."""
    return role_is_demoted(_cached_role(path), about_tests=about_tests, about_docs=about_docs)


_CONFIG_EXTENSIONS = frozenset(
    {"json", "jsonc", "json5", "yaml", "yml", "toml", "ini", "cfg", "conf", "xml", "lock",
     "properties", "env", "plist", "csv", "tsv"}
)  # fmt: skip


@lru_cache(maxsize=65536)
def is_configuration(path: str) -> bool:
    """Whether `path` is a configuration or data file rather than program text: a `source`
    file (`file_role`) with a data or configuration extension (`json yaml yml toml ini cfg
    conf xml lock properties env plist csv tsv`, ...) or a dot-file name (`.gitignore`,
    `.pre-commit-config.yaml`)."""
    if _cached_role(path) != "source":
        return False
    name = path.rsplit("/", 1)[-1].lower()
    extension = name.rsplit(".", 1)[-1] if "." in name[1:] else ""
    return name.startswith(".") or extension in _CONFIG_EXTENSIONS


__all__ = ["FileRole", "file_role", "is_configuration", "is_demoted", "role_is_demoted"]
