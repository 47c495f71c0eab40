"""ds4_core: the runtime-neutral DS4 context engine.

The engine keeps an agent's memory outside its context window: it indexes Pi session JSONL into
SQLite/FTS5, retrieves historical evidence, plans the messages of the next model call within a
token budget and records a metadata-only manifest of every plan. `ContextEngine` is the facade
used by the `ds4` CLI and by the `ds4_lsp` server.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
