-- ds4 for Neovim: user commands. The LSP config is `lsp/ds4.lua`; it is enabled by
-- `require('ds4').setup()` or `vim.lsp.enable('ds4')` (:help ds4).
if vim.g.loaded_ds4 then
  return
end
vim.g.loaded_ds4 = true

if vim.fn.has('nvim-0.11') == 0 then
  return
end

require('ds4.commands').create()
