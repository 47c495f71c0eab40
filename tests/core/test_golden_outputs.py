"""Golden outputs of `ds4 ... --json` (issue 10: recorded before the engine, CLI and LSP layers
are restructured; after it they must be identical, ids and times normalised).

One scenario, in order, on one temp database: plan (with the trusted workspace), retrieve
(history, project, both), manifest (every view, and `--latest`), compact, summaries, index,
health, rebuild. Each step records its argv, exit code, stderr and parsed stdout; the whole
recording, normalised (see `tests/golden_outputs.py` for exactly what is normalised), must
equal `tests/golden/cli.json`.

Record again (only when the change of behaviour is wanted): `DS4_UPDATE_GOLDEN=1` (see
`tests/golden_outputs.py`).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import golden_outputs as golden
import pytest

from ds4_core import cli


def record_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Run the scenario with `ds4_core.cli.run` in this process; returns the raw recording
    (step name -> {argv, exitCode, stderr, result})."""
    session, workspace, db = golden.prepare_cli(tmp_path, monkeypatch)
    steps: dict[str, Any] = {}

    def ds4(name: str, *argv: str) -> Any:
        out, err = io.StringIO(), io.StringIO()
        full = ["--db", str(db), *argv]
        code = cli.run(full, out, err)
        result = json.loads(out.getvalue()) if out.getvalue().strip() else None
        steps[name] = {"argv": full, "exitCode": code, "stderr": err.getvalue(), "result": result}
        return result

    s, ws = str(session), str(workspace)
    plan = ds4("plan", "plan", "--session", s, "--workspace", ws, "--trust", "--json", golden.QUERY)
    ds4(
        "retrieve-history", "retrieve", "--session", s, "--scope", "history", "--json", golden.QUERY
    )
    ds4(
        "retrieve-project",
        *("retrieve", "--workspace", ws, "--trust", "--scope", "project", "--json", golden.QUERY),
    )
    ds4(
        "retrieve-both",
        *("retrieve", "--session", s, "--workspace", ws, "--trust", "--json", golden.QUERY),
    )
    manifest_id = plan["manifestId"] if isinstance(plan, dict) else "missing"
    for view in golden.MANIFEST_VIEWS:
        ds4(f"manifest-{view}", "manifest", manifest_id, "--view", view, "--json")
    ds4("manifest-latest", "manifest", "--latest", "--session", s, "--json")
    ds4("compact", "compact", "--session", s, "--json")
    ds4("summaries", "summaries", "--session", s, "--json")
    ds4("index", "index", "--json", s)
    ds4("health", "health", "--json")
    ds4("rebuild", "rebuild", "--json")
    return steps


def test_cli_json_outputs_match_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.time()
    steps = record_cli(tmp_path, monkeypatch)
    plan = steps["plan"]["result"]
    hashes = {golden.prompt_hash(plan["messages"])} if isinstance(plan, dict) else set()
    normalised = golden.Normaliser(tmp_path, started, time.time(), hashes).normalise(steps)
    golden.check_golden("cli", normalised, tmp_path)
