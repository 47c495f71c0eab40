"""scripts/verify-packages: its inventory rules reject what must never ship (no build here).

The whole script (build, install, stdio handshake) runs in CI; these tests feed its inventory
check small hand-made wheels and sdists, so a loosened rule fails fast, check in a small git
repository that the build takes committed files only, and run `main` with a failing build.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import subprocess
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
    "ds4_lsp/py.typed": b"",
    "ds4_lsp-1.2.3.dist-info/licenses/LICENSE": b"MIT",
}


def test_a_clean_wheel_passes_and_lists_every_member(script: ModuleType, tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path / "ds4_lsp-1.2.3-py3-none-any.whl", {**CLEAN_WHEEL, "ds4_lsp/a.py": b"ab"}
    )
    inventory = script.check_inventory(wheel, script.PROJECTS[1], "1.2.3")
    assert script.failures == []
    assert inventory == [
        "ds4_lsp-1.2.3-py3-none-any.whl\t0\tds4_lsp/__init__.py",
        "ds4_lsp-1.2.3-py3-none-any.whl\t0\tds4_lsp/py.typed",
        "ds4_lsp-1.2.3-py3-none-any.whl\t3\tds4_lsp-1.2.3.dist-info/licenses/LICENSE",
        "ds4_lsp-1.2.3-py3-none-any.whl\t2\tds4_lsp/a.py",
    ]


@pytest.mark.parametrize(("project", "marker"), [(0, "ds4_core/py.typed"), (1, "ds4_lsp/py.typed")])
def test_a_package_without_its_py_typed_marker_fails(
    script: ModuleType, tmp_path: Path, project: int, marker: str
) -> None:
    name = script.PROJECTS[project].dist_name
    files = {f"{name}-1.2.3/LICENSE": b"MIT", f"{name}-1.2.3/{marker}x": b""}
    script.check_inventory(
        _sdist(tmp_path / f"{name}-1.2.3.tar.gz", files), script.PROJECTS[project], "1.2.3"
    )
    assert script.failures == [f"{name}-1.2.3.tar.gz: has {marker}"]


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
    sdist = _sdist(
        tmp_path / "ds4_lsp-1.2.4.tar.gz",
        {"ds4_lsp-1.2.4/ds4_lsp/__init__.py": b"", "ds4_lsp-1.2.4/ds4_lsp/py.typed": b""},
    )
    script.check_inventory(sdist, script.PROJECTS[1], "1.2.3")
    assert script.failures == [
        "ds4_lsp-1.2.4.tar.gz: carries version 1.2.3 in its name",
        "ds4_lsp-1.2.4.tar.gz: has a LICENSE",
    ]


def test_the_sdist_folder_name_is_not_judged(script: ModuleType, tmp_path: Path) -> None:
    """`tests` in the sdist's own folder name would not be a test folder: only inner paths count."""
    sdist = _sdist(
        tmp_path / "ds4_lsp-1.2.3.tar.gz",
        {
            "ds4_lsp-1.2.3/LICENSE": b"MIT",
            "ds4_lsp-1.2.3/ds4_lsp/__init__.py": b"",
            "ds4_lsp-1.2.3/ds4_lsp/py.typed": b"",
        },
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


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "-c",
            "commit.gpgsign=false",
            *args,
        ],
        check=True,
        capture_output=True,
    )


def test_the_build_takes_committed_files_and_names_the_others(
    script: ModuleType, tmp_path: Path
) -> None:
    """A file planted in a package folder is not built unless committed; a committed one is
    built, and then the inventory check is what stops it (the tests above)."""
    repo = tmp_path / "repo"
    package = repo / "core" / "ds4_core"
    package.mkdir(parents=True)
    (package / "engine.py").write_text("committed\n")
    (package / "planted_test.py").write_text("committed too\n")
    (repo / "notes.md").write_text("not packaged\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    (package / "engine.py").write_text("changed\n")
    (package / "scratch_dump.py").write_text("untracked\n")
    (package / "tests").mkdir()
    (package / "tests" / "test_x.py").write_text("untracked\n")
    (repo / "notes.md").write_text("changed, not packaged\n")

    assert script.is_git_checkout(repo) and not script.is_git_checkout(tmp_path)
    commit = script.export_commit(repo, tmp_path / "source")
    exported = sorted(
        p.relative_to(tmp_path / "source").as_posix()
        for p in (tmp_path / "source").rglob("*")
        if p.is_file()
    )
    assert exported == ["core/ds4_core/engine.py", "core/ds4_core/planted_test.py", "notes.md"]
    assert (tmp_path / "source/core/ds4_core/engine.py").read_text() == "committed\n"
    assert len(commit) == 40
    assert sorted(script.uncommitted(repo, script.PACKAGED_PATHS)) == [
        " M core/ds4_core/engine.py",
        "?? core/ds4_core/scratch_dump.py",
        "?? core/ds4_core/tests/test_x.py",
    ]


@pytest.mark.parametrize("keep", [False, True])
def test_a_failed_build_names_the_log_only_when_it_is_kept(
    script: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    keep: bool,
) -> None:
    temp = tmp_path / "pack"
    temp.mkdir()
    monkeypatch.setattr(script.tempfile, "mkdtemp", lambda prefix: str(temp))
    monkeypatch.setattr(script, "prepare_sources", lambda temp: ROOT)
    monkeypatch.setenv("DS4_KEEP_PACK_TMP", "1" if keep else "0")

    def failing_run(
        cmd: list[str], cwd: Path, env: dict[str, str], log: Path
    ) -> subprocess.CompletedProcess[str]:
        with log.open("a", encoding="utf-8") as out:
            out.write("SyntaxError: a broken setup.py\n")
        script.failed_commands.append(" ".join(cmd))
        return subprocess.CompletedProcess(cmd, 1, "", "")

    monkeypatch.setattr(script, "run", failing_run)
    assert script.main() == 1
    out = capsys.readouterr().out
    log = temp / "commands.log"
    assert temp.exists() is keep
    if keep:
        assert f"[FAIL] build sdist and wheel of ds4_lsp: see {log}" in out
    else:
        assert "commands.log" not in out
        assert (
            "[FAIL] build sdist and wheel of ds4_lsp: see the end of the command log below" in out
        )
        assert "SyntaxError: a broken setup.py" in out
