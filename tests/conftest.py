"""Shared pytest fixtures: the real Pi session files bundled in `tests/fixtures/pi-sessions/`
(copies of the project's shared fixtures; origins and licenses in the README there).

Treat the fixture directory as read-only; tests that append to a session must work on a copy
(`pi_session_copy`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

PI_SESSIONS_DIR = Path(__file__).resolve().parent / "fixtures" / "pi-sessions"


@pytest.fixture(scope="session")
def pi_sessions_dir() -> Path:
    """Directory holding the real Pi session fixtures (docs/reference.md §P10); read-only.

    Fails (never skips) when they are missing: a suite that silently skips its real-data tests
    would pass without testing anything that matters.
    """
    assert PI_SESSIONS_DIR.is_dir(), f"Pi session fixtures are missing: {PI_SESSIONS_DIR}"
    return PI_SESSIONS_DIR


@pytest.fixture
def pi_session_copy(pi_sessions_dir: Path, tmp_path: Path) -> Callable[[str], Path]:
    """Factory: copy the named fixture into `tmp_path` (writable) and return the copy's path."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copyfile(pi_sessions_dir / name, target)
        target.chmod(0o644)
        return target

    return copy
