"""Shared pytest fixtures: the real Pi session files in `shared/fixtures/pi-sessions/`.

The fixture directory is read-only; tests that append to a session must work on a copy
(`pi_session_copy`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

PI_SESSIONS_DIR = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "pi-sessions"


@pytest.fixture(scope="session")
def pi_sessions_dir() -> Path:
    """Directory holding the real Pi session fixtures (pi-session-format.md 10); read-only."""
    if not PI_SESSIONS_DIR.is_dir():
        pytest.skip(f"Pi session fixtures not found at {PI_SESSIONS_DIR}")
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
