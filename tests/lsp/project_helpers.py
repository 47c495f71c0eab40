"""Helpers for the project-knowledge end-to-end tests: a project folder, a recording `git`,
a client that records `ds4/indexUpdated` and registrations, and bounded waits."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsp_helpers import TIMEOUT_S, Servers, plain, request
from lsprotocol import types
from pytest_lsp import LanguageClient

ENCODINGS = {"visual-studio-code": "utf-16", "neovim": "utf-8"}
"""The position encoding pygls negotiates with each captured client."""

INDEX_UPDATED = "ds4/indexUpdated"

FAKE_GIT = """#!/bin/sh
printf '%s\\n' "$*" >> '{log}'
exec '{real}' "$@"
"""
"""A `git` that appends its arguments to a log, then runs the real git."""


def units(text: str, encoding: str) -> int:
    """Length of `text` in the client's position units."""
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def recording_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """Server environment with a `git` first on PATH that logs every invocation, and the
    log's path (absent until git is first run)."""
    real = shutil.which("git")
    assert real, "these tests need git"
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "git-invocations.log"
    script = bin_dir / "git"
    script.write_text(FAKE_GIT.format(log=log, real=real))
    script.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}, log


def git_commit_all(root: Path) -> None:
    """Make `root` a git repository with everything committed (runs the real git)."""
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env)


def project_rows(database_path: Path) -> dict[str, int]:
    """Row counts of the project tables (0 for a table that does not exist)."""
    counts = {}
    with sqlite3.connect(database_path) as conn:
        for table in ("project_states", "project_files", "project_snippets"):
            try:
                (counts[table],) = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            except sqlite3.OperationalError:
                counts[table] = 0
    return counts


class ProjectClient:
    """A started server's client plus what it recorded: every `ds4/indexUpdated` (as plain
    JSON) and every `client/registerCapability` registration."""

    def __init__(self) -> None:
        self.client: LanguageClient | None = None
        self.index_updates: list[dict[str, Any]] = []
        self.registrations: list[types.Registration] = []
        self._arrived = asyncio.Event()

    def features(self) -> dict[str, Callable[..., Any]]:
        """Client handlers to pass to `Servers.start(client_features=...)`."""

        def index_updated(params: Any) -> None:
            self.index_updates.append(plain(params))
            self._arrived.set()

        def register_capability(params: types.RegistrationParams) -> None:
            self.registrations.extend(params.registrations)

        return {INDEX_UPDATED: index_updated, types.CLIENT_REGISTER_CAPABILITY: register_capability}

    async def wait_index(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first `ds4/indexUpdated` (received so far or next) that satisfies `predicate`."""

        async def first() -> dict[str, Any]:
            while True:
                for update in self.index_updates:
                    if predicate(update):
                        return update
                self._arrived.clear()
                await self._arrived.wait()

        return await asyncio.wait_for(first(), TIMEOUT_S)

    @property
    def lsp(self) -> LanguageClient:
        assert self.client is not None
        return self.client


async def start_project_client(
    servers: Servers, *, trusted: bool, env: dict[str, str] | None = None
) -> ProjectClient:
    """A server over `servers.workspace` with `initializationOptions.trusted = trusted`."""
    recorder = ProjectClient()
    recorder.client = await servers.start(
        initialization_options={"trusted": trusted},
        env=env,
        client_features=recorder.features(),
    )
    return recorder


async def wait_diagnostics(
    client: LanguageClient, uri: str, predicate: Callable[[Sequence[types.Diagnostic]], bool]
) -> Sequence[types.Diagnostic]:
    """The diagnostics of `uri` once `predicate` holds for them (checked at each publish)."""

    async def settle() -> Sequence[types.Diagnostic]:
        while not predicate(client.diagnostics.get(uri, [])):
            await client.protocol.wait_for_notification_async(
                types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
            )
        return client.diagnostics.get(uri, [])

    return await asyncio.wait_for(settle(), TIMEOUT_S)


async def retrieve_project(client: LanguageClient, query: str) -> dict[str, Any]:
    """`ds4/retrieve` over the project scope only."""
    return await request(client, "ds4/retrieve", {"query": query, "scopes": ["project"]})


def hits_in(result: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The project hits of `result` for `path` (relative to the root)."""
    return [hit for hit in result["project"] if hit["path"] == path]


def open_document(client: LanguageClient, path: Path, text: str, version: int = 1) -> str:
    """`textDocument/didOpen` for `path` holding `text`; returns its URI."""
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="plaintext", version=version, text=text
            )
        )
    )
    return uri


def change_document(
    client: LanguageClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    """One incremental `textDocument/didChange` (positions in client units)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(*start), types.Position(*end)), text=text
                )
            ],
        )
    )
