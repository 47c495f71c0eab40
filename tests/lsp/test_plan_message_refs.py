"""`ds4/plan` with `messageRefs` (issue 13): session messages sent unchanged come back as
entry references a client holding the session resolves to the very same messages; everything
else comes back in full; bad values are rejected naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import plan_params, request
from pytest_lsp import LanguageClient
from session_files import SessionWriter

KEY = "sk-" + "proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4"  # built: no key in this file


def session(tmp_path: Path) -> SessionWriter:
    writer = SessionWriter(tmp_path / "refs.jsonl")
    for n in range(12):
        writer.turn(n)
    writer.user(f"deploy with the key {KEY}")  # a remote destination gets it redacted
    writer.assistant("Deployed.")
    return writer


def entries(path: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        entry = json.loads(line)
        found[entry["id"]] = entry
    return found


async def test_references_resolve_to_the_messages_a_full_answer_sends(
    client: LanguageClient, tmp_path: Path
) -> None:
    writer = session(tmp_path)
    params = plan_params(writer.path, "what did we deploy?")
    full = await request(client, "ds4/plan", params)
    refs = await request(client, "ds4/plan", {**params, "messageRefs": True})
    assert full["mode"] == refs["mode"] == "managed"
    assert len(full["messages"]) == len(refs["messages"])
    by_id = entries(writer.path)
    referenced = 0
    for sent, answer in zip(full["messages"], refs["messages"], strict=True):
        if "entryRef" in answer:
            referenced += 1
            assert set(answer) == {"entryRef"}
            assert by_id[answer["entryRef"]]["message"] == sent
        elif answer["role"] == "user" and "what did we deploy?" in json.dumps(answer):
            continue  # the new request: its timestamp is the clock's
        else:
            assert answer == sent
    assert referenced >= len(full["messages"]) - 3
    # the message whose key was redacted goes out in full, never as a reference
    redacted = [
        m for m in refs["messages"] if "entryRef" not in m and "deploy with" in json.dumps(m)
    ]
    assert redacted and KEY not in json.dumps(refs)
    assert len(json.dumps(refs)) < len(json.dumps(full)) / 5


@pytest.mark.parametrize("value", ["yes", 1, None, []])
async def test_a_bad_message_refs_value_is_rejected_naming_the_field(
    client: LanguageClient, tmp_path: Path, value: object
) -> None:
    writer = session(tmp_path)
    params = {**plan_params(writer.path, "next?"), "messageRefs": value}
    with pytest.raises(Exception, match="params.messageRefs"):
        await request(client, "ds4/plan", params)


async def test_no_reference_for_an_escaped_id_or_in_a_file_with_a_repeated_id(
    client: LanguageClient, tmp_path: Path
) -> None:
    """An id with a lone surrogate is stored with its escape as text, which another entry may
    spell literally: its message goes in full. A file that uses an id twice gets no
    references at all (which entry an id names would depend on the reader)."""
    writer = session(tmp_path)
    leaf = writer.leaf
    lines = [
        {
            "type": "message",
            "id": "a\\ud800",
            "parentId": leaf,
            "timestamp": "2026-11-01T12:00:00.000Z",
            "message": {
                "role": "user",
                "content": "literal backslash, off the branch",
                "timestamp": 5,
            },
        },
        {
            "type": "message",
            "id": "a\ud800",
            "parentId": leaf,
            "timestamp": "2026-11-01T12:01:00.000Z",
            "message": {"role": "user", "content": "the surrogate entry", "timestamp": 6},
        },
    ]
    with writer.path.open("a", encoding="utf-8") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")  # \\ud800 escaped: valid UTF-8
    params = {**plan_params(writer.path, "and now?"), "messageRefs": True}
    refs = await request(client, "ds4/plan", params)
    assert all("\\" not in m.get("entryRef", "") for m in refs["messages"])
    assert any("the surrogate entry" in json.dumps(m) for m in refs["messages"])

    writer.leaf = leaf
    writer._next -= 1  # the next entry reuses the id of the one before
    writer.user("a second entry with a used id")
    refs = await request(client, "ds4/plan", params)
    assert refs["mode"] == "managed" and not any("entryRef" in m for m in refs["messages"])


async def test_an_id_with_a_lone_surrogate_is_never_a_reference(
    client: LanguageClient, tmp_path: Path
) -> None:
    """Alone in the file, the surrogate id is stored as `a\\ud800` (its escape as text), which
    names no entry of the file: the message goes in full."""
    writer = session(tmp_path)
    line = {
        "type": "message",
        "id": "a\ud800",
        "parentId": writer.leaf,
        "timestamp": "2026-11-01T12:01:00.000Z",
        "message": {"role": "user", "content": "the surrogate entry", "timestamp": 6},
    }
    with writer.path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")
    params = {**plan_params(writer.path, "and now?"), "messageRefs": True}
    refs = await request(client, "ds4/plan", params)
    assert any("entryRef" in m for m in refs["messages"])  # the others are references
    assert all("\\" not in m.get("entryRef", "") for m in refs["messages"])
    assert any("the surrogate entry" in json.dumps(m) for m in refs["messages"])
