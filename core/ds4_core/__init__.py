"""ds4_core: the runtime-neutral DS4 context engine.

The engine keeps an agent's memory outside its context window: it indexes Pi session JSONL into
SQLite/FTS5, retrieves historical evidence, plans the messages of the next model call within a
token budget and records a metadata-only manifest of every plan. `ds4_core.engine.ContextEngine`
is the facade used by the `ds4` CLI and by the `ds4_lsp` server.

This module only names the version: it imports nothing, so `import ds4_core.tokens` stays cheap
and no module of the package imports its way back here in a circle
(tests/lsp/test_import_graph.py).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
