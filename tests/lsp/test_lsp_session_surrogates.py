"""ds4/plan and ds4/retrieve, end to end over stdio, on a session whose ids, references,
timestamps and header fields hold lone UTF-16 surrogates (JSON `\\ud800` escapes in the file).

Every request on such a session used to fail with -32603 (UnicodeEncodeError from SQLite).
"""

from __future__ import annotations

import json
from pathlib import Path

from lsp_helpers import request
from pytest_lsp import LanguageClient
from session_files import hostile_metadata_session

MODEL = {"provider": "anthropic", "id": "claude-sonnet-4-5", "contextWindow": 200000}


async def test_plan_and_retrieve_answer_normally(client: LanguageClient, tmp_path: Path) -> None:
    session = hostile_metadata_session(tmp_path / "surrogates.jsonl")

    plan = await request(
        client,
        "ds4/plan",
        {"session": {"file": str(session)}, "request": "and the tokenizer?", "model": MODEL},
    )
    assert plan["mode"] == "managed" and plan["manifestStored"] is True
    assert plan["session"] == {"id": "s\\ud800", "file": str(session), "leafId": "u7"}
    roles = [m["role"] for m in plan["messages"]]
    assert roles == ["compactionSummary", "user", "assistant", "user", "user"]

    # The first turn lies before the compaction's firstKeptEntryId: history finds it, under
    # the escaped ids a client can send back as leafId.
    found = await request(
        client,
        "ds4/retrieve",
        {"session": {"file": str(session)}, "query": "zanzibar parser", "maxResults": 5},
    )
    assert found["status"] == "ok"
    assert {hit["entryId"] for hit in found["history"]} == {"r\\ud800", "a\\udc01"}
    assert all(hit["entryKey"].startswith("s\\ud800:") for hit in found["history"])

    branch = await request(
        client,
        "ds4/plan",
        {
            "session": {"file": str(session), "leafId": "a\\udc01"},
            "request": "where was it?",
            "model": MODEL,
        },
    )
    assert branch["session"]["leafId"] == "a\\udc01"
    assert "zanzibar" in json.dumps(branch["messages"])
    assert not [m for m in client.log_messages if "could not be updated" in m.message]
