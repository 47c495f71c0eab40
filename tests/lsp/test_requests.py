"""ds4/plan, ds4/retrieve and ds4/manifest on a real Pi session, end to end over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lsp_helpers import SESSION_ID, plan_params, request
from pytest_lsp import LanguageClient


async def test_plan_on_a_real_session_is_managed_and_fits_the_budget(
    client: LanguageClient, session_file: Path
) -> None:
    """A plan of a 1 MB session is managed, ends with the new request, fits the hard limit,
    and is recorded under a manifest id; the client log gets a one-line summary."""
    text = "which selector files did we port to the theme system?"
    result = await request(client, "ds4/plan", plan_params(session_file, text))

    assert result["mode"] == "managed"
    assert result["manifestId"]
    assert result["manifestStored"] is True
    last = result["messages"][-1]
    assert last["role"] == "user" and text in json.dumps(last)
    assert 0 < result["estimatedTokens"] <= result["budget"]["hardInputLimit"]
    model = result["model"]
    assert (model["provider"], model["id"]) == ("anthropic", "claude-sonnet-4-5")
    assert (model["contextWindow"], model["source"]) == (200000, "request")
    assert result["session"]["id"] == SESSION_ID
    assert "fallbackReason" not in result
    assert result["overHardLimit"] is False
    assert result["estimatorVersion"] == "chars-v2"
    assert 0 < result["currentTurnTokens"] <= result["hardInputLimit"]
    summaries = [m.message for m in client.log_messages if m.message.startswith("ds4/plan:")]
    assert summaries and f"manifest={result['manifestId']}" in summaries[-1]


async def test_plan_with_caller_messages_and_no_session_plans_those_messages(
    client: LanguageClient,
) -> None:
    """Without a session the caller's messages are planned as given (ephemeral manifest)."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "hello"}], "timestamp": 1},
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}], "timestamp": 2},
    ]
    result = await request(
        client,
        "ds4/plan",
        {"messages": messages, "request": "and now?", "model": {"contextWindow": 32000}},
    )
    assert result["mode"] in {"managed", "fallback"}
    assert result["messages"][: len(messages)] == messages
    assert result["manifestStored"] is False


async def test_a_request_over_the_hard_input_limit_is_flagged_with_its_numbers(
    client: LanguageClient, session_file: Path
) -> None:
    """A request no plan can fit falls back and says so in fields, not only in prose."""
    params = {**plan_params(session_file, "word " * 200_000), "fixedTokens": 1_000}
    result = await request(client, "ds4/plan", params)

    assert result["mode"] == "fallback"
    assert result["overHardLimit"] is True
    assert result["hardInputLimit"] == result["budget"]["hardInputLimit"]
    assert result["fixedTokens"] == 1_000
    assert result["currentTurnTokens"] >= 250_000 > result["hardInputLimit"]
    assert "current turn" in result["fallbackReason"]


async def test_retrieve_finds_older_history_of_the_session(
    client: LanguageClient, session_file: Path
) -> None:
    """A query about early work returns ranked history hits from that session."""
    result = await request(
        client,
        "ds4/retrieve",
        {
            "session": {"file": str(session_file)},
            "query": "port user-message-selector.ts DynamicBorder to the theme",
            "maxResults": 5,
        },
    )
    assert result["status"] == "ok"
    assert 1 <= len(result["history"]) <= 5
    for hit in result["history"]:
        assert hit["entryKey"].startswith(f"{SESSION_ID}:")
        assert hit["excerpt"] and hit["tokens"] > 0 and hit["reason"]
    scores = [hit["score"] for hit in result["history"]]
    assert scores == sorted(scores, reverse=True)
    assert result["stats"]["candidates"] >= len(result["history"])
    assert result["project"] == []


async def test_retrieve_without_query_uses_the_last_user_message(
    client: LanguageClient, session_file: Path
) -> None:
    """With no `query`, the last user message of the active branch is the query."""
    result = await request(client, "ds4/retrieve", {"session": {"file": str(session_file)}})
    assert result["status"] in {"ok", "no-query"}
    assert result["query"]


async def test_manifest_is_returned_by_id_and_as_the_latest_of_its_session(
    client: LanguageClient, session_file: Path
) -> None:
    """The manifest of a plan comes back by id and by {session, latest}, metadata only."""
    marker = "manifestmarkerxq"
    planned = await request(
        client, "ds4/plan", plan_params(session_file, f"explain {marker} please")
    )

    by_id = await request(client, "ds4/manifest", {"id": planned["manifestId"]})
    latest = await request(
        client, "ds4/manifest", {"session": {"file": str(session_file)}, "latest": True}
    )

    assert by_id["id"] == latest["id"] == planned["manifestId"]
    assert by_id["sessionId"] == SESSION_ID
    assert by_id["estimatedTokens"] == planned["estimatedTokens"]
    assert marker not in json.dumps(by_id)  # metadata only, never content
    full = await request(client, "ds4/manifest", {"id": planned["manifestId"], "view": "full"})
    assert full["id"] == planned["manifestId"]


async def test_retrieve_serves_text_rewritten_in_place_with_size_and_mtime_kept(
    client: LanguageClient, session_file: Path
) -> None:
    """Rewrite an entry 34 KB into the 974 KB session (same size, mtime restored to the ns):
    the next request re-indexes it and finds the new text."""
    query = {"session": {"file": str(session_file)}, "query": "zqxrewrittenword", "maxResults": 3}
    first = await request(client, "ds4/retrieve", query)
    assert first["history"] == []
    before = session_file.stat()
    data = session_file.read_bytes()
    at = data.index(b'"text":"', 34_000) + len(b'"text":"')
    new = b" zqxrewrittenword "
    assert b"\\" not in data[at : at + len(new)] and b'"' not in data[at : at + len(new)]
    with open(session_file, "r+b") as handle:
        handle.seek(at)
        handle.write(new)
    os.utime(session_file, ns=(before.st_atime_ns, before.st_mtime_ns))
    again = await request(client, "ds4/retrieve", query)
    assert any("zqxrewrittenword" in hit["excerpt"] for hit in again["history"])


async def test_plan_and_retrieve_warn_when_another_file_carries_the_session_id(
    client: LanguageClient, session_file: Path, tmp_path: Path
) -> None:
    """A copied session file (same session id) shares one index with the original: ds4/plan
    and ds4/retrieve on either copy say so in `warnings`, naming the other file, as health
    does."""
    copy = tmp_path / "elsewhere" / session_file.name
    copy.parent.mkdir()
    copy.write_bytes(session_file.read_bytes())
    await request(client, "ds4/retrieve", {"session": {"file": str(copy)}, "query": "theme"})

    planned = await request(client, "ds4/plan", plan_params(session_file))
    (warning,) = [w for w in planned["warnings"] if "is also the id of" in w]
    assert str(copy) in warning
    found = await request(client, "ds4/retrieve", {"session": {"file": str(session_file)}})
    assert any(str(copy) in w for w in found["warnings"] if "is also the id of" in w)
