"""ds4_lsp: the DS4 context engine served over the Language Server Protocol (pygls 2).

The adapter is released in lockstep with ds4-context-core and requires exactly its version, so
the version is the core's, written once in ds4_core/__init__.py (RELEASING.md).
"""

from ds4_core import __version__

__all__ = ["__version__"]
