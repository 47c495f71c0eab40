"""Compaction: `ds4/compact`, the `ds4/summarize` bridge to the client, and the
`ds4/compactCommitted` / `ds4/compactFailed` notifications (docs/compaction.md).

The engine runs a compaction on a worker thread and calls its summarizer there, blocking. When
the client offers `ds4/summarize` (`capabilities.experimental.ds4.summarize: true`), that
summarizer is `client_summarizer`: it hands the request to the event loop
(`Ds4Server.request_client_from_thread`), which sends it and waits at most
`compaction.summarizeTimeoutMs`, so the loop keeps serving other requests meanwhile. Anything
but a usable answer raises `SummarizerUnavailable`, and the engine uses its offline summarizer
with that message as `fallbackReason`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from pygls.exceptions import JsonRpcException

from ds4_core.json_bounds import bounded_text
from ds4_core.requests import SummarizeAnswer, SummarizeCall, Summarizer, SummarizerUnavailable
from ds4_core.results import LifecycleResult
from ds4_core.wire import JsonObject
from ds4_lsp.converter import summarize_answer
from ds4_lsp.methods import DS4_COMPACT, DS4_COMPACT_COMMITTED, DS4_COMPACT_FAILED, DS4_SUMMARIZE
from ds4_lsp.params import (
    CompactCommittedParams,
    CompactFailedParams,
    CompactParams,
    SummarizeParams,
)
from ds4_lsp.server import ClientRequestFailed, Ds4Server, with_wire
from ds4_lsp.services.progress import WorkDoneProgress

log = logging.getLogger(__name__)

CLIENT_MESSAGE_CHARS = 400
"""How much of the client's error message a fallback reason quotes (characters): enough for
an editor's message with a file path in front of it, never a client's megabytes."""


async def compact(ls: Ds4Server, params: CompactParams) -> JsonObject:
    """`ds4/compact`: summarize the span of the session's active branch and prepare the
    summary nodes; the result holds the compaction entry for the client to write.

    The client is asked for the summary with `ds4/summarize` when it offers it, else the
    offline summarizer writes it. Reports work-done progress (begin, a report while the client
    summarizes, end). Errors: InvalidParams naming the field (unknown session file, `leafId`,
    `firstKeptEntryId`, a `previousSummaryId` that is not the branch's root); RequestFailed
    (-32803) when there is nothing to compact or compaction is turned off. Runs on the
    compaction threads, so a client slow to summarize never holds up plans.
    """
    request = params.to_core()
    async with WorkDoneProgress(ls, "ds4: compacting the session") as progress:
        summarizer = client_summarizer(ls, progress) if ls.client_offers_summarize else None
        result, answer = await ls.run_engine(
            lambda: with_wire(ls.engine.compact(request, summarizer)),
            method=DS4_COMPACT,
            compaction=True,
        )
        progress.end_message = (
            f"{result.summary_kind} summary {result.summary_id} ({result.summarizer} summarizer)"
        )
    ls.log_request(DS4_COMPACT, result.log_summary())
    return answer


def client_summarizer(ls: Ds4Server, progress: WorkDoneProgress) -> Summarizer:
    """A `Summarizer` that asks the client with `ds4/summarize`; call it on a worker thread.

    Waits at most `compaction.summarizeTimeoutMs` (read now, when the compaction starts). Raises
    `SummarizerUnavailable` when the client does not answer in time (the request is then
    cancelled with `$/cancelRequest`), answers with a JSON-RPC error (its code and message are
    named), or answers without a string `summary`.
    """
    loop = asyncio.get_running_loop()
    timeout_ms = ls.engine.config.compaction.summarize_timeout_ms

    def summarize(call: SummarizeCall) -> SummarizeAnswer:
        progress.report(1, 2, "waiting for the client's summary")
        params = SummarizeParams.from_core(call)
        try:
            result = ls.request_client_from_thread(loop, DS4_SUMMARIZE, params, timeout_ms / 1000)
        except TimeoutError:
            log.warning("%s: no answer within %d ms", DS4_SUMMARIZE, timeout_ms)
            raise SummarizerUnavailable(
                f"the client did not answer {DS4_SUMMARIZE} within {timeout_ms} ms"
            ) from None
        except JsonRpcException as exc:
            log.warning("%s: the client answered error %s", DS4_SUMMARIZE, exc.code)
            raise SummarizerUnavailable(
                f"the client answered {DS4_SUMMARIZE} with error {exc.code}: "
                f"{bounded_text(exc.message, CLIENT_MESSAGE_CHARS)}"
            ) from None
        except ClientRequestFailed as exc:
            raise SummarizerUnavailable(f"{DS4_SUMMARIZE} was not answered: {exc}") from None
        return summarize_answer(result)

    return summarize


async def compact_committed(ls: Ds4Server, params: CompactCommittedParams) -> None:
    """`ds4/compactCommitted`: the client wrote the compaction entry; mark the operation whose
    root is `summaryId` committed (`entryId`: the Pi entry carrying it; `session`: the session
    file, else every session where it is pending). A notification: problems are logged (ids
    only), never answered."""
    session = params.session.to_core() if params.session else None
    await _change_lifecycle(
        ls,
        DS4_COMPACT_COMMITTED,
        lambda: ls.engine.compact_committed(params.summary_id, params.entry_id, session),
        params.summary_id,
    )


async def compact_failed(ls: Ds4Server, params: CompactFailedParams) -> None:
    """`ds4/compactFailed`: the client did not write the compaction entry; mark the operation
    whose root is `summaryId` failed (in `session` when given, else in every session where it
    is prepared). A notification: problems are logged (ids only), never answered; `reason` is
    stored with the nodes, never logged."""
    session = params.session.to_core() if params.session else None
    await _change_lifecycle(
        ls,
        DS4_COMPACT_FAILED,
        lambda: ls.engine.compact_failed(params.summary_id, params.reason, session),
        params.summary_id,
    )


async def _change_lifecycle(
    ls: Ds4Server, method: str, change: Callable[[], LifecycleResult], summary_id: str
) -> None:
    """Run the engine's lifecycle `change` off the loop and log the outcome (ids, counts)."""
    try:
        result = await ls.run_engine(change, method=method)
    except JsonRpcException:  # run_engine logged the field or exception type
        log.warning("%s: ignored for summary %.40s", method, summary_id)
        return
    ls.log_request(method, f"summary={summary_id:.40} changed={len(result.changed)}")
