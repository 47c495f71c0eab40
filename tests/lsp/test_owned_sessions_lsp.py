"""`ds4/sessionOpen` / `ds4/sessionAppend` end to end: a client without Pi gets a session the
server writes, readable by our reader and usable by ds4/plan, ds4/retrieve and ds4/compact;
two servers appending at once lose nothing; hostile input is refused naming the field."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import INVALID_PARAMS, Servers, execute, plan_params, request, request_error
from pytest_lsp import LanguageClient
from session_files import SessionWriter, turn_messages

from ds4_core.sessions import build_session_context, read_all


def complete(message: dict[str, Any]) -> dict[str, Any]:
    """`message` with the fields the server would fill in given, so it reads back unchanged."""
    if message["role"] == "assistant":
        counts = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        usage = {**counts, "totalTokens": 0, "cost": {**counts, "total": 0}}
        return {"api": "anthropic-messages", "usage": usage, **message}
    return message


async def test_appended_messages_read_back_and_serve_plan_retrieve_and_compact(
    client: LanguageClient, tmp_path: Path, database_path: Path, servers: Servers
) -> None:
    opened = await request(client, "ds4/sessionOpen", {"title": "Parser work"})
    assert opened["created"] is True and opened["leafId"] is not None
    file = Path(opened["file"])
    assert file.parent == database_path.parent / "sessions"
    assert read_all(file).header.cwd == str(servers.workspace)  # type: ignore[union-attr]

    messages = [complete(m) for m in turn_messages(tmp_path, 3)]
    first = await request(
        client, "ds4/sessionAppend", {"session": {"file": str(file)}, "messages": messages[:10]}
    )
    rest = await request(
        client, "ds4/sessionAppend", {"session": {"file": str(file)}, "messages": messages[10:]}
    )
    assert first["sessionId"] == opened["sessionId"] and rest["file"] == str(file)
    entry_ids = first["entryIds"] + rest["entryIds"]
    assert rest["leafId"] == entry_ids[-1] and len(entry_ids) == len(messages)

    context = build_session_context(read_all(file).entries)
    assert context.messages == messages
    assert context.message_entry_ids == entry_ids
    assert context.path_entry_ids == [opened["leafId"], *entry_ids]

    plan = await request(client, "ds4/plan", plan_params(file, "what changed in parser_1?"))
    assert plan["mode"] == "managed" and plan["session"]["id"] == opened["sessionId"]
    found = await request(
        client, "ds4/retrieve", {"session": {"file": str(file)}, "query": "parser_2 strip"}
    )
    # indexed and searched (its hits are all kept verbatim by the plan, so none is sent)
    assert found["status"] == "ok" and found["stats"]["candidates"] > 0

    kept = entry_ids[16]  # the third turn's user message
    compacted = await request(
        client, "ds4/compact", {"session": {"file": str(file)}, "firstKeptEntryId": kept}
    )
    assert compacted["appended"] is True
    last = read_all(file).entries[-1]
    assert last.entry_id == compacted["entryId"] and last.entry_type == "compaction"
    assert last.parent_id == entry_ids[-1]
    assert last.data["firstKeptEntryId"] == kept
    assert last.data["summary"] == compacted["compaction"]["summary"]
    view = await execute(client, "ds4.summaries", [{"session": {"file": str(file)}}])
    (node,) = view["nodes"]
    assert node["summaryId"] == compacted["summaryId"] and node["lifecycle"] == "committed"
    after = build_session_context(read_all(file).entries)
    assert after.messages[0]["role"] == "compactionSummary"
    assert after.messages[1:] == messages[16:]


async def test_compacting_a_pi_session_appends_nothing(
    client: LanguageClient, tmp_path: Path
) -> None:
    writer = SessionWriter.with_turns(tmp_path / "pi.jsonl", 3)
    before = writer.path.read_bytes()
    result = await request(
        client,
        "ds4/compact",
        {"session": {"file": str(writer.path)}, "firstKeptEntryId": "00000011"},
    )
    assert result["appended"] is False and result["entryId"] is None
    assert writer.path.read_bytes() == before


async def test_reopening_by_id_and_branching_with_a_parent(client: LanguageClient) -> None:
    opened = await request(client, "ds4/sessionOpen", {"sessionId": "chat-1", "cwd": "/srv/app"})
    assert opened == {
        "sessionId": "chat-1",
        "file": opened["file"],
        "leafId": None,
        "created": True,
        "cwd": "/srv/app",
    }
    session = {"file": opened["file"]}
    user = {"role": "user", "content": "hello", "timestamp": 1}
    (root,) = (
        await request(client, "ds4/sessionAppend", {"session": session, "messages": [user]})
    )["entryIds"]
    await request(client, "ds4/sessionAppend", {"session": session, "messages": [user]})
    branch = await request(
        client, "ds4/sessionAppend", {"session": session, "messages": [user], "parentId": root}
    )
    again = await request(client, "ds4/sessionOpen", {"sessionId": "chat-1"})
    assert again["created"] is False and again["leafId"] == branch["leafId"]
    by_leaf = await request(
        client,
        "ds4/sessionAppend",
        {"session": {**session, "leafId": root}, "messages": [user]},
    )
    (entry,) = [
        e for e in read_all(Path(opened["file"])).entries if e.entry_id == by_leaf["leafId"]
    ]
    assert entry.parent_id == root
    assert read_all(Path(opened["file"])).header.cwd == "/srv/app"  # type: ignore[union-attr]


async def test_hostile_appends_are_refused_naming_the_field(
    client: LanguageClient, tmp_path: Path, database_path: Path
) -> None:
    opened = await request(client, "ds4/sessionOpen", {})
    owned_file = Path(opened["file"])
    good = {"role": "user", "content": "hi", "timestamp": 1}
    pi_file = SessionWriter.with_turns(tmp_path / "pi.jsonl", 1).path
    planted = owned_file.parent / "planted.jsonl"
    planted.symlink_to(pi_file)
    before = pi_file.read_bytes()
    pi_id = read_all(pi_file).header.session_id  # type: ignore[union-attr]
    written_by_pi = owned_file.parent / f"2026-01-01T00-00-00-000Z_{pi_id}.jsonl"
    written_by_pi.write_bytes(before)  # Pi pointed at the directory: no owned mark

    async def refused(params: dict[str, Any], field: str, text: str = "") -> None:
        error = await request_error(client, "ds4/sessionAppend", params)
        assert error.code == INVALID_PARAMS, error.message
        assert f"params.{field}" in error.message, error.message
        assert text in error.message

    through = owned_file.parent / ".." / owned_file.parent.name / owned_file.name
    foreign_files = (pi_file, planted, written_by_pi, owned_file.parent / ".." / "ds4.db", through)
    for foreign in (*foreign_files, Path("/etc/passwd")):
        await refused(
            {"session": {"file": str(foreign)}, "messages": [good]},
            "session.file",
            "not a session this server owns",
        )
    assert pi_file.read_bytes() == before == written_by_pi.read_bytes()
    session = {"file": str(owned_file)}
    bad_messages: list[tuple[list[Any], str]] = [
        ([], "messages"),
        ([good] * 1001, "messages"),
        ([good, good, good, {"role": "system", "content": "x"}], "messages[3].role"),
        ([{"role": "user", "content": 5}], "messages[0].content"),
        ([{"role": "user", "content": [{"type": "toolCall"}]}], "messages[0].content[0].type"),
        ([{"role": "user", "content": "x", "timestamp": "now"}], "messages[0].timestamp"),
        (
            [{"role": "assistant", "content": [{"type": "toolCall", "id": "c", "name": "read"}]}],
            "messages[0].content[0].arguments",
        ),
        ([{"role": "assistant", "content": [], "stopReason": "pending"}], "messages[0].stopReason"),
        ([{"role": "toolResult", "toolName": "read", "content": []}], "messages[0].toolCallId"),
        (["text"], "messages[0]"),
    ]
    deep: Any = {}
    for _ in range(110):
        deep = {"d": deep}
    bad_messages.append(
        ([{"role": "user", "content": "x", "details": deep}], "messages[0].details.d")
    )
    for messages, field in bad_messages:
        await refused({"session": session, "messages": messages}, field)
    await refused({"session": session, "messages": [good], "parentId": "deadbeef"}, "parentId")
    await refused({"session": {**session, "leafId": "nope"}, "messages": [good]}, "session.leafId")
    await refused({"session": session, "messages": {"role": "user"}}, "messages")
    await refused({"session": session}, "messages")
    assert len(read_all(owned_file).entries) == 0

    for params, field in (
        ({"title": "t" * 201}, "title"),
        ({"sessionId": "../x"}, "sessionId"),
        ({"sessionId": 7}, "sessionId"),
        ({"sessionId": pi_id}, "sessionId"),  # the Pi file's id: never taken over
    ):
        error = await request_error(client, "ds4/sessionOpen", params)
        assert error.code == INVALID_PARAMS and f"params.{field}" in error.message, error.message
    assert sorted(p.name for p in owned_file.parent.iterdir()) == sorted(
        [owned_file.name, f"{owned_file.name}.lock", ".lock", "planted.jsonl", written_by_pi.name]
    )
    # The server keeps serving.
    result = await request(client, "ds4/sessionAppend", {"session": session, "messages": [good]})
    assert len(result["entryIds"]) == 1


async def test_a_reopen_keeps_its_cwd_and_a_hard_linked_file_is_refused(
    client: LanguageClient, servers: Servers
) -> None:
    opened = await request(client, "ds4/sessionOpen", {"sessionId": "reopen1", "cwd": "/a"})
    assert opened["cwd"] == "/a"
    error = await request_error(
        client, "ds4/sessionOpen", {"sessionId": "reopen1", "cwd": "/b", "title": "t"}
    )
    assert error.code == INVALID_PARAMS and "params.cwd" in error.message, error.message
    assert 'was opened with cwd "/a"' in error.message
    again = await request(client, "ds4/sessionOpen", {"sessionId": "reopen1"})  # the workspace
    assert (again["file"], again["created"], again["cwd"]) == (opened["file"], False, "/a")
    fresh = await request(client, "ds4/sessionOpen", {})
    assert fresh["cwd"] == str(servers.workspace)

    file = Path(opened["file"])
    elsewhere = file.parent.parent / "copy.jsonl"
    os.link(file, elsewhere)  # a second name (another data dir's file would do the same)
    user = {"role": "user", "content": "hi", "timestamp": 1}
    error = await request_error(
        client, "ds4/sessionAppend", {"session": {"file": str(file)}, "messages": [user]}
    )
    assert error.code == INVALID_PARAMS and "params.session.file" in error.message
    assert read_all(file).entries == []
    elsewhere.unlink()
    result = await request(
        client, "ds4/sessionAppend", {"session": {"file": str(file)}, "messages": [user]}
    )
    assert len(result["entryIds"]) == 1


@pytest.mark.parametrize("client_name", ["neovim"])
async def test_two_servers_appending_at_once_lose_nothing(servers: Servers) -> None:
    first, second = await servers.start(), await servers.start()
    opened = await request(first, "ds4/sessionOpen", {"title": "busy"})
    session = {"file": opened["file"]}
    batches, size = 50, 100

    async def append_all(client: LanguageClient, writer: int) -> list[str]:
        ids: list[str] = []
        for batch in range(batches):
            messages = [
                {"role": "user", "content": f"w{writer} n{batch * size + i}", "timestamp": i}
                for i in range(size)
            ]
            result = await request(
                client, "ds4/sessionAppend", {"session": session, "messages": messages}
            )
            ids += result["entryIds"]
        return ids

    ids_a, ids_b = await asyncio.gather(append_all(first, 0), append_all(second, 1))
    data = Path(opened["file"]).read_bytes()
    assert data.endswith(b"\n")
    records = [json.loads(line) for line in data.split(b"\n")[:-1]]  # every line is JSON
    entries = records[2:]  # the header and the title
    assert len(entries) == 2 * batches * size
    assert sorted(r["message"]["content"] for r in entries) == sorted(
        f"w{w} n{n}" for w in range(2) for n in range(batches * size)
    )
    assert [r["id"] for r in entries if r["message"]["content"].startswith("w0 ")] == ids_a
    assert [r["id"] for r in entries if r["message"]["content"].startswith("w1 ")] == ids_b
    seen = {records[1]["id"]}
    for record in entries:
        assert record["parentId"] in seen  # each parent is an earlier entry
        seen.add(record["id"])
    assert len(seen) == len(entries) + 1
    parsed = read_all(Path(opened["file"]))
    assert parsed.malformed_lines == 0 and parsed.duplicate_ids == 0
    assert len(build_session_context(parsed.entries).messages) == 2 * batches * size
    assert os.stat(opened["file"]).st_mode & 0o777 == 0o600
