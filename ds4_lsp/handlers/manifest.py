"""`ds4/manifest`."""

from __future__ import annotations

from typing import Any

from ds4_lsp.methods import DS4_MANIFEST
from ds4_lsp.params import ManifestParams
from ds4_lsp.server import Ds4Server


async def manifest(ls: Ds4Server, params: ManifestParams) -> dict[str, Any]:
    """`ds4/manifest`: a plan's manifest (metadata only) by `id`, or a session's latest.

    Errors: InvalidParams naming `id` or `session.file` when neither selects a manifest.
    """
    request = params.to_core()
    result = await ls.run_engine(lambda: ls.engine.manifest(request).to_wire(), method=DS4_MANIFEST)
    ls.log_request(DS4_MANIFEST, f"manifest={result.get('id')} view={params.view}")
    return result
