"""Privacy end to end over stdio: for a remote destination no secret value and no withheld
text occurs anywhere in what the server answers (plan, manifest, retrieve, the summarize
prompt), searched in the serialized bytes; for a local destination everything allowed is
there, unchanged (docs/privacy.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import Servers, execute, request
from privacy_session import (
    ALLOWED,
    ESCAPED,
    VALUES,
    WITHHELD,
    write_privacy_project,
    write_privacy_session,
)
from test_compaction import OFFERS_SUMMARIZE, FakeSummarizer, answering, valid_summary

REMOTE = {"provider": "openai", "id": "gpt-4o", "contextWindow": 200000}
LOCAL = {"provider": "ollama", "id": "llama3", "contextWindow": 200000, "maxOutputTokens": 4096}
SMALL_REMOTE = {
    "provider": "openai",
    "id": "gpt-4o",
    "contextWindow": 5000,
    "maxOutputTokens": 1000,
}
REQUEST = "what is the launch code of the vault, and the deploy credentials?"


def leaks(answer: Any) -> list[str]:
    """Secret values and withheld words found in the serialized `answer`."""
    text = json.dumps(answer, ensure_ascii=False)
    return [value[:12] + "..." for value in VALUES if value in text] + [
        word for word in WITHHELD if word in text
    ]


@pytest.fixture
def session(tmp_path: Path) -> Path:
    path = tmp_path / "sessions" / "privacy.jsonl"
    path.parent.mkdir()
    write_privacy_session(path)
    return path


async def start(servers: Servers, project: Path | None = None) -> Any:
    options: dict[str, Any] = {
        "trusted": project is not None,
        "settings": {"compaction": {"keepRecentTokens": 200}},
    }
    if project is not None:
        servers.workspace = project
    return await servers.start(
        initialization_options=options,
        experimental=OFFERS_SUMMARIZE,
        client_features={"ds4/summarize": SUMMARIZER.handle},
    )


SUMMARIZER = FakeSummarizer(answering(valid_summary))


async def test_a_remote_destination_receives_no_secret_and_no_withheld_text(
    servers: Servers, session: Path, tmp_path: Path
) -> None:
    project = write_privacy_project(tmp_path / "project")
    client = await start(servers, project)
    params = {"session": {"file": str(session)}, "request": REQUEST}

    whole = await request(client, "ds4/plan", {**params, "model": REMOTE})
    assert whole["mode"] == "managed", whole.get("fallbackReason")
    assert leaks(whole) == []
    privacy = whole["privacy"]
    assert privacy["destination"] == {
        "provider": "openai",
        "kind": "remote",
        "allowed": ["normal", "internal"],
        "redactSecrets": True,
    }
    assert privacy["redacted"] >= len(VALUES)
    assert privacy["withheld"]["local-only"] >= 5 and privacy["withheld"]["sensitive"] == 1
    sent = json.dumps(whole["messages"])
    assert all(word in sent for word in ALLOWED) and "[ds4:" not in sent.replace(ESCAPED, "")
    assert json.dumps(ESCAPED)[1:-1] in sent  # an escaped marker is plain text, sent as written

    small = await request(client, "ds4/plan", {**params, "model": SMALL_REMOTE})
    assert leaks(small) == []
    for answer in (whole, small):
        manifest = await request(
            client, "ds4/manifest", {"id": answer["manifestId"], "view": "full"}
        )
        assert leaks(manifest) == [] and manifest["privacy"] == answer["privacy"]
    dropped = [
        item
        for item in (
            await request(client, "ds4/manifest", {"id": small["manifestId"], "view": "full"})
        )["excluded"]
        if item["reason"] == "excluded due to privacy policy"
    ]
    assert dropped, "history or project evidence holding local-only text is left out whole"
    assert {item["classification"] for item in dropped} <= {"sensitive", "local-only"}

    for query in (REQUEST, "launch code of the vault and the budget", "deploy credentials"):
        found = await request(
            client,
            "ds4/retrieve",
            {
                "session": {"file": str(session)},
                "query": query,
                "scopes": ["history", "project"],
                "model": {"provider": "openai"},
            },
        )
        assert leaks(found) == [], query

    compacted = await request(
        client, "ds4/compact", {"session": {"file": str(session)}, "model": {"provider": "openai"}}
    )
    assert compacted["summarizer"] == "client"
    assert SUMMARIZER.calls and leaks(SUMMARIZER.calls[-1]) == []
    assert "[DS4 local-only content excluded by privacy policy]" in SUMMARIZER.calls[-1]["prompt"]
    # the client saw `internal` text (and placeholders): its summary carries that level
    assert compacted["compaction"]["summary"].startswith("[ds4:internal]\n")


async def test_a_local_destination_receives_everything_allowed_unchanged(
    servers: Servers, session: Path
) -> None:
    client = await start(servers)
    planned = await request(
        client,
        "ds4/plan",
        {"session": {"file": str(session)}, "request": REQUEST, "model": LOCAL},
    )
    assert planned["mode"] == "managed", planned.get("fallbackReason")
    sent = json.dumps(planned["messages"], ensure_ascii=False)
    assert [v[:12] for v in VALUES if v not in sent] == []
    # every withheld word but the project file's (this server has no trusted workspace)
    expected = [word for word in (*WITHHELD, *ALLOWED) if word != "projectword8484"]
    assert [word for word in expected if word not in sent] == []
    assert planned["privacy"]["destination"]["kind"] == "local"
    assert planned["privacy"]["redacted"] == 0 and planned["privacy"]["withheld"] == {}
    assert "[ds4:" not in sent.replace(json.dumps(ESCAPED)[1:-1], "")  # markers removed


async def test_retrieve_without_a_destination_classifies_only(
    servers: Servers, session: Path
) -> None:
    client = await servers.start(
        initialization_options={"settings": {"context": {"recentTailTokens": 300}}}
    )
    found = await request(
        client,
        "ds4/retrieve",
        {"session": {"file": str(session)}, "query": "vaultword4242 launch code vault"},
    )
    assert found["privacy"]["destination"] is None
    levels = {hit["classification"] for hit in found["history"]}
    assert "local-only" in levels, found["history"]
    assert "vaultword4242" in json.dumps(found)  # for the editor's own display


async def test_the_privacy_command_explains_a_destination(servers: Servers) -> None:
    client = await servers.start()
    answer = await execute(client, "ds4.privacy", [{"model": "openai/gpt-4o"}])
    assert answer["kind"] == "remote" and answer["withheld"] == ["sensitive", "local-only"]
    assert answer["rule"] == "privacy.remoteDefaultAllowed" and "withheld" in answer["explanation"]
    local = await execute(client, "ds4.privacy", [{"provider": "Ollama"}])
    assert local["kind"] == "local" and local["redactSecrets"] is False
    unnamed = await execute(client, "ds4.privacy", [])
    assert unnamed["provider"] is None and unnamed["kind"] == "remote"
    health = await execute(client, "ds4.health")
    assert health["privacy"]["enabled"] is True
    assert health["privacy"]["localProviders"] == ["faux", "ollama", "llama-cpp", "lmstudio"]
