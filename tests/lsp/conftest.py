"""End-to-end fixtures: a real `python -m ds4_lsp` over stdio, driven by pytest-lsp.

Every test gets its own server process and its own database (`DS4_DB` in a temp dir), and
runs twice: with VS Code's captured client capabilities (UTF-16 positions) and with Neovim's
(UTF-8). Waits are bounded with `asyncio.wait_for`; nothing sleeps.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import LARGE_SESSION, Servers
from pytest_lsp import LanguageClient

CLIENTS = ["visual-studio-code", "neovim"]


@pytest.fixture(params=CLIENTS)
def client_name(request: pytest.FixtureRequest) -> str:
    """The editor whose captured capabilities the test client presents."""
    return request.param


@pytest.fixture
def session_file(pi_session_copy: Callable[[str], Path]) -> Path:
    """A private copy of the real pi-mono v1 session (about 1 MB, 1018 entries)."""
    return pi_session_copy(LARGE_SESSION)


@pytest.fixture
def database_path(tmp_path: Path) -> Path:
    """Where this test's servers keep their database (passed as `DS4_DB`)."""
    return tmp_path / "db" / "ds4.db"


@pytest_asyncio.fixture
async def servers(client_name: str, tmp_path: Path, database_path: Path) -> AsyncIterator[Servers]:
    """A `Servers` for this test; whatever is still running is shut down afterwards."""
    started = Servers(client_name, tmp_path, database_path)
    yield started
    await started.stop_all()


@pytest_asyncio.fixture
async def client(servers: Servers) -> LanguageClient:
    """A server started with default options."""
    return await servers.start()
