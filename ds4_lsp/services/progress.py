"""Work-done progress (`$/progress`, LSP 3.17 "WorkDoneProgress") for long engine calls."""

from __future__ import annotations

import asyncio
import logging
import uuid
from types import TracebackType
from typing import TYPE_CHECKING

from lsprotocol import types

if TYPE_CHECKING:
    from ds4_lsp.server import Ds4Server

log = logging.getLogger("ds4_lsp.progress")

CREATE_TIMEOUT_S = 10.0
"""How long to wait for the client to accept `window/workDoneProgress/create` (s)."""


class WorkDoneProgress:
    """Reports one operation as `begin`, `report` (percentages) and `end` notifications.

    The token is the request's `workDoneToken` when the client sent one; otherwise one is
    created with `window/workDoneProgress/create` if the client supports it (capability
    `window.workDoneProgress`); otherwise nothing is sent. Use as `async with`; `report` is
    the engine's `progress(done, total, message)` callback and may be called from any thread.
    `end_message` set inside the block becomes the `end` notification's message.
    """

    def __init__(self, ls: Ds4Server, title: str) -> None:
        self._ls = ls
        self._title = title
        self._loop = asyncio.get_running_loop()
        self._token: types.ProgressToken | None = None
        self._last_percentage = -1
        self.end_message: str | None = None

    @property
    def token(self) -> types.ProgressToken | None:
        """The progress token in use, or None when the client gets no progress."""
        return self._token

    async def __aenter__(self) -> WorkDoneProgress:
        self._token = self._ls.protocol.work_done_token or await self._create_token()
        if self._token is not None:
            self._ls.work_done_progress.begin(
                self._token,
                types.WorkDoneProgressBegin(title=self._title, percentage=0, cancellable=False),
            )
        return self

    async def _create_token(self) -> types.ProgressToken | None:
        if not self._ls.supports_work_done_progress:
            return None
        token = f"ds4-{uuid.uuid4()}"
        try:
            await asyncio.wait_for(
                self._ls.work_done_progress.create_async(token), CREATE_TIMEOUT_S
            )
        except Exception as exc:  # the client refused or did not answer: work without progress
            log.warning("progress token not created: %s", type(exc).__name__)
            return None
        return token

    def report(self, done: int, total: int, message: str) -> None:
        """Send a `report` when the whole percentage changed (thread-safe; drops repeats).

        `done` and `total` are in any unit (sessions, bytes); total <= 0 reads as 0%.
        """
        if self._token is None:
            return
        percentage = max(0, min(100, done * 100 // total)) if total > 0 else 0
        if percentage == self._last_percentage:
            return
        self._last_percentage = percentage
        value = types.WorkDoneProgressReport(percentage=percentage, message=message)
        self._loop.call_soon_threadsafe(self._ls.work_done_progress.report, self._token, value)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is None:
            return
        message = self.end_message if exc is None else "failed"
        self._ls.work_done_progress.end(self._token, types.WorkDoneProgressEnd(message=message))
