"""`workspace/didChangeConfiguration`: apply new settings to the engine."""

from __future__ import annotations

from lsprotocol import types

from ds4_lsp.protocol import settings_section
from ds4_lsp.server import Ds4Server

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
    settings = settings_section(params.settings)
    if settings is None and ls.supports_configuration:
        pulled = await ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        )
        settings = settings_section(pulled[0] if pulled else None)
    if settings is None:
        return
    warnings = await ls.run_engine(ls.engine.update_settings, settings, method="settings")
    for warning in warnings:
        ls.show_message(warning)
