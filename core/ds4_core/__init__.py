"""ds4_core: the runtime-neutral DS4 context engine.

The engine keeps an agent's memory outside its context window: it indexes Pi session JSONL into
SQLite/FTS5, retrieves historical evidence, plans the messages of the next model call within a
token budget and records a metadata-only manifest of every plan. `ContextEngine` is the facade
used by the `ds4` CLI and by the `ds4_lsp` server.
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["ContextEngine", "__version__"]

if TYPE_CHECKING:
    from .engine import ContextEngine


def __getattr__(name: str) -> Any:
    # Imported on first use so that `import ds4_core.tokens` stays cheap.
    if name == "ContextEngine":
        from .engine import ContextEngine

        return ContextEngine
    raise AttributeError(f"module 'ds4_core' has no attribute {name!r}")
