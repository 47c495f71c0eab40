"""The one version: written in core/ds4_core/__init__.py, read by both builds (RELEASING.md).

The adapter (ds4-lsp) and the core (ds4-context-core) are released in lockstep and the adapter
requires exactly the core's version. These tests fail when a second copy of the number appears
or when one of the places that must follow it drifts.
"""

from __future__ import annotations

import json
import re
import runpy
import tomllib
from pathlib import Path
from typing import Any

import pytest

import ds4_core
import ds4_lsp

ROOT = Path(__file__).resolve().parents[2]
VERSION_LINE = re.compile(r'^__version__ = "([^"]+)"$', re.M)


def _source_version() -> str:
    found = VERSION_LINE.findall((ROOT / "core" / "ds4_core" / "__init__.py").read_text("utf-8"))
    assert len(found) == 1, "core/ds4_core/__init__.py must write __version__ exactly once"
    return str(found[0])


def _pyproject(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text("utf-8"))


def _adapter_setup(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keyword arguments setup.py passes to setuptools.setup (captured, nothing built)."""
    captured: dict[str, Any] = {}
    monkeypatch.setattr("setuptools.setup", lambda **kwargs: captured.update(kwargs))
    runpy.run_path(str(ROOT / "setup.py"))
    return captured


def _npm_form(version: str) -> str:
    """The version as `npm version <version> --no-git-tag-version` writes it (npm 11): a PEP 440
    pre-release gets a hyphen before its letters (`0.2.0rc1` -> `0.2.0-rc1`), which makes it
    valid semver, as vsce requires; a release stays as it is."""
    return re.sub(r"^(\d+\.\d+\.\d+)((?:a|b|rc)\d+)$", r"\1-\2", version)


def test_the_version_is_a_release_number() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", _source_version())


def test_both_packages_report_the_one_version_at_run_time() -> None:
    assert ds4_core.__version__ == _source_version()
    assert ds4_lsp.__version__ == _source_version()


def test_the_core_build_reads_the_version_from_its_package() -> None:
    project = _pyproject(ROOT / "core" / "pyproject.toml")
    assert "version" not in project["project"], "core/pyproject.toml: no literal version"
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ds4_core.__version__"}


def test_the_adapter_build_takes_the_core_version_and_requires_exactly_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project = _pyproject(ROOT / "pyproject.toml")
    assert "version" not in project["project"], "pyproject.toml: no literal version"
    assert "dependencies" not in project["project"], "pyproject.toml: dependencies are in setup.py"
    assert sorted(project["project"]["dynamic"]) == ["dependencies", "version"]
    setup = _adapter_setup(monkeypatch)
    assert setup["version"] == _source_version()
    core_pins = [r for r in setup["install_requires"] if r.startswith("ds4-context-core")]
    assert core_pins == [f"ds4-context-core=={_source_version()}"]


def test_the_adapter_sdist_carries_the_version_file() -> None:
    manifest = (ROOT / "MANIFEST.in").read_text("utf-8").split("\n")
    assert "include core/ds4_core/__init__.py" in manifest


@pytest.mark.parametrize(
    ("python", "npm"),
    [
        ("0.2.0", "0.2.0"),
        ("0.2.0rc1", "0.2.0-rc1"),
        ("0.2.0a1", "0.2.0-a1"),
        ("1.10.3b12", "1.10.3-b12"),
    ],
)
def test_a_pre_release_has_the_form_npm_version_writes(python: str, npm: str) -> None:
    assert _npm_form(python) == npm


def test_the_vscode_extension_follows_the_version() -> None:
    vscode = ROOT / "editors" / "vscode"
    package = json.loads((vscode / "package.json").read_text("utf-8"))
    lock = json.loads((vscode / "package-lock.json").read_text("utf-8"))
    expected = _npm_form(_source_version())
    assert package["version"] == expected, "bump editors/vscode/package.json too (npm version)"
    assert lock["version"] == expected, "bump editors/vscode/package-lock.json too (npm version)"
    assert lock["packages"][""]["version"] == expected, "package-lock.json: packages[''].version"


def test_no_other_python_file_writes_a_version() -> None:
    writers = [
        path.relative_to(ROOT).as_posix()
        for folder in ("core/ds4_core", "ds4_lsp")
        for path in (ROOT / folder).rglob("*.py")
        if VERSION_LINE.search(path.read_text("utf-8"))
    ]
    assert writers == ["core/ds4_core/__init__.py"]


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "core/pyproject.toml"])
def test_the_build_requires_a_setuptools_that_reads_the_license_expression(
    pyproject: str,
) -> None:
    """`license = "MIT"` (PEP 639) is a configuration error before setuptools 77."""
    project = _pyproject(ROOT / pyproject)
    assert project["project"]["license"] == "MIT"
    assert project["build-system"]["requires"] == ["setuptools>=77"]


@pytest.mark.parametrize(("pyproject", "package"), [(".", "ds4_lsp"), ("core", "ds4_core")])
def test_each_package_ships_its_py_typed_marker(pyproject: str, package: str) -> None:
    """PEP 561: without `py.typed` in the wheel, users' type checkers ignore the annotations."""
    project = _pyproject(ROOT / pyproject / "pyproject.toml")
    assert project["tool"]["setuptools"]["package-data"] == {package: ["py.typed"]}
    assert (ROOT / pyproject / package / "py.typed").is_file()


def test_the_core_distribution_carries_the_same_license() -> None:
    assert (ROOT / "core" / "LICENSE").read_bytes() == (ROOT / "LICENSE").read_bytes()
