"""The DS4 context engine: `ContextEngine`, a thin facade over one service per concern.

docs/architecture.md ("The engine package") has one line per module of this package, the
direction of their imports, and which service answers each `ds4/*` method.
"""

from .context import ProgressCallback
from .facade import ContextEngine

__all__ = ["ContextEngine", "ProgressCallback"]
