"""ds4_lsp: the DS4 context engine served over the Language Server Protocol (pygls 2)."""

__version__ = "0.1.0"
