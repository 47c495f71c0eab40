"""Model switches (DS4 M11, docs/model-awareness.md): which provider/model each session's last
plan was for, so a plan for another one is recorded as a switch in its manifest
(`modelAwareness.modelSwitch`). A switched-to model is planned with its own profile: its window,
its overrides and its own calibration.

The last model of a session is kept in memory (bounded); after a restart it is read from the
session's latest stored manifest.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from ..logs import describe_failure
from ..store import manifests as manifest_repo
from .context import EngineContext
from .profiles import UNKNOWN

log = logging.getLogger("ds4_core.engine")

KEPT_SESSIONS = 1024
"""Sessions whose last model is kept in memory (least recently planned dropped first)."""


class ModelSwitches:
    """The last planned model per session (see the module docstring). Thread-safe."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._last: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def planned(self, session_id: str | None, provider: str, model: str) -> dict[str, str] | None:
        """Note that a plan of `session_id` is for `provider/model`; returns `{from, to}`
        (`provider/model` strings) when the session's previous plan was for another model,
        else None (also for the first plan, and without a session). Never raises: a database
        that cannot be read counts as no previous plan."""
        if session_id is None:
            return None
        current = (provider, model)
        with self._lock:
            previous = self._last.get(session_id)
        if previous is None:
            previous = self._stored(session_id)
        with self._lock:
            self._last[session_id] = current
            self._last.move_to_end(session_id)
            while len(self._last) > KEPT_SESSIONS:
                self._last.popitem(last=False)
        if previous is None or previous == current or UNKNOWN in (previous[0], provider):
            return None  # a call whose provider nobody named is no switch
        return {"from": "/".join(previous), "to": "/".join(current)}

    def _stored(self, session_id: str) -> tuple[str, str] | None:
        try:
            return manifest_repo.latest_model(self._context.store(), session_id)
        except Exception as exc:  # a switch is metadata: the plan stands
            log.warning("last model not read: error=%s", describe_failure(exc))
            return None
