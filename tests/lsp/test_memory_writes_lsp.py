"""`ds4/pin`, `ds4/unpin`, `ds4/remember`, `ds4/forget` end to end: the returned entry, appended
to the real session file as a client would, is listed by `ds4/memory`; refused writes say what
to do and append nothing; bad params name the field and the server keeps serving."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lsp_helpers import request, request_error
from pytest_lsp import LanguageClient
from session_files import SessionWriter

INVALID_PARAMS = -32602
REQUEST_FAILED = -32803


def append_returned(writer: SessionWriter, result: dict[str, Any]) -> str:
    """Append the write's entry as Pi's `appendEntry(customType, data)` does."""
    assert result["appended"] is False and result["entryId"] is None
    return writer.append("custom", customType=result["customType"], data=result["data"])


async def test_written_entries_appended_by_the_client_are_listed(
    client: LanguageClient, tmp_path: Path
) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-w")
    source = writer.user("we settled on 3 retries")
    session = {"file": str(writer.path)}

    remembered = await request(
        client,
        "ds4/remember",
        {"session": session, "claim": "retries defaults to 3", "sourceEntryIds": [source]},
    )
    assert remembered["customType"] == "ds4-context-memory-v1"
    memory_id = remembered["itemId"]
    assert memory_id.startswith("mem-") and len(memory_id) == 20
    assert remembered["data"]["operation"] == "add"
    assert remembered["data"]["item"]["projectPath"] == "/home/me/demo"
    entry = append_returned(writer, remembered)

    pinned = await request(
        client,
        "ds4/pin",
        {"session": session, "content": "Keep the v1 API", "scope": "branch"},
    )
    assert pinned["data"]["item"]["branchLeafId"] == entry
    append_returned(writer, pinned)

    listed = await request(client, "ds4/memory", {"session": session})
    (item,) = listed["memory"]
    assert item["id"] == memory_id and item["key"] == "retries"
    assert item["provenance"]["mutationKey"] == f"sess-w:{entry}"
    assert item["provenance"]["sourceEntryIds"] == [source]
    assert [p["id"] for p in listed["pins"]] == [pinned["itemId"]]

    # The next plan quotes the pin, then the claim, before the request; the manifest names
    # them by id only.
    planned = await request(
        client,
        "ds4/plan",
        {
            "session": session,
            "request": "how many retries?",
            "model": {"provider": "anthropic", "id": "claude-sonnet-4-5"},
        },
    )
    texts = [
        m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
        for m in planned["messages"]
        if m["role"] == "user"
    ]
    assert texts[-1] == "how many retries?"
    assert texts[-3].startswith("[DS4 PINNED CONTEXT") and "Keep the v1 API" in texts[-3]
    assert texts[-2].startswith("[DS4 DURABLE MEMORY") and "retries defaults to 3" in texts[-2]
    manifest = await request(client, "ds4/manifest", {"id": planned["manifestId"], "view": "full"})
    kinds = {item["sourceId"]: item["kind"] for item in manifest["included"]}
    assert kinds[pinned["itemId"]] == "pin" and kinds[memory_id] == "memory"
    assert "Keep the v1 API" not in str(manifest)

    # A conflicting claim is refused, naming the item and what to do; nothing to append.
    error = await request_error(
        client, "ds4/remember", {"session": session, "claim": "Retries defaults to 5"}
    )
    assert error.code == REQUEST_FAILED
    assert f"conflicts with active memory '{memory_id}'" in error.message
    assert f'pass params.supersedes: "{memory_id}"' in error.message
    assert error.data == {"conflictsWith": memory_id, "kind": "conflict"}

    # Superseding it works; then forgetting the old one is refused (it is not active).
    replaced = await request(
        client,
        "ds4/remember",
        {"session": session, "claim": "Retries defaults to 5", "supersedes": memory_id},
    )
    assert replaced["data"]["operation"] == "supersede"
    append_returned(writer, replaced)
    error = await request_error(client, "ds4/forget", {"session": session, "memoryId": memory_id})
    assert error.code == REQUEST_FAILED
    assert f"superseded by '{replaced['itemId']}'" in error.message

    forgotten = await request(
        client,
        "ds4/forget",
        {"session": session, "memoryId": replaced["itemId"], "status": "expired", "reason": "old"},
    )
    append_returned(writer, forgotten)
    unpinned = await request(client, "ds4/unpin", {"session": session, "pinId": pinned["itemId"]})
    append_returned(writer, unpinned)

    listed = await request(client, "ds4/memory", {"session": session})
    assert listed["memory"] == [] and listed["pins"] == []
    assert listed["counts"] == {"applied": 5, "rejected": 0, "invalid": 0}
    everything = await request(client, "ds4/memory", {"session": session, "includeInactive": True})
    assert [m["status"] for m in everything["memory"]] == ["superseded", "expired"]
    assert [p["status"] for p in everything["pins"]] == ["deleted"]


async def test_refused_and_bad_writes_name_the_problem(
    client: LanguageClient, tmp_path: Path
) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-bad")
    writer.user("hello")
    session = {"file": str(writer.path)}
    pinned = await request(client, "ds4/pin", {"session": session, "content": "Use tabs"})
    append_returned(writer, pinned)

    error = await request_error(client, "ds4/pin", {"session": session, "content": "use tabs."})
    assert error.code == REQUEST_FAILED and "repeats active pin" in error.message
    assert error.data == {"conflictsWith": pinned["itemId"], "kind": "repeat"}
    error = await request_error(client, "ds4/unpin", {"session": session, "pinId": "pin-nope"})
    assert error.code == REQUEST_FAILED and "unknown pin 'pin-nope' (params.pinId)" in error.message
    assert error.data == {"kind": "unknown"}

    for method, params, field in (
        ("ds4/pin", {"session": session, "content": "x", "scope": "galaxy"}, "params.scope"),
        ("ds4/pin", {"session": session, "content": "  "}, "params.content"),
        ("ds4/pin", {"session": session, "content": "x" * 4001}, "params.content"),
        ("ds4/remember", {"session": session, "claim": 3}, "params.claim"),
        ("ds4/remember", {"session": session, "claim": "a", "classification": "x"},
         "params.classification"),
        ("ds4/forget", {"session": session, "memoryId": "m", "status": "gone"}, "params.status"),
        ("ds4/unpin", {"session": session}, "params.pinId"),
        ("ds4/pin", {"session": {"file": str(tmp_path / "no.jsonl")}, "content": "x"},
         "params.session.file"),
        ("ds4/pin", {"session": {**session, "leafId": "zzz"}, "content": "x"},
         "params.session.leafId"),
    ):  # fmt: skip
        error = await request_error(client, method, params)
        assert error.code == INVALID_PARAMS and field in error.message, (method, error.message)
    assert (await request(client, "ds4/memory", {"session": session}))["pins"]  # still serving


async def test_writes_to_an_owned_session_are_appended_by_the_server(
    client: LanguageClient,
) -> None:
    opened = await request(client, "ds4/sessionOpen", {"title": "memory"})
    session = {"file": opened["file"]}
    appended = await request(
        client,
        "ds4/sessionAppend",
        {"session": session, "messages": [{"role": "user", "content": "hi", "timestamp": 1}]},
    )
    remembered = await request(
        client, "ds4/remember", {"session": session, "claim": "the cache is redis"}
    )
    assert remembered["appended"] is True
    assert remembered["entryId"] not in (None, *appended["entryIds"])
    pinned = await request(
        client, "ds4/pin", {"session": session, "content": "Keep it short", "scope": "branch"}
    )
    assert pinned["appended"] is True
    assert pinned["data"]["item"]["branchLeafId"] == remembered["entryId"]

    listed = await request(client, "ds4/memory", {"session": session})  # no client append
    (item,) = listed["memory"]
    assert item["id"] == remembered["itemId"]
    assert item["provenance"]["mutationKey"] == f"{opened['sessionId']}:{remembered['entryId']}"
    assert [p["id"] for p in listed["pins"]] == [pinned["itemId"]]
    lines = [json.loads(line) for line in Path(opened["file"]).read_text().splitlines()]
    assert lines[-1]["parentId"] == remembered["entryId"]
    assert lines[-1]["customType"] == "ds4-context-pin-v1"
    assert [remembered["entry"], pinned["entry"]] == lines[-2:]  # the lines as appended

    error = await request_error(
        client, "ds4/remember", {"session": session, "claim": "the cache is memcached"}
    )
    assert error.code == REQUEST_FAILED
    assert error.data == {"conflictsWith": remembered["itemId"], "kind": "conflict"}
    assert len(Path(opened["file"]).read_text().splitlines()) == len(lines)  # nothing appended


async def test_the_complete_entry_line_appended_raw_is_imported(
    client: LanguageClient, tmp_path: Path
) -> None:
    """A client that appends raw lines (not Pi's appendEntry) appends `entry` as it is."""
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-raw")
    writer.user("hello")
    leaf = writer.user("we settled on 3 retries")
    session = {"file": str(writer.path)}
    result = await request(client, "ds4/remember", {"session": session, "claim": "retries = 3"})
    entry = result["entry"]
    assert result["appended"] is False and result["entryId"] is None
    assert list(entry) == ["type", "id", "parentId", "timestamp", "customType", "data"]
    assert entry["type"] == "custom" and entry["parentId"] == leaf
    assert len(entry["id"]) == 8 and int(entry["id"], 16) >= 0
    assert (entry["customType"], entry["data"]) == (result["customType"], result["data"])
    with writer.path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(entry) + "\n")
    listed = await request(client, "ds4/memory", {"session": session})
    assert [m["id"] for m in listed["memory"]] == [result["itemId"]]
    assert listed["memory"][0]["provenance"]["mutationKey"] == f"sess-raw:{entry['id']}"


async def test_a_session_cannot_retire_another_sessions_items(
    client: LanguageClient, tmp_path: Path
) -> None:
    """Owned sessions A and C of two projects: C's unpin and forget of A's items are refused
    (`elsewhere`), and a hand-written status entry in another session's file is rejected by
    the replay with its reason; a superseded item's hint names the active end of its chain."""
    opened = []
    for name in ("pa", "pc"):
        (tmp_path / name).mkdir()
        opened.append(await request(client, "ds4/sessionOpen", {"cwd": str(tmp_path / name)}))
    a, c = ({"file": o["file"]} for o in opened)
    pinned = await request(client, "ds4/pin", {"session": a, "content": "A-only pin"})
    mine = await request(
        client, "ds4/remember", {"session": a, "claim": "alpha is one", "scope": "session"}
    )
    for method, params, field in (
        ("ds4/unpin", {"session": c, "pinId": pinned["itemId"]}, "params.pinId"),
        ("ds4/forget", {"session": c, "memoryId": mine["itemId"]}, "params.memoryId"),
    ):
        error = await request_error(client, method, params)
        assert error.code == REQUEST_FAILED and error.data == {"kind": "elsewhere"}
        assert f"does not apply to this session ({field})" in error.message
    assert (await request(client, "ds4/memory", {"session": c}))["pins"] == []

    writer = SessionWriter(tmp_path / "hand.jsonl", session_id="sess-hand")
    writer.user("hello")
    key = writer.mutation(
        "pin", "mu-hand", 2**52, operation="status", pinId=pinned["itemId"], status="deleted"
    )
    listed = await request(client, "ds4/memory", {"session": {"file": str(writer.path)}})
    (problem,) = [p for p in listed["problems"] if p["entryId"] == key]
    assert problem["problem"] == (
        f"pin '{pinned['itemId']}' does not apply to session 'sess-hand' (a session item of "
        f"session '{opened[0]['sessionId']}')"
    )
    assert [p["id"] for p in (await request(client, "ds4/memory", {"session": a}))["pins"]] == [
        pinned["itemId"]
    ]

    second = await request(
        client,
        "ds4/remember",
        {"session": a, "claim": "alpha is 2", "scope": "session", "supersedes": mine["itemId"]},
    )
    third = await request(
        client,
        "ds4/remember",
        {"session": a, "claim": "alpha is 3", "scope": "session", "supersedes": second["itemId"]},
    )
    error = await request_error(client, "ds4/forget", {"session": a, "memoryId": mine["itemId"]})
    assert error.data == {"kind": "inactive"}
    assert f"not active (params.memoryId); use '{third['itemId']}'" in error.message
