"""Native continuation from the client: `ds4/continuationFailed`.

The decision itself is part of `ds4/plan` (its `continuation`); the response's output arrives
with `ds4/usage`. docs/model-awareness.md "Native continuation".
"""

from __future__ import annotations

import logging

from pygls.exceptions import JsonRpcException

from ds4_lsp.methods import DS4_CONTINUATION_FAILED
from ds4_lsp.params import ContinuationFailedParams
from ds4_lsp.server import Ds4Server

log = logging.getLogger("ds4_lsp.continuation")


async def continuation_failed(ls: Ds4Server, params: ContinuationFailedParams) -> None:
    """`ds4/continuationFailed` (notification): the provider rejected the client's
    `previous_response_id`; drop the session's continuation states (of `provider`/`model`
    when given) so the next plan is `full` (`continuation-handle-rejected`). A notification:
    a bad session file is logged naming the field, never answered; `reason` is not logged."""
    try:
        dropped = await ls.run_engine(
            ls.engine.continuation_failed,
            params.session.to_core(),
            params.provider,
            params.model,
            method=DS4_CONTINUATION_FAILED,
        )
    except JsonRpcException:  # run_engine logged the field
        log.warning("%s: ignored", DS4_CONTINUATION_FAILED)
        return
    ls.log_request(DS4_CONTINUATION_FAILED, f"dropped={dropped}")
