"""What every engine service shares: the store and settings providers (`EngineContext`) and the
progress callback type.

The providers are called at each use, never cached: `ContextEngine` opens the store lazily and
reopens it after `close()`, and `update_settings` replaces the settings snapshot. A service
takes one snapshot of the settings per call (`context.config()`) so that a call sees one
consistent set of settings even while another thread changes them.

Logging: every module of this package logs to the one logger `ds4_core.engine` (not
`__name__`), as the single-module engine did, so log lines keep their logger name and a
`ds4_core.engine` level or filter set by a user or a test still covers all of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Config
from ..store import Store

ProgressCallback = Callable[[int, int, str], None]
"""progress(done, total, message): units are whatever `total` counts (bytes or sessions)."""


@dataclass(frozen=True, slots=True)
class EngineContext:
    """The store and the settings of one `ContextEngine`, as providers.

    Attributes:
        store: the open store (opened, migrated or rebuilt on first use; raises
            `DatabaseUnavailableError` when it cannot be opened).
        config: the current settings snapshot.
    """

    store: Callable[[], Store]
    config: Callable[[], Config]
