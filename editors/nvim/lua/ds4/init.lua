--- ds4 for Neovim: setup, the Lua API for AI plugins, and workspace trust.
---
--- API: every call takes protocol params (docs/protocol.md: Lua tables, camelCase keys) and a
--- callback `cb(err, result)`. `err` is nil on success, else `{ code?, message, data? }`:
--- the JSON-RPC error (`code` -32602 for invalid params) or a plugin error without `code`
--- (no server). `result` is the server's result table (JSON null is `vim.NIL`).
--- The client used is the one attached to `opts.bufnr` (default: the current buffer), else
--- the one of its workspace root, else one started for that root. See `:help ds4-api`.

local client = require('ds4.client')
local config = require('ds4.config')
local trust = require('ds4.trust')

local M = {}

--- Id of the last manifest planned through this module (for :Ds4Manifest without an id).
---@type string?
M.last_manifest_id = nil

--- `provider/id` of the last plan's model (the default destination of :Ds4Privacy).
---@type string?
M.last_model = nil

--- Configure and (by default) enable the `ds4` LSP config. Safe to call again.
---@param opts ds4.Options?
function M.setup(opts)
  if vim.fn.has('nvim-0.11') == 0 then
    vim.notify('ds4: Neovim >= 0.11 is required', vim.log.levels.ERROR)
    return
  end
  local options = config.set(opts)
  vim.lsp.config('ds4', config.lsp_overrides(options))
  if options.enable then
    vim.lsp.enable('ds4')
  end
  require('ds4.commands').create()
  -- trusted_roots may have changed for running clients.
  for _, c in ipairs(client.clients()) do
    client.sync_trust(c)
  end
end

---@param params table?
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.plan(params, cb, opts)
  vim.validate('cb', cb, 'function')
  client.request('ds4/plan', params, function(err, result)
    if result and type(result.manifestId) == 'string' then
      M.last_manifest_id = result.manifestId
    end
    local model = result and result.model
    if
      type(model) == 'table'
      and type(model.provider) == 'string'
      and type(model.id) == 'string'
    then
      M.last_model = model.provider .. '/' .. model.id
    end
    cb(err, result)
  end, opts)
end

--- `ds4/retrieve`. Params pass through, e.g. `scopes = { 'history', 'project', 'git' }`
--- (default `{ 'history' }`); project hits come back in `result.project`, with
--- `result.projectStatus`; commits in `result.git`, with `result.gitStatus`; and per scope
--- searched, `result.relevance[scope].why` says why nothing was sent (nil when something was).
---@param params table?
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.retrieve(params, cb, opts)
  vim.validate('cb', cb, 'function')
  client.request('ds4/retrieve', params, cb, opts)
end

---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.manifest(params, cb, opts)
  vim.validate('cb', cb, 'function')
  client.request('ds4/manifest', params, cb, opts)
end

--- `ds4.health` (workspace/executeCommand).
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.health(cb, opts)
  vim.validate('cb', cb, 'function')
  client.execute('ds4.health', cb, opts)
end

--- `ds4.projectStatus` (workspace/executeCommand): the project index of the workspace.
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.project_status(cb, opts)
  vim.validate('cb', cb, 'function')
  client.execute('ds4.projectStatus', cb, opts)
end

--- Report an agent tool run: sends the `ds4/toolExecuted` notification (`{ tool, paths }`) to
--- the ds4 server of `opts.bufnr` (default: the current buffer), starting it if needed.
--- `write`, `edit`, `bash` and unknown tools make the server re-sync the project (the `paths`
--- re-read first); `read`, `grep`, `find` and `ls` do nothing. `cb(err)` is optional.
---@param tool string e.g. 'write', 'edit', 'bash'
---@param paths string[]? files the tool touched: absolute or relative to the workspace root
---@param opts {bufnr: integer?, cb: fun(err: table?)?}?
function M.tool_executed(tool, paths, opts)
  vim.validate('tool', tool, 'string')
  vim.validate('paths', paths, 'table', true)
  opts = opts or {}
  client.notify('ds4/toolExecuted', { tool = tool, paths = paths or {} }, opts.cb, opts)
end

--- Send the notification `method` with `params` when `problems` (a `ds4.usage` check's) is
--- empty; else send nothing and report them, prefixed by `method`, to `opts.cb(err)` (or with
--- vim.notify at ERROR level without a callback).
---@return boolean sent
---@return string? problem
local function checked_notify(method, params, problems, opts)
  opts = opts or {}
  if #problems > 0 then
    local message = method .. ': ' .. table.concat(problems, '; ')
    if opts.cb then
      opts.cb({ message = message })
    else
      vim.notify(message, vim.log.levels.ERROR)
    end
    return false, message
  end
  client.notify(method, params, opts.cb, opts)
  return true, nil
end

--- `ds4/usage`: report what the provider said the response to a planned request cost, after
--- each response. Params: `{ manifestId, provider, model, usage = { input, output?, cacheRead?,
--- cacheWrite? }, stopReason? }` (Pi's `Usage` table can be passed as `usage` as is: its
--- `totalTokens` and `cost` are ignored; continuation clients add `outputItems` or
--- `outputItemHashes`, and `hasResponseId`). The manifest then has `actualTokens` (input +
--- cacheRead + cacheWrite) and `usage` with the cache share, and the server calibrates that
--- model's budgets (docs/model-awareness.md).
---
--- The params are checked first: on a bad field nothing is sent, `opts.cb(err)` gets
--- `{ message = 'ds4/usage: params.usage.input must be an integer >= 0, got -1' }` (without a
--- callback the message is shown with vim.notify at ERROR level), and this returns
--- `false, message`. Otherwise it sends the notification and returns `true`; `opts.cb(err)`
--- is called once sent (err when there is no server).
---@param params table
---@param opts {bufnr: integer?, cb: fun(err: table?)?}?
---@return boolean sent
---@return string? problem
function M.report_usage(params, opts)
  return checked_notify('ds4/usage', params, require('ds4.usage').problems(params), opts)
end

--- `ds4/continuationFailed`: the provider rejected the `previous_response_id` of a plan whose
--- `continuation.mode` was `delta` (a stale handle). The server drops the session's
--- continuation state (of `provider`/`model` when given), so the next plan is `full`.
--- Params: `{ session = { file }, provider?, model?, reason? }`. Checked first, reported and
--- returned like |ds4.report_usage()|.
---@param params table
---@param opts {bufnr: integer?, cb: fun(err: table?)?}?
---@return boolean sent
---@return string? problem
function M.continuation_failed(params, opts)
  local problems = require('ds4.usage').continuation_failed_problems(params)
  return checked_notify('ds4/continuationFailed', params, problems, opts)
end

--- `ds4/compact`: summarize the older part of a session's active branch (docs/compaction.md).
--- Params: `{ session = { file, leafId? }, reason?, firstKeptEntryId?, previousSummaryId?,
--- customInstructions? }`. The server asks the `summarize` setup function for the text when
--- one is configured, else (or when it fails) summarizes offline (`result.summarizer`,
--- `result.fallbackReason`). ds4 never writes the session file: append `result.compaction` as
--- a Pi compaction entry, then call `compact_committed` (or `compact_failed`).
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.compact(params, cb, opts)
  vim.validate('params', params, 'table')
  vim.validate('cb', cb, 'function')
  client.request('ds4/compact', params, cb, opts)
end

--- Run the server command `command` with its one argument object `argument`.
---@param command string
---@param argument table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
local function execute_with(command, argument, cb, opts)
  client.execute(command, cb, vim.tbl_extend('force', opts or {}, { arguments = { argument } }))
end

--- `ds4.summaries` (workspace/executeCommand): a session's summary graph. Params:
--- `{ session = { file, leafId? }, format? = 'json'|'dot' }` (`dot` adds `result.dot`).
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.summaries(params, cb, opts)
  vim.validate('params', params, 'table')
  vim.validate('cb', cb, 'function')
  execute_with('ds4.summaries', params, cb, opts)
end

--- `ds4.privacy` (workspace/executeCommand): what the destination `model` (`provider/id`,
--- e.g. `openai/gpt-4o`) may see under the privacy policy. The result: `{ enabled, provider,
--- class ('local'|'remote'), allowed, withheld, redactSecrets, explanation }`.
---@param model string
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.privacy(model, cb, opts)
  vim.validate('model', model, 'string')
  vim.validate('cb', cb, 'function')
  execute_with('ds4.privacy', { model = model }, cb, opts)
end

--- `ds4/compactCommitted`: the agent appended the compaction entry of `summary_id` (the
--- result's `summaryId`); `entry_id` is that Pi entry's id, if known. `opts.cb(err)` optional.
---@param summary_id string
---@param entry_id string?
---@param opts {bufnr: integer?, cb: fun(err: table?)?}?
function M.compact_committed(summary_id, entry_id, opts)
  vim.validate('summary_id', summary_id, 'string')
  vim.validate('entry_id', entry_id, 'string', true)
  opts = opts or {}
  client.notify(
    'ds4/compactCommitted',
    { summaryId = summary_id, entryId = entry_id },
    opts.cb,
    opts
  )
end

--- `ds4/compactFailed`: the agent did not append the compaction entry of `summary_id`.
---@param summary_id string
---@param reason string?
---@param opts {bufnr: integer?, cb: fun(err: table?)?}?
function M.compact_failed(summary_id, reason, opts)
  vim.validate('summary_id', summary_id, 'string')
  vim.validate('reason', reason, 'string', true)
  opts = opts or {}
  client.notify('ds4/compactFailed', { summaryId = summary_id, reason = reason }, opts.cb, opts)
end

--- Send the pin/memory write `method` with `params`, its `session` defaulted (|ds4-memory|).
local function write_request(method, params, cb, opts)
  vim.validate('params', params, 'table')
  vim.validate('cb', cb, 'function')
  require('ds4.memory').with_session(params, cb, opts, function(p)
    client.request(method, p, cb, opts)
  end)
end

--- `ds4/pin`: pin text so every plan of the session carries it (docs/memory.md). Params:
--- `{ session?, content, scope? = 'session'|'branch'|'project', classification?,
--- sourceEntryId?, sourceFile?, supersedes? }`. Without `session`: the session file
--- (|ds4.session_file()|), else the workspace's server-owned session (|ds4.session_open()|).
--- Every write returns the Pi custom entry that records it, `{ customType, data, itemId,
--- appended, entryId, entry }`: appended by the server for a session it owns (`appended =
--- true`); else not recorded until the agent's Pi extension calls `pi.appendEntry(customType,
--- data)` or `entry` (the complete line; absent from older servers) is appended to the file.
--- A refused write (a repeat, an unknown or inactive id, a conflicting claim) is `err.code ==
--- -32803` with the server's message and `err.data.conflictsWith`; for a conflict
--- (`err.data.kind == 'conflict'`, not `'repeat'`) pass it as `supersedes`.
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.pin(params, cb, opts)
  write_request('ds4/pin', params, cb, opts)
end

--- `ds4/unpin`: `{ session?, pinId, reason? }` marks the active pin deleted (see |ds4.pin()|).
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.unpin(params, cb, opts)
  write_request('ds4/unpin', params, cb, opts)
end

--- `ds4/remember`: `{ session?, claim, scope? = 'project'|'session', key?, classification?,
--- sourceEntryIds?, supersedes? }` records a claim (see |ds4.pin()| for the result and errors).
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.remember(params, cb, opts)
  write_request('ds4/remember', params, cb, opts)
end

--- `ds4/forget`: `{ session?, memoryId, status? = 'invalid'|'expired', reason? }` (see
--- |ds4.pin()|).
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.forget(params, cb, opts)
  write_request('ds4/forget', params, cb, opts)
end

--- `ds4/memory`: `{ session?, includeInactive? }` lists pins and memory items with their
--- provenance: `{ sessionId, memory, pins, counts, problems }` (docs/protocol.md).
---@param params table?
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.memory(params, cb, opts)
  vim.validate('cb', cb, 'function')
  client.request('ds4/memory', params, cb, opts)
end

--- `ds4/artifactSearch`: `{ query, artifactId? | session?, maxMatches? }` finds literal text
--- (case-insensitive) in stored tool outputs: `{ query, matches = { { artifactId, sourceId,
--- line, column, excerpt } }, searched, truncated }`; excerpts are bounded, secrets redacted,
--- private keys and classified text withheld (docs/privacy.md "Excerpts of long texts").
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.artifact_search(params, cb, opts)
  vim.validate('params', params, 'table')
  vim.validate('cb', cb, 'function')
  client.request('ds4/artifactSearch', params, cb, opts)
end

--- `ds4/sessionOpen`. Without params (nil or `{}`): the workspace's server-owned session,
--- opened once per workspace root and reopened by its remembered id (|ds4-owned-session|; a
--- failed reopen keeps the id and returns the error). With params `{ cwd?, title?, sessionId?
--- }`: the request as given. The result: `{ sessionId, file, leafId, created, cwd }`.
---@param params table?
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.session_open(params, cb, opts)
  vim.validate('params', params, 'table', true)
  vim.validate('cb', cb, 'function')
  if params == nil or next(params) == nil then
    return require('ds4.memory').owned_session(cb, opts)
  end
  client.request('ds4/sessionOpen', params, cb, opts)
end

--- Forget the DS4-owned session remembered for the workspace of `opts.bufnr` (its file stays
--- where it is), so the next call without a session opens a new one: for a session that can
--- no longer be reopened (|ds4-owned-session|). The forgotten `{ sessionId, file }`, or nil.
---@param opts {bufnr: integer?}?
---@return {sessionId: string, file: string}?
function M.forget_owned_session(opts)
  return require('ds4.memory').forget_owned(opts)
end

--- `ds4/sessionAppend`: `{ session?, messages, parentId? }` appends Pi messages (user,
--- assistant, toolResult tables) to a session the server owns (default: the workspace's,
--- |ds4.session_open()|). The result: `{ sessionId, file, entryIds, leafId }`.
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.session_append(params, cb, opts)
  vim.validate('params', params, 'table')
  vim.validate('cb', cb, 'function')
  if params.session ~= nil then
    return client.request('ds4/sessionAppend', params, cb, opts)
  end
  require('ds4.memory').owned_session(function(err, owned)
    if err then
      return cb(err, nil)
    end
    local p = vim.tbl_extend('force', params, { session = { file = owned.file } })
    client.request('ds4/sessionAppend', p, cb, opts)
  end, opts)
end

--- `ds4.rebuildIndex` (workspace/executeCommand), with `$/progress`.
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.rebuild(cb, opts)
  vim.validate('cb', cb, 'function')
  client.execute('ds4.rebuildIndex', cb, opts)
end

--- Send new settings (docs/configuration.md) to every running ds4 server, on top of the
--- current ones; also used for servers started later.
---@param settings table
function M.update_settings(settings)
  vim.validate('settings', settings, 'table')
  local options = config.options
  options.settings = vim.tbl_deep_extend('force', options.settings or {}, settings)
  options.settings.trusted = nil
  vim.lsp.config('ds4', { init_options = { settings = options.settings } })
  local sent = vim.deepcopy(settings)
  sent.trusted = nil
  for _, c in ipairs(client.clients()) do
    if c.initialized and not c:is_stopped() then
      c:notify('workspace/didChangeConfiguration', { settings = { ds4 = sent } })
    end
  end
end

--- The workspace root of `bufnr` (default: current buffer): its ds4 client's root, else the
--- one found by the root markers.
---@param bufnr integer?
---@return string?
function M.root(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  for _, c in ipairs(client.clients({ bufnr = bufnr })) do
    local state = client.state[c.id]
    if state and state.root then
      return state.root
    end
    if c.root_dir then
      return c.root_dir
    end
  end
  return client.root_for(bufnr)
end

--- Record a trust decision for `root` ('allow', 'deny' or 'remove'; default 'allow') and tell
--- the running servers it covers (`workspace/didChangeConfiguration` `{ds4 = {trusted}}`).
---@param root string? default: the current buffer's root
---@param action ('allow'|'deny'|'remove')?
---@return string normalized root
function M.trust(root, action)
  root = root or M.root()
  assert(root, 'ds4.trust: no workspace root')
  local normalized = trust.set(root, action or 'allow')
  for _, c in ipairs(client.clients()) do
    local state = client.state[c.id]
    if state and state.root and trust.is_within(trust.normalize(state.root), normalized) then
      client.sync_trust(c)
    end
  end
  return normalized
end

--- The trust of `bufnr`'s workspace: `{ root, trusted, source, sent }`, where `sent` is what
--- its running server was told (nil when no server runs for it).
---@param bufnr integer?
---@return {root: string?, trusted: boolean, source: ds4.TrustSource, sent: boolean?}
function M.trust_state(bufnr)
  local root = M.root(bufnr)
  local trusted, source = trust.decide(root)
  local sent
  for _, c in ipairs(client.clients()) do
    local state = client.state[c.id]
    if state and state.root == root then
      sent = state.trusted
    end
  end
  return { root = root, trusted = trusted, source = source, sent = sent }
end

--- The Pi session file for :Ds4Plan / :Ds4Retrieve: `explicit`, else `vim.g.ds4_session_file`,
--- else the setup option `session_file` (strings or functions returning one). Absolute path.
---@param explicit string?
---@return string? file
---@return string? problem
function M.session_file(explicit)
  local candidates = { explicit, vim.g.ds4_session_file, config.options.session_file }
  for i = 1, 3 do
    local candidate = candidates[i]
    if type(candidate) == 'function' then
      candidate = candidate()
    end
    if type(candidate) == 'string' and candidate ~= '' then
      return vim.fn.fnamemodify(vim.fs.normalize(candidate), ':p'), nil
    end
  end
  return nil,
    'no session file: pass --session=PATH, set vim.g.ds4_session_file, '
      .. 'or setup({ session_file = ... }) (:help ds4-session)'
end

return M
