--- User commands: :Ds4Plan, :Ds4Retrieve, :Ds4Manifest, :Ds4Health, :Ds4Rebuild, :Ds4Trust,
--- :Ds4Compact, :Ds4Summaries, :Ds4Privacy, :Ds4Usage, and for durable context :Ds4Pin,
--- :Ds4Remember, :Ds4Memory, :Ds4ArtifactSearch (`ds4.memory`).
--- :Ds4Retrieve --scope=history,project,git searches the session, the trusted workspace's files
--- and/or its Git history (commits).
---
--- Flags are `--name=value` (quote values with spaces: `--session="a b.jsonl"`). For :Ds4Plan,
--- :Ds4Retrieve, :Ds4Compact and :Ds4Summaries they come first and `--` ends them; the rest of
--- the line is the request, query, reason (and focus) or format, taken verbatim. :Ds4Manifest
--- takes them anywhere; :Ds4Usage takes only flags.

local M = {}

local FLAGS = {
  Ds4Plan = { 'session', 'leaf', 'model', 'context-window', 'fixed-tokens', 'mode' },
  Ds4Retrieve = { 'session', 'leaf', 'max', 'max-tokens', 'scope', 'model' },
  Ds4Manifest = { 'session', 'view' },
  Ds4Compact = { 'session', 'leaf', 'first-kept', 'model' },
  Ds4Summaries = { 'session', 'leaf' },
  Ds4Pin = { 'session', 'scope' },
  Ds4Remember = { 'session', 'scope', 'key' },
  Ds4Memory = { 'session' },
  Ds4ArtifactSearch = { 'session', 'artifact', 'max' },
  Ds4Usage = {
    'manifest',
    'model',
    'input',
    'output',
    'cache-read',
    'cache-write',
    'stop-reason',
  },
}

local REASONS = { manual = true, threshold = true, overflow = true }

local function notify_error(message)
  vim.notify(message, vim.log.levels.ERROR)
end

--- Split leading `--name=value` flags from the rest of `args`.
---@param command string
---@param args string
---@return table<string, string>? flags
---@return string|nil rest or the error
function M.parse(command, args)
  local allowed = {}
  for _, name in ipairs(FLAGS[command] or {}) do
    allowed[name] = true
  end
  local flags = {}
  local rest = vim.trim(args or '')
  while vim.startswith(rest, '--') do
    if rest == '--' or rest:match('^%-%-%s') then
      rest = vim.trim(rest:sub(3))
      break
    end
    local name, value, after = rest:match('^%-%-([%w%-]+)="([^"]*)"(.*)$')
    if not name then
      name, value, after = rest:match('^%-%-([%w%-]+)=(%S*)(.*)$')
    end
    if not name then
      name = rest:match('^%-%-([%w%-]+)')
      return nil, ('%s: --%s needs a value (--%s=VALUE)'):format(command, name or '?', name or '?')
    end
    if not allowed[name] then
      local names = vim.tbl_map(function(n)
        return '--' .. n
      end, FLAGS[command] or {})
      return nil,
        ('%s: unknown flag --%s (flags: %s)'):format(command, name, table.concat(names, ', '))
    end
    flags[name] = value
    rest = vim.trim(after)
  end
  return flags, rest
end

---@param command string
---@param flag string
---@param value string?
---@return integer?|false
local function integer_flag(command, flag, value)
  if value == nil then
    return nil
  end
  local n = tonumber(value)
  if not n or n ~= math.floor(n) then
    notify_error(('%s: --%s expects an integer, got %q'):format(command, flag, value))
    return false
  end
  return n
end

--- `--model=PROVIDER/ID` as `{ provider, id }` (nil without the flag; false, after saying
--- why, when malformed). The model that reads the result: its provider is the destination
--- the privacy policy writes the text for.
---@param command string
---@param value string?
---@return table?|false
local function model_flag(command, value)
  if value == nil then
    return nil
  end
  local provider, id = value:match('^([^/]+)/(.+)$')
  if not provider then
    notify_error(('%s: --model expects PROVIDER/ID, got %q'):format(command, value))
    return false
  end
  return { provider = provider, id = id }
end

--- The session reference for a command: `--session`/`--leaf`, else the default session file.
---@param command string
---@param flags table<string, string>
---@return table? session `{ file, leafId? }`
local function session_ref(command, flags)
  local file, problem = require('ds4').session_file(flags.session)
  if not file then
    notify_error(('%s: %s'):format(command, problem))
    return nil
  end
  return { file = file, leafId = flags.leaf }
end

function M.plan(opts)
  local flags, rest = M.parse('Ds4Plan', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest == '' then
    return notify_error(
      'Ds4Plan: give the request to plan, e.g. :Ds4Plan what did we decide about X?'
    )
  end
  local session = session_ref('Ds4Plan', flags)
  if not session then
    return
  end
  local params = { session = session, request = rest }
  local model = model_flag('Ds4Plan', flags.model)
  if model == false then
    return
  end
  model = model or {}
  local window = integer_flag('Ds4Plan', 'context-window', flags['context-window'])
  local fixed = integer_flag('Ds4Plan', 'fixed-tokens', flags['fixed-tokens'])
  if window == false or fixed == false then
    return
  end
  model.contextWindow = window
  if next(model) then
    params.model = model
  end
  params.fixedTokens = fixed
  params.mode = flags.mode
  local ds4 = require('ds4')
  ds4.plan(params, function(err, result)
    if err then
      return notify_error('ds4/plan: ' .. err.message)
    end
    -- The manifest gives the per-item reasons (evidence, exclusions); render without it if
    -- it cannot be fetched.
    ds4.manifest({ id = result.manifestId, view = 'full' }, function(_, manifest)
      require('ds4.ui').show('plan', require('ds4.render').plan(result, manifest), 'ds4 plan')
    end)
  end)
end

local SCOPES = { history = true, project = true, git = true }

--- `history,project,git` -> `{ 'history', 'project', 'git' }` (duplicates dropped, order
--- kept); nil and the problem for an unknown scope or an empty list.
---@param value string
---@return string[]? scopes
---@return string? problem
function M.parse_scopes(value)
  local scopes = {}
  for _, scope in ipairs(vim.split(value, ',', { plain = true, trimempty = true })) do
    scope = vim.trim(scope)
    if not SCOPES[scope] then
      return nil,
        ('Ds4Retrieve: --scope takes history, project and/or git (comma-separated), got %q'):format(
          value
        )
    end
    if not vim.tbl_contains(scopes, scope) then
      scopes[#scopes + 1] = scope
    end
  end
  if #scopes == 0 then
    return nil,
      'Ds4Retrieve: --scope needs history, project and/or git, e.g. --scope=history,project,git'
  end
  return scopes, nil
end

function M.retrieve(opts)
  local flags, rest = M.parse('Ds4Retrieve', opts.args)
  if not flags then
    return notify_error(rest)
  end
  local scopes
  if flags.scope then
    local problem
    scopes, problem = M.parse_scopes(flags.scope)
    if not scopes then
      return notify_error(problem)
    end
  end
  -- A project and/or git search needs no session; history (the default scope) does.
  local session
  if not scopes or vim.tbl_contains(scopes, 'history') or flags.session then
    session = session_ref('Ds4Retrieve', flags)
    if not session then
      return
    end
  end
  local max = integer_flag('Ds4Retrieve', 'max', flags.max)
  local max_tokens = integer_flag('Ds4Retrieve', 'max-tokens', flags['max-tokens'])
  local model = model_flag('Ds4Retrieve', flags.model)
  if max == false or max_tokens == false or model == false then
    return
  end
  local params = {
    session = session,
    query = rest ~= '' and rest or nil,
    maxResults = max,
    maxTokens = max_tokens,
    scopes = scopes,
    model = model,
  }
  require('ds4').retrieve(params, function(err, result)
    if err then
      return notify_error('ds4/retrieve: ' .. err.message)
    end
    require('ds4.ui').show(
      'retrieve',
      require('ds4.render').retrieve(result, scopes),
      'ds4 retrieve'
    )
  end)
end

local VIEWS = { summary = true, included = true, excluded = true, full = true }

function M.manifest(opts)
  -- Flags may come before or after the id here (there is no free text).
  local flags, ids = {}, {}
  for _, word in ipairs(opts.fargs) do
    if vim.startswith(word, '--') then
      local parsed, problem = M.parse('Ds4Manifest', word)
      if not parsed then
        return notify_error(problem)
      end
      flags = vim.tbl_extend('force', flags, parsed)
    else
      ids[#ids + 1] = word
    end
  end
  if #ids > 1 then
    return notify_error('Ds4Manifest: give at most one manifest id')
  end
  local rest = ids[1] or ''
  local view = flags.view
  if view and not VIEWS[view] then
    return notify_error(
      ('Ds4Manifest: --view must be summary, included, excluded or full, got %q'):format(view)
    )
  end
  local ds4 = require('ds4')
  local params = { view = 'full' }
  if rest ~= '' then
    params.id = rest
  else
    local file = ds4.session_file(flags.session)
    if file then
      params.session, params.latest = { file = file }, true
    elseif ds4.last_manifest_id then
      params.id = ds4.last_manifest_id
    else
      return notify_error(
        'Ds4Manifest: give a manifest id, or a session (--session=PATH, '
          .. 'vim.g.ds4_session_file) for its latest manifest'
      )
    end
  end
  ds4.manifest(params, function(err, result)
    if err then
      return notify_error('ds4/manifest: ' .. err.message)
    end
    if view and view ~= 'full' and view ~= 'summary' then
      -- Keep only the list asked for.
      result[view == 'included' and 'excluded' or 'included'] = nil
    end
    local lines = require('ds4.render').manifest(result, view ~= nil and view ~= 'summary')
    require('ds4.ui').show('manifest', lines, 'ds4 manifest')
  end)
end

function M.health()
  local client = require('ds4.client')
  client.with_client(0, function(err, c)
    if err or not c then
      return notify_error((err and err.message) or 'ds4: no client')
    end
    client.execute('ds4.health', function(herr, result)
      if herr then
        return notify_error('ds4.health: ' .. herr.message)
      end
      local state = client.state[c.id] or {}
      local lines = require('ds4.render').health(
        result,
        { id = c.id, root = state.root, trust_source = state.source }
      )
      require('ds4.ui').show('health', lines, 'ds4 health')
    end, { echo_progress = true })
  end)
end

function M.rebuild()
  require('ds4.client').execute('ds4.rebuildIndex', function(err, result)
    if err then
      return notify_error('ds4.rebuildIndex: ' .. err.message)
    end
    require('ds4.ui').show('rebuild', require('ds4.render').rebuild(result), 'ds4 rebuild')
  end, { echo_progress = true })
end

function M.trust(opts)
  local action, dir = opts.fargs[1], opts.fargs[2]
  if action and action ~= 'allow' and action ~= 'deny' and action ~= 'remove' then
    dir, action = action, nil
  end
  local ds4 = require('ds4')
  local root = dir and vim.fs.normalize(dir) or ds4.root()
  if not root then
    return notify_error(
      'Ds4Trust: this buffer has no workspace root; give a directory: :Ds4Trust allow DIR'
    )
  end
  local normalized = ds4.trust(root, action or 'allow')
  local trusted, source = require('ds4.trust').decide(normalized)
  vim.notify(
    ('ds4: %s is %s (%s)'):format(normalized, trusted and 'trusted' or 'not trusted', source)
  )
end

--- :Ds4Compact [--session=PATH] [--leaf=ID] [--first-kept=ID] [--model=PROVIDER/ID] [REASON]
--- [FOCUS...]
function M.compact(opts)
  local flags, rest = M.parse('Ds4Compact', opts.args)
  if not flags then
    return notify_error(rest)
  end
  local session = session_ref('Ds4Compact', flags)
  if not session then
    return
  end
  local reason, focus = rest:match('^(%S+)%s*(.-)$')
  if reason and not REASONS[reason] then
    return notify_error(
      ('Ds4Compact: the reason must be manual, threshold or overflow, got %q'):format(reason)
    )
  end
  local model = model_flag('Ds4Compact', flags.model)
  if model == false then
    return
  end
  local params = {
    session = session,
    reason = reason or 'manual',
    firstKeptEntryId = flags['first-kept'],
    customInstructions = (focus and focus ~= '') and focus or nil,
    model = model,
  }
  vim.api.nvim_echo(
    { { 'ds4: compacting ' .. vim.fn.fnamemodify(session.file, ':t') .. '…' } },
    false,
    {}
  )
  require('ds4').compact(params, function(err, result)
    if err then
      return notify_error('ds4/compact: ' .. err.message)
    end
    local lines =
      require('ds4.render').compaction(result, { session = session.file, leaf = session.leafId })
    require('ds4.ui').show('compaction', lines, 'ds4 compaction')
  end)
end

--- :Ds4Summaries [--session=PATH] [--leaf=ID] [dot]
function M.summaries(opts)
  local flags, rest = M.parse('Ds4Summaries', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest ~= '' and rest ~= 'dot' and rest ~= 'tree' then
    return notify_error(('Ds4Summaries: give nothing (the tree) or dot, got %q'):format(rest))
  end
  local session = session_ref('Ds4Summaries', flags)
  if not session then
    return
  end
  local dot = rest == 'dot'
  local params = { session = session, format = dot and 'dot' or 'json' }
  require('ds4').summaries(params, function(err, result)
    if err then
      return notify_error('ds4.summaries: ' .. err.message)
    end
    local ui = require('ds4.ui')
    if dot then
      local text = type(result.dot) == 'string' and result.dot or ''
      local lines = vim.split(vim.trim(text), '\n', { plain = true })
      ui.show('summaries.dot', lines, 'ds4 summaries (dot)', { filetype = 'dot' })
    else
      ui.show('summaries', require('ds4.render').summaries(result), 'ds4 summaries')
    end
  end)
end

--- :Ds4Privacy [PROVIDER/MODEL | PROVIDER]: what that destination (default: the last plan's
--- model) may see under the privacy policy (`ds4.privacy`).
function M.privacy(opts)
  local ds4 = require('ds4')
  local privacy = require('ds4.privacy')
  local wanted = vim.trim(opts.args or '')
  if wanted == '' then
    wanted = ds4.last_model or ''
  end
  if wanted == '' then
    return notify_error(
      'Ds4Privacy: give the destination as PROVIDER/MODEL or PROVIDER, e.g. '
        .. ':Ds4Privacy openai/gpt-4o (no plan was made here yet to default to)'
    )
  end
  local model, problem = privacy.parse_model(wanted)
  if not model then
    return notify_error(problem)
  end
  ds4.privacy(model, function(err, result)
    if err then
      return notify_error('ds4.privacy: ' .. err.message)
    end
    require('ds4.ui').show('privacy', privacy.answer(result, model), 'ds4 privacy')
  end)
end

--- :Ds4Usage [--manifest=ID] [--model=PROVIDER/ID] --input=N [--output=N] [--cache-read=N]
--- [--cache-write=N] [--stop-reason=R]: report a provider's usage for a plan (`ds4/usage`;
--- default: the last plan made here and its model), then show that manifest.
function M.usage(opts)
  local flags, rest = M.parse('Ds4Usage', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest ~= '' then
    return notify_error(('Ds4Usage: takes only flags (--input=N ...), got %q'):format(rest))
  end
  local ds4 = require('ds4')
  local manifest_id = flags.manifest or ds4.last_manifest_id
  if not manifest_id then
    return notify_error('Ds4Usage: give --manifest=ID (no plan was made here yet to default to)')
  end
  local model = model_flag('Ds4Usage', flags.model or ds4.last_model)
  if model == false then
    return
  end
  if not model then
    return notify_error('Ds4Usage: give --model=PROVIDER/ID (the model that answered)')
  end
  if not flags.input then
    return notify_error('Ds4Usage: give --input=N (the input tokens the provider reported)')
  end
  local usage = {}
  for flag, key in pairs({
    input = 'input',
    output = 'output',
    ['cache-read'] = 'cacheRead',
    ['cache-write'] = 'cacheWrite',
  }) do
    local n = integer_flag('Ds4Usage', flag, flags[flag])
    if n == false then
      return
    end
    usage[key] = n
  end
  local params = {
    manifestId = manifest_id,
    provider = model.provider,
    model = model.id,
    usage = usage,
    stopReason = flags['stop-reason'],
  }
  -- Bad values come back through the callback, naming the field.
  ds4.report_usage(params, {
    cb = function(err)
      if err then
        return notify_error(err.message)
      end
      M.show_reported(manifest_id, 5)
    end,
  })
end

--- Show the manifest `id` once it has the usage just reported: `ds4/usage` is a notification
--- the server may still be storing, so a manifest without `actualTokens` is asked for again,
--- `tries` more times 100 ms apart (then shown as it is).
---@param id string
---@param tries integer
function M.show_reported(id, tries)
  require('ds4').manifest({ id = id, view = 'summary' }, function(err, result)
    if err then
      return notify_error('ds4/manifest: ' .. err.message)
    end
    if result.actualTokens == vim.NIL and tries > 0 then
      return vim.defer_fn(function()
        M.show_reported(id, tries - 1)
      end, 100)
    end
    require('ds4.ui').show('manifest', require('ds4.render').manifest(result), 'ds4 manifest')
  end)
end

local PIN_SCOPES = { session = true, branch = true, project = true }
local MEMORY_SCOPES = { session = true, project = true }

--- :[range]Ds4Pin [--session=PATH] [--scope=session|branch|project]: pin the lines of the
--- range (default: the cursor's line) of the current buffer.
function M.pin(opts)
  local flags, rest = M.parse('Ds4Pin', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest ~= '' then
    return notify_error(('Ds4Pin: takes only flags and a range, got %q'):format(rest))
  end
  if flags.scope and not PIN_SCOPES[flags.scope] then
    return notify_error(
      ('Ds4Pin: --scope must be session, branch or project, got %q'):format(flags.scope)
    )
  end
  local lines = vim.api.nvim_buf_get_lines(0, opts.line1 - 1, opts.line2, false)
  local content = table.concat(lines, '\n')
  if vim.trim(content) == '' then
    return notify_error('Ds4Pin: the lines are empty; select the text to pin')
  end
  local name = vim.api.nvim_buf_get_name(0)
  local source = (name ~= '' and vim.bo.buftype == '') and name or nil
  local memory = require('ds4.memory')
  memory.default_session(flags.session, function(err, session)
    if err then
      return notify_error('Ds4Pin: ' .. err.message)
    end
    memory.write(
      'ds4/pin',
      { session = session, content = content, scope = flags.scope, sourceFile = source },
      'pin'
    )
  end)
end

--- :Ds4Remember [--session=PATH] [--scope=project|session] [--key=KEY] CLAIM
function M.remember(opts)
  local flags, rest = M.parse('Ds4Remember', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest == '' then
    return notify_error('Ds4Remember: give the claim, e.g. :Ds4Remember retries defaults to 3')
  end
  if flags.scope and not MEMORY_SCOPES[flags.scope] then
    return notify_error(
      ('Ds4Remember: --scope must be project or session, got %q'):format(flags.scope)
    )
  end
  local memory = require('ds4.memory')
  memory.default_session(flags.session, function(err, session)
    if err then
      return notify_error('Ds4Remember: ' .. err.message)
    end
    memory.write(
      'ds4/remember',
      { session = session, claim = rest, scope = flags.scope, key = flags.key },
      'memory'
    )
  end)
end

--- :Ds4Memory [--session=PATH]: the session's pins and memory, with actions.
function M.memory(opts)
  local flags, rest = M.parse('Ds4Memory', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest ~= '' then
    return notify_error(('Ds4Memory: takes only --session=PATH, got %q'):format(rest))
  end
  local memory = require('ds4.memory')
  memory.default_session(flags.session, function(err, session, owned)
    if err then
      return notify_error('Ds4Memory: ' .. err.message)
    end
    memory.show_list(session, owned == true)
  end)
end

--- :Ds4ArtifactSearch [--session=PATH] [--artifact=ID] [--max=N] QUERY
function M.artifact_search(opts)
  local flags, rest = M.parse('Ds4ArtifactSearch', opts.args)
  if not flags then
    return notify_error(rest)
  end
  if rest == '' then
    return notify_error('Ds4ArtifactSearch: give the text to find, e.g. :Ds4ArtifactSearch AssertionError')
  end
  local max = integer_flag('Ds4ArtifactSearch', 'max', flags.max)
  if max == false then
    return
  end
  local memory = require('ds4.memory')
  local function search(params)
    require('ds4').artifact_search(params, function(err, result)
      if err then
        return notify_error('ds4/artifactSearch: ' .. err.message)
      end
      require('ds4.ui').show('artifacts', memory.render_artifacts(result), 'ds4 artifact search')
    end)
  end
  if flags.artifact then
    return search({ query = rest, artifactId = flags.artifact, maxMatches = max })
  end
  memory.default_session(flags.session, function(err, session)
    if err then
      return notify_error('Ds4ArtifactSearch: ' .. err.message)
    end
    search({ query = rest, session = session, maxMatches = max })
  end)
end

local function complete_flags(command)
  return function(arg_lead)
    local out = {}
    for _, name in ipairs(FLAGS[command]) do
      local flag = '--' .. name .. '='
      if vim.startswith(flag, arg_lead) then
        out[#out + 1] = flag
      end
    end
    if vim.startswith(arg_lead, '--session=') then
      local prefix = arg_lead:sub(#'--session=' + 1)
      for _, f in ipairs(vim.fn.getcompletion(prefix, 'file')) do
        out[#out + 1] = '--session=' .. f
      end
    elseif vim.startswith(arg_lead, '--view=') then
      for _, v in ipairs({ 'summary', 'included', 'excluded', 'full' }) do
        out[#out + 1] = '--view=' .. v
      end
    elseif vim.startswith(arg_lead, '--mode=') then
      out = { '--mode=managed', '--mode=observer' }
    elseif vim.startswith(arg_lead, '--scope=') and command == 'Ds4Retrieve' then
      out = {
        '--scope=history',
        '--scope=project',
        '--scope=git',
        '--scope=history,project',
        '--scope=history,git',
        '--scope=project,git',
        '--scope=history,project,git',
      }
    elseif vim.startswith(arg_lead, '--scope=') and command == 'Ds4Pin' then
      out = { '--scope=session', '--scope=branch', '--scope=project' }
    elseif vim.startswith(arg_lead, '--scope=') and command == 'Ds4Remember' then
      out = { '--scope=project', '--scope=session' }
    elseif command == 'Ds4Compact' then
      vim.list_extend(out, { 'manual', 'threshold', 'overflow' })
    elseif command == 'Ds4Summaries' then
      out[#out + 1] = 'dot'
    end
    return vim.tbl_filter(function(item)
      return vim.startswith(item, arg_lead)
    end, out)
  end
end

--- Create the user commands (idempotent).
function M.create()
  local create = vim.api.nvim_create_user_command
  create('Ds4Plan', M.plan, {
    nargs = '+',
    complete = complete_flags('Ds4Plan'),
    desc = 'ds4: plan the next model call for a request ([--session=PATH] REQUEST)',
  })
  create('Ds4Retrieve', M.retrieve, {
    nargs = '*',
    complete = complete_flags('Ds4Retrieve'),
    desc = 'ds4: rank history, project and/or git evidence for a query '
      .. '([--session=PATH] [--scope=history,project,git] QUERY)',
  })
  create('Ds4Manifest', M.manifest, {
    nargs = '*',
    complete = complete_flags('Ds4Manifest'),
    desc = 'ds4: show a plan manifest ([ID] [--view=...])',
  })
  create('Ds4Compact', M.compact, {
    nargs = '*',
    complete = complete_flags('Ds4Compact'),
    desc = 'ds4: compact the session (the agent appends the entry; ds4 never writes it) '
      .. '([--session=PATH] [--first-kept=ID] [manual|threshold|overflow] [FOCUS])',
  })
  create('Ds4Summaries', M.summaries, {
    nargs = '*',
    complete = complete_flags('Ds4Summaries'),
    desc = "ds4: the session's summary graph as a tree, or Graphviz DOT ([--session=PATH] [dot])",
  })
  create('Ds4Privacy', M.privacy, {
    nargs = '?',
    complete = function(arg_lead)
      local ds4 = require('ds4')
      local models = { 'openai/gpt-4o', 'anthropic/claude-sonnet-4-5', 'ollama/qwen3-coder' }
      if ds4.last_model then
        table.insert(models, 1, ds4.last_model)
      end
      return vim.tbl_filter(function(m)
        return vim.startswith(m, arg_lead)
      end, models)
    end,
    desc = 'ds4: what a destination model may see under the privacy policy ([PROVIDER/MODEL])',
  })
  create('Ds4Usage', M.usage, {
    nargs = '+',
    complete = complete_flags('Ds4Usage'),
    desc = "ds4: report a provider's usage for the last plan (--input=N [--output=N] "
      .. '[--cache-read=N] [--cache-write=N] [--manifest=ID] [--model=PROVIDER/ID])',
  })
  create('Ds4Pin', M.pin, {
    nargs = '*',
    range = true,
    complete = complete_flags('Ds4Pin'),
    desc = 'ds4: pin the selected lines so every plan carries them '
      .. '([--session=PATH] [--scope=session|branch|project])',
  })
  create('Ds4Remember', M.remember, {
    nargs = '+',
    complete = complete_flags('Ds4Remember'),
    desc = 'ds4: remember a claim about the project '
      .. '([--session=PATH] [--scope=project|session] [--key=KEY] CLAIM)',
  })
  create('Ds4Memory', M.memory, {
    nargs = '*',
    complete = complete_flags('Ds4Memory'),
    desc = "ds4: the session's pins and memory, to forget, unpin or supersede ([--session=PATH])",
  })
  create('Ds4ArtifactSearch', M.artifact_search, {
    nargs = '+',
    complete = complete_flags('Ds4ArtifactSearch'),
    desc = "ds4: find text in the session's stored tool outputs "
      .. '([--session=PATH] [--artifact=ID] [--max=N] QUERY)',
  })
  create('Ds4Health', M.health, { nargs = 0, desc = 'ds4: server and index health' })
  create(
    'Ds4Rebuild',
    M.rebuild,
    { nargs = 0, desc = 'ds4: rebuild the index from the session files' }
  )
  create('Ds4Trust', M.trust, {
    nargs = '*',
    complete = function(arg_lead, cmdline, cursor_pos)
      -- Words before the one being completed (the command name included).
      local before = vim.split(vim.trim(cmdline:sub(1, cursor_pos - #arg_lead)), '%s+')
      local dirs = vim.fn.getcompletion(arg_lead, 'dir')
      if #before > 1 then
        return dirs
      end
      local actions = vim.tbl_filter(function(a)
        return vim.startswith(a, arg_lead)
      end, { 'allow', 'deny', 'remove' })
      return vim.list_extend(actions, dirs)
    end,
    desc = 'ds4: trust, deny or forget a workspace root ([allow|deny|remove] [DIR])',
  })
end

return M
