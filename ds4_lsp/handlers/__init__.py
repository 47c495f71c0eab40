"""LSP handlers, one module per concern. Each translates LSP types, calls one `ContextEngine`
method through `Ds4Server.run_engine`, and translates back; registration is in
`ds4_lsp.server.create_server`."""
