"""scripts/verify-packages: its inventory rules reject what must never ship (no build here).

The whole script (build, install, stdio handshake) runs in CI; these tests feed its inventory
check small hand-made wheels and sdists, so a loosened rule fails fast.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import sys
import tarfile
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader(
        "verify_packages", str(ROOT / "scripts" / "verify-packages")
    )
    spec = importlib.util.spec_from_loader("verify_packages", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "verify_packages", module)  # dataclasses look it up
    loader.exec_module(module)
    module.failures.clear()
    return module


def _wheel(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return path


def _sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return path


CLEAN_WHEEL = {
    "ds4_lsp/__init__.py": b"",
    "ds4_lsp-1.2.3.dist-info/licenses/LICENSE": b"MIT",
}


def test_a_clean_wheel_passes(script: ModuleType, tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "ds4_lsp-1.2.3-py3-none-any.whl", CLEAN_WHEEL)
    script.check_inventory(wheel, script.PROJECTS[1], "1.2.3")
    assert script.failures == []


@pytest.mark.parametrize(
    "name",
    [
        "tests/test_x.py",
        "ds4_lsp/test_thing.py",
        "ds4_lsp/conftest.py",
        "ds4_lsp/context.db",
        "ds4_lsp/context.db-wal",
        "ds4_lsp/session.jsonl",
        ".ds4/memory.json",
        "ds4_lsp/.env",
        "ds4_lsp/server.pem",
        "ds4_lsp/__pycache__/x.cpython-311.pyc",
    ],
)
def test_a_forbidden_file_fails_the_wheel(script: ModuleType, tmp_path: Path, name: str) -> None:
    wheel = _wheel(tmp_path / "ds4_lsp-1.2.3-py3-none-any.whl", {**CLEAN_WHEEL, name: b"x"})
    script.check_inventory(wheel, script.PROJECTS[1], "1.2.3")
    assert script.failures == [
        "ds4_lsp-1.2.3-py3-none-any.whl: no tests, databases, session data or credentials"
    ]


def test_a_key_in_the_text_fails(script: ModuleType, tmp_path: Path) -> None:
    key = b"-----BEGIN RSA " + b"PRIVATE KEY-----\nabc\n"
    wheel = _wheel(
        tmp_path / "ds4_lsp-1.2.3-py3-none-any.whl", {**CLEAN_WHEEL, "ds4_lsp/k.py": key}
    )
    script.check_inventory(wheel, script.PROJECTS[1], "1.2.3")
    assert script.failures == ["ds4_lsp-1.2.3-py3-none-any.whl: no credential markers in the text"]


def test_an_sdist_without_a_license_and_with_another_version_fails(
    script: ModuleType, tmp_path: Path
) -> None:
    sdist = _sdist(tmp_path / "ds4_lsp-1.2.4.tar.gz", {"ds4_lsp-1.2.4/ds4_lsp/__init__.py": b""})
    script.check_inventory(sdist, script.PROJECTS[1], "1.2.3")
    assert script.failures == [
        "ds4_lsp-1.2.4.tar.gz: carries version 1.2.3 in its name",
        "ds4_lsp-1.2.4.tar.gz: has a LICENSE",
    ]


def test_the_sdist_folder_name_is_not_judged(script: ModuleType, tmp_path: Path) -> None:
    """`tests` in the sdist's own folder name would not be a test folder: only inner paths count."""
    sdist = _sdist(
        tmp_path / "ds4_lsp-1.2.3.tar.gz",
        {"ds4_lsp-1.2.3/LICENSE": b"MIT", "ds4_lsp-1.2.3/ds4_lsp/__init__.py": b""},
    )
    script.check_inventory(sdist, script.PROJECTS[1], "1.2.3")
    assert script.failures == []


def test_too_many_files_fail(script: ModuleType, tmp_path: Path) -> None:
    bound = script.PROJECTS[1].max_files
    many = {f"ds4_lsp/m{i}.py": b"" for i in range(bound)}
    wheel = _wheel(tmp_path / "ds4_lsp-1.2.3-py3-none-any.whl", {**CLEAN_WHEEL, **many})
    script.check_inventory(wheel, script.PROJECTS[1], "1.2.3")
    assert len(script.failures) == 1 and "files" in script.failures[0]


def test_an_lsp_frame_round_trips(script: ModuleType) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"é": 1}}
    assert script.read_frame(io.BytesIO(script.frame(message))) == message
    assert script.read_frame(io.BytesIO(b"")) is None
