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
