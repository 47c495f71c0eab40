--- Options of `require('ds4').setup()` and their defaults (`:help ds4-setup`).

local M = {}

---@class ds4.Options
---@field cmd string[]|string Command starting the server (default `{ 'ds4-lsp' }`).
---@field cmd_env table<string,string>? Extra environment of the server (e.g. `{ DS4_DB = path }`).
---@field settings table ds4 settings (docs/configuration.md), nested or dotted.
---@field database_path string? Database file (`initializationOptions.databasePath`).
---@field trusted_roots string[] Directories whose workspaces (and subdirectories) are trusted.
---@field trust_prompt boolean Ask once per untrusted root (when a UI is attached); remembered.
---@field session_file string|fun():string? Default Pi session for :Ds4Plan/:Ds4Retrieve.
---@field root_markers string[] Files marking a workspace root.
---@field filetypes string[]? Filetypes to attach to (nil: every file buffer).
---@field enable boolean Call `vim.lsp.enable('ds4')` in setup().
---@field view 'split'|'vsplit'|'tab'|'float' Where result buffers open.
---@field start_timeout_ms integer How long an API call waits for the server to initialize.
---@field summarize fun(params: table, done: fun(summary: string?, info: table|string?))? Writes
---compaction summaries: declares `capabilities.experimental.ds4.summarize` and answers the
---server's `ds4/summarize` (`:help ds4-summarize`). Nil: the server summarizes offline.

---@type ds4.Options
M.defaults = {
  cmd = { 'ds4-lsp' },
  cmd_env = nil,
  settings = {},
  database_path = nil,
  trusted_roots = {},
  trust_prompt = true,
  session_file = nil,
  root_markers = { '.git', '.hg', '.jj' },
  filetypes = nil,
  enable = true,
  view = 'split',
  start_timeout_ms = 15000,
}

---@type ds4.Options
M.options = vim.deepcopy(M.defaults)

local VIEWS = { split = true, vsplit = true, tab = true, float = true }

local KNOWN = {}
for _, key in ipairs({
  'cmd',
  'cmd_env',
  'settings',
  'database_path',
  'trusted_roots',
  'trust_prompt',
  'session_file',
  'root_markers',
  'filetypes',
  'enable',
  'view',
  'start_timeout_ms',
  'summarize',
}) do
  KNOWN[key] = true
end

--- Validate and store `opts` on top of the defaults. Unknown keys are reported (not fatal).
---@param opts table?
---@return ds4.Options
function M.set(opts)
  opts = opts or {}
  vim.validate('opts', opts, 'table')
  vim.validate('cmd', opts.cmd, { 'table', 'string' }, true)
  vim.validate('cmd_env', opts.cmd_env, 'table', true)
  vim.validate('settings', opts.settings, 'table', true)
  vim.validate('database_path', opts.database_path, 'string', true)
  vim.validate('trusted_roots', opts.trusted_roots, 'table', true)
  vim.validate('trust_prompt', opts.trust_prompt, 'boolean', true)
  vim.validate('session_file', opts.session_file, { 'string', 'function' }, true)
  vim.validate('root_markers', opts.root_markers, 'table', true)
  vim.validate('filetypes', opts.filetypes, 'table', true)
  vim.validate('enable', opts.enable, 'boolean', true)
  vim.validate('start_timeout_ms', opts.start_timeout_ms, 'number', true)
  vim.validate('summarize', opts.summarize, 'function', true)
  vim.validate('view', opts.view, function(v)
    return v == nil or VIEWS[v] ~= nil
  end, "'split', 'vsplit', 'tab' or 'float'")
  for key in pairs(opts) do
    if not KNOWN[key] then
      vim.notify(('ds4.setup: unknown option %q ignored'):format(key), vim.log.levels.WARN)
    end
  end
  local settings = opts.settings and vim.deepcopy(opts.settings) or nil
  if settings and settings.trusted ~= nil then
    -- Trust is decided by trusted_roots and the trust prompt, never by settings.
    settings.trusted = nil
    vim.notify(
      'ds4.setup: settings.trusted ignored; use trusted_roots or :Ds4Trust (:help ds4-trust)',
      vim.log.levels.WARN
    )
  end
  local merged = vim.tbl_extend('force', vim.deepcopy(M.defaults), opts)
  merged.settings = settings or {}
  if type(merged.cmd) == 'string' then
    merged.cmd = { merged.cmd }
  end
  merged.cmd = M.expand_cmd(merged.cmd)
  M.options = merged
  return merged
end

--- `cmd` with `~` (and `$VAR`s) in its executable expanded: `vim.lsp` starts the server
--- without a shell, so `{ '~/src/ds4-lsp/.venv/bin/ds4-lsp' }` would not be found. The
--- arguments are passed as given. A copy; functions are returned as they are.
---@param cmd string[]|function
---@return string[]|function
function M.expand_cmd(cmd)
  if type(cmd) ~= 'table' or type(cmd[1]) ~= 'string' then
    return cmd
  end
  local expanded = vim.deepcopy(cmd)
  local first = expanded[1]
  if first:find('^~') or first:find('%$') then
    expanded[1] = vim.fs.normalize(first)
  end
  return expanded
end

--- The `vim.lsp.config('ds4', ...)` overrides these options imply.
---@param options ds4.Options
---@return vim.lsp.Config
function M.lsp_overrides(options)
  local init_options = {
    trusted = false,
    settings = next(options.settings) and options.settings or vim.empty_dict(),
  }
  if options.database_path then
    init_options.databasePath = vim.fs.normalize(options.database_path)
  end
  local overrides = {
    cmd = options.cmd,
    root_markers = options.root_markers,
    init_options = init_options,
  }
  if options.cmd_env then
    overrides.cmd_env = options.cmd_env
  end
  if options.filetypes then
    overrides.filetypes = options.filetypes
  end
  return overrides
end

return M
