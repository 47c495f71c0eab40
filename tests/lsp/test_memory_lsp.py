"""`ds4/memory` end to end: memory and pins appended by a client are listed with provenance; bad
params are refused naming the field and the server keeps serving."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lsp_helpers import request, request_error
from pytest_lsp import LanguageClient
from session_files import SessionWriter, memory_item

INVALID_PARAMS = -32602


def remember(writer: SessionWriter, mutation_id: str, at: int, **fields: Any) -> str:
    return writer.mutation("memory", mutation_id, at, **fields)


async def test_memory_lists_appended_claims_with_provenance(
    client: LanguageClient, tmp_path: Path
) -> None:
    writer = SessionWriter(tmp_path / "s.jsonl", session_id="sess-mem")
    source = writer.user("the cache is redis now")
    entry = remember(
        writer,
        "mu1",
        10,
        operation="add",
        item=memory_item("m1", "the cache is redis", 10, [source]),
    )
    writer.mutation(
        "pin", "pu1", 11, operation="add",
        item={"id": "p1", "scope": "session", "content": "Keep the v1 API", "createdAt": 11},
    )  # fmt: skip
    result = await request(client, "ds4/memory", {"session": {"file": str(writer.path)}})
    assert result["sessionId"] == "sess-mem"
    (item,) = result["memory"]
    assert item["claim"] == "the cache is redis" and item["key"] == "the cache"
    assert item["provenance"]["mutationKey"] == f"sess-mem:{entry}"
    assert item["provenance"]["sourceEntryIds"] == [source]
    assert [pin["content"] for pin in result["pins"]] == ["Keep the v1 API"]

    # A contradicting add appended later is rejected and reported; the first claim stands.
    remember(
        writer, "mu2", 20, operation="add", item=memory_item("m2", "the cache is memcached", 20, [])
    )
    result = await request(client, "ds4/memory", {"session": {"file": str(writer.path)}})
    assert [m["id"] for m in result["memory"]] == ["m1"]
    assert result["counts"] == {"applied": 2, "rejected": 1, "invalid": 0}
    assert "supersede it" in result["problems"][0]["problem"]

    everything = await request(client, "ds4/memory", {"includeInactive": True})
    assert everything["sessionId"] is None and len(everything["memory"]) == 1


async def test_bad_memory_params_name_the_field(client: LanguageClient, tmp_path: Path) -> None:
    error = await request_error(client, "ds4/memory", {"includeInactive": "yes"})
    assert error.code == INVALID_PARAMS and "params.includeInactive" in error.message
    error = await request_error(
        client, "ds4/memory", {"session": {"file": str(tmp_path / "missing.jsonl")}}
    )
    assert error.code == INVALID_PARAMS and "params.session.file" in error.message
    assert (await request(client, "ds4/memory", {}))["memory"] == []  # still serving
