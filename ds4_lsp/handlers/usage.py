"""`ds4/usage`: a provider's usage of a planned call, recorded on its manifest and as a
calibration sample (docs/model-awareness.md; the engine's `record_usage`).

A notification: nothing is answered. A bad field is logged with its name and the report is
dropped; the server keeps serving. The response is taken on the event loop as the notification arrives
(`note_response`: native continuation), and the report is queued for the engine's threads
before any later request (a plan of its model waits while it is written), so a plan the client
sends next always sees it.
"""

from __future__ import annotations

import logging

from pygls.exceptions import JsonRpcException

from ds4_core.json_bounds import echo
from ds4_core.requests import RequestError
from ds4_lsp.methods import DS4_USAGE
from ds4_lsp.params import UsageParams
from ds4_lsp.server import Ds4Server

log = logging.getLogger(__name__)


async def usage(ls: Ds4Server, params: UsageParams) -> None:
    """`ds4/usage`: give the response to continuation at once, on the event loop (in memory,
    bounded: the client's next `ds4/plan`, sent after this, must see it), then record the
    report off the loop and log one line (ids, counts and the calibrated ratio; never the
    response's items)."""
    report = params.to_core()
    try:
        ls.engine.note_response(report)
    except RequestError as exc:
        log.info("%s: rejected input (field %s)", DS4_USAGE, exc.field)
        log.warning("%s: ignored for manifest %s", DS4_USAGE, echo(params.manifest_id))
        return
    try:
        result = await ls.run_engine(ls.engine.record_usage, report, method=DS4_USAGE)
    except JsonRpcException:  # run_engine logged the field or the exception type
        log.warning("%s: ignored for manifest %s", DS4_USAGE, echo(params.manifest_id))
        return
    calibration = result.calibration
    ls.log_request(
        DS4_USAGE,
        f"manifest={result.manifest_id:.40} actual={result.actual_tokens} "
        f"sample={'yes' if result.sample else 'no'} ratio={calibration.get('ratio')} "
        f"samples={calibration.get('samples')}",
    )
