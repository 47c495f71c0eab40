"""`initialize` and `shutdown`: the engine's lifetime."""

from __future__ import annotations

from lsprotocol import types

from ds4_lsp.protocol import parse_initialization_options
from ds4_lsp.server import Ds4Server


async def initialize(ls: Ds4Server, params: types.InitializeParams) -> None:
    """`initialize`: read `initializationOptions`, start the engine and open its database.

    Invalid options and settings are ignored and each is shown with `window/showMessage`
    (Warning), as are database notices (a corrupt file moved aside); none of them is fatal.
    """
    options, warnings = parse_initialization_options(params.initialization_options)
    warnings += await ls.open_engine(options)
    for warning in warnings:
        ls.show_message(warning)


async def shutdown(ls: Ds4Server, params: None) -> None:
    """`shutdown`: let engine calls in flight finish (briefly), then close the database."""
    await ls.close_engine()
