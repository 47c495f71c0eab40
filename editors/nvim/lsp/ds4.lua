--- ds4-lsp for `vim.lsp.config` (Neovim >= 0.11).
---
--- Picked up from 'runtimepath' as `vim.lsp.config.ds4`. Enable it with
--- `vim.lsp.enable('ds4')` (or `require('ds4').setup()`), override fields with
--- `vim.lsp.config('ds4', {...})`. See `:help ds4-lsp-config`.
---
--- Workspace trust is decided per root by the plugin (`:help ds4-trust`) in `before_init`
--- and sent as `initializationOptions.trusted`; it is never true by default. Keep these
--- `before_init` / `on_init` functions if you override the config (or call the `ds4.client`
--- hooks from yours), otherwise the server is always told "untrusted". `before_init` also
--- declares `capabilities.experimental.ds4.summarize` when `setup({ summarize = fn })` gave a
--- summarizer; the `ds4/summarize` handler below calls it.

---@type vim.lsp.Config
return {
  cmd = { 'ds4-lsp' },
  -- ds4 is not tied to a language: it serves every file buffer of a workspace.
  root_markers = { '.git', '.hg', '.jj' },
  -- Attach only inside a workspace; the Lua API starts a server anywhere when asked.
  workspace_required = true,
  init_options = {
    trusted = false,
    settings = vim.empty_dict(),
  },
  before_init = function(params, config)
    require('ds4.client').before_init(params, config)
  end,
  on_init = function(client, result)
    require('ds4.client').on_init(client, result)
  end,
  on_exit = function(code, signal, client_id)
    require('ds4.client').on_exit(code, signal, client_id)
  end,
  handlers = {
    ['$/progress'] = function(err, result, ctx)
      return require('ds4.client').on_progress(err, result, ctx)
    end,
    -- Asked only when `before_init` declared the capability (setup option `summarize`).
    ['ds4/summarize'] = function(err, params, ctx)
      return require('ds4.client').on_summarize(err, params, ctx)
    end,
  },
}
