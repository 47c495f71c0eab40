"""Compaction over LSP, end to end: `ds4/compact`, the server-to-client `ds4/summarize`, the
`ds4/compactCommitted` / `ds4/compactFailed` notifications and the `ds4.summaries` command.

Sessions are small synthetic Pi v3 files (`session_files.SessionWriter`) grown the way Pi grows
them: after a compaction the test appends the compaction entry the result asks for, then more
turns. The client side of `ds4/summarize` is `FakeSummarizer`, registered on the test client
before `initialize`.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_helpers import (
    INVALID_PARAMS,
    REQUEST_FAILED,
    SESSION_ID,
    TIMEOUT_S,
    Servers,
    execute,
    notify_and_wait,
    plain,
    plan_params,
    request,
    request_error,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient
from session_files import SessionWriter

OFFERS_SUMMARIZE = {"ds4": {"summarize": True}}
"""`capabilities.experimental` of a client that answers `ds4/summarize`."""

SMALL_SPANS = {"settings": {"compaction": {"keepRecentTokens": 200}}}
"""initializationOptions keeping only ~200 recent tokens, so a few turns make a span."""

SECTIONS = [
    "Objective",
    "User Constraints",
    "Durable Decisions",
    "Completed Work",
    "Current State",
    "Files Read",
    "Files Modified",
    "Commands / Tests",
    "Errors / Risks",
    "Open Questions",
    "Next Actions",
    "Critical Exact Values",
]

Answer = Callable[[dict[str, Any]], Awaitable[Any]]


class FakeSummarizer:
    """The client side of `ds4/summarize`: records each call's params (plain JSON), answers
    with `answer(params)`, and notes when the server cancels the request. Register `handle`
    (a plain function: pygls tags handlers with attributes, which bound methods refuse)."""

    def __init__(self, answer: Answer) -> None:
        self.calls: list[dict[str, Any]] = []
        self.asked = asyncio.Event()
        self.cancelled = asyncio.Event()

        async def handle(params: Any) -> Any:
            call = plain(params)
            self.calls.append(call)
            self.asked.set()
            try:
                return await answer(call)
            except asyncio.CancelledError:  # the server sent $/cancelRequest
                self.cancelled.set()
                raise

        self.handle = handle


def summary_text(sections: dict[str, list[str]]) -> str:
    """A twelve-section summary; sections not given hold `- None`."""
    lines: list[str] = []
    for name in SECTIONS:
        lines.append(f"## {name}")
        lines += [f"- {bullet}" for bullet in sections.get(name) or ["None"]]
    return "\n".join(lines) + "\n"


def valid_summary(call: dict[str, Any]) -> str:
    """A summary a careful model would write for a span starting at turn 1: every backticked
    value occurs in the conversation, the file sections are the span's inventories."""
    return summary_text(
        {
            "Objective": ["Fix the parser bugs step by step while keeping the API stable."],
            "User Constraints": ["Keep the API stable."],
            "Durable Decisions": ["Each parser function strips whitespace from its input."],
            "Completed Work": ["Fixed `src/parser_1.py` so that it strips whitespace."],
            "Current State": ["The tests of the fixed steps pass."],
            "Files Read": [f"`{path}`" for path in call["readFiles"]],
            "Files Modified": [f"`{path}`" for path in call["modifiedFiles"]],
            "Commands / Tests": ["`pytest tests/test_parser_1.py -q`"],
            "Next Actions": ["Continue with the next step of the parser fixes."],
            "Critical Exact Values": ["`src/parser_1.py`"],
        }
    )


def answering(text: Callable[[dict[str, Any]], str], **extra: Any) -> Answer:
    """An answer function returning `{summary: text(params), **extra}`."""

    async def answer(call: dict[str, Any]) -> Any:
        return {"summary": text(call), **extra}

    return answer


async def start_summarizing(
    servers: Servers, answer: Answer, settings: dict[str, Any] | None = None
) -> tuple[LanguageClient, FakeSummarizer]:
    """A server whose client offers `ds4/summarize` and answers it with `answer`."""
    fake = FakeSummarizer(answer)
    options = {"settings": {"compaction": {"keepRecentTokens": 200, **(settings or {})}}}
    client = await servers.start(
        initialization_options=options,
        experimental=OFFERS_SUMMARIZE,
        client_features={"ds4/summarize": fake.handle},
    )
    return client, fake


@pytest.fixture
def writer(tmp_path: Path) -> SessionWriter:
    """A new synthetic v3 session file with three turns (about 8 messages each)."""
    (tmp_path / "sessions").mkdir()
    session = SessionWriter(tmp_path / "sessions" / "session.jsonl")
    for n in (1, 2, 3):
        session.turn(n)
    return session


def compact_params(writer: SessionWriter, **fields: Any) -> dict[str, Any]:
    """`ds4/compact` params for the writer's session at its current leaf."""
    return {"session": {"file": str(writer.path), "leafId": writer.leaf}, **fields}


def summaries_args(writer: SessionWriter, leaf_id: str | None = None, **fields: Any) -> list:
    """`ds4.summaries` arguments for the writer's session at `leaf_id` (default: its leaf)."""
    return [{"session": {"file": str(writer.path), "leafId": leaf_id or writer.leaf}, **fields}]


def nodes_by_id(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The nodes of a `ds4.summaries` view keyed by summary id."""
    return {node["summaryId"]: node for node in view["nodes"]}


# --------------------------------------------------------------------------- ds4/summarize


async def test_a_valid_client_summary_becomes_the_segment(
    servers: Servers, writer: SessionWriter
) -> None:
    """The client offering ds4/summarize gets the prompt with the conversation and writes the
    summary; it validates as is and the compaction entry carries a schema-2 record."""
    client, fake = await start_summarizing(
        servers, answering(valid_summary, provider="anthropic", model="claude-sonnet-4-5")
    )
    result = await request(client, "ds4/compact", compact_params(writer))

    (call,) = fake.calls
    assert call["summaryKind"] == "segment"
    assert "src/parser_1.py" in call["prompt"] and "Step 1: fix the parser bug" in call["prompt"]
    assert re.fullmatch(r"[0-9a-f]{64}", call["sourceHash"])
    assert call["tokenLimit"] > 0
    assert call["sessionId"] == writer.session_id
    assert call["sourceEntryIds"][0] == "00000001"
    # read and then edited: listed as modified only (Pi's file inventory rule)
    assert (call["readFiles"], call["modifiedFiles"][0]) == ([], "src/parser_1.py")
    assert result["summarizer"] == "client"
    assert result["fallbackReason"] is None
    assert result["validation"] == {"status": "valid", "issueCodes": [], "repairs": []}
    assert result["summaryKind"] == "segment" and result["graphLevel"] == 0
    assert result["summaryId"] == result["segmentSummaryId"]
    compaction = result["compaction"]
    assert compaction["summary"] == valid_summary(call)
    assert compaction["firstKeptEntryId"] == result["span"]["firstKeptEntryId"]
    record = compaction["details"]["ds4ContextEngine"]
    assert record["schemaVersion"] == 2
    assert record["summaryId"] == result["summaryId"]
    assert record["sourceHash"] == call["sourceHash"]
    assert (record["provider"], record["model"]) == ("anthropic", "claude-sonnet-4-5")
    assert result["span"]["messageCount"] > 0 and result["span"]["previousSummaryId"] is None
    logged = [m.message for m in client.log_messages if m.message.startswith("ds4/compact:")]
    assert logged and f"summary={result['summaryId']}" in logged[-1]
    assert "parser" not in logged[-1]  # ids and counts only
    (progress,) = [
        reports
        for reports in client.progress_reports.values()
        if reports and getattr(reports[0], "title", None) == "ds4: compacting the session"
    ]
    begin, report, end = progress
    assert isinstance(begin, types.WorkDoneProgressBegin)
    assert isinstance(report, types.WorkDoneProgressReport)
    assert isinstance(end, types.WorkDoneProgressEnd)
    assert (report.percentage, report.message) == (50, "waiting for the client's summary")
    assert end.message == f"segment summary {result['summaryId']} (client summarizer)"


async def test_an_invalid_client_summary_is_replaced_by_the_offline_one(
    servers: Servers, writer: SessionWriter
) -> None:
    """A summary missing sections is not used: the offline summary stands in, and the
    fallback reason names the issue codes."""
    client, fake = await start_summarizing(
        servers, answering(lambda _: "## Objective\n- Fix the parser bugs.\n")
    )
    result = await request(client, "ds4/compact", compact_params(writer))

    assert len(fake.calls) == 1
    assert result["summarizer"] == "offline"
    assert "missing-section" in result["fallbackReason"]
    assert result["validation"]["status"] == "valid"
    assert result["compaction"]["summary"].startswith("## Objective\n")
    assert all(f"## {name}\n" in result["compaction"]["summary"] for name in SECTIONS)
    record = result["compaction"]["details"]["ds4ContextEngine"]
    assert (record["provider"], record["model"]) == ("ds4", "offline-v1")


async def test_a_repairable_client_summary_is_repaired_and_kept(
    servers: Servers, writer: SessionWriter
) -> None:
    """A wrong Files Read bullet is overwritten with the known inventory and a bullet holding
    an unsupported exact value is pruned; the client's summary stays in use."""

    def repairable(call: dict[str, Any]) -> str:
        text = valid_summary(call)
        text = text.replace("## Files Read\n", "## Files Read\n- `src/never_opened_module.py`\n", 1)
        return text.replace(
            "## Completed Work\n",
            "## Completed Work\n- Bumped the build to `zq-build-7731`.\n",
            1,
        )

    client, _fake = await start_summarizing(servers, answering(repairable))
    result = await request(client, "ds4/compact", compact_params(writer))

    assert result["summarizer"] == "client"
    assert result["fallbackReason"] is None
    validation = result["validation"]
    assert {"unsupported-read-file", "unsupported-exact-value"} <= set(validation["issueCodes"])
    assert "files-overwritten" in validation["repairs"]
    assert "bullets-pruned" in validation["repairs"]
    assert validation["status"] == "valid"
    summary = result["compaction"]["summary"]
    assert "never_opened_module" not in summary and "zq-build-7731" not in summary
    assert "Each parser function strips whitespace" in summary


async def test_a_slow_client_times_out_to_the_offline_summary_and_is_cancelled(
    servers: Servers, writer: SessionWriter
) -> None:
    """A client that does not answer within compaction.summarizeTimeoutMs gets
    $/cancelRequest; the compaction finishes offline and the server keeps serving."""

    async def too_slow(call: dict[str, Any]) -> Any:
        await asyncio.sleep(TIMEOUT_S)  # far beyond the 300 ms timeout: that is the point
        return {"summary": valid_summary(call)}

    client, fake = await start_summarizing(servers, too_slow, {"summarizeTimeoutMs": 300})
    result = await request(client, "ds4/compact", compact_params(writer))

    assert result["summarizer"] == "offline"
    assert result["fallbackReason"] == "the client did not answer ds4/summarize within 300 ms"
    assert result["validation"]["status"] == "valid"
    await asyncio.wait_for(fake.cancelled.wait(), TIMEOUT_S)
    planned = await request(client, "ds4/plan", plan_params(writer.path, "and now?"))
    assert planned["mode"] == "managed"


async def test_plans_are_served_while_compactions_wait_for_the_client(
    servers: Servers, writer: SessionWriter
) -> None:
    """Compactions waiting for ds4/summarize run on their own threads: more of them than the
    engine has threads never hold up ds4/plan."""
    release = asyncio.Event()
    asked = 0
    all_asked = asyncio.Event()

    async def held(call: dict[str, Any]) -> Any:
        nonlocal asked
        asked += 1
        if asked == 2:
            all_asked.set()
        await release.wait()
        return {"summary": valid_summary(call)}

    client, _fake = await start_summarizing(servers, held)
    compactions = [
        asyncio.ensure_future(request(client, "ds4/compact", compact_params(writer)))
        for _ in range(5)
    ]
    await asyncio.wait_for(all_asked.wait(), TIMEOUT_S)  # both compaction threads are waiting
    for question in ("and now?", "what next?", "which files?", "any errors?", "done?"):
        planned = await request(client, "ds4/plan", plan_params(writer.path, question))
        assert planned["mode"] == "managed"
    release.set()
    results = await asyncio.wait_for(asyncio.gather(*compactions), TIMEOUT_S * 2)
    assert [r["summarizer"] for r in results] == ["client"] * 5


async def test_shutdown_stops_waiting_for_the_client_and_the_compaction_finishes(
    servers: Servers, writer: SessionWriter
) -> None:
    """`shutdown` while ds4/summarize is out (default timeout: 2 minutes) cancels the request;
    the compaction completes offline and the server exits long before that timeout."""

    async def never(call: dict[str, Any]) -> Any:
        await asyncio.sleep(TIMEOUT_S * 10)

    client, fake = await start_summarizing(servers, never)
    compacting = asyncio.create_task(request(client, "ds4/compact", compact_params(writer)))
    await asyncio.wait_for(fake.asked.wait(), TIMEOUT_S)

    code = await asyncio.wait_for(servers.stop(client), 20)
    result = await asyncio.wait_for(compacting, TIMEOUT_S)

    assert code == 0
    assert result["summarizer"] == "offline"
    assert result["fallbackReason"] == (
        "ds4/summarize was not answered: the server is shutting down"
    )
    await asyncio.wait_for(fake.cancelled.wait(), TIMEOUT_S)


async def test_a_client_without_the_capability_is_never_asked(
    servers: Servers, writer: SessionWriter
) -> None:
    """Without capabilities.experimental.ds4.summarize the server does not send
    ds4/summarize (even when the client could answer it) and summarizes offline."""
    fake = FakeSummarizer(answering(valid_summary))
    client = await servers.start(
        initialization_options=SMALL_SPANS, client_features={"ds4/summarize": fake.handle}
    )
    result = await request(client, "ds4/compact", compact_params(writer))

    assert fake.calls == []
    assert result["summarizer"] == "offline"
    assert result["fallbackReason"]
    assert result["validation"]["status"] == "valid"
    assert result["warnings"] == []


async def test_a_client_error_answer_falls_back_naming_the_error(
    servers: Servers, writer: SessionWriter
) -> None:
    """A JSON-RPC error answer to ds4/summarize becomes the fallback reason."""

    async def refuse(call: dict[str, Any]) -> Any:
        raise JsonRpcException(code=-32050, message="no model is configured for summaries")

    client, fake = await start_summarizing(servers, refuse)
    result = await request(client, "ds4/compact", compact_params(writer))

    assert len(fake.calls) == 1
    assert result["summarizer"] == "offline"
    assert result["fallbackReason"] == (
        "the client answered ds4/summarize with error -32050: no model is configured for summaries"
    )


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (["a list"], "ds4/summarize answered without a string `summary`"),
        ({"text": "## Objective"}, "ds4/summarize answered without a string `summary`"),
        (None, "ds4/summarize answered without a string `summary`"),
        (
            {"summary": "x", "provider": 7},
            "ds4/summarize: result.provider: expected a string in the client's answer",
        ),
    ],
)
async def test_an_answer_of_the_wrong_shape_falls_back_saying_so(
    servers: Servers, writer: SessionWriter, answer: Any, reason: str
) -> None:
    """A result that is not {summary: string, provider?: string, model?: string} is not used."""

    async def misshapen(call: dict[str, Any]) -> Any:
        return answer

    client, _fake = await start_summarizing(servers, misshapen)
    result = await request(client, "ds4/compact", compact_params(writer))
    assert (result["summarizer"], result["fallbackReason"]) == ("offline", reason)


# --------------------------------------------------------------------------- the graph


async def test_a_second_compaction_on_the_branch_aggregates_the_first(
    servers: Servers, writer: SessionWriter
) -> None:
    """After the first compaction entry is written, the next compaction builds a segment for
    the new span and an aggregate over [first root, new segment] as the branch's root."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    first = await request(client, "ds4/compact", compact_params(writer, reason="threshold"))
    assert (first["summaryKind"], first["graphLevel"]) == ("segment", 0)
    writer.compaction(first["compaction"])
    for n in (4, 5, 6):
        writer.turn(n)

    second = await request(client, "ds4/compact", compact_params(writer))

    assert (second["summaryKind"], second["graphLevel"]) == ("aggregate", 1)
    assert second["span"]["previousSummaryId"] == first["summaryId"]
    assert second["segmentSummaryId"] != second["summaryId"]
    record = second["compaction"]["details"]["ds4ContextEngine"]
    assert record["childSummaryIds"] == [first["summaryId"], second["segmentSummaryId"]]
    assert record["reason"] == "manual"
    assert [n["summaryId"] for n in record["embeddedNodes"]] == [second["segmentSummaryId"]]
    with_previous = await request(
        client,
        "ds4/compact",
        compact_params(writer, previousSummaryId=first["summaryId"]),
    )  # naming the branch's root explicitly is accepted
    assert with_previous["span"]["previousSummaryId"] == first["summaryId"]


async def test_commit_and_failure_notifications_change_the_lifecycle(
    servers: Servers, writer: SessionWriter
) -> None:
    """A prepared batch becomes committed with ds4/compactCommitted and failed with
    ds4/compactFailed, as ds4.summaries shows; a malformed notification is ignored."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    kept = await request(client, "ds4/compact", compact_params(writer))
    dropped = await request(client, "ds4/compact", compact_params(writer))

    view = await execute(client, "ds4.summaries", summaries_args(writer))
    lifecycles = {sid: node["lifecycle"] for sid, node in nodes_by_id(view).items()}
    assert lifecycles == {kept["summaryId"]: "prepared", dropped["summaryId"]: "prepared"}

    client.protocol.notify("ds4/compactCommitted", {"entryId": 7})  # bad: ignored, no answer
    line = await notify_and_wait(
        client, "ds4/compactCommitted", {"summaryId": kept["summaryId"], "entryId": "feedbeef"}
    )
    assert line == f"ds4/compactCommitted: summary={kept['summaryId']} changed=1"
    await notify_and_wait(
        client,
        "ds4/compactFailed",
        {"summaryId": dropped["summaryId"], "reason": "the user cancelled"},
    )

    view = await execute(client, "ds4.summaries", summaries_args(writer))
    nodes = nodes_by_id(view)
    assert nodes[kept["summaryId"]]["lifecycle"] == "committed"
    assert nodes[dropped["summaryId"]]["lifecycle"] == "failed"


def fork_session(writer: SessionWriter, name: str, session_id: str) -> SessionWriter:
    """Session B as Pi's `/fork` writes it: a header with a new id and `parentSession`, then a
    copy of A's entries (compaction entries and the summary ids they carry included)."""
    fork = SessionWriter(writer.path.parent / name, session_id=session_id)
    lines = writer.path.read_text(encoding="utf-8").splitlines(keepends=True)
    header = {**json.loads(lines[0]), "id": session_id, "parentSession": str(writer.path)}
    fork.path.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    fork._next, fork._minute, fork.leaf = writer._next, writer._minute, writer.leaf
    return fork


async def test_a_forked_session_has_its_own_nodes_and_notifications_name_the_session(
    servers: Servers, writer: SessionWriter
) -> None:
    """A fork copies A's compaction entry: ds4.summaries of the fork shows its own committed
    copy of the node. A notification naming `session` changes that session's nodes only; one
    without it changes the session where the batch is still pending."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    first = await request(client, "ds4/compact", compact_params(writer))
    entry_id = writer.compaction(first["compaction"])  # written; A not synced yet
    fork = fork_session(writer, "fork.jsonl", "0a1b2c3d-fork")

    view = await execute(client, "ds4.summaries", summaries_args(fork))
    assert view["sessionId"] == fork.session_id
    assert view["activeRootId"] == first["summaryId"]
    assert nodes_by_id(view)[first["summaryId"]]["lifecycle"] == "committed"

    summary_id = first["summaryId"]
    line = await notify_and_wait(
        client,
        "ds4/compactFailed",
        {"summaryId": summary_id, "session": {"file": str(fork.path)}},
    )
    assert line == f"ds4/compactFailed: summary={summary_id} changed=0"  # B's copy: committed
    line = await notify_and_wait(client, "ds4/compactFailed", {"summaryId": summary_id})
    assert line == f"ds4/compactFailed: summary={summary_id} changed=1"  # A's batch
    line = await notify_and_wait(
        client,
        "ds4/compactCommitted",
        {
            "summaryId": summary_id,
            "entryId": entry_id,
            "session": {"file": str(writer.path), "leafId": writer.leaf},
        },
    )
    assert line == f"ds4/compactCommitted: summary={summary_id} changed=1"

    fork.turn(4, topic="fork")
    fork.turn(5, topic="fork")
    second = await request(client, "ds4/compact", compact_params(fork))
    assert second["span"]["previousSummaryId"] == summary_id
    view_a = await execute(client, "ds4.summaries", summaries_args(writer))
    assert set(nodes_by_id(view_a)) == {summary_id}
    view_b = await execute(client, "ds4.summaries", summaries_args(fork))
    assert set(nodes_by_id(view_b)) == {
        summary_id,
        second["segmentSummaryId"],
        second["summaryId"],
    }


async def test_a_written_compaction_entry_commits_its_batch_without_a_notification(
    servers: Servers, writer: SessionWriter
) -> None:
    """ds4.summaries syncs the session first: the entry in the file marks the batch committed,
    and its root becomes the branch's active root."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    result = await request(client, "ds4/compact", compact_params(writer))
    entry_id = writer.compaction(result["compaction"])

    view = await execute(client, "ds4.summaries", summaries_args(writer))

    node = nodes_by_id(view)[result["summaryId"]]
    assert node["lifecycle"] == "committed"
    assert view["activeRootId"] == result["summaryId"]
    assert view["leafId"] == entry_id
    assert view["sessionId"] == writer.session_id


async def test_a_server_start_fails_batches_left_prepared_and_the_entry_revives_them(
    servers: Servers, writer: SessionWriter
) -> None:
    """A batch still prepared when another server starts on the database is marked failed
    (nobody is left to report it); its entry appearing in the session commits it anyway."""
    first = await servers.start(initialization_options=SMALL_SPANS)
    result = await request(first, "ds4/compact", compact_params(writer))

    second = await servers.start(initialization_options=SMALL_SPANS)
    view = await execute(second, "ds4.summaries", summaries_args(writer))
    assert nodes_by_id(view)[result["summaryId"]]["lifecycle"] == "failed"

    writer.compaction(result["compaction"])
    view = await execute(second, "ds4.summaries", summaries_args(writer))
    assert nodes_by_id(view)[result["summaryId"]]["lifecycle"] == "committed"
    assert view["activeRootId"] == result["summaryId"]


async def test_each_branch_compacts_separately(servers: Servers, writer: SessionWriter) -> None:
    """Two branches from one parent: each compaction sees only its own branch, and each
    branch's view has its own active root with the other branch's root as alternate."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    fork = writer.leaf
    for n in (4, 5):
        writer.turn(n, topic="lexer")
    left = await request(client, "ds4/compact", compact_params(writer))
    left_entry = writer.compaction(left["compaction"])

    writer.leaf = fork
    for n in (4, 5):
        writer.turn(n, topic="printer")
    right = await request(client, "ds4/compact", compact_params(writer))
    right_entry = writer.compaction(right["compaction"])

    assert right["summaryKind"] == "segment"  # no aggregate over the left branch's root
    assert right["span"]["previousSummaryId"] is None
    assert "lexer" not in right["compaction"]["summary"]

    left_view = await execute(client, "ds4.summaries", summaries_args(writer, left_entry))
    right_view = await execute(client, "ds4.summaries", summaries_args(writer, right_entry))
    assert left_view["activeRootId"] == left["summaryId"]
    assert right_view["activeRootId"] == right["summaryId"]
    assert nodes_by_id(left_view)[right["summaryId"]]["role"] == "alternate-branch"
    assert nodes_by_id(right_view)[left["summaryId"]]["role"] == "alternate-branch"


async def test_summaries_as_dot_add_the_graphviz_text(
    servers: Servers, writer: SessionWriter
) -> None:
    """format "dot" adds the Graphviz text, naming each node."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    result = await request(client, "ds4/compact", compact_params(writer))
    view = await execute(client, "ds4.summaries", summaries_args(writer, format="dot"))
    assert view["dot"].startswith("digraph")
    assert result["summaryId"] in view["dot"]
    plain_view = await execute(client, "ds4.summaries", summaries_args(writer))
    assert "dot" not in plain_view


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"reason": "manual"}, "params.session"),
        ({"session": {"leafId": "x"}}, "params.session.file"),
        ({"session": "FILE", "reason": "sometimes"}, "params.reason"),
        ({"session": "FILE", "firstKeptEntryId": 12}, "params.firstKeptEntryId"),
        ({"session": "FILE", "firstKeptEntryId": "nope1234"}, "params.firstKeptEntryId"),
        (
            {"session": "FILE", "previousSummaryId": "s-0000000000000000"},
            "params.previousSummaryId",
        ),
        ({"session": {"file": "/no/such/session.jsonl"}}, "params.session.file"),
    ],
)
async def test_bad_compact_params_are_invalid_params_naming_the_field(
    servers: Servers, writer: SessionWriter, params: dict[str, Any], field: str
) -> None:
    """Bad input is -32602 naming the field; the server keeps serving."""
    client = await servers.start(initialization_options=SMALL_SPANS)
    if params.get("session") == "FILE":
        params = {**params, "session": {"file": str(writer.path)}}

    error = await request_error(client, "ds4/compact", params)

    assert error.code == INVALID_PARAMS
    assert error.message.startswith(f"ds4/compact: {field}")
    assert error.data and field in error.data["fields"]
    health = await execute(client, "ds4.health")
    assert health["status"] == "ok"


async def test_a_short_session_has_nothing_to_compact_and_a_disabled_server_refuses(
    servers: Servers, tmp_path: Path
) -> None:
    """A branch within compaction.keepRecentTokens cannot be compacted, and with
    compaction.enabled off every ds4/compact is refused; both say what to do."""
    short = SessionWriter(tmp_path / "short.jsonl")
    short.user("hello")
    short.assistant("hi there")
    client = await servers.start(initialization_options=SMALL_SPANS)
    error = await request_error(client, "ds4/compact", compact_params(short))
    assert error.code == REQUEST_FAILED
    assert error.message.startswith("ds4/compact: nothing to compact:")
    assert "firstKeptEntryId" in error.message  # the way out

    disabled = await servers.start(
        initialization_options={"settings": {"compaction": {"enabled": False}}}
    )
    error = await request_error(disabled, "ds4/compact", compact_params(short))
    assert error.code == REQUEST_FAILED
    assert "compaction.enabled" in error.message


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        (lambda session: [], "params.arguments"),
        (lambda session: [{"format": "dot"}], "params.arguments[0].session"),
        (lambda session: [session, session], "params.arguments"),
        (lambda session: [[session]], "params.arguments[0]"),
        (lambda session: [{"session": session, "format": "svg"}], "params.arguments[0].format"),
        (lambda session: [{"session": {"file": 3}}], "params.arguments[0].session.file"),
        (
            lambda session: [{"session": {"file": "/no/such.jsonl"}}],
            "params.arguments[0].session.file",
        ),
        (
            lambda session: [{"session": {**session, "leafId": "nope"}}],
            "params.arguments[0].session.leafId",
        ),
    ],
)
async def test_bad_summaries_arguments_are_invalid_params_naming_the_field(
    servers: Servers,
    writer: SessionWriter,
    arguments: Callable[[dict[str, Any]], list[Any]],
    field: str,
) -> None:
    """ds4.summaries takes exactly one {session, format?} object."""
    client = await servers.start()
    with pytest.raises(JsonRpcException) as caught:
        await execute(client, "ds4.summaries", arguments({"file": str(writer.path)}))
    assert caught.value.code == INVALID_PARAMS
    assert caught.value.message.startswith(f"ds4.summaries: {field}")
    assert caught.value.data == {"fields": [field]}


async def test_compaction_of_the_large_real_session_summarizes_offline(
    servers: Servers, session_file: Path
) -> None:
    """The 1 MB pi-mono session compacts with the default settings: most of its messages go
    into the span, the recent ones stay, and the offline summary is valid."""
    client = await servers.start()
    result = await request(client, "ds4/compact", {"session": {"file": str(session_file)}})

    assert result["summarizer"] == "offline"
    assert result["validation"]["status"] == "valid"
    assert result["span"]["messageCount"] > 500
    assert result["compaction"]["tokensBefore"] > result["span"]["tokens"]
    view = await execute(client, "ds4.summaries", [{"session": {"file": str(session_file)}}])
    assert view["sessionId"] == SESSION_ID
    assert result["summaryId"] in nodes_by_id(view)
