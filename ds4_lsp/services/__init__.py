"""What the LSP handlers share: project sync scheduling (`project_sync`), stale-snippet
diagnostics (`diagnostics`), work-done progress (`progress`) and open documents with LSP line
rules (`documents`). Services import neither `ds4_lsp.app` nor any handler; they name the
server's type (`Ds4Server`, which owns them) only under `if TYPE_CHECKING:`."""
