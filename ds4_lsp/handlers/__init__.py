"""LSP handlers, one module per concern. Each translates LSP types, calls one `ContextEngine`
method through `Ds4Server.run_engine`, and translates back; registration is in
`ds4_lsp.app.create_server`. Handlers import the server (`ds4_lsp.server`), what they share
(`ds4_lsp.services`) and the wire modules (`methods`, `params`, `converter`), never
`ds4_lsp.app` and never each other."""
