"""`ds4/artifactSearch` and `ds4.gcArtifacts` end to end over stdio: a plan stores a large
tool result, a search by session and by id finds it with redacted excerpts, a garbage
collection keeps it; hostile params (bad id, huge query, wrong types) are InvalidParams
naming the field, and the server keeps serving."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import Servers, execute, request, request_error
from pygls.exceptions import JsonRpcException
from test_artifacts_lsp import BIG, MODEL, session_with_big_result

from ds4_core.artifacts.store import ArtifactStore

SECRET = "sk-" + "proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
BIG_ID = hashlib.sha256(BIG.encode()).hexdigest()
INVALID_PARAMS = -32602


async def test_search_finds_the_planned_artifact_and_gc_keeps_it(
    servers: Servers, tmp_path: Path, database_path: Path
) -> None:
    writer = session_with_big_result(tmp_path / "s.jsonl")
    client = await servers.start()
    session = {"file": str(writer.path)}
    await request(client, "ds4/plan", {"session": session, "request": "why?", "model": MODEL})
    found = await request(
        client, "ds4/artifactSearch", {"query": "ZQXLSP49999", "session": session}
    )
    assert found["searched"] == [{"artifactId": BIG_ID, "status": "ok"}]
    (match,) = found["matches"]
    assert (match["line"], match["column"]) == (
        50000,
        len("tests/test_49.py::case_49999 FAILED ") + 1,
    )
    assert (
        match["sourceId"] and match["excerpt"] == "tests/test_49.py::case_49999 FAILED zqxlsp49999"
    )
    store = ArtifactStore(database_path.parent / "artifacts")
    keyed = store.put(f"line one\ntoken={SECRET}\n".encode()).artifact_id
    secret = await request(
        client, "ds4/artifactSearch", {"query": "token=", "artifactId": keyed, "maxMatches": 1}
    )
    assert secret["matches"][0]["sourceId"] is None and secret["matches"][0]["line"] == 2
    excerpt = secret["matches"][0]["excerpt"]
    assert SECRET not in excerpt and "REDACTED" in excerpt
    many = await request(
        client, "ds4/artifactSearch", {"query": "failed", "session": session, "maxMatches": 5}
    )
    assert len(many["matches"]) == 5 and many["truncated"] is True

    orphan = store.put(b"an output no session refers to").artifact_id
    old = time.time() - 7200
    for artifact_id in (BIG_ID, orphan, keyed):
        os.utime(store.path_for(artifact_id), (old, old))
    dry = await execute(client, "ds4.gcArtifacts", [{"dryRun": True}])
    assert (dry["removed"], dry["kept"], dry["dryRun"]) == (2, 1, True)
    done = await execute(client, "ds4.gcArtifacts")
    assert (done["removed"], done["kept"], done["dryRun"]) == (2, 1, False)
    assert store.artifact_ids() == [BIG_ID]
    health = await execute(client, "ds4.health")
    assert health["artifacts"]["objects"] == 1 and health["artifacts"]["lastGc"]["removed"] == 2


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"artifactId": "a" * 64}, "params.query"),
        ({"query": "x"}, "params.artifactId"),
        ({"query": "x", "artifactId": "../../etc/passwd"}, "params.artifactId"),
        ({"query": "x", "artifactId": 42}, "params.artifactId"),
        ({"query": "x" * 100_000, "artifactId": "a" * 64}, "params.query"),
        ({"query": "", "artifactId": "a" * 64}, "params.query"),
        ({"query": ["x"], "artifactId": "a" * 64}, "params.query"),
        ({"query": "x", "artifactId": "a" * 64, "maxMatches": "5"}, "params.maxMatches"),
        ({"query": "x", "artifactId": "a" * 64, "maxMatches": 10_000}, "params.maxMatches"),
        ({"query": "x", "session": {"file": 7}}, "params.session.file"),
        ({"query": "x", "session": {"file": "/no/such.jsonl"}}, "params.session.file"),
    ],
)
async def test_hostile_search_params_name_the_field_and_the_server_keeps_serving(
    servers: Servers, params: dict[str, Any], field: str
) -> None:
    client = await servers.start()
    error = await request_error(client, "ds4/artifactSearch", params)
    assert error.code == INVALID_PARAMS and field in error.message
    missing = await request(client, "ds4/artifactSearch", {"query": "x", "artifactId": "b" * 64})
    assert missing["searched"] == [{"artifactId": "b" * 64, "status": "missing"}]


async def test_gc_refuses_a_bad_argument(servers: Servers) -> None:
    client = await servers.start()
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "ds4.gcArtifacts", [{"dryRun": "yes"}])
    assert caught.value.code == INVALID_PARAMS
    assert "params.arguments[0].dryRun" in caught.value.message
    with pytest.raises(JsonRpcException) as forced:
        await execute(client, "ds4.gcArtifacts", [{"force": "yes"}])
    assert forced.value.code == INVALID_PARAMS
    assert "params.arguments[0].force" in forced.value.message
    assert (await execute(client, "ds4.gcArtifacts", [{}]))["dryRun"] is False


async def test_gc_over_an_index_without_sessions_needs_force(
    servers: Servers, database_path: Path
) -> None:
    """Objects but no indexed session (the database was deleted): a real run is refused,
    naming `force`, and the server keeps serving; with `force` it collects."""
    store = ArtifactStore(database_path.parent / "artifacts")
    orphan = store.put(b"an output of a session the index lost").artifact_id
    old = time.time() - 7200
    os.utime(store.path_for(orphan), (old, old))
    client = await servers.start()
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "ds4.gcArtifacts")
    assert caught.value.code == INVALID_PARAMS
    assert "params.arguments[0].force" in caught.value.message
    assert "no session" in caught.value.message and store.artifact_ids() == [orphan]
    dry = await execute(client, "ds4.gcArtifacts", [{"dryRun": True}])
    assert dry["removed"] == 1 and store.artifact_ids() == [orphan]
    done = await execute(client, "ds4.gcArtifacts", [{"force": True}])
    assert done["removed"] == 1 and store.artifact_ids() == []
