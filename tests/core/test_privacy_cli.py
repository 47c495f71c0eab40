"""Privacy through the `ds4` command line, as a user runs it (a real `python -m ds4_core.cli`
process): for a remote model no secret value and no withheld text occurs anywhere in the
output of `ds4 plan`, `ds4 retrieve` or `ds4 manifest` (JSON and text reports); for a local
model everything allowed is there; `ds4 privacy` explains a destination."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from privacy_session import ALLOWED, VALUES, WITHHELD, write_privacy_project, write_privacy_session

REQUEST = "what is the launch code of the vault, and the deploy credentials?"
OUTPUT_LIMIT = ["--set", 'modelAwareness.overrides={"openai/*": {"maxOutputTokens": 1000}}']


def leaks(text: str) -> list[str]:
    """Secret values and withheld words found in `text`."""
    return [value[:12] + "..." for value in VALUES if value in text] + [
        word for word in WITHHELD if word in text
    ]


@pytest.fixture
def ds4(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {**os.environ, "DS4_DB": str(tmp_path / "db" / "context.db"), "COLUMNS": "100"}

    def run(*argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ds4_core.cli", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    return run


@pytest.fixture
def paths(tmp_path: Path) -> tuple[Path, Path]:
    session = tmp_path / "privacy.jsonl"
    write_privacy_session(session)
    return session, write_privacy_project(tmp_path / "project")


def test_nothing_withheld_reaches_the_output_for_a_remote_model(ds4, paths) -> None:  # type: ignore[no-untyped-def]
    session, project = paths
    common = ["--session", str(session), "--workspace", str(project), "--trust"]
    for window in ("200000", "5000"):
        for json_flag in ([], ["--json"]):
            out = ds4(
                *OUTPUT_LIMIT, "plan", *common, "--model", "openai/gpt-4o",
                "--context-window", window, *json_flag, REQUEST,
            )  # fmt: skip
            assert leaks(out) == [], (window, json_flag)
    planned = json.loads(
        ds4(
            *OUTPUT_LIMIT,
            "plan",
            *common,
            "--model",
            "openai/gpt-4o",
            "--context-window",
            "5000",
            "--json",
            REQUEST,
        )  # fmt: skip
    )
    assert planned["privacy"]["excluded"] == {"local-only": 1}  # the project file, left out
    for view in (["--view", "full"], ["--view", "full", "--json"]):
        assert leaks(ds4("manifest", planned["manifestId"], *view)) == []
    for json_flag in ([], ["--json"]):
        out = ds4(
            "retrieve", *common, "--model", "openai/gpt-4o", *json_flag,
            "launch code of the vault and the budget",
        )  # fmt: skip
        assert leaks(out) == []


def test_a_local_model_gets_everything_allowed(ds4, paths) -> None:  # type: ignore[no-untyped-def]
    session, _ = paths
    planned = json.loads(
        ds4(
            "plan",
            "--session",
            str(session),
            "--model",
            "ollama/llama3",
            "--context-window",
            "200000",
            "--json",
            REQUEST,
        )  # fmt: skip
    )
    sent = json.dumps(planned["messages"], ensure_ascii=False)
    assert [v[:12] for v in VALUES if v not in sent] == []
    assert [w for w in (*WITHHELD, *ALLOWED) if w not in sent] == ["projectword8484"]
    assert planned["privacy"]["destination"]["kind"] == "local"


def test_privacy_off_sends_markers_and_secrets_as_written(ds4, paths) -> None:  # type: ignore[no-untyped-def]
    session, _ = paths
    planned = json.loads(
        ds4(
            "--set",
            "privacy.enabled=false",
            "plan",
            "--session",
            str(session),
            "--model",
            "openai/gpt-4o",
            "--context-window",
            "200000",
            "--json",
            REQUEST,
        )  # fmt: skip
    )
    sent = json.dumps(planned["messages"], ensure_ascii=False)
    assert "[ds4:local-only]vaultword4242" in sent and VALUES[0] in sent
    assert planned["privacy"]["enabled"] is False


def test_ds4_privacy_explains_a_destination(ds4) -> None:  # type: ignore[no-untyped-def]
    text = ds4(
        "--set", 'privacy.remoteProviders={"openrouter": ["normal"]}', "privacy", "--model",
        "openrouter/any",
    )  # fmt: skip
    assert "openrouter is remote" in text and "privacy.remoteProviders.openrouter" in text
    answer = json.loads(ds4("privacy", "--model", "lmstudio/qwen", "--json"))
    assert answer["kind"] == "local" and answer["withheld"] == []
    assert json.loads(ds4("privacy", "--json"))["provider"] is None
