"""`workspace/didChangeConfiguration`: apply new settings to the engine."""

from __future__ import annotations

import logging

from lsprotocol import types

from ds4_core.config import flatten_settings
from ds4_lsp.logs import apply_log_level_setting
from ds4_lsp.params import settings_section
from ds4_lsp.server import Ds4Server

log = logging.getLogger(__name__)

SECTION = "ds4"
"""The configuration section pulled with `workspace/configuration`."""


async def did_change_configuration(
    ls: Ds4Server, params: types.DidChangeConfigurationParams
) -> None:
    """Apply `params.settings` (under `ds4` or at the top level) with `update_settings`.

    When the client sends no settings (the LSP "pull" style), they are requested with
    `workspace/configuration` if the client supports it. Each ignored value is shown with
    `window/showMessage` (Warning); nothing here is fatal.
    """
    trusted = _trust_grant(params.settings)
    if trusted is not None and trusted != ls.options.trusted:
        ls.options.trusted = trusted
        log.info("workspace trust changed: trusted=%s", trusted)
        await ls.project.trust_changed()  # a grant starts indexing, without a restart
    settings = settings_section(params.settings)
    if settings is not None:
        settings = {k: v for k, v in settings.items() if k != "trusted"} or None
    if settings is None and trusted is None and ls.supports_configuration:
        pulled = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
        settings = settings_section(pulled[0] if pulled else None)
    if settings is None:
        return
    warnings = await ls.run_engine(ls.engine.update_settings, settings, method="settings")
    if "diagnostics.logLevel" in flatten_settings(settings):
        apply_log_level_setting(ls.engine.config.diagnostics.log_level)
    ls.apply_frame_limit(settings)
    for warning in warnings:
        ls.show_message(warning)


def _trust_grant(raw: object) -> bool | None:
    """`trusted` sent with the settings (top level or in the `ds4` section), else None.

    Editors report workspace trust this way when the user grants it after start-up (docs/
    protocol.md). Only the client decides trust: no settings file can set it.
    """
    if not isinstance(raw, dict):
        return None
    for scope in (raw, raw.get("ds4")):
        if isinstance(scope, dict) and isinstance(scope.get("trusted"), bool):
            return bool(scope["trusted"])
    return None
