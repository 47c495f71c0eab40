--- The ds4-lsp clients: lifecycle hooks of `lsp/ds4.lua`, finding or starting a client, and
--- sending requests and commands to it.

local trust = require('ds4.trust')

local M = {}

---@class ds4.ClientState
---@field root string?
---@field trusted boolean
---@field source ds4.TrustSource
---@field summarize boolean? whether it declared `experimental.ds4.summarize`

--- What each running client was told about trust (and whether it offers summaries), by id.
---@type table<integer, ds4.ClientState>
M.state = {}

--- Trust sent in `initialize`, by client config table, until `on_init` records it by id.
local pending = setmetatable({}, { __mode = 'k' })

--- Progress tokens whose notifications are echoed (user commands, not API calls).
---@type table<string, boolean>
local echoed_tokens = {}
local token_counter = 0

--- The client that served the last request (preferred where no workspace root applies).
---@type integer?
M.last_client_id = nil

--- Overridable in tests: whether a user can answer a prompt.
---@return boolean
function M.ui_attached()
  return #vim.api.nvim_list_uis() > 0
end

---@param params lsp.InitializeParams
---@return string?
local function root_of(params)
  local uri = params.rootUri
  if type(uri) == 'string' then
    return vim.uri_to_fname(uri)
  end
  local folders = params.workspaceFolders
  if type(folders) == 'table' and folders[1] then
    return vim.uri_to_fname(folders[1].uri)
  end
  return nil
end

--- Add `experimental.ds4.summarize = true` to `capabilities`, keeping what is there.
---@param capabilities table
function M.declare_summarize(capabilities)
  local experimental = type(capabilities.experimental) == 'table' and capabilities.experimental
    or {}
  local ds4 = type(experimental.ds4) == 'table' and experimental.ds4 or {}
  ds4.summarize = true
  experimental.ds4 = ds4
  capabilities.experimental = experimental
end

--- `before_init` of `lsp/ds4.lua`: decide trust for the client's root and send it as
--- `initializationOptions.trusted` (false unless a trust decision allows the root); declare
--- `experimental.ds4.summarize` when the setup option `summarize` is a function.
---@param params lsp.InitializeParams
---@param config vim.lsp.ClientConfig
function M.before_init(params, config)
  local root = root_of(params)
  local trusted, source = trust.decide(root)
  local options = {}
  if type(params.initializationOptions) == 'table' then
    for key, value in pairs(params.initializationOptions) do
      options[key] = value
    end
  end
  options.trusted = trusted
  if type(options.settings) ~= 'table' or next(options.settings) == nil then
    options.settings = vim.empty_dict()
  end
  params.initializationOptions = options
  local summarize = type(require('ds4.config').options.summarize) == 'function'
  if summarize then
    params.capabilities = params.capabilities or {}
    M.declare_summarize(params.capabilities)
  end
  pending[config] = { root = root, trusted = trusted, source = source, summarize = summarize }
end

--- `on_init` of `lsp/ds4.lua`: remember the trust sent, then ask about an undecided root
--- (once, when `trust_prompt` is on and a UI is attached).
---@param client vim.lsp.Client
function M.on_init(client)
  local sent = pending[client.config]
    or { root = client.root_dir, trusted = false, source = 'default' }
  M.state[client.id] =
    { root = sent.root, trusted = sent.trusted, source = sent.source, summarize = sent.summarize }
  -- A decision made while the server was starting.
  M.sync_trust(client)
  local options = require('ds4.config').options
  if
    not M.state[client.id].trusted
    and options.trust_prompt
    and M.ui_attached()
    and trust.should_ask(sent.root)
  then
    vim.schedule(function()
      trust.prompt(sent.root, function(action)
        if action then
          require('ds4').trust(sent.root, action)
        end
      end)
    end)
  end
end

---@param client_id integer
function M.on_exit(_, _, client_id)
  vim.schedule(function()
    M.state[client_id] = nil
  end)
end

--- `$/progress` handler: the default one, plus an echo for the commands a user ran.
function M.on_progress(err, result, ctx)
  local default = vim.lsp.handlers['$/progress']
  local value = default and default(err, result, ctx)
  if type(result) == 'table' and echoed_tokens[result.token] and type(result.value) == 'table' then
    local progress = result.value
    local text = progress.title or ''
    if progress.message then
      text = text .. ': ' .. progress.message
    end
    if progress.percentage then
      text = ('%s (%d%%)'):format(text, progress.percentage)
    end
    if progress.kind == 'end' then
      echoed_tokens[result.token] = nil
    end
    vim.api.nvim_echo({ { text } }, false, {})
  end
  return value
end

--- The JSON-RPC error answering `ds4/summarize` (RequestFailed; the server then summarizes
--- offline and names `message` in `fallbackReason`).
---@param message string
local function summarize_error(message)
  local codes = vim.lsp.protocol.ErrorCodes
  return vim.lsp.rpc.rpc_response_error(codes.RequestFailed or codes.InternalError, message)
end

--- The `ds4/summarize` handler of `lsp/ds4.lua` (a server-to-client request, asked only when
--- `before_init` declared the capability): calls the setup option
--- `summarize(params, done)` and answers with what it passes to `done`:
--- `done(summary, { provider = ..., model = ... })` answers `{ summary, provider, model }`;
--- `done(nil, message)` (or an error raised by the function) answers a JSON-RPC error, and
--- the server falls back to its offline summary. `done` may be called later (asynchronously):
--- Neovim runs server-request handlers in a coroutine, which waits for it. The server stops
--- waiting after its `compaction.summarizeTimeoutMs`; a later answer is dropped.
---@param params table the wire params: summaryKind, prompt, sourceHash, tokenLimit,
---  sessionId, sourceEntryIds, readFiles, modifiedFiles
---@return table? result
---@return table? err
function M.on_summarize(_, params, _)
  local summarize = require('ds4.config').options.summarize
  if type(summarize) ~= 'function' then
    return nil,
      summarize_error('ds4: no summarize function is configured (setup({ summarize = ... }))')
  end
  if type(params) ~= 'table' or type(params.prompt) ~= 'string' then
    return nil,
      vim.lsp.rpc.rpc_response_error(
        vim.lsp.protocol.ErrorCodes.InvalidParams,
        'ds4/summarize: params.prompt must be a string'
      )
  end
  local co, is_main = coroutine.running()
  local async = co ~= nil and not is_main
  local finished, waiting = false, false
  local result, problem
  local function done(summary, info)
    if finished then
      return
    end
    finished = true
    if type(summary) == 'string' and vim.trim(summary) ~= '' then
      result = { summary = summary }
      if type(info) == 'table' then
        result.provider = type(info.provider) == 'string' and info.provider or nil
        result.model = type(info.model) == 'string' and info.model or nil
      end
    elseif summary == nil then
      problem = type(info) == 'string' and info
        or (type(info) == 'table' and tostring(info.message or vim.inspect(info)))
        or 'the summarize function gave no summary'
    else
      problem = 'the summarize function gave an empty or non-string summary'
    end
    if waiting then
      vim.schedule(function()
        coroutine.resume(co)
      end)
    end
  end
  local ok, raised = pcall(summarize, params, done)
  if not ok and not finished then
    finished, problem = true, 'the summarize function failed: ' .. tostring(raised)
  end
  if not finished then
    if not async then
      finished, problem = true, 'the summarize function must call done() before returning here'
    else
      waiting = true
      coroutine.yield()
    end
  end
  if result then
    return result, nil
  end
  return nil, summarize_error(problem)
end

--- Tell `client` its root's current trust if it changed since it was last told
--- (`workspace/didChangeConfiguration` with `{ ds4 = { trusted = ... } }`).
---@param client vim.lsp.Client
---@return boolean changed
function M.sync_trust(client)
  local state = M.state[client.id]
  if not state or client:is_stopped() then
    return false
  end
  local trusted, source = trust.decide(state.root)
  if trusted == state.trusted then
    state.source = source
    return false
  end
  client:notify('workspace/didChangeConfiguration', { settings = { ds4 = { trusted = trusted } } })
  state.trusted, state.source = trusted, source
  return true
end

--- The ds4 clients, initialized or starting.
---@param filter table?
---@return vim.lsp.Client[]
function M.clients(filter)
  local f = vim.tbl_extend('force', filter or {}, { name = 'ds4', _uninitialized = true })
  return vim.lsp.get_clients(f)
end

--- The workspace root of a buffer by the config's root markers (nil when none is found).
---@param bufnr integer
---@return string?
function M.root_for(bufnr)
  local config = vim.lsp.config.ds4
  local markers = (config and config.root_markers) or require('ds4.config').options.root_markers
  return vim.fs.root(bufnr, markers)
end

---@param cmd string[]|function
---@return string
local function cmd_problem(cmd)
  if type(cmd) == 'table' and cmd[1] and vim.fn.executable(cmd[1]) == 0 then
    return ("ds4: the server command '%s' is not executable; "):format(cmd[1])
      .. 'install ds4-lsp or set `cmd` (:help ds4-setup)'
  end
  return 'ds4: the language server could not be started (see :checkhealth ds4 and :LspLog)'
end

--- The client for `bufnr`: the one attached to it, else the one of its root, else a new one
--- started for its root without attaching it.
---@param bufnr integer
---@return vim.lsp.Client? client
---@return string? err
function M.find_or_start(bufnr)
  local attached = M.clients({ bufnr = bufnr })
  for _, client in ipairs(attached) do
    if not client:is_stopped() then
      return client
    end
  end
  local root = M.root_for(bufnr)
  local running = vim.tbl_filter(function(client)
    return not client:is_stopped()
  end, M.clients())
  for _, client in ipairs(running) do
    if client.root_dir == root then
      return client
    end
  end
  if not root and #running > 0 then
    -- No workspace here (a result buffer, a scratch buffer, a file outside any project):
    -- any running server answers ds4 requests the same way.
    local last = M.last_client_id and vim.lsp.get_client_by_id(M.last_client_id)
    return (last and not last:is_stopped()) and last or running[1]
  end
  local config = vim.lsp.config.ds4
  if not config then
    return nil,
      "ds4: no LSP config 'ds4' found; is editors/nvim on 'runtimepath'? (:help ds4-install)"
  end
  config = vim.deepcopy(config)
  config.name = 'ds4'
  config.root_dir = root
  config.workspace_required = false
  local ok, id = pcall(vim.lsp.start, config, { attach = false, silent = true })
  local client = ok and id and vim.lsp.get_client_by_id(id) or nil
  if not client then
    return nil, cmd_problem(config.cmd)
  end
  return client
end

--- Call `cb(err, client)` once a ds4 client for `bufnr` is initialized (starting one if
--- needed). `err` is `{ message }` when none starts within `start_timeout_ms`.
---@param bufnr integer?
---@param cb fun(err: table?, client: vim.lsp.Client?)
function M.with_client(bufnr, cb)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local client, problem = M.find_or_start(bufnr)
  if not client then
    return cb({ message = problem }, nil)
  end
  M.last_client_id = client.id
  if client.initialized then
    return cb(nil, client)
  end
  local timeout_ms = require('ds4.config').options.start_timeout_ms
  local started = vim.uv.now()
  local timer = assert(vim.uv.new_timer())
  timer:start(
    10,
    10,
    vim.schedule_wrap(function()
      if timer:is_closing() then
        return
      end
      local waited = vim.uv.now() - started
      if client.initialized or client:is_stopped() or waited > timeout_ms then
        timer:stop()
        timer:close()
        if client.initialized and not client:is_stopped() then
          cb(nil, client)
        elseif client:is_stopped() then
          cb({ message = cmd_problem(client.config.cmd) }, nil)
        else
          cb(
            { message = ('ds4: the server did not initialize within %d ms'):format(timeout_ms) },
            nil
          )
        end
      end
    end)
  )
end

---@param err table|string
---@return {code: integer?, message: string, data: any}
local function as_error(err)
  if type(err) == 'table' then
    return { code = err.code, message = tostring(err.message or vim.inspect(err)), data = err.data }
  end
  return { message = tostring(err) }
end

--- Send `method` with `params` to the ds4 client of `opts.bufnr` (default: current buffer) and
--- call `cb(err, result)`: `err` is `{ code?, message, data? }` (the JSON-RPC error, or a
--- plugin error without `code`), `result` the server's result table.
---@param method string
---@param params table?
---@param cb fun(err: table?, result: any)
---@param opts {bufnr: integer?}?
function M.request(method, params, cb, opts)
  opts = opts or {}
  M.with_client(opts.bufnr, function(err, client)
    if err or not client then
      return cb(as_error(err or 'ds4: no client'), nil)
    end
    local sent = client:request(method, params or vim.empty_dict(), function(rerr, result)
      if rerr then
        cb(as_error(rerr), nil)
      else
        cb(nil, result)
      end
    end)
    if not sent then
      cb({ message = 'ds4: the server is not running (see :checkhealth ds4)' }, nil)
    end
  end)
end

--- Send the notification `method` with `params` to the ds4 client of `opts.bufnr` (default:
--- current buffer), starting it if needed; then `cb(err)` when given.
---@param method string
---@param params table
---@param cb fun(err: table?)?
---@param opts {bufnr: integer?}?
function M.notify(method, params, cb, opts)
  opts = opts or {}
  cb = cb or function(err)
    if err then
      vim.notify(method .. ': ' .. err.message, vim.log.levels.WARN)
    end
  end
  M.with_client(opts.bufnr, function(err, client)
    if err or not client then
      return cb(as_error(err or 'ds4: no client'))
    end
    if not client:notify(method, params) then
      return cb({ message = 'ds4: the server is not running (see :checkhealth ds4)' })
    end
    cb(nil)
  end)
end

--- Run a server command (`ds4.health`, `ds4.rebuildIndex`, `ds4.summaries`) with a work-done
--- token and `opts.arguments` (default none).
---@param command string
---@param cb fun(err: table?, result: any)
---@param opts {bufnr: integer?, echo_progress: boolean?, arguments: table?}?
function M.execute(command, cb, opts)
  opts = opts or {}
  token_counter = token_counter + 1
  local token = ('ds4-nvim-%d'):format(token_counter)
  if opts.echo_progress then
    echoed_tokens[token] = true
  end
  local params = { command = command, workDoneToken = token }
  if opts.arguments then
    params.arguments = opts.arguments
  end
  M.request('workspace/executeCommand', params, cb, opts)
end

return M
