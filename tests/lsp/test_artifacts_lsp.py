"""Artifacts over LSP, end to end: a `ds4/plan` of a session whose current turn holds a 2 MB
tool result answers it condensed (the plan fits), stores it beside the database named by
`DS4_DB`, names it in the manifest, and leaves the session file as it was; observer mode
sends it whole. A bad `artifacts.*` setting is refused naming the rule and the server keeps
serving."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from lsp_helpers import Servers, execute, request
from session_files import SessionWriter

from ds4_core.artifacts.condense import END_LINE, tool_result_text
from ds4_core.artifacts.store import ArtifactStore

BIG = "".join(f"tests/test_{i % 50}.py::case_{i} FAILED zqxlsp{i}\n" for i in range(50000))
MODEL = {"provider": "acme", "id": "alpha", "contextWindow": 128000}


def session_with_big_result(path: Path) -> SessionWriter:
    writer = SessionWriter.with_turns(path, 2)
    writer.user("Run the whole test suite.")
    writer.assistant("Running.", [("t1", "bash", {"command": "pytest"})])
    writer.tool_result("t1", "bash", BIG, is_error=True)
    return writer


def results(plan: dict[str, Any]) -> list[str]:
    return [tool_result_text(m) for m in plan["messages"] if m.get("role") == "toolResult"]


async def test_a_huge_current_result_is_sent_condensed_and_stored(
    servers: Servers, tmp_path: Path, database_path: Path
) -> None:
    writer = session_with_big_result(tmp_path / "s.jsonl")
    before = writer.path.read_bytes()
    client = await servers.start()
    params = {"session": {"file": str(writer.path)}, "request": "Why did it fail?", "model": MODEL}
    plan = await request(client, "ds4/plan", params)
    assert plan["mode"] == "managed"
    condensed = [text for text in results(plan) if END_LINE in text]
    assert len(condensed) == 1 and "zqxlsp49999" in condensed[0]  # the tail excerpt
    artifact_id = hashlib.sha256(BIG.encode()).hexdigest()
    assert f"artifact://sha256/{artifact_id}" in condensed[0]
    assert ArtifactStore(database_path.parent / "artifacts").read(artifact_id) == BIG.encode()
    assert writer.path.read_bytes() == before
    manifest = await request(client, "ds4/manifest", {"id": plan["manifestId"], "view": "full"})
    assert [a["artifactId"] for a in manifest["artifacts"]] == [artifact_id]
    observed = await request(client, "ds4/plan", {**params, "mode": "observer"})
    assert BIG in results(observed)


async def test_a_bad_artifacts_setting_is_refused_naming_the_rule(servers: Servers) -> None:
    client = await servers.start(
        initialization_options={"settings": {"artifacts": {"excerptChars": 20000}}}
    )
    health = await execute(client, "ds4.health")
    assert any(
        "excerptChars must be <= maxInlineToolResultChars" in w for w in health["configWarnings"]
    )
    assert (await execute(client, "ds4.health"))["configWarnings"] == health["configWarnings"]
