"""`ds4 artifacts search` and `ds4 artifacts gc` (core/ds4_core/cli/artifact_commands.py):
the JSON is the engine's result, the text report escapes what it quotes, a bad option is a
usage error naming it."""

from __future__ import annotations

import hashlib
import io
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_cli import Run, ds4  # noqa: F401 - the fixture
from test_engine_artifacts import BIG, write_session

from ds4_core import cli
from ds4_core.artifacts.store import ArtifactStore

BIG_ID = hashlib.sha256(BIG.encode()).hexdigest()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "context.db"


def test_search_and_gc_from_the_command_line(
    ds4: Callable[..., Run],  # noqa: F811
    db: Path,
    tmp_path: Path,
) -> None:
    session = tmp_path / "s.jsonl"
    write_session(session)
    assert ds4("plan", "--session", str(session), "what failed?").code == 0
    found = ds4("artifacts", "search", "--session", str(session), "ZQXBIG2999", "--json")
    assert found.code == 0, found.err
    result = found.json()
    assert result["searched"] == [{"artifactId": BIG_ID, "status": "ok"}]
    assert [(m["sourceId"], m["line"]) for m in result["matches"]] == [("e3", 3000)]
    text = ds4("artifacts", "search", "--artifact", BIG_ID, "--max-matches", "2", "zqxbig1")
    assert text.code == 0
    assert text.out.startswith("ds4 artifacts search: 2 match(es) in 1 artifact(s) (more exist")
    assert f"{BIG_ID[:12]} entry - line 2 column" in text.out
    piped = ds4(
        "artifacts", "search", "--artifact", BIG_ID, "-", "--json", stdin=io.StringIO("zqxbig7\n")
    )
    assert piped.json()["query"] == "zqxbig7"

    store = ArtifactStore(db.parent / "artifacts")
    orphan = store.put(b"\x1b[31m unreferenced").artifact_id
    old = time.time() - 7200
    os.utime(store.path_for(orphan), (old, old))
    dry = ds4("artifacts", "gc", "--dry-run", "--json")
    assert dry.json() == {
        "removed": 1,
        "removedBytes": 18,
        "kept": 1,
        "keptBytes": len(BIG),
        "dryRun": True,
        "young": 0,
    }
    done = ds4("artifacts", "gc")
    assert done.code == 0 and done.out.startswith("ds4 artifacts gc: removed 1 file(s), 18 bytes")
    assert store.artifact_ids() == [BIG_ID]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "--artifact", "nothex", "x"], "--artifact: expected 64 lower-case hex"),
        (["search", "--artifact", "a" * 64, "--max-matches", "0", "x"], "--max-matches:"),
        (["search", "--session", "/no/such.jsonl", "x"], "--session:"),
        (["search", "--artifact", "a" * 64, "q" * 1001], "QUERY: expected a string"),
        (["search", "--artifact", "a" * 64, "--leaf", "e1", "x"], "--leaf: names a branch"),
    ],
)
def test_bad_arguments_are_usage_errors_naming_the_option(
    ds4: Callable[..., Run],  # noqa: F811
    argv: list[str],
    message: str,
) -> None:
    run = ds4("artifacts", *argv)
    assert run.code == cli.EXIT_USAGE and message in run.err, run.err


def test_search_needs_a_target(ds4: Callable[..., Run]) -> None:  # noqa: F811
    run = ds4("artifacts", "search", "x")
    assert run.code == cli.EXIT_USAGE and "--artifact" in run.err


def test_gc_over_an_index_without_sessions_needs_force(
    ds4: Callable[..., Run],  # noqa: F811
    db: Path,
) -> None:
    store = ArtifactStore(db.parent / "artifacts")
    orphan = store.put(b"an output of a session the index lost").artifact_id
    old = time.time() - 7200
    os.utime(store.path_for(orphan), (old, old))
    refused = ds4("artifacts", "gc")
    assert refused.code == cli.EXIT_USAGE and refused.err.count("--force: ") == 1, refused.err
    assert "index holds no session" in refused.err and store.artifact_ids() == [orphan]
    done = ds4("artifacts", "gc", "--force", "--json")
    assert done.code == 0 and done.json()["removed"] == 1 and store.artifact_ids() == []
