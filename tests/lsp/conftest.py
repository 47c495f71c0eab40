"""End-to-end fixtures: a real `python -m ds4_lsp` over stdio, driven by pytest-lsp.

Every test gets its own server process and its own database (`DS4_DB` in a temp dir), and
runs twice: with VS Code's captured client capabilities (UTF-16 positions) and with Neovim's
(UTF-8). Waits are bounded with `asyncio.wait_for`; nothing sleeps.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio
from lsp_helpers import LARGE_SESSION, Servers
from pytest_lsp import LanguageClient

from ds4_core.engine import ContextEngine

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
def indexed_sessions(
    pi_session_copy: Callable[[str], Path], database_path: Path, tmp_path: Path
) -> list[Path]:
    """20 copies of the large session, each with its own session id, already indexed in
    `database_path` (in this process, before any server starts): a rebuild that takes a while.
    """
    header, _, body = pi_session_copy(LARGE_SESSION).read_bytes().partition(b"\n")
    engine = ContextEngine(database_path=database_path)
    paths = []
    for number in range(20):
        session = {**json.loads(header), "id": str(uuid.UUID(int=number + 1))}
        path = tmp_path / "many" / f"session-{number:02d}.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(json.dumps(session).encode() + b"\n" + body)
        engine.index_session(path)
        paths.append(path)
    engine.close()
    return paths


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


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """An empty project folder (the workspace of `project_servers`), apart from the test's
    database and session copies."""
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest_asyncio.fixture
async def project_servers(
    client_name: str, project_dir: Path, database_path: Path
) -> AsyncIterator[Servers]:
    """Like `servers`, with `project_dir` as the workspace folder."""
    started = Servers(client_name, project_dir, database_path)
    yield started
    await started.stop_all()
