-- End-to-end tests of the ds4 Neovim plugin against the real ds4-lsp server.
--
-- Run by tests/editors/test_nvim.py as
--   nvim --headless --clean -u NONE -i NONE -l tests/editors/nvim/test_plugin.lua CONFIG.json
-- CONFIG.json: { plugin_dir, cmd, session, db, other_db, results, doc_dir,
--                roots = { trusted, untrusted, prompted, other, compaction },
--                compact_sessions = { valid, fallback, plain }, plain_first_kept }.
-- Every test is run (a failure does not stop the others); the results are written to
-- `results` as { tests = [{ name, ok, error }] }. Waits are `vim.wait` with a timeout.

local cfg = vim.json.decode(table.concat(vim.fn.readfile(assert(_G.arg[1], 'config path')), '\n'))
local TIMEOUT_MS = 20000

vim.opt.runtimepath:prepend(cfg.plugin_dir)
vim.cmd.runtime('plugin/ds4.lua')

-- Messages the plugin shows (recorded; an ERROR notify would abort `-l` scripts otherwise).
local notified = {}
vim.notify = function(msg, level)
  notified[#notified + 1] = { msg = tostring(msg), level = level }
  io.stderr:write(('[notify %s] %s\n'):format(tostring(level), tostring(msg)))
end

-- Prompts shown through vim.ui.select, answered by `select_answer`.
local prompts = {}
local select_answer = 'Trust'
vim.ui.select = function(items, opts, on_choice)
  prompts[#prompts + 1] = opts.prompt
  vim.schedule(function()
    on_choice(select_answer, select_answer and vim.fn.index(items, select_answer) + 1 or nil)
  end)
end

local ds4 = require('ds4')
local client_mod = require('ds4.client')
local trust_mod = require('ds4.trust')
local ui = require('ds4.ui')

ds4.setup({
  cmd = cfg.cmd,
  cmd_env = { DS4_DB = cfg.db },
  trusted_roots = { cfg.roots.trusted },
  settings = { retrieval = { maxResults = 12 } },
})

-- Keep INFO lines in lsp.log: `server_info_lines_are_not_errors_in_lsp_log` reads them.
vim.lsp.log.set_level('info')

local REQUEST = 'which selector files did we port to the theme system?'
local results = {}

--- Raised by `skip(reason)`: the case is reported skipped (pytest.skip) with `reason`.
local SKIP = {}

--- Stop the current case and report it skipped, saying why.
local function skip(reason)
  error(setmetatable({ reason = reason }, SKIP))
end

local function test(name, fn)
  local started = vim.uv.hrtime()
  local skipped
  local ok, err = xpcall(fn, function(e)
    if getmetatable(e) == SKIP then
      skipped = e.reason
      return e
    end
    return debug.traceback(e)
  end)
  if skipped then
    ok, err = true, nil
  end
  local elapsed_ms = (vim.uv.hrtime() - started) / 1e6
  results[#results + 1] = {
    name = name,
    ok = ok,
    error = (not ok) and tostring(err) or nil,
    skipped = skipped,
    elapsed_ms = elapsed_ms,
  }
  io.stderr:write(
    ('%s %s (%.0f ms)\n'):format(skipped and 'SKIP' or (ok and 'PASS' or 'FAIL'), name, elapsed_ms)
  )
  if not ok then
    io.stderr:write(tostring(err) .. '\n')
  end
end

local function eq(actual, expected, what)
  if actual ~= expected then
    error(
      ('%s: expected %s, got %s'):format(
        what or 'value',
        vim.inspect(expected),
        vim.inspect(actual)
      ),
      2
    )
  end
end

local function wait_for(what, cond)
  if not vim.wait(TIMEOUT_MS, cond, 10) then
    error('timed out waiting for ' .. what, 2)
  end
end

--- Call `fn(cb)` and wait for `cb(err, result)`.
local function await(fn)
  local done, e, r = false, nil, nil
  fn(function(err, result)
    done, e, r = true, err, result
  end)
  wait_for('a callback', function()
    return done
  end)
  return e, r
end

--- Edit `path` and wait until a ds4 client is attached to it and initialized.
local function edit_and_attach(path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local bufnr = vim.api.nvim_get_current_buf()
  local client
  wait_for('a ds4 client attached to ' .. path, function()
    client = vim.lsp.get_clients({ name = 'ds4', bufnr = bufnr })[1]
    return client ~= nil and client.initialized == true and client_mod.state[client.id] ~= nil
  end)
  return client, bufnr
end

local function buffer_text(buf)
  return table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), '\n')
end

--- Run a user command and wait for its result buffer to be (re)filled; fail at once with the
--- message if the command reports an error instead.
local function run_command(cmd, kind)
  if ui.buffer(kind) then
    vim.bo[ui.buffer(kind)].modifiable = true
    vim.api.nvim_buf_set_lines(ui.buffer(kind), 0, -1, false, {})
  end
  local count = #notified
  local function new_error()
    for i = count + 1, #notified do
      if notified[i].level == vim.log.levels.ERROR then
        return notified[i].msg
      end
    end
  end
  vim.cmd(cmd)
  wait_for(kind .. ' buffer after ' .. cmd, function()
    local buf = ui.buffer(kind)
    return new_error() ~= nil or (buf ~= nil and buffer_text(buf) ~= '')
  end)
  local problem = new_error()
  if problem then
    error(cmd .. ' failed: ' .. problem, 2)
  end
  return ui.buffer(kind), buffer_text(ui.buffer(kind))
end

local function plan_params()
  return {
    session = { file = cfg.session },
    request = REQUEST,
    model = { provider = 'anthropic', id = 'claude-sonnet-4-5', contextWindow = 200000 },
  }
end

local trusted_client, trusted_buf
local planned

test('attaches_to_a_file_in_a_workspace', function()
  trusted_client, trusted_buf = edit_and_attach(cfg.roots.trusted .. '/a.txt')
  eq(trusted_client.name, 'ds4', 'client name')
  eq(trust_mod.normalize(trusted_client.root_dir), trust_mod.normalize(cfg.roots.trusted), 'root')
  eq(trusted_client.offset_encoding, 'utf-8', 'negotiated position encoding')
  eq(trusted_client.server_info.name, 'ds4-lsp', 'serverInfo.name')
end)

test('trust_is_true_for_a_trusted_root', function()
  local err, health = await(function(cb)
    ds4.health(cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(health.server.trusted, true, 'server.trusted')
  local state = ds4.trust_state(trusted_buf)
  eq(state.source, 'trusted_roots', 'trust source')
  eq(state.sent, true, 'trust sent to the server')
end)

test('trust_is_false_by_default', function()
  local client, buf = edit_and_attach(cfg.roots.untrusted .. '/b.txt')
  assert(client.id ~= trusted_client.id, 'a second root gets its own server')
  local err, health = await(function(cb)
    ds4.health(cb, { bufnr = buf })
  end)
  assert(not err, vim.inspect(err))
  eq(health.server.trusted, false, 'server.trusted')
  eq(ds4.trust_state(buf).source, 'default', 'trust source')
  eq(#prompts, 0, 'prompts shown without a UI')
end)

test('granting_trust_updates_the_running_server', function()
  local client, buf = edit_and_attach(cfg.roots.untrusted .. '/b.txt')
  vim.cmd('Ds4Trust')
  local err, health = await(function(cb)
    ds4.health(cb, { bufnr = buf })
  end)
  assert(not err, vim.inspect(err))
  eq(health.server.trusted, true, 'server.trusted after :Ds4Trust')
  eq(#vim.lsp.get_clients({ name = 'ds4', bufnr = buf }), 1, 'clients on the buffer')
  eq(
    vim.lsp.get_clients({ name = 'ds4', bufnr = buf })[1].id,
    client.id,
    'same client (no restart)'
  )
  eq(trust_mod.read()[trust_mod.normalize(cfg.roots.untrusted)], 'allow', 'remembered decision')
  eq(#health.configWarnings, 0, 'configWarnings')

  vim.cmd('Ds4Trust deny')
  err, health = await(function(cb)
    ds4.health(cb, { bufnr = buf })
  end)
  assert(not err, vim.inspect(err))
  eq(health.server.trusted, false, 'server.trusted after :Ds4Trust deny')
  eq(ds4.trust_state(buf).source, 'denied', 'trust source')
end)

test('an_undecided_root_is_asked_about_once', function()
  local real = client_mod.ui_attached
  client_mod.ui_attached = function()
    return true
  end
  local ok, problem = pcall(function()
    local _, buf = edit_and_attach(cfg.roots.prompted .. '/c.txt')
    wait_for('the trust prompt', function()
      return #prompts == 1
    end)
    assert(prompts[1]:find(trust_mod.normalize(cfg.roots.prompted), 1, true), prompts[1])
    wait_for('the grant to reach the server', function()
      return ds4.trust_state(buf).sent == true
    end)
    local err, health = await(function(cb)
      ds4.health(cb, { bufnr = buf })
    end)
    assert(not err, vim.inspect(err))
    eq(health.server.trusted, true, 'server.trusted after answering Trust')
    -- Another file of the same root: no second prompt.
    edit_and_attach(cfg.roots.prompted .. '/d.txt')
    eq(#prompts, 1, 'prompts')
  end)
  client_mod.ui_attached = real
  assert(ok, problem)
end)

test('plan_through_the_lua_api', function()
  local err, result = await(function(cb)
    ds4.plan(plan_params(), cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  planned = result
  eq(result.mode, 'managed', 'mode')
  assert(result.manifestId:match('^m%-%x+$'), result.manifestId)
  eq(result.manifestStored, true, 'manifestStored')
  eq(result.session.file, cfg.session, 'session.file')
  eq(result.model.source, 'request', 'model.source')
  eq(result.budget.contextWindow, 200000, 'budget.contextWindow')
  assert(
    #result.messages > 0 and #result.messages < result.stats.counts.messages,
    'the plan dropped messages'
  )
  assert(result.stats.counts.supplements > 0, 'history evidence was retrieved')
  local last = result.messages[#result.messages]
  eq(last.role, 'user', 'last message role')
  eq(last.content[1].text, REQUEST, 'last message text')
  eq(ds4.last_manifest_id, result.manifestId, 'last_manifest_id')
end)

test('server_info_lines_are_not_errors_in_lsp_log', function()
  -- The server's INFO lines (one per request) arrive as window/logMessage and are logged at
  -- INFO; stderr, which Neovim logs as [ERROR], carries none of them.
  local log_file = vim.lsp.log.get_filename()
  local lines = {}
  wait_for('the ds4/plan line in ' .. log_file, function()
    lines = vim.fn.filereadable(log_file) == 1 and vim.fn.readfile(log_file) or {}
    for _, line in ipairs(lines) do
      if line:find('[INFO]', 1, true) and line:find('ds4/plan: mode=managed', 1, true) then
        return true
      end
    end
    return false
  end)
  for _, line in ipairs(lines) do
    if line:find('[ERROR]', 1, true) then
      assert(not line:find(' INFO ', 1, true), 'an INFO line logged as an error: ' .. line)
      assert(not line:find('ds4/plan: ', 1, true), 'a request line logged as an error: ' .. line)
    end
  end
end)

test('retrieve_through_the_lua_api', function()
  local err, result = await(function(cb)
    ds4.retrieve({
      session = { file = cfg.session },
      query = 'port user-message-selector.ts DynamicBorder to the theme',
      maxResults = 3,
    }, cb)
  end)
  assert(not err, vim.inspect(err))
  eq(result.status, 'ok', 'status')
  -- at most maxResults; fewer when the rest fall under the relevance floor (issue 11)
  assert(#result.history >= 1 and #result.history <= 3, 'hits: ' .. #result.history)
  local hit = result.history[1]
  assert(
    type(hit.score) == 'number' and hit.reason:find('DynamicBorder', 1, true),
    vim.inspect(hit)
  )
  assert(hit.excerpt ~= '', 'excerpt')
end)

test('manifest_through_the_lua_api', function()
  assert(planned, 'needs plan_through_the_lua_api')
  local err, result = await(function(cb)
    ds4.manifest({ id = planned.manifestId }, cb)
  end)
  assert(not err, vim.inspect(err))
  eq(result.id, planned.manifestId, 'id')
  eq(result.itemCounts.included, planned.stats.counts.included, 'itemCounts.included')
  eq(result.included, nil, 'summary view drops the item lists')
  err, result = await(function(cb)
    ds4.manifest({ session = { file = cfg.session }, latest = true, view = 'excluded' }, cb)
  end)
  assert(not err, vim.inspect(err))
  eq(result.id, planned.manifestId, 'latest id')
  -- A long session's older turns come as one bulk item counting `count` messages.
  local render = require('ds4.render')
  local messages, bulk = 0, nil
  for _, item in ipairs(result.excluded) do
    messages = messages + render.message_count(item)
    bulk = render.message_count(item) > 1 and item or bulk
  end
  eq(messages, planned.stats.counts.excluded, 'excluded messages')
  assert(bulk, 'the plan of the large session has a bulk item')
  local text = table.concat(render.manifest(result, true), '\n')
  local range =
    ('%s … %s (%s messages)'):format(bulk.sourceId, bulk.lastSourceId, render.num(bulk.count))
  assert(text:find(range, 1, true), range .. ' not in:\n' .. text)
  local heading = ('## Excluded: %s items'):format(render.num(planned.stats.counts.excluded))
  assert(text:find(heading, 1, true), heading .. ' not in:\n' .. text)
end)

--- The full manifest (`view = 'full'`) of the plan of `plan_through_the_lua_api`.
local function planned_manifest()
  assert(planned, 'needs plan_through_the_lua_api')
  local err, manifest = await(function(cb)
    ds4.manifest({ id = planned.manifestId, view = 'full' }, cb)
  end)
  assert(not err, vim.inspect(err))
  return manifest
end

test('a_rolled_up_manifest_renders_the_totals_of_every_excluded_item', function()
  local manifest = planned_manifest()
  assert(#manifest.excluded > 2, 'the plan excluded items')
  local render = require('ds4.render')
  -- What the server stores for a manifest over 256 KiB: part of the list and the totals.
  -- Item totals count messages: a bulk item counts its `count`.
  local tokens, total = 0, 0
  for _, item in ipairs(manifest.excluded) do
    tokens = tokens + item.tokens
    total = total + render.message_count(item)
  end
  local kept = { manifest.excluded[1], manifest.excluded[#manifest.excluded] }
  local rolled = vim.tbl_extend('force', manifest, {
    excluded = kept,
    excludedRollup = {
      total = total,
      omitted = total - render.message_count(kept[1]) - render.message_count(kept[2]),
      tokens = tokens,
      omittedTokens = tokens - kept[1].tokens - kept[2].tokens,
    },
  })
  local text = table.concat(render.plan(planned, rolled), '\n')
  local heading = ('## Excluded: %s items, %s tokens'):format(render.num(total), render.num(tokens))
  assert(text:find(heading, 1, true), heading .. ' not in:\n' .. text)
end)

test('a_bulk_item_renders_its_range_and_counts_its_messages', function()
  local manifest = planned_manifest()
  local render = require('ds4.render')
  -- What the server sends for a long session (docs/protocol.md "bulk item"): the newest
  -- excluded turns one by one, the older ones as one item standing for `count` messages.
  local older = 'older turn outside the recent tail; no retrieval evidence'
  local function background(source, tokens)
    return {
      kind = 'background',
      sourceId = source,
      groupId = vim.NIL,
      classification = 'normal',
      tokens = tokens,
      score = 0,
      reason = older,
    }
  end
  local bulk = vim.tbl_extend(
    'force',
    background('v1-1', 912345),
    { count = 4872, lastSourceId = 'v1-4872' }
  )
  local with_bulk = vim.tbl_extend('force', manifest, {
    excluded = {
      bulk,
      background('v1-4873', 30),
      background('v1-4874', 40),
      vim.tbl_extend(
        'force',
        background('v1-9', 5000),
        { kind = 'history', reason = 'oversized turn' }
      ),
    },
    excludedRollup = vim.NIL,
  })
  local text = table.concat(render.manifest(with_bulk, true), '\n')
  assert(text:find('## Excluded: 4,875 items, 917,415 tokens', 1, true), text)
  assert(text:find('background%s+4,874%s+912,415%s+older turn outside the recent tail'), text)
  assert(text:find('history%s+1%s+5,000%s+oversized turn'), text)
  assert(text:find('background%s+v1%-1 … v1%-4872 %(4,872 messages%)%s+%-%s+912,345'), text)
  -- Every other item keeps its plain source id.
  assert(text:find('background%s+v1%-4873%s+%-%s+30'), text)
  local _, ranges = text:gsub(' messages%)', '')
  eq(ranges, 1, 'one range')
  -- The plan view counts the bulk item's messages too.
  local plan_text = table.concat(render.plan(planned, with_bulk), '\n')
  assert(plan_text:find('## Excluded: 4,875 items, 917,415 tokens', 1, true), plan_text)
  assert(plan_text:find('background%s+4,874%s+912,415%s+older turn'), plan_text)
  -- A count that is not an integer over 1 stands for one message.
  eq(render.message_count(bulk), 4872, 'count of the bulk item')
  eq(render.message_count(vim.tbl_extend('force', bulk, { count = 1 })), 1, 'count 1')
  eq(render.message_count(vim.tbl_extend('force', bulk, { count = 2.5 })), 1, 'count 2.5')
  eq(render.message_count(vim.tbl_extend('force', bulk, { count = '9' })), 1, 'count as text')
  eq(render.message_count(vim.tbl_extend('force', bulk, { count = vim.NIL })), 1, 'count null')
  eq(render.message_count(background('v1-4873', 30)), 1, 'a plain item')
end)

test('invalid_params_come_back_as_an_error', function()
  local err, result = await(function(cb)
    ds4.plan({ session = { file = 12 } }, cb)
  end)
  eq(result, nil, 'result')
  eq(err.code, -32602, 'error code')
  assert(err.message:find('params.session.file', 1, true), err.message)
end)

test('health_reports_the_database_from_cmd_env', function()
  local err, result = await(function(cb)
    ds4.health(cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.databasePath, cfg.db, 'databasePath')
  eq(result.server.name, 'ds4-lsp', 'server.name')
  eq(result.server.positionEncoding, 'utf-8', 'server.positionEncoding')
  assert(result.sessions >= 1 and result.entries > 0, vim.inspect(result))
end)

test('rebuild_reports_progress', function()
  local events = {}
  local autocmd = vim.api.nvim_create_autocmd('LspProgress', {
    callback = function(args)
      local params = args.data and args.data.params or {}
      if type(params.token) == 'string' and params.token:match('^ds4%-nvim%-') then
        events[#events + 1] = params.value.kind
      end
    end,
  })
  local err, result = await(function(cb)
    ds4.rebuild(cb, { bufnr = trusted_buf })
  end)
  vim.api.nvim_del_autocmd(autocmd)
  assert(not err, vim.inspect(err))
  assert(result.sessions >= 1, vim.inspect(result))
  eq(#result.failed, 0, 'failed sessions')
  eq(events[1], 'begin', 'first progress event')
  eq(events[#events], 'end', 'last progress event')
end)

test('ds4plan_renders_the_plan_with_its_manifest_id', function()
  vim.api.nvim_set_current_buf(trusted_buf)
  local buf, text =
    run_command('Ds4Plan --session=' .. vim.fn.fnameescape(cfg.session) .. ' ' .. REQUEST, 'plan')
  local id = ds4.last_manifest_id
  assert(id and text:find(id, 1, true), 'manifest id ' .. tostring(id) .. ' not in:\n' .. text)
  assert(text:find('# ds4 plan: mode managed', 1, true), text)
  assert(text:find('## Evidence: %d+ items'), text)
  assert(text:find('## Excluded: [%d,]+ items'), text)
  assert(text:find('older turn outside the recent tail', 1, true), 'excluded reasons:\n' .. text)
  assert(not text:find('"manifestId"', 1, true), 'raw JSON in the buffer')
  eq(vim.bo[buf].buftype, 'nofile', 'buftype')
  eq(vim.bo[buf].filetype, 'ds4', 'filetype')
  eq(vim.bo[buf].modifiable, false, 'modifiable')
  eq(vim.api.nvim_buf_get_name(buf), 'ds://plan', 'buffer name')
end)

test('ds4plan_takes_the_session_from_vim_g_or_setup', function()
  vim.api.nvim_set_current_buf(trusted_buf)
  local count = #notified
  vim.cmd('Ds4Plan ' .. REQUEST)
  local message = notified[count + 1] and notified[count + 1].msg or ''
  assert(
    message:find('no session file', 1, true),
    'expected a "no session file" error, got: ' .. message
  )

  vim.g.ds4_session_file = cfg.session
  local _, text = run_command('Ds4Plan --mode=observer ' .. REQUEST, 'plan')
  vim.g.ds4_session_file = nil
  assert(text:find('# ds4 plan: mode observer', 1, true), text)

  ds4.setup({
    cmd = cfg.cmd,
    cmd_env = { DS4_DB = cfg.db },
    trusted_roots = { cfg.roots.trusted },
    session_file = function()
      return cfg.session
    end,
  })
  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command('Ds4Plan ' .. REQUEST, 'plan')
  assert(text:find(ds4.last_manifest_id, 1, true), text)
end)

test('the_other_commands_render_readable_buffers', function()
  assert(planned, 'needs plan_through_the_lua_api')
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command(
    'Ds4Retrieve --session='
      .. vim.fn.fnameescape(cfg.session)
      .. ' --max=2 port user-message-selector.ts DynamicBorder to the theme',
    'retrieve'
  )
  assert(text:find('# ds4 retrieve: status ok · [12] hits'), text) -- fewer under the floor
  assert(text:find('## 1. v1-', 1, true), text)

  vim.api.nvim_set_current_buf(trusted_buf)
  vim.g.ds4_session_file = cfg.session
  _, text = run_command('Ds4Manifest', 'manifest')
  vim.g.ds4_session_file = nil
  assert(text:find('# ds4 manifest ' .. ds4.last_manifest_id, 1, true), text)
  assert(text:find('## Excluded:', 1, true), text)

  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command('Ds4Manifest ' .. planned.manifestId .. ' --view=included', 'manifest')
  assert(text:find('# ds4 manifest ' .. planned.manifestId, 1, true), text)
  assert(text:find('kind%s+source%s+group'), 'item list:\n' .. text)

  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command('Ds4Health', 'health')
  assert(text:find('# ds4 health: ok', 1, true), text)
  assert(text:find('database     ' .. cfg.db, 1, true), text)
  assert(text:find('trusted      true (trusted_roots)', 1, true), text)

  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command('Ds4Rebuild', 'rebuild')
  assert(text:find('# ds4 rebuild: %d+ sessions'), text)
  assert(text:find(cfg.session, 1, true), text)
end)

--- Wait until the project index of `bufnr`'s server is `ready` (ds4.projectStatus).
local function wait_project_ready(bufnr)
  local deadline = vim.uv.now() + TIMEOUT_MS
  local last
  repeat
    local err, status = await(function(cb)
      ds4.project_status(cb, { bufnr = bufnr })
    end)
    assert(not err, vim.inspect(err))
    last = status
    if status.status == 'ready' then
      return status
    end
    vim.wait(100)
  until vim.uv.now() > deadline
  error('the project index is not ready: ' .. vim.inspect(last))
end

test('retrieve_with_scopes_returns_project_hits', function()
  local status = wait_project_ready(trusted_buf)
  eq(status.trusted, true, 'projectStatus.trusted')
  assert(status.files >= 2, vim.inspect(status))
  -- Project only: no session needed; params pass through unchanged.
  local err, result = await(function(cb)
    ds4.retrieve({ query = 'compute_shipping_cost', scopes = { 'project' } }, cb, {
      bufnr = trusted_buf,
    })
  end)
  assert(not err, vim.inspect(err))
  eq(result.projectStatus, 'ok', 'projectStatus')
  assert(#result.project >= 1, vim.inspect(result))
  local hit = result.project[1]
  eq(hit.path, 'shipping.py', 'path')
  assert(type(hit.startLine) == 'number' and hit.endLine >= hit.startLine, vim.inspect(hit))
  assert(type(hit.score) == 'number' and hit.reason ~= '', vim.inspect(hit))
  assert(hit.text:find('def compute_shipping_cost', 1, true), hit.text)
  eq(#result.history, 0, 'no history without the history scope')
  -- Both scopes, with the session.
  err, result = await(function(cb)
    ds4.retrieve({
      session = { file = cfg.session },
      query = 'compute_shipping_cost DynamicBorder theme',
      scopes = { 'history', 'project' },
      maxResults = 3,
    }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.status, 'ok', 'status')
  eq(result.projectStatus, 'ok', 'projectStatus')
  assert(#result.history > 0 and #result.project > 0, vim.inspect(result))
  -- Without scopes: history only (the server default).
  err, result = await(function(cb)
    ds4.retrieve({ session = { file = cfg.session }, query = 'compute_shipping_cost' }, cb, {
      bufnr = trusted_buf,
    })
  end)
  assert(not err, vim.inspect(err))
  eq(result.projectStatus, vim.NIL, 'projectStatus without the project scope')
  eq(#result.project, 0, 'project hits without the project scope')
end)

test('ds4retrieve_scope_flag_renders_project_hits', function()
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command('Ds4Retrieve --scope=project compute_shipping_cost', 'retrieve')
  assert(text:find('## Project: %d+ hits · status ok'), text)
  assert(text:find('shipping%.py:%d+%-%d+'), text)
  assert(text:find('def compute_shipping_cost', 1, true), 'snippet text:\n' .. text)
  assert(text:find('score%s+lines%s+tokens%s+tree%s+reason'), text)

  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command(
    'Ds4Retrieve --session='
      .. vim.fn.fnameescape(cfg.session)
      .. ' --scope=history,project --max=2 compute_shipping_cost DynamicBorder theme',
    'retrieve'
  )
  assert(text:find('# ds4 retrieve: status ok · 2 hits · %d+ project hits %(project ok%)'), text)
  assert(text:find('## 1. v1-', 1, true), text)
  assert(text:find('## P1. shipping%.py:%d+%-%d+'), text)

  -- A bad scope is an error, not a request.
  local count = #notified
  vim.cmd('Ds4Retrieve --scope=files compute_shipping_cost')
  local message = notified[count + 1] and notified[count + 1].msg or ''
  assert(message:find('--scope takes history, project and/or git', 1, true), message)
  local scopes = require('ds4.commands').parse_scopes('project, history,project')
  eq(table.concat(scopes, ','), 'project,history', 'parse_scopes')
end)

--- Plan `request` for the session in the trusted workspace; the plan and its full manifest.
local function plan_with_manifest(request)
  local err, result = await(function(cb)
    ds4.plan({
      session = { file = cfg.session },
      request = request,
      model = { provider = 'anthropic', id = 'claude-sonnet-4-5', contextWindow = 200000 },
    }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  local manifest
  err, manifest = await(function(cb)
    ds4.manifest({ id = result.manifestId, view = 'full' }, cb)
  end)
  assert(not err, vim.inspect(err))
  return result, manifest
end

test('plan_and_manifest_show_project_snippets_as_path_lines', function()
  local result, manifest =
    plan_with_manifest('where is compute_shipping_cost defined in shipping.py?')
  eq(manifest.project.status, 'ready', 'manifest project.status')
  assert(#manifest.projectSnippets >= 1, vim.inspect(manifest.projectSnippets))
  local snippet = manifest.projectSnippets[1]
  eq(snippet.path, 'shipping.py', 'snippet path')

  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command('Ds4Manifest ' .. result.manifestId .. ' --view=included', 'manifest')
  assert(text:find('## Project: %d+ snippets · status ready'), text)
  assert(text:find('revision     branch', 1, true), text)
  local label = ('shipping.py:%d-%d'):format(snippet.lines[1], snippet.lines[2])
  assert(text:find('project%s+' .. vim.pesc(label)), 'project item by path:lines:\n' .. text)
  assert(not text:find(snippet.snippetId, 1, true), 'snippet id shown:\n' .. text)

  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command(
    'Ds4Plan --session='
      .. vim.fn.fnameescape(cfg.session)
      .. ' where is compute_shipping_cost defined in shipping.py?',
    'plan'
  )
  assert(text:find('## Project: %d+ snippets · status ready'), text)
  assert(text:find(label, 1, true), text)
  assert(not text:find(snippet.snippetId, 1, true), 'snippet id shown:\n' .. text)
end)

test('health_shows_the_project_status', function()
  local err, result = await(function(cb)
    ds4.health(cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.project.status, 'ready', 'health project.status')
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command('Ds4Health', 'health')
  assert(text:find('  project      ready · ', 1, true), text)
  assert(text:find(' files · ', 1, true), text)
end)

local GIT_QUERY = 'why was the europe zone rate raised for the carrier surcharge'
local UNRELATED = 'Write a haiku about the sea, please.'

test('retrieve_with_the_git_scope_returns_commits', function()
  wait_project_ready(trusted_buf)
  local err, result = await(function(cb)
    ds4.retrieve({ query = GIT_QUERY, scopes = { 'git' } }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  if not cfg.git then
    eq(result.gitStatus, 'no-git', 'gitStatus without a Git history')
    return
  end
  eq(result.gitStatus, 'ok', 'gitStatus')
  assert(#result.git >= 1, vim.inspect(result))
  local commit = result.git[1]
  eq(commit.subject, 'Raise the europe zone rate because the carrier surcharge changed', 'subject')
  eq(commit.committedAt, '2024-02-02T03:04:05Z', 'committedAt')
  assert(vim.tbl_contains(commit.files, 'shipping.py'), vim.inspect(commit))
  assert(#commit.hash == 40 and commit.reason ~= '', vim.inspect(commit))
  eq(result.relevance.git.sent, #result.git, 'relevance.git.sent')
  eq(result.relevance.git.why, vim.NIL, 'relevance.git.why when commits were sent')
  eq(#result.history + #result.project, 0, 'git only: no history, no project hits')

  -- All three scopes at once.
  err, result = await(function(cb)
    ds4.retrieve({
      session = { file = cfg.session },
      query = GIT_QUERY .. ' compute_shipping_cost',
      scopes = { 'history', 'project', 'git' },
    }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.gitStatus, 'ok', 'gitStatus with three scopes')
  eq(result.projectStatus, 'ok', 'projectStatus with three scopes')
  for _, scope in ipairs({ 'history', 'project', 'git' }) do
    assert(type(result.relevance[scope]) == 'table', scope .. ': ' .. vim.inspect(result.relevance))
  end

  -- An unrelated request: no commit, and why.
  err, result = await(function(cb)
    ds4.retrieve({ query = UNRELATED, scopes = { 'git' } }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(#result.git, 0, 'commits for an unrelated request')
  assert(type(result.relevance.git.why) == 'string', vim.inspect(result.relevance))

  -- :Ds4Health counts the commits indexed.
  local health
  err, health = await(function(cb)
    ds4.health(cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(health.project.commits, 2, 'health project.commits')
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command('Ds4Health', 'health')
  assert(text:find(' · 2 commits', 1, true), text)
end)

test('ds4retrieve_scope_git_renders_commits_and_why_none', function()
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, text = run_command('Ds4Retrieve --scope=git ' .. GIT_QUERY, 'retrieve')
  if not cfg.git then
    assert(text:find('## Git: 0 commits · status no-git', 1, true), text)
    return
  end
  local err, result = await(function(cb)
    ds4.retrieve({ query = GIT_QUERY, scopes = { 'git' } }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  local commit = result.git[1]
  -- A git-only search has no session: no history status or stats.
  assert(text:find('^# ds4 retrieve: %d+ commits %(git ok%) · [%d.,]+ ms\n'), text)
  assert(not text:find('  stats     ', 1, true), text)
  assert(text:find('## Git: %d+ commits · status ok'), text)
  assert(text:find('score%s+commit%s+date%s+subject%s+files%s+reason'), text)
  -- The short hash, the date, the subject, the files and the reason.
  assert(text:find(commit.hash:sub(1, 10), 1, true), text)
  assert(not text:find(commit.hash, 1, true), 'the full hash is shown:\n' .. text)
  assert(text:find('## G1. ' .. commit.hash:sub(1, 10) .. ' 2024-02-02', 1, true), text)
  assert(
    text:find('Raise the europe zone rate because the carrier surcharge changed', 1, true),
    text
  )
  assert(text:find('    shipping.py', 1, true), text)
  assert(text:find('  why: ' .. commit.reason, 1, true), text)
  assert(text:find('## Relevance', 1, true), text)
  assert(text:find('\n  git%s+ok%s+%d+'), text)

  -- Three scopes: a relevance row each.
  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command(
    'Ds4Retrieve --session='
      .. vim.fn.fnameescape(cfg.session)
      .. ' --scope=history,project,git '
      .. GIT_QUERY,
    'retrieve'
  )
  assert(text:find('project hits %(project ok%) · %d+ commits %(git ok%)'), text)
  for _, scope in ipairs({ 'history', 'project', 'git' }) do
    assert(text:find('\n  ' .. scope .. '%s+%a'), scope .. ' row:\n' .. text)
  end

  -- Nothing relevant: each scope says why none was sent.
  vim.api.nvim_set_current_buf(trusted_buf)
  _, text = run_command('Ds4Retrieve --scope=project,git ' .. UNRELATED, 'retrieve')
  assert(text:find('## Git: 0 commits · status ok\n  none sent: ', 1, true), text)
  assert(text:find('## Project: 0 hits · status %a+\n  none sent: '), text)

  local scopes = require('ds4.commands').parse_scopes('git,history, git,project')
  eq(table.concat(scopes, ','), 'git,history,project', 'parse_scopes with git')
  local fn = vim.api.nvim_get_commands({})['Ds4Retrieve']
  assert(fn, 'Ds4Retrieve exists')
  local completions = vim.fn.getcompletion('Ds4Retrieve --scope=history,p', 'cmdline')
  assert(vim.tbl_contains(completions, '--scope=history,project,git'), vim.inspect(completions))
end)

--- An excluded item under the relevance floor, as a manifest lists it.
local function below_floor_item(kind, source_id, tokens, score, floor)
  return {
    kind = kind,
    sourceId = source_id,
    groupId = vim.NIL,
    tokens = tokens,
    score = score,
    reason = ('below the relevance floor (%.3f < %s)'):format(score, floor),
  }
end

--- A manifest as a server sends it, with `excluded` and the other `fields` given.
local function fake_manifest(excluded, fields)
  return vim.tbl_extend('force', {
    id = 'm-0123456789abcdef',
    planning = { mode = 'managed' },
    retrieved = {},
    included = {},
    excluded = excluded,
    warnings = {},
  }, fields)
end

test('manifest_renders_relevance_and_below_floor_items', function()
  local render = require('ds4.render')
  -- What a server sends: a relevance section, and the below-floor candidates as excluded
  -- items, one score each, grouped under one row per floor.
  local manifest = fake_manifest({
    below_floor_item('history', 's:e1', 120, 0.21, '0.350'),
    below_floor_item('history', 's:e2', 80, 0.12, '0.350'),
    below_floor_item('project', 'snip-1', 40, 0.3, '0.400'),
    {
      kind = 'recent',
      sourceId = 's:e3',
      groupId = 'group:1-2',
      tokens = 10,
      score = vim.NIL,
      reason = 'over the recent tail budget',
    },
  }, {
    relevance = {
      history = {
        status = 'ok',
        sent = 0,
        belowFloor = 2,
        floor = 0.35,
        best = 0.21,
        why = 'no candidate reached the relevance floor (best 0.210 < 0.350)',
      },
      project = { status = 'ok', sent = 3, belowFloor = 1, floor = 0.4, best = 0.3, why = vim.NIL },
    },
  })
  local text = table.concat(render.manifest(manifest, true), '\n')
  assert(text:find('## Relevance', 1, true), text)
  assert(text:find('scope%s+status%s+sent%s+below floor%s+floor%s+best%s+why none was sent'), text)
  assert(
    text:find('history%s+ok%s+0%s+2%s+0%.350%s+0%.210%s+no candidate reached the relevance floor'),
    text
  )
  assert(text:find('project%s+ok%s+3%s+1%s+0%.400%s+0%.300\n'), text)
  assert(text:find('history%s+2%s+200%s+below the relevance floor %(score < 0%.350%)'), text)
  assert(text:find('project%s+1%s+40%s+below the relevance floor %(score < 0%.400%)'), text)
  eq(
    render.reason_group("below the relative floor (0.520 of the best hit's score < 0.700)"),
    "below the relative floor (share of the best hit's score < 0.700)",
    'reason_group of the relative floor'
  )
  -- The item list keeps each item's own reason.
  assert(text:find('below the relevance floor (0.120 < 0.350)', 1, true), text)

  -- A plan's evidence line says why none was sent.
  local plan_text = table.concat(
    render.plan({ mode = 'managed', manifestId = manifest.id, stats = {}, messages = {} }, manifest),
    '\n'
  )
  assert(
    plan_text:find('none: no candidate reached the relevance floor (best 0.210 < 0.350)', 1, true),
    plan_text
  )
  assert(plan_text:find('## Relevance', 1, true), plan_text)

  -- And a real plan for an unrelated request: its manifest has the relevance section.
  local result, full = plan_with_manifest(UNRELATED)
  assert(
    type(full.relevance) == 'table' and type(full.relevance.history) == 'table',
    vim.inspect(full.relevance)
  )
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, shown =
    run_command('Ds4Manifest ' .. result.manifestId .. ' --view=excluded', 'manifest')
  assert(shown:find('## Relevance', 1, true), shown)
  assert(shown:find('\n  history%s+%a'), shown)
  -- Each below-floor item is counted in its group's row.
  local groups = {}
  for _, item in ipairs(full.excluded) do
    local group = render.reason_group(item.reason)
    if group ~= item.reason then
      groups[item.kind .. '\t' .. group] = true
    end
  end
  for key in pairs(groups) do
    local kind, group = key:match('^([^\t]+)\t(.*)$')
    local row = ('%s%%s+[%%d,]+%%s+[%%d,]+%%s+%s'):format(kind, vim.pesc(group))
    assert(shown:find(row), row .. ' not in:\n' .. shown)
  end
end)

--- A manifest's `privacy` for a plan to a remote destination that held text back.
local function remote_privacy()
  return {
    enabled = true,
    destination = {
      provider = 'openai',
      kind = 'remote',
      allowed = { 'normal', 'internal' },
      redactSecrets = true,
    },
    classified = { internal = 1, ['local-only'] = 2 },
    redacted = 3,
    redactedByKind = { ['OpenAI key'] = 1, ['bearer token'] = 2 },
    withheld = { ['local-only'] = 2 },
    excluded = { ['local-only'] = 1 },
  }
end

test('ds4privacy_and_the_manifest_privacy_section_render', function()
  local render = require('ds4.render')
  local manifest = fake_manifest({
    {
      kind = 'history',
      sourceId = 's:e7',
      groupId = vim.NIL,
      classification = 'local-only',
      tokens = 412,
      score = 9.5,
      reason = 'excluded due to privacy policy',
    },
    below_floor_item('history', 's:e3', 10, 0.1, '0.350'),
  }, { privacy = remote_privacy() })
  local text = table.concat(render.manifest(manifest, true), '\n')
  assert(
    text:find(
      '## Privacy: destination openai (remote) · may see normal, internal · secrets redacted',
      1,
      true
    ),
    text
  )
  assert(text:find('level%s+classified%s+withheld%s+excluded'), text)
  assert(text:find('internal%s+1%s+0%s+0\n'), text)
  assert(text:find('local%-only%s+2%s+2%s+1\n'), text)
  assert(text:find('redacted: 3 secret(s): bearer token 2, OpenAI key 1', 1, true), text)
  assert(text:find('excluded due to privacy policy: 1 item(s)', 1, true), text)
  assert(text:find('history%s+s:e7%s+local%-only%s+412\n'), text)
  -- Only the privacy exclusions are listed in the section (the others stay under Excluded).
  local section = text:match('## Privacy:.-\n\n') or ''
  assert(not section:find('s:e3', 1, true), section)
  -- A plan shows the section too; a server without privacy shows none.
  local plan_text = table.concat(
    render.plan({ mode = 'managed', manifestId = manifest.id, stats = {}, messages = {} }, manifest),
    '\n'
  )
  assert(plan_text:find('## Privacy: destination openai (remote)', 1, true), plan_text)
  manifest.privacy = nil
  local old = table.concat(render.manifest(manifest, true), '\n')
  assert(not old:find('## Privacy', 1, true), old)
  manifest.privacy = { enabled = false }
  assert(
    table.concat(render.manifest(manifest), '\n'):find('## Privacy: policy off', 1, true),
    'policy off'
  )
  -- The active policy of ds4.health.
  local health = table.concat(
    render.health({
      status = 'ok',
      privacy = { enabled = true, localProviders = { 'ollama' }, redactSecrets = true },
    }),
    '\n'
  )
  assert(
    health:find('privacy      on · localProviders ollama · redactSecrets true', 1, true),
    health
  )

  -- :Ds4Privacy sends { model } to ds4.privacy and shows the answer (a fake answer until the
  -- server has the command).
  local sent = {}
  local execute = client_mod.execute
  client_mod.execute = function(command, cb, opts)
    sent[#sent + 1] = { command = command, arguments = opts and opts.arguments }
    vim.schedule(function()
      cb(nil, {
        enabled = true,
        provider = 'openai',
        kind = 'remote',
        allowed = { 'normal', 'internal' },
        withheld = { 'sensitive', 'local-only' },
        redactSecrets = true,
        explanation = 'openai is not a local provider, so it is remote.',
        rule = 'privacy.remoteDefaultAllowed',
      })
    end)
  end
  local ok, problem = pcall(function()
    local _, shown = run_command('Ds4Privacy openai/gpt-4o', 'privacy')
    eq(sent[1].command, 'ds4.privacy', 'command')
    eq(vim.inspect(sent[1].arguments), vim.inspect({ { model = 'openai/gpt-4o' } }), 'arguments')
    assert(shown:find('# ds4 privacy: openai/gpt-4o', 1, true), shown)
    assert(shown:find('class        remote', 1, true), shown)
    assert(shown:find('may see      normal, internal', 1, true), shown)
    assert(shown:find('withheld     sensitive, local%-only'), shown)
    assert(shown:find('secrets      redacted', 1, true), shown)
    assert(shown:find('openai is not a local provider, so it is remote.', 1, true), shown)
    assert(shown:find('decided by   privacy.remoteDefaultAllowed', 1, true), shown)
    -- Without an argument: the last plan's model (earlier cases planned).
    assert(ds4.last_model and ds4.last_model:find('/', 1, true), vim.inspect(ds4.last_model))
    run_command('Ds4Privacy', 'privacy')
    eq(vim.inspect(sent[2].arguments), vim.inspect({ { model = ds4.last_model } }), 'default')
    -- A malformed destination is refused before anything is sent.
    local count = #notified
    vim.cmd('Ds4Privacy open ai')
    eq(#sent, 2, 'nothing sent for "open ai"')
    assert(notified[count + 1] and notified[count + 1].msg:find('PROVIDER/MODEL', 1, true))
    -- :Ds4Retrieve and :Ds4Compact name their reader with --model=PROVIDER/ID.
    for _, cmd in ipairs({
      'Ds4Retrieve --scope=git --model=openai why',
      'Ds4Compact --session=/s.jsonl --model=x',
    }) do
      count = #notified
      vim.cmd(cmd)
      local said = notified[count + 1]
      assert(said and said.msg:find('--model expects PROVIDER/ID', 1, true), cmd)
    end
  end)
  client_mod.execute = execute
  assert(ok, problem)
end)

test('a_remote_plan_withholds_local_only_text', function()
  local secret = 'hunter2-nvim-0xC0FFEE'
  local path = vim.fn.tempname() .. '.jsonl'
  local function entry(id, parent, message)
    return vim.json.encode({
      type = 'message',
      id = id,
      parentId = parent or vim.NIL,
      timestamp = '2026-11-01T09:0' .. id:sub(-1) .. ':00.000Z',
      message = message,
    })
  end
  vim.fn.writefile({
    vim.json.encode({
      type = 'session',
      version = 3,
      id = 'nvim-private-sess',
      timestamp = '2026-11-01T09:00:00.000Z',
      cwd = '/tmp',
    }),
    entry('00000001', nil, {
      role = 'user',
      content = 'The staging password is [ds4:local-only]' .. secret .. '[/ds4:local-only].',
      timestamp = 1,
    }),
    entry('00000002', '00000001', {
      role = 'assistant',
      content = { { type = 'text', text = 'Noted; it stays on this machine.' } },
      provider = 'anthropic',
      model = 'claude-sonnet-4-5',
      stopReason = 'stop',
      timestamp = 2,
    }),
  }, path)
  local err, result = await(function(cb)
    ds4.plan({
      session = { file = path },
      request = 'what do we deploy next?',
      model = { provider = 'openai', id = 'gpt-4o' },
    }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.privacy.destination.kind, 'remote', 'destination class')
  assert((result.privacy.withheld['local-only'] or 0) >= 1, vim.inspect(result.privacy))
  assert(not vim.json.encode(result.messages):find(secret, 1, true), 'the secret went to openai')
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, shown = run_command(
    'Ds4Plan --session=' .. path .. ' --model=openai/gpt-4o what do we deploy next?',
    'plan'
  )
  assert(shown:find('## Privacy: destination openai (remote)', 1, true), shown)
  assert(shown:find('local%-only%s+[%d,]+%s+[1-9][%d,]*%s+[%d,]+\n'), shown)
  assert(not shown:find(secret, 1, true), shown)
  local _, manifest_text = run_command('Ds4Manifest ' .. ds4.last_manifest_id, 'manifest')
  assert(manifest_text:find('## Privacy: destination openai (remote)', 1, true), manifest_text)
  -- :Ds4Privacy against the server.
  local _, answer = run_command('Ds4Privacy openai/gpt-4o', 'privacy')
  assert(answer:find('class        remote', 1, true), answer)
  assert(answer:find('withheld     sensitive, local-only', 1, true), answer)
  _, answer = run_command('Ds4Privacy ollama', 'privacy')
  assert(answer:find('class        local', 1, true), answer)
  -- settings.privacy reaches the server: a remote provider allowed `sensitive`.
  ds4.update_settings({
    privacy = { remoteProviders = { ['azure-openai'] = { 'normal', 'internal', 'sensitive' } } },
  })
  _, answer = run_command('Ds4Privacy azure-openai/gpt-4o', 'privacy')
  assert(answer:find('may see      normal, internal, sensitive\n', 1, true), answer)
  assert(answer:find('decided by   privacy.remoteProviders.azure-openai', 1, true), answer)
  ds4.update_settings({ privacy = { remoteProviders = vim.empty_dict() } })
  -- :Ds4Health shows the active policy.
  local _, health = run_command('Ds4Health', 'health')
  assert(health:find('privacy      on · ', 1, true), health)
end)

--- A calibrated profile whose estimates run low, with the other `fields` given.
local function fake_calibration(fields)
  return vim.tbl_extend('force', {
    provider = 'anthropic',
    model = 'claude-sonnet-4-5',
    ratio = 1.31,
    calibrated = true,
    samples = 6,
    accepted = 5,
    outliers = 1,
    warnings = {
      {
        code = 'persistent-underestimate',
        severity = 'warning',
        message = 'the estimate is 31% below what anthropic/claude-sonnet-4-5 reports',
      },
    },
  }, fields or {})
end

--- A manifest's model awareness once an Anthropic response was reported: 39,100 input tokens
--- (4,000 uncached + 35,100 cache reads) against a 36,349 estimate, a calibrated profile whose
--- estimates run low.
local function reported_manifest(fields)
  return fake_manifest({}, vim.tbl_extend('force', {
    estimatedTokens = 36349,
    actualTokens = 39100,
    usage = {
      provider = 'anthropic',
      model = 'claude-sonnet-4-5',
      input = 4000,
      output = 412,
      cacheRead = 35100,
      cacheWrite = 0,
      stopReason = 'stop',
      cacheShare = 0.8977,
      reportedAt = '2026-11-30T10:27:19.204Z',
    },
    modelAwareness = {
      estimatorVersion = 'chars-v2',
      calibration = fake_calibration(),
      modelSwitch = vim.NIL,
    },
    continuation = vim.NIL,
  }, fields or {}))
end

test('report_usage_checks_params_before_sending', function()
  local usage = require('ds4.usage')
  local good = {
    manifestId = 'm-1',
    provider = 'anthropic',
    model = 'claude-sonnet-4-5',
    -- Pi's Usage as is: totalTokens and cost are ignored by the server.
    usage = { input = 10, output = 2, cacheRead = 0, cacheWrite = 0, totalTokens = 12, cost = {} },
    stopReason = 'stop',
  }
  eq(#usage.problems(good), 0, 'problems of good params')
  eq(
    table.concat(usage.problems({ manifestId = 'm-1', provider = 'p', model = 'x' }), ' | '),
    'params.usage must be a table with integer token counts ({ input, output?, cacheRead?, '
      .. 'cacheWrite? }), got nothing',
    'missing usage'
  )
  eq(
    table.concat(
      usage.problems(vim.tbl_extend('force', good, {
        provider = '',
        usage = { input = -1, output = 1.5, cacheRead = '3', cacheWrite = vim.NIL },
        hasResponseId = 'no',
        outputItemHashes = { 1 },
      })),
      ' | '
    ),
    table.concat({
      'params.provider must be a non-empty string of at most 256 characters, got ""',
      'params.usage.input must be an integer >= 0, got -1',
      'params.usage.output must be an integer >= 0 when given, got 1.5',
      'params.usage.cacheRead must be an integer >= 0 when given, got "3"',
      'params.usage.cacheWrite must be an integer >= 0 when given, got null',
      'params.outputItemHashes must be a list of strings when given, got [1]',
      'params.hasResponseId must be true or false when given, got "no"',
    }, ' | '),
    'every bad field named'
  )
  eq(usage.problems('x')[1], 'params must be a table, got "x"', 'not a table')
  eq(
    table.concat(
      usage.problems(vim.tbl_extend('force', good, { model = ('m'):rep(257), stopReason = '' })),
      ' | '
    ),
    'params.model must be a non-empty string of at most 256 characters, got "'
      .. ('m'):rep(38)
      .. '… | params.stopReason must be Pi\'s stop reason (1..64 characters) when given, got ""',
    'the server bounds'
  )

  -- Through the API: the callback gets the error and nothing is sent.
  local sent = {}
  local real_notify = client_mod.notify
  client_mod.notify = function(method, params, cb)
    sent[#sent + 1] = { method = method, params = params }
    if cb then
      cb(nil)
    end
  end
  local ok, problem = pcall(function()
    local got_err
    local was_sent, message = ds4.report_usage(
      vim.tbl_extend('force', good, { usage = { input = -5 } }),
      { cb = function(e)
        got_err = e
      end }
    )
    eq(was_sent, false, 'sent with a bad field')
    eq(message, 'ds4/usage: params.usage.input must be an integer >= 0, got -5', 'returned problem')
    eq(got_err and got_err.message, message, 'the callback got the problem')
    -- Without a callback: shown with vim.notify at ERROR level.
    local count = #notified
    ds4.report_usage({ manifestId = 'm-1' })
    eq(notified[count + 1] and notified[count + 1].level, vim.log.levels.ERROR, 'notify level')
    assert(notified[count + 1].msg:find('params.provider must be', 1, true), notified[count + 1].msg)
    eq(#sent, 0, 'nothing sent for bad params')
    eq(ds4.report_usage(good), true, 'good params are sent')
    eq(sent[1] and sent[1].method, 'ds4/usage', 'method')
    eq(sent[1].params, good, 'params unchanged')
    -- ds4/continuationFailed: the same checks (session.file required).
    local failed, failed_message = ds4.continuation_failed({ session = {}, provider = 5 }, {
      cb = function() end,
    })
    eq(failed, false, 'continuation_failed sent with a bad field')
    eq(
      failed_message,
      'ds4/continuationFailed: params.session.file must be a non-empty string (the plan\'s '
        .. 'session file), got nothing; params.provider must be a string when given, got 5',
      'continuation_failed problem'
    )
    eq(#sent, 1, 'nothing more sent')
    -- `reason` may be the provider's whole error object: the server never reads it.
    local params = {
      session = { file = cfg.session },
      provider = 'openai',
      model = 'gpt-5',
      reason = { code = 'previous_response_not_found', status = 400 },
    }
    eq(ds4.continuation_failed(params), true, 'continuation_failed sent')
    eq(sent[2] and sent[2].method, 'ds4/continuationFailed', 'continuation_failed method')
  end)
  client_mod.notify = real_notify
  assert(ok, problem)
end)

test('manifest_renders_usage_calibration_switch_and_continuation', function()
  local render = require('ds4.render')
  -- Before a report: the provider has not reported usage.
  local waiting = render.manifest(fake_manifest({}, {
    estimatedTokens = 36349,
    actualTokens = vim.NIL,
    usage = vim.NIL,
    modelAwareness = { estimatorVersion = 'chars-v2', calibration = vim.NIL, modelSwitch = vim.NIL },
  }))
  local text = table.concat(waiting, '\n')
  assert(text:find('  actual       not reported (the provider has not reported usage)', 1, true), text)
  assert(text:find('## Model awareness', 1, true), text)
  -- null: the server did not look calibration up (the plan's provider is unknown).
  assert(text:find("  calibration  not looked up (the plan's provider is unknown)", 1, true), text)
  -- Looked up, nothing reported yet: a calibration with samples 0 and the minimum.
  text = table.concat(
    render.manifest(fake_manifest({}, {
      actualTokens = vim.NIL,
      usage = vim.NIL,
      modelAwareness = {
        estimatorVersion = 'chars-v2',
        calibration = fake_calibration({
          ratio = 1,
          calibrated = false,
          samples = 0,
          accepted = 0,
          outliers = 0,
          minimumSamples = 3,
          warnings = {},
        }),
        modelSwitch = vim.NIL,
      },
    })),
    '\n'
  )
  assert(
    text:find(
      'ratio 1.000 · not calibrated: no usage reported yet (needs 3 accepted samples)',
      1,
      true
    ),
    text
  )
  assert(not text:find('not looked up', 1, true), text)
  -- A server without model awareness: no section.
  text = table.concat(render.manifest(fake_manifest({}, { actualTokens = vim.NIL })), '\n')
  assert(not text:find('Model awareness', 1, true), text)
  assert(text:find('the provider has not reported usage', 1, true), text)

  text = table.concat(render.manifest(reported_manifest()), '\n')
  for _, expected in ipairs({
    '  actual       39,100 (+7.6% vs the estimate 36,349) · cache share 89.8%',
    '  usage        reported by anthropic/claude-sonnet-4-5 at 2026-11-30T10:27:19.204Z · stop reason stop',
    '  input        actual 39,100 (+7.6% vs the estimate 36,349)',
    '  cache        share 89.8% · read 35,100 · write 0 · uncached input 4,000',
    '  output       412 tokens',
    '  calibration  anthropic/claude-sonnet-4-5 · ratio 1.310 · calibrated from 5 accepted samples '
      .. '(6 in the window, 1 outlier) · estimator chars-v2',
    '    warning persistent-underestimate: the estimate is 31% below',
  }) do
    assert(text:find(expected, 1, true), expected .. ' not in:\n' .. text)
  end

  local switched = reported_manifest({
    modelAwareness = {
      estimatorVersion = 'chars-v2',
      calibration = fake_calibration({
        provider = 'openai',
        model = 'gpt-5',
        ratio = 1,
        calibrated = false,
        samples = 2,
        accepted = 1,
        warnings = {
          { code = 'calibration-outliers', severity = 'critical', message = 'too many outliers' },
        },
      }),
      modelSwitch = { from = 'anthropic/claude-sonnet-4-5', to = 'openai/gpt-5' },
    },
    continuation = {
      strategy = 'openai-previous-response-v1',
      mode = 'full',
      deltaStart = 0,
      reason = 'state-expired',
    },
  })
  text = table.concat(render.manifest(switched), '\n')
  for _, expected in ipairs({
    '  switch       switched from anthropic/claude-sonnet-4-5 to openai/gpt-5',
    'ratio 1.000 · not calibrated: 1 of 2 samples accepted',
    '    critical calibration-outliers: too many outliers',
    '  continuation full: send the whole request · reason state-expired (openai-previous-response-v1)',
  }) do
    assert(text:find(expected, 1, true), expected .. ' not in:\n' .. text)
  end
  -- The server's minimum: accepted samples of the minimumSamples it needs.
  local usage = require('ds4.usage')
  local line = usage.calibration_line(
    fake_calibration({
      ratio = 1,
      calibrated = false,
      samples = 2,
      accepted = 1,
      minimumSamples = 3,
    })
  )
  assert(line == 'ratio 1.000 · not calibrated: 1 of 3 accepted samples', line)

  -- A plan with a delta decision.
  local plan_text = table.concat(
    render.plan({
      mode = 'managed',
      manifestId = 'm-0123456789abcdef',
      stats = {},
      messages = {},
      continuation = {
        strategy = 'openai-previous-response-v1',
        mode = 'delta',
        deltaStart = 12,
        reason = vim.NIL,
      },
    }, reported_manifest()),
    '\n'
  )
  assert(
    plan_text:find(
      '  continue  delta: send the messages from index 12 on (openai-previous-response-v1)',
      1,
      true
    ),
    plan_text
  )
  assert(plan_text:find('## Model awareness', 1, true), plan_text)

  -- :Ds4Health's calibration lines.
  local health = table.concat(
    render.health({
      status = 'ok',
      server = {},
      calibration = {
        fake_calibration({
          estimatorVersion = 'chars-v2',
          cacheShare = 0.8351,
          lastReportedAt = '2026-11-30T10:27:19.204Z',
          warnings = {
            { code = 'persistent-underestimate', severity = 'warning', message = 'runs low' },
          },
        }),
      },
    }),
    '\n'
  )
  assert(
    health:find(
      '  calibration  anthropic/claude-sonnet-4-5 (chars-v2): ratio 1.310 · calibrated from 5 '
        .. 'accepted samples (6 in the window, 1 outlier) · cache share 83.5% · last report '
        .. '2026-11-30T10:27:19.204Z',
      1,
      true
    ),
    health
  )
  assert(health:find('warning persistent-underestimate: runs low', 1, true), health)
  health = table.concat(render.health({ status = 'ok', server = {}, calibration = {} }), '\n')
  assert(health:find('  calibration  no usage reported yet', 1, true), health)
end)

test('model_awareness_server_strings_stay_on_one_line', function()
  -- A hostile or broken server: newlines and control characters in every string shown.
  local render = require('ds4.render')
  local bad = 'open\nai\r\x01\x1b[31m'
  local manifest = reported_manifest({
    usage = {
      provider = bad,
      model = bad,
      input = 4000,
      stopReason = bad,
      reportedAt = bad,
    },
    modelAwareness = {
      estimatorVersion = bad,
      calibration = fake_calibration({
        provider = bad,
        model = bad,
        warnings = { { code = bad, severity = bad, message = bad } },
      }),
      modelSwitch = { from = bad, to = bad },
    },
    continuation = { strategy = bad, mode = bad, deltaStart = 0, reason = bad },
  })
  local health = render.health({
    status = 'ok',
    server = {},
    calibration = {
      fake_calibration({
        provider = bad,
        model = bad,
        estimatorVersion = bad,
        lastReportedAt = bad,
        warnings = { { code = bad, severity = bad, message = bad } },
      }),
    },
  })
  for _, lines in ipairs({ render.manifest(manifest), health }) do
    local text = table.concat(lines, '\n')
    assert(text:find('open ai \\x01\\x1b[31m', 1, true), text)
    for _, line in ipairs(lines) do
      assert(not line:find('[%c]'), ('a control character in %q'):format(line))
    end
    -- What the views do with them: one buffer line each.
    local buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    assert(vim.api.nvim_buf_line_count(buf) == #lines)
    vim.api.nvim_buf_delete(buf, { force = true })
  end
  assert(render.one_line('a\0b', 10) == 'a\\x00b', render.one_line('a\0b', 10))
end)

test('report_usage_shows_actual_tokens_in_the_manifest', function()
  local result, manifest = plan_with_manifest(REQUEST)
  -- Refused before sending: the callback names the field.
  local err = await(function(cb)
    ds4.report_usage({
      manifestId = result.manifestId,
      provider = 'anthropic',
      model = 'claude-sonnet-4-5',
      usage = { input = -1 },
    }, { cb = cb })
  end)
  assert(err and err.message:find('params.usage.input must be an integer >= 0', 1, true), vim.inspect(err))
  if manifest.usage == nil then
    skip('this ds4-lsp has no model awareness yet (no `usage` in the manifest): ds4/usage is not served')
  end
  eq(manifest.actualTokens, vim.NIL, 'actualTokens before a report')
  -- What Anthropic reported, in Pi's Usage shape.
  local input = math.floor(result.estimatedTokens * 0.3)
  local cache_read = math.floor(result.estimatedTokens * 0.8)
  err = await(function(cb)
    ds4.report_usage({
      manifestId = result.manifestId,
      provider = 'anthropic',
      model = 'claude-sonnet-4-5',
      usage = { input = input, output = 300, cacheRead = cache_read, cacheWrite = 64, totalTokens = 1 },
      stopReason = 'stop',
    }, { bufnr = trusted_buf, cb = cb })
  end)
  assert(not err, vim.inspect(err))
  local actual = input + cache_read + 64
  -- ds4/usage is a notification: the server may still be storing it.
  local reported
  for _ = 1, 100 do
    local e, m = await(function(cb)
      ds4.manifest({ id = result.manifestId, view = 'full' }, cb)
    end)
    assert(not e, vim.inspect(e))
    if m.actualTokens ~= vim.NIL then
      reported = m
      break
    end
    vim.wait(50)
  end
  assert(reported, 'actualTokens stayed null after ds4/usage')
  eq(reported.actualTokens, actual, 'actualTokens')
  eq(reported.usage.cacheRead, cache_read, 'usage.cacheRead')
  eq(reported.usage.stopReason, 'stop', 'usage.stopReason')
  local text = table.concat(require('ds4.render').manifest(reported), '\n')
  local render = require('ds4.render')
  assert(text:find('  actual       ' .. render.num(actual) .. ' (', 1, true), text)
  assert(text:find('  cache        share %d+%.%d%% · read ' .. render.num(cache_read)), text)

  -- :Ds4Usage reports for the last plan and shows its manifest.
  vim.api.nvim_set_current_buf(trusted_buf)
  local _, shown = run_command('Ds4Usage --input=100 --cache-read=900 --output=5', 'manifest')
  assert(shown:find('# ds4 manifest ' .. ds4.last_manifest_id, 1, true), shown)
  local count = #notified
  vim.cmd('Ds4Usage --output=5')
  assert((notified[count + 1] or {}).msg:find('give --input=N', 1, true), vim.inspect(notified[count + 1]))

  -- :Ds4Health and :checkhealth show the profile's calibration.
  local _, health = run_command('Ds4Health', 'health')
  assert(health:find('  calibration  anthropic/claude-sonnet-4-5 (', 1, true), health)
  vim.cmd('checkhealth ds4')
  local check = buffer_text(0)
  vim.cmd('bwipeout')
  assert(check:find('calibration anthropic/claude-sonnet-4-5: ratio ', 1, true), check)
end)

test('tool_executed_sends_ds4_tool_executed', function()
  local path = cfg.roots.trusted .. '/pricing.py'
  vim.fn.writefile({ 'def apply_voucher_discount(total, voucher):', '    return total - voucher' }, path)
  local sent, send_err = false, nil
  ds4.tool_executed('write', { path }, {
    bufnr = trusted_buf,
    cb = function(e)
      sent, send_err = true, e
    end,
  })
  wait_for('the notification to be sent', function()
    return sent
  end)
  assert(not send_err, vim.inspect(send_err))
  -- The write schedules a sync that runs before the next retrieve at the latest.
  local err, result = await(function(cb)
    ds4.retrieve({ query = 'apply_voucher_discount', scopes = { 'project' } }, cb, {
      bufnr = trusted_buf,
    })
  end)
  assert(not err, vim.inspect(err))
  local paths = vim.tbl_map(function(h)
    return h.path
  end, result.project)
  assert(vim.tbl_contains(paths, 'pricing.py'), vim.inspect(result))
  -- A read-only tool and no paths are fine too.
  ds4.tool_executed('read', nil, { bufnr = trusted_buf })
  local ok = pcall(ds4.tool_executed, 12)
  assert(not ok, 'tool must be a string')
end)

test('setup_expands_tilde_in_cmd', function()
  local config = require('ds4.config')
  local saved = config.options
  local home = vim.fs.normalize('~')
  local ok, problem = pcall(function()
    local options = config.set({ cmd = { '~/src/ds4-lsp/.venv/bin/ds4-lsp', '--log-level', '~' } })
    eq(options.cmd[1], home .. '/src/ds4-lsp/.venv/bin/ds4-lsp', 'cmd[1]')
    eq(options.cmd[3], '~', 'arguments as given')
    eq(config.set({ cmd = '~/bin/ds4-lsp' }).cmd[1], home .. '/bin/ds4-lsp', 'string cmd')
    eq(config.set({ cmd = { 'ds4-lsp' } }).cmd[1], 'ds4-lsp', 'a name on PATH')
  end)
  config.options = saved
  assert(ok, problem)
end)

test('checkhealth_advises_the_repository_install', function()
  ds4.setup({ cmd = { '~/no-such-dir/ds4-lsp' }, trusted_roots = { cfg.roots.trusted } })
  eq(vim.lsp.config.ds4.cmd[1], vim.fs.normalize('~') .. '/no-such-dir/ds4-lsp', 'expanded cmd')
  vim.api.nvim_set_current_buf(trusted_buf)
  vim.cmd('checkhealth ds4')
  local text = buffer_text(0)
  vim.cmd('bwipeout')
  ds4.setup({
    cmd = cfg.cmd,
    cmd_env = { DS4_DB = cfg.db },
    trusted_roots = { cfg.roots.trusted },
    session_file = function()
      return cfg.session
    end,
  })
  assert(text:find(vim.fs.normalize('~') .. '/no-such-dir/ds4-lsp\' is not executable', 1, true), text)
  assert(text:find('./scripts/demo.sh', 1, true), text)
  assert(text:find('pip install ./core .', 1, true), text)
  assert(not text:find('pip install ds4-lsp', 1, true), text)
end)

test('checkhealth_ds4', function()
  vim.api.nvim_set_current_buf(trusted_buf)
  vim.cmd('checkhealth ds4')
  local text = buffer_text(0)
  vim.cmd('bwipeout')
  assert(text:find('version: ds4-lsp ', 1, true), text)
  assert(text:find('client %d+: root ' .. vim.pesc(trust_mod.normalize(cfg.roots.trusted))), text)
  assert(text:find('trusted: true (trusted_roots', 1, true), text)
  assert(text:find('database: ' .. cfg.db, 1, true), text)
  assert(text:find('project: ready · ', 1, true), text)
  assert(not text:find('ERROR'), text)
end)

test('the_help_file_has_valid_tags_and_links', function()
  -- Result windows of earlier cases would leave no room for a help window (E36).
  vim.cmd('silent! only')
  vim.cmd('helptags ' .. vim.fn.fnameescape(cfg.doc_dir))
  local tags = {}
  for _, line in ipairs(vim.fn.readfile(cfg.doc_dir .. '/tags')) do
    tags[line:match('^(%S+)')] = true
  end
  for _, tag in ipairs({
    'ds4.txt',
    'ds4',
    'ds4-setup',
    'ds4-trust',
    'ds4-api',
    'ds4-session',
    ':Ds4Plan',
    ':Ds4Trust',
    'ds4.plan()',
    'ds4.retrieve()',
    'ds4.tool_executed()',
    'ds4.project_status()',
    'ds4-summarize',
    ':Ds4Compact',
    ':Ds4Summaries',
    'ds4.compact()',
    'ds4.summaries()',
    'ds4.compact_committed()',
    'ds4.compact_failed()',
    ':Ds4Privacy',
    'ds4.privacy()',
    'ds4-privacy',
    'ds4.report_usage()',
    'ds4.continuation_failed()',
    ':Ds4Usage',
    'ds4-usage',
  }) do
    assert(tags[tag], 'missing help tag ' .. tag)
  end
  vim.opt.runtimepath:append(vim.fs.dirname(cfg.doc_dir))
  local doc = table.concat(vim.fn.readfile(cfg.doc_dir .. '/ds4.txt'), '\n')
  for link in doc:gmatch('|([^|%s]+)|') do
    local ok, problem = pcall(vim.cmd.help, link)
    assert(ok, ('|%s| does not resolve: %s'):format(link, tostring(problem)))
  end
  vim.cmd('helpclose')
end)

test('update_settings_reaches_the_running_servers', function()
  ds4.update_settings({ context = { mode = 'observer' } })
  local err, result = await(function(cb)
    ds4.plan(plan_params(), cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.mode, 'observer', 'mode after update_settings')
  ds4.update_settings({ context = { mode = 'managed' } })
  err, result = await(function(cb)
    ds4.plan(plan_params(), cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.mode, 'managed', 'mode after the second update_settings')
end)

test('the_float_view_opens_a_floating_window', function()
  ds4.setup({
    cmd = cfg.cmd,
    cmd_env = { DS4_DB = cfg.db },
    trusted_roots = { cfg.roots.trusted },
    view = 'float',
  })
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == ui.buffer('health') then
      vim.api.nvim_win_close(win, true)
    end
  end
  vim.api.nvim_set_current_buf(trusted_buf)
  local buf = run_command('Ds4Health', 'health')
  local win = vim.api.nvim_get_current_win()
  eq(vim.api.nvim_win_get_buf(win), buf, 'current window shows the health buffer')
  eq(vim.api.nvim_win_get_config(win).relative, 'editor', 'floating window')
  vim.api.nvim_feedkeys('q', 'x', false)
  assert(not vim.api.nvim_win_is_valid(win), 'q closes the window')
end)

test('database_path_option_is_sent_as_init_option', function()
  ds4.setup({ cmd = cfg.cmd, database_path = cfg.other_db, trusted_roots = {} })
  local _, buf = edit_and_attach(cfg.roots.other .. '/e.txt')
  local err, result = await(function(cb)
    ds4.health(cb, { bufnr = buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.databasePath, cfg.other_db, 'databasePath')
  eq(result.server.trusted, false, 'server.trusted')
end)

-- Compaction. The `summarize` setup option declares `experimental.ds4.summarize` for servers
-- started from then on; the server then asks it for each summary.

local SECTIONS = {
  'Objective',
  'User Constraints',
  'Durable Decisions',
  'Completed Work',
  'Current State',
  'Files Read',
  'Files Modified',
  'Commands / Tests',
  'Errors / Risks',
  'Open Questions',
  'Next Actions',
  'Critical Exact Values',
}

--- What a careful model writes for the synthetic sessions: twelve sections, the file sections
--- from the known lists, backticks only around text copied from the conversation.
local function valid_summary(params)
  local function paths(list)
    if #list == 0 then
      return { 'None' }
    end
    return vim.tbl_map(function(path)
      return '`' .. path .. '`'
    end, list)
  end
  local bullets = {
    Objective = { 'Fix the parser bugs step by step while keeping the API stable.' },
    ['User Constraints'] = { 'Keep the API stable.' },
    ['Completed Work'] = { 'Fixed `src/parser_1.py` so that it strips whitespace.' },
    ['Files Read'] = paths(params.readFiles),
    ['Files Modified'] = paths(params.modifiedFiles),
    ['Commands / Tests'] = { '`pytest tests/test_parser_1.py -q`' },
    ['Next Actions'] = { 'Continue with the next step of the parser fixes.' },
  }
  local lines = {}
  for _, name in ipairs(SECTIONS) do
    lines[#lines + 1] = '## ' .. name
    for _, bullet in ipairs(bullets[name] or { 'None' }) do
      lines[#lines + 1] = '- ' .. bullet
    end
  end
  return table.concat(lines, '\n') .. '\n'
end

local summarize_calls = {}
--- How the `summarize` callback answers; tests replace it.
local summarize_answer = function(params, done)
  vim.defer_fn(function()
    done(valid_summary(params), { provider = 'nvim-test', model = 'fake-model-1' })
  end, 20)
end
local answer_later = summarize_answer

local function summarize(params, done)
  summarize_calls[#summarize_calls + 1] = params
  summarize_answer(params, done)
end

--- Append the compaction entry of a `ds4/compact` result to the session file, as Pi would;
--- returns the new entry's id.
local function append_compaction(path, compaction)
  local lines = vim.fn.readfile(path)
  local last = vim.json.decode(lines[#lines])
  local id = ('fe%06x'):format(#lines)
  local entry = {
    type = 'compaction',
    id = id,
    parentId = last.id,
    timestamp = '2026-11-01T12:00:00.000Z',
    summary = compaction.summary,
    firstKeptEntryId = compaction.firstKeptEntryId,
    tokensBefore = compaction.tokensBefore,
    details = compaction.details,
    fromHook = true,
  }
  vim.fn.writefile({ vim.json.encode(entry) }, path, 'a')
  return id
end

local compact_client, compact_buf, first_compaction

test('summarize_callback_answer_is_used', function()
  ds4.setup({
    cmd = cfg.cmd,
    cmd_env = { DS4_DB = cfg.db },
    trusted_roots = { cfg.roots.trusted },
    -- Keep only ~200 recent tokens, so three turns make a span.
    settings = { compaction = { keepRecentTokens = 200 } },
    summarize = summarize,
  })
  compact_client, compact_buf = edit_and_attach(cfg.roots.compaction .. '/f.txt')
  eq(client_mod.state[compact_client.id].summarize, true, 'capability declared')
  local err, result = await(function(cb)
    ds4.compact({ session = { file = cfg.compact_sessions.valid } }, cb, { bufnr = compact_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(#summarize_calls, 1, 'summarize calls')
  local call = summarize_calls[1]
  eq(call.summaryKind, 'segment', 'summaryKind')
  eq(call.sessionId, 'nvim-valid-sess', 'sessionId')
  assert(call.prompt:find('Step 1: fix the parser bug', 1, true), 'the prompt holds the turns')
  assert(type(call.tokenLimit) == 'number' and call.tokenLimit > 0, vim.inspect(call.tokenLimit))
  assert(#call.sourceEntryIds > 0, 'sourceEntryIds')
  eq(result.summarizer, 'client', 'summarizer')
  eq(result.fallbackReason, vim.NIL, 'fallbackReason')
  eq(result.validation.status, 'valid', 'validation.status')
  eq(result.summaryKind, 'segment', 'summaryKind')
  eq(vim.trim(result.compaction.summary), vim.trim(valid_summary(call)), 'the summary as written')
  local record = result.compaction.details.ds4ContextEngine
  eq(record.provider, 'nvim-test', 'provider')
  eq(record.model, 'fake-model-1', 'model')
  first_compaction = result
end)

test('summarize_callback_error_falls_back_offline', function()
  assert(compact_buf, 'needs summarize_callback_answer_is_used')
  local calls = #summarize_calls
  summarize_answer = function(_, done)
    done(nil, 'no model here')
  end
  local err, result = await(function(cb)
    ds4.compact({ session = { file = cfg.compact_sessions.fallback } }, cb, { bufnr = compact_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(#summarize_calls, calls + 1, 'the callback was asked')
  eq(result.summarizer, 'offline', 'summarizer')
  assert(result.fallbackReason:find('no model here', 1, true), result.fallbackReason)
  assert(result.fallbackReason:find('-32803', 1, true), result.fallbackReason)
  eq(result.compaction.details.ds4ContextEngine.model, 'offline-v1', 'model')
  ds4.compact_failed(result.summaryId, 'test: not appended', { bufnr = compact_buf })

  -- A callback that raises, and one that answers an empty summary.
  summarize_answer = function()
    error('boom from the callback')
  end
  err, result = await(function(cb)
    ds4.compact({ session = { file = cfg.compact_sessions.fallback } }, cb, { bufnr = compact_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.summarizer, 'offline', 'summarizer after an error')
  assert(result.fallbackReason:find('boom from the callback', 1, true), result.fallbackReason)
  ds4.compact_failed(result.summaryId, nil, { bufnr = compact_buf })

  summarize_answer = function(_, done)
    vim.schedule(function()
      done('   ')
    end)
  end
  err, result = await(function(cb)
    ds4.compact({ session = { file = cfg.compact_sessions.fallback } }, cb, { bufnr = compact_buf })
  end)
  summarize_answer = answer_later
  assert(not err, vim.inspect(err))
  eq(result.summarizer, 'offline', 'summarizer after an empty summary')
  assert(result.fallbackReason:find('empty', 1, true), result.fallbackReason)
  ds4.compact_failed(result.summaryId, nil, { bufnr = compact_buf })
end)

test('ds4compact_renders_the_result_and_the_note', function()
  assert(compact_buf, 'needs summarize_callback_answer_is_used')
  summarize_answer = answer_later
  vim.api.nvim_set_current_buf(compact_buf)
  local buf, text = run_command(
    'Ds4Compact --session='
      .. vim.fn.fnameescape(cfg.compact_sessions.fallback)
      .. ' threshold the parser fixes',
    'compaction'
  )
  assert(text:find('# ds4 compaction: s%-%x+ %(segment, level 0%)'), text)
  assert(text:find('note: ds4 never writes the session file', 1, true), text)
  assert(text:find('summarizer   client (nvim-test/fake-model-1)', 1, true), text)
  assert(text:find('validation   valid · issues none · repairs none', 1, true), text)
  assert(
    text:find('  span         %d+ messages · [%d,]+ tokens summarized · first kept %x+'),
    text
  )
  assert(text:find('# Summary\n\n## Objective\n- Fix the parser bugs', 1, true), text)
  assert(
    summarize_calls[#summarize_calls].prompt:find(
      '<custom-instructions>\nthe parser fixes\n</custom-instructions>',
      1,
      true
    ),
    'the focus reached the prompt'
  )
  eq(vim.api.nvim_buf_get_name(buf), 'ds://compaction', 'buffer name')
  eq(vim.bo[buf].modifiable, false, 'modifiable')
  -- Nothing was written to the session file.
  local lines = vim.fn.readfile(cfg.compact_sessions.fallback)
  assert(not lines[#lines]:find('"type":"compaction"', 1, true), 'the session file was written')

  local count = #notified
  vim.cmd('Ds4Compact --session=' .. vim.fn.fnameescape(cfg.compact_sessions.fallback) .. ' soon')
  local message = notified[count + 1] and notified[count + 1].msg or ''
  assert(message:find('the reason must be manual, threshold or overflow', 1, true), message)
end)

test('ds4summaries_shows_the_tree_after_a_compaction', function()
  assert(first_compaction, 'needs summarize_callback_answer_is_used')
  local id = first_compaction.summaryId
  local entry_id = append_compaction(cfg.compact_sessions.valid, first_compaction.compaction)
  local sent, send_err = false, nil
  ds4.compact_committed(id, entry_id, {
    bufnr = compact_buf,
    cb = function(e)
      sent, send_err = true, e
    end,
  })
  wait_for('ds4/compactCommitted to be sent', function()
    return sent
  end)
  assert(not send_err, vim.inspect(send_err))

  vim.api.nvim_set_current_buf(compact_buf)
  local session_flag = '--session=' .. vim.fn.fnameescape(cfg.compact_sessions.valid)
  local _, text = run_command('Ds4Summaries ' .. session_flag, 'summaries')
  assert(text:find('# ds4 summaries: session nvim-valid-sess', 1, true), text)
  assert(text:find('active root  ' .. id, 1, true), text)
  assert(text:find('* ' .. id .. ' segment L0 committed valid ', 1, true), text)
  assert(text:find('(active root)', 1, true), text)

  vim.api.nvim_set_current_buf(compact_buf)
  local buf, dot = run_command('Ds4Summaries ' .. session_flag .. ' dot', 'summaries.dot')
  eq(vim.bo[buf].filetype, 'dot', 'filetype')
  assert(dot:find('^digraph summaries {'), dot)

  local err, result = await(function(cb)
    ds4.summaries({ session = { file = cfg.compact_sessions.valid } }, cb, { bufnr = compact_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(result.activeRootId, id, 'activeRootId')
  eq(result.dot, nil, 'no dot without format dot')
  eq(result.nodes[1].piEntryId, entry_id, 'piEntryId')
end)

test('without_summarize_the_capability_is_not_declared', function()
  -- The trusted root's server was started before any `summarize` option.
  eq(client_mod.state[trusted_client.id].summarize, false, 'capability declared')
  local calls = #summarize_calls
  local err, result = await(function(cb)
    ds4.compact({
      session = { file = cfg.compact_sessions.plain },
      firstKeptEntryId = cfg.plain_first_kept,
      reason = 'overflow',
    }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(#summarize_calls, calls, 'the callback was not asked')
  eq(result.summarizer, 'offline', 'summarizer')
  assert(
    result.fallbackReason:find('no model summarizer was offered', 1, true),
    result.fallbackReason
  )
  eq(result.compaction.firstKeptEntryId, cfg.plain_first_kept, 'firstKeptEntryId')
end)

-- Durable context: pins, memory, artifacts and server-owned sessions (docs/memory.md,
-- docs/artifacts.md). Requests the server does not have yet are skipped, not failed.

local memory_mod = require('ds4.memory')

--- Whether `err` says the server has no such method (a server before that request).
local function missing(err)
  return err ~= nil and err.code == -32601
end

local function in_order(text, needles)
  local at = 1
  for _, needle in ipairs(needles) do
    local found = text:find(needle, at, true)
    assert(found, ('%q not found after position %d in:\n%s'):format(needle, at, text))
    at = found + #needle
  end
end

--- Fail when a line of a result buffer holds a control character (a newline would break
--- nvim_buf_set_lines; an escape sequence would reach the terminal).
local function no_control_characters(lines)
  for _, line in ipairs(lines) do
    assert(not line:find('%c'), 'a control character in ' .. vim.inspect(line))
  end
end

test('memory_lines_and_entries_render_without_a_server', function()
  local hostile = 'line one\27[31m red\nline two\r'
  local lines, items = memory_mod.render_list({
    sessionId = 's',
    memory = {
      {
        id = 'm1',
        scope = 'project',
        status = 'active',
        key = 'retries',
        claim = hostile,
        projectPath = vim.NIL,
        classification = vim.NIL,
        createdAt = 1764666120000,
        updatedAt = 1764666120000,
        supersededBy = vim.NIL,
        statusReason = vim.NIL,
        provenance = { sessionId = 's', mutationKey = 's:00000002', sourceEntryIds = { '00000001' } },
      },
      {
        id = 'm0',
        scope = 'project',
        status = 'superseded',
        key = vim.NIL,
        claim = 'retries defaults to 2',
        createdAt = 1,
        updatedAt = 2,
        supersededBy = 'm1',
        statusReason = vim.NIL,
        provenance = { mutationKey = 's:00000001', sourceEntryIds = {} },
      },
    },
    pins = {},
    counts = { applied = 2, rejected = 1, invalid = 0 },
    problems = { { mutationKey = 's:00000009', kind = 'memory', problem = 'conflicts\nwith m1' } },
  }, '/s.jsonl')
  no_control_characters(lines)
  local text = table.concat(lines, '\n')
  in_order(text, {
    '# ds4 memory: 0 pins, 2 memory items',
    '  session  /s.jsonl',
    '## Pins',
    'none (:Ds4Pin on a selection)',
    '## Memory',
    '* m1  project  active',
    '    │ line one\\x1b[31m red',
    '    │ line two',
    'key retries · from s:00000002 · source entries 00000001 · created 2025-12-02T09:02:00Z',
    '- m0  project  superseded',
    'superseded by m1',
    '1 rejected',
    's:00000009 (memory): conflicts with m1',
  })
  -- Every line of an item's block maps to it (the buffer actions read the cursor's line).
  local mapped = {}
  for line, entry in pairs(items) do
    mapped[entry.item.id] = (mapped[entry.item.id] or 0) + 1
    assert(lines[line] ~= '', 'an empty line is mapped')
  end
  eq(mapped.m1, 4, 'lines of m1')
  eq(mapped.m0, 3, 'lines of m0')

  -- A write for a Pi session (an older server: no `entry`): prepared only, the bare entry line.
  local result = {
    customType = 'ds4-context-memory-v1',
    data = { schemaVersion = 1, mutationId = 'mu-1', createdAt = 5, operation = 'add' },
    itemId = 'mem-1',
    appended = false,
    entryId = vim.NIL,
  }
  local entry = memory_mod.write_lines(result, 'memory')
  in_order(table.concat(entry, '\n'), {
    '# ds4 memory mem-1: prepared, not yet recorded',
    'ds4 never writes it',
    'pi.appendEntry("ds4-context-memory-v1", data)',
    'append the line below to the',
    "DS4-owned session",
  })
  local decoded = vim.json.decode(entry[#entry])
  eq(decoded.type, 'custom', 'entry type')
  eq(decoded.customType, 'ds4-context-memory-v1', 'customType')
  eq(decoded.data.mutationId, 'mu-1', 'data')
  result.appended, result.entryId = true, '0000000a'
  eq(
    memory_mod.write_lines(result, 'memory')[1],
    'ds4: memory mem-1 recorded (entry 0000000a appended to the DS4-owned session)',
    'owned'
  )

  -- RequestFailed with a conflict, without one, and other errors.
  local refused = memory_mod.refused({ code = -32803, message = 'conflicts', data = { conflictsWith = 'm1' } })
  eq(refused.conflicts_with, 'm1', 'conflicts_with')
  eq(memory_mod.refused({ code = -32803, message = 'unknown pin', data = vim.NIL }).conflicts_with, nil, 'no conflict')
  eq(memory_mod.refused({ code = -32602, message = 'bad' }), nil, 'InvalidParams')

  local found = memory_mod.render_artifacts({
    query = 'retry',
    matches = {
      { artifactId = ('a'):rep(64), sourceId = '0000002a', line = 412, column = 9, excerpt = 'E  Retry\nE  got 5' },
    },
    searched = { { artifactId = ('a'):rep(64), status = 'ok' }, { artifactId = ('b'):rep(64), status = 'corrupt' } },
    truncated = true,
  })
  in_order(table.concat(found, '\n'), {
    '# ds4 artifact search: 1 matches in 2 artifacts (truncated: narrow the query)',
    '  query    retry',
    'artifact://sha256/' .. ('a'):rep(64) .. ' 412:9 (entry 0000002a)',
    '    E  Retry',
    '    E  got 5',
    'not searched: ' .. ('b'):rep(64) .. ' (corrupt)',
  })
end)

test('a_pi_session_write_shows_the_complete_entry_line_and_claims_no_one_appends_it', function()
  local entry = {
    type = 'custom',
    id = '1a2b3c4d',
    parentId = '0000002a',
    timestamp = '2025-12-02T09:02:00.000Z',
    customType = 'ds4-context-pin-v1',
    data = { schemaVersion = 1, mutationId = 'mu-2', createdAt = 5, operation = 'add' },
  }
  local result = {
    customType = 'ds4-context-pin-v1',
    data = entry.data,
    itemId = 'pin-1',
    appended = false,
    entryId = vim.NIL,
    entry = entry,
  }
  local lines = memory_mod.write_lines(result, 'pin')
  eq(memory_mod.entry_json(result), lines[#lines], 'the last line is the entry')
  local decoded = vim.json.decode(lines[#lines])
  for _, field in ipairs({ 'type', 'id', 'parentId', 'timestamp', 'customType' }) do
    eq(decoded[field], entry[field], field)
  end
  eq(decoded.data.mutationId, 'mu-2', 'data')
  local note = table.concat(lines, '\n', 1, #lines - 1)
  -- Nothing sends the entry to Pi, and a line without id/parentId would be dropped: never say
  -- that something appends or imports it by itself.
  assert(not note:find('extension appends', 1, true), note)
  assert(not note:find('The server imports it when', 1, true), note)
  in_order(note, { 'prepared, not yet recorded', 'nothing has sent this entry to Pi', 'pi.appendEntry("ds4-context-pin-v1", data)' })
end)

test('memory_facts_holding_newlines_stay_on_their_line', function()
  local nl = 'a\nb\r\27c'
  local sources = { mutationKey = 's:2', sourceEntryIds = { nl, '00000001' } }
  local lines = memory_mod.render_list({
    sessionId = 's',
    pins = {
      {
        id = 'p\n1',
        scope = 'session',
        status = 'superseded',
        content = 'keep it',
        supersededBy = 'p\n2',
        statusReason = vim.NIL,
        projectPath = '/home/me/demo\nINJECTED',
        classification = 'local\nonly',
        createdAt = 9007199254740991,
        updatedAt = 9007199254740991,
        provenance = {
          sessionId = 's',
          mutationKey = 's:\n1',
          sourceFile = 'src/a.ts\n:!rm -rf ~',
          sourceEntryId = nl,
        },
      },
    },
    -- A time beyond what os.date formats (1e300 ms) shows as '-'.
    memory = { { id = 'm1', scope = 'project', status = 'active', claim = 'x', createdAt = 1e300, provenance = sources } },
    counts = { applied = 2, rejected = 0, invalid = 0 },
    problems = { { mutationKey = 'k\n1', kind = 'pin\n', problem = 'x' } },
  }, '/s\n.jsonl')
  no_control_characters(lines)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.api.nvim_buf_delete(buf, { force = true })
  in_order(table.concat(lines, '\n'), {
    'session  /s .jsonl',
    '- p 1  session  superseded',
    'from s: 1 · file src/a.ts :!rm -rf ~ · source entry a b \\x1bc',
    'superseded by p 2',
    'project /home/me/demo INJECTED',
    'classification local only',
    'created -',
    '* m1  project  active',
    'source entries a b \\x1bc, 00000001',
    'created -',
    'k 1 (pin): x',
  })
end)

test('a_repeat_is_refused_without_offering_supersede', function()
  local conflict = memory_mod.refused({
    code = -32803,
    message = 'conflicts',
    data = { conflictsWith = 'm1', kind = 'conflict' },
  })
  eq(conflict.supersede, 'm1', 'a conflict is superseded')
  eq(conflict.kind, 'conflict', 'kind')
  local repeat_ = memory_mod.refused({
    code = -32803,
    message = "already pinned as 'p1'",
    data = { conflictsWith = 'p1', kind = 'repeat' },
  })
  eq(repeat_.conflicts_with, 'p1', 'the repeated item is named')
  eq(repeat_.supersede, nil, 'a repeat is not superseded')
  eq(memory_mod.refused({ code = -32803, message = 'c', data = { conflictsWith = 'm1' } }).supersede, 'm1', 'no kind: as before')

  -- M.write: a repeat is shown, no "Supersede" prompt, nothing sent again.
  local request = client_mod.request
  local sent = 0
  client_mod.request = function(method, params, cb)
    sent = sent + 1
    vim.schedule(function()
      cb({ code = -32803, message = "already pinned as 'p1'", data = { conflictsWith = 'p1', kind = 'repeat' } }, nil)
    end)
  end
  local prompt_count, notify_count = #prompts, #notified
  local ok, problem = pcall(function()
    memory_mod.write('ds4/pin', { session = { file = '/s.jsonl' }, content = 'x' }, 'pin')
    wait_for('the refusal shown', function()
      return #notified > notify_count
    end)
    vim.wait(50)
    eq(#prompts, prompt_count, 'no Supersede prompt')
    eq(sent, 1, 'sent once')
    assert(notified[#notified].msg:find("already pinned as 'p1'", 1, true), notified[#notified].msg)
  end)
  client_mod.request = request
  assert(ok, problem)
end)

test('a_failed_reopen_keeps_the_owned_session_and_reports_the_error', function()
  local store = memory_mod.store_path()
  local before = vim.fn.filereadable(store) == 1 and vim.fn.readfile(store) or nil
  local stored = { sessionId = 'kept-session', file = '/data/sessions/kept-session.jsonl' }
  local request = client_mod.request
  local asked = {}
  client_mod.request = function(method, params, cb)
    asked[#asked + 1] = vim.deepcopy(params)
    vim.schedule(function()
      if params.sessionId then
        cb({ code = -32803, message = 'Request ds4/sessionOpen failed: timed out' }, nil)
      else
        cb(nil, { sessionId = 'new', file = '/data/sessions/new.jsonl', leafId = vim.NIL, created = true })
      end
    end)
  end
  local cwd = vim.fn.getcwd()
  local ok, problem = pcall(function()
    vim.cmd.cd(vim.fn.fnameescape(cfg.roots.other))
    local buf = vim.api.nvim_create_buf(false, true)
    -- The root the plugin keys the store by for this buffer (no client: the cwd).
    local root = ds4.root(buf) or vim.fn.getcwd()
    local roots = trust_mod.read_roots(store)
    roots[root] = stored
    trust_mod.write_roots(store, roots)
    local err, result = await(function(cb)
      ds4.session_open(nil, cb, { bufnr = buf })
    end)
    eq(result, nil, 'no session')
    assert(err, 'the error reaches the caller')
    assert(err.message:find('could not reopen the DS4-owned session kept-session', 1, true), err.message)
    assert(err.message:find('timed out', 1, true), err.message)
    eq(#asked, 1, 'nothing created')
    eq(asked[1].sessionId, 'kept-session', 'reopened by id')
    eq(vim.inspect(memory_mod.stored(root)), vim.inspect(stored), 'the id is kept')
    -- Forgotten on request: the next call opens (and remembers) a new one.
    eq(vim.inspect(ds4.forget_owned_session({ bufnr = buf })), vim.inspect(stored), 'forgotten')
    local err2, opened = await(function(cb)
      ds4.session_open(nil, cb, { bufnr = buf })
    end)
    assert(not err2, vim.inspect(err2))
    eq(opened.sessionId, 'new', 'a new session')
    eq(memory_mod.stored(root).sessionId, 'new', 'remembered')
  end)
  client_mod.request = request
  vim.cmd.cd(vim.fn.fnameescape(cwd))
  if before then
    vim.fn.writefile(before, store)
  else
    os.remove(store)
  end
  assert(ok, problem)
end)

test('write_roots_replaces_the_state_file_by_rename', function()
  local dir = vim.fn.tempname()
  local path = dir .. '/state/roots.json'
  trust_mod.write_roots(path, { ['/a'] = 'allow' })
  local first = vim.uv.fs_stat(path)
  trust_mod.write_roots(path, { ['/a'] = 'allow', ['/b'] = 'deny' })
  local second = vim.uv.fs_stat(path)
  -- A new file renamed over the old one (a reader sees one or the other, never a truncated
  -- file): a new inode, and no temporary file left behind.
  assert(first.ino ~= second.ino, 'rewritten in place: inode ' .. tostring(first.ino))
  eq(vim.inspect(trust_mod.read_roots(path)), vim.inspect({ ['/a'] = 'allow', ['/b'] = 'deny' }), 'roots')
  eq(#vim.fn.readdir(dir .. '/state'), 1, 'files in the directory')
  vim.fn.delete(dir, 'rf')
end)

test('ds4memory_lists_pins_and_memory_with_provenance_and_actions', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  vim.api.nvim_set_current_buf(trusted_buf)
  local err, result = await(function(cb)
    ds4.memory({ session = { file = cfg.memory_session } }, cb, { bufnr = trusted_buf })
  end)
  assert(not err, vim.inspect(err))
  eq(#result.memory, 1, 'memory items')
  eq(result.memory[1].id, 'mem-nvim-1', 'memory id')
  eq(result.memory[1].key, 'retries', 'automatic key')
  eq(#result.pins, 1, 'pins')
  eq(result.pins[1].provenance.sourceFile, cfg.roots.trusted .. '/shipping.py', 'pin source file')

  local buf, text = run_command(
    'Ds4Memory --session=' .. vim.fn.fnameescape(cfg.memory_session),
    'memory'
  )
  in_order(text, {
    '# ds4 memory: 1 pins, 1 memory items',
    '  session  ' .. cfg.memory_session,
    '## Pins',
    '* pin-nvim-1  session  active',
    '    │ Keep the public API of shipping.py stable.',
    '    │ No new dependencies.',
    'file ' .. cfg.roots.trusted .. '/shipping.py',
    '## Memory',
    '* mem-nvim-1  project  active',
    '    │ retries defaults to 3',
    'key retries · from nvim-memory-sess:',
  })
  local keys = {}
  for _, map in ipairs(vim.api.nvim_buf_get_keymap(buf, 'n')) do
    keys[map.lhs] = true
  end
  assert(keys.d and keys.s and keys.r and keys.q, vim.inspect(keys))
  -- The item under the cursor is what `d` and `s` act on.
  local line = vim.fn.search('mem-nvim-1', 'nw')
  eq(memory_mod.shown[buf].items[line].item.id, 'mem-nvim-1', 'the item on its line')
  eq(memory_mod.shown[buf].session.file, cfg.memory_session, 'the session acted on')
end)

test('remember_conflict_offers_supersede_and_shows_the_entry_to_append', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  vim.api.nvim_set_current_buf(trusted_buf)
  local session = { file = cfg.memory_session }
  local err, result = await(function(cb)
    ds4.remember({ session = session, claim = 'the timeout is 30 seconds' }, cb, { bufnr = trusted_buf })
  end)
  if missing(err) then
    skip('this ds4-lsp has no ds4/remember yet')
  end
  assert(not err, vim.inspect(err))
  eq(result.customType, 'ds4-context-memory-v1', 'customType')
  eq(result.appended, false, 'a Pi session: not appended by the server')
  eq(result.entryId, vim.NIL, 'entryId')
  eq(result.data.operation, 'add', 'operation')
  assert(result.itemId:match('^mem%-%x+$'), result.itemId)
  if result.entry ~= nil then
    -- A server that sends the complete line: that is the entry shown and copied.
    eq(memory_mod.entry_json(result), vim.json.encode(result.entry), 'the complete entry line')
    assert(type(result.entry.id) == 'string' and type(result.entry.timestamp) == 'string', vim.inspect(result.entry))
  end

  -- The same claim again is a repeat: refused, and never offered for Supersede when the
  -- server says it is one (`data.kind`).
  local repeated = await(function(cb)
    ds4.remember({ session = session, claim = 'retries defaults to 3' }, cb, { bufnr = trusted_buf })
  end)
  eq(repeated and repeated.code, -32803, 'a repeat is RequestFailed')
  local refusal = memory_mod.refused(repeated)
  if refusal.kind ~= nil then
    eq(refusal.kind, 'repeat', 'kind')
    eq(refusal.supersede, nil, 'no Supersede for a repeat')
  end

  -- The session holds "retries defaults to 3" (mem-nvim-1): another value conflicts.
  err = await(function(cb)
    ds4.remember({ session = session, claim = 'retries defaults to 5' }, cb, { bufnr = trusted_buf })
  end)
  assert(err, 'a conflicting claim is refused')
  eq(err.code, -32803, 'RequestFailed')
  eq(err.data.conflictsWith, 'mem-nvim-1', 'conflictsWith')
  assert(err.message:find('mem-nvim-1', 1, true), err.message)

  -- :Ds4Remember offers to supersede; answered, it shows the entry for Pi to append.
  local prompt_count = #prompts
  select_answer = 'Supersede'
  local ok, problem = pcall(function()
    local _, text = run_command(
      'Ds4Remember --session=' .. vim.fn.fnameescape(cfg.memory_session) .. ' retries defaults to 5',
      'entry'
    )
    assert(prompts[prompt_count + 1]:find('mem-nvim-1', 1, true), vim.inspect(prompts))
    in_order(text, { 'prepared, not yet recorded', 'ds4 never writes it', 'ds4-context-memory-v1' })
    local lines = vim.split(text, '\n')
    local entry = vim.json.decode(lines[#lines])
    eq(entry.data.operation, 'supersede', 'operation')
    eq(entry.data.previousId, 'mem-nvim-1', 'previousId')
  end)
  select_answer = 'Trust'
  assert(ok, problem)
end)

test('ds4memory_mappings_forget_unpin_and_supersede_the_item_under_the_cursor', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  vim.api.nvim_set_current_buf(trusted_buf)
  local probe = await(function(cb)
    ds4.unpin({ session = { file = cfg.memory_session }, pinId = 'pin-none' }, cb, { bufnr = trusted_buf })
  end)
  if missing(probe) then
    skip('this ds4-lsp has no ds4/unpin yet')
  end
  eq(probe and probe.code, -32803, 'an unknown pin is RequestFailed')
  local buf = run_command('Ds4Memory --session=' .. vim.fn.fnameescape(cfg.memory_session), 'memory')
  local answers = {}
  local input = vim.ui.input
  vim.ui.input = function(opts, on_confirm)
    answers[#answers + 1] = opts.prompt
    vim.schedule(function()
      on_confirm(opts.default and (opts.default .. ' (v2)') or 'obsolete')
    end)
  end
  local ok, problem = pcall(function()
    local function act_on(id, action)
      vim.api.nvim_set_current_buf(buf)
      vim.api.nvim_win_set_cursor(0, { vim.fn.search(id, 'nw'), 0 })
      local entry_buf = ui.buffer('entry')
      if entry_buf then
        vim.bo[entry_buf].modifiable = true
        vim.api.nvim_buf_set_lines(entry_buf, 0, -1, false, {})
      end
      local tick = vim.api.nvim_buf_get_changedtick(buf)
      memory_mod.act(buf, action)
      wait_for('the entry of ' .. action, function()
        return ui.buffer('entry') ~= nil and buffer_text(ui.buffer('entry')) ~= ''
      end)
      -- ... and the list refreshed after it (asynchronously: wait, so it lands here).
      wait_for('the memory list refreshed', function()
        return vim.api.nvim_buf_get_changedtick(buf) > tick
      end)
      local lines = vim.api.nvim_buf_get_lines(ui.buffer('entry'), 0, -1, false)
      return vim.json.decode(lines[#lines])
    end
    local forgot = act_on('mem-nvim-1', 'remove')
    eq(forgot.customType, 'ds4-context-memory-v1', 'forget: customType')
    eq(forgot.data.operation, 'status', 'forget: operation')
    eq(forgot.data.memoryId, 'mem-nvim-1', 'forget: memoryId')
    eq(forgot.data.reason, 'obsolete', 'forget: reason')
    local unpinned = act_on('pin-nvim-1', 'remove')
    eq(unpinned.data.pinId, 'pin-nvim-1', 'unpin: pinId')
    local superseded = act_on('pin-nvim-1', 'supersede')
    eq(superseded.data.operation, 'supersede', 'supersede: operation')
    eq(superseded.data.previousId, 'pin-nvim-1', 'supersede: previousId')
    eq(
      superseded.data.item.content,
      'Keep the public API of shipping.py stable.\nNo new dependencies. (v2)',
      'supersede: the edited text'
    )
    assert(answers[1]:find('forget mem-nvim-1', 1, true), vim.inspect(answers))
  end)
  vim.ui.input = input
  assert(ok, problem)
end)

test('ds4pin_pins_the_range_and_shows_the_entry_to_append', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  vim.api.nvim_set_current_buf(trusted_buf)
  local err = await(function(cb)
    ds4.pin({ session = { file = cfg.memory_session }, content = 'probe', scope = 'galaxy' }, cb, {
      bufnr = trusted_buf,
    })
  end)
  if missing(err) then
    skip('this ds4-lsp has no ds4/pin yet')
  end
  eq(err.code, -32602, 'a bad scope is InvalidParams')
  assert(err.message:find('params.scope', 1, true), err.message)
  local _, text = run_command(
    '1,1Ds4Pin --scope=branch --session=' .. vim.fn.fnameescape(cfg.memory_session),
    'entry'
  )
  in_order(text, { '# ds4 pin pin-', 'prepared, not yet recorded', 'ds4-context-pin-v1' })
  local lines = vim.split(text, '\n')
  local entry = vim.json.decode(lines[#lines])
  eq(entry.data.operation, 'add', 'operation')
  eq(entry.data.item.content, 'trusted', 'the range')
  eq(entry.data.item.scope, 'branch', 'scope')
  eq(entry.data.item.sourceFile, vim.api.nvim_buf_get_name(trusted_buf), 'sourceFile')
end)

local owned_file

test('session_open_and_append_own_a_session_the_server_writes', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  local opts = { bufnr = trusted_buf }
  local err, opened = await(function(cb)
    ds4.session_open(nil, cb, opts)
  end)
  if missing(err) then
    skip('this ds4-lsp has no ds4/sessionOpen yet')
  end
  assert(not err, vim.inspect(err))
  eq(opened.created, true, 'created')
  -- The title is Pi's `session_info` entry: the only entry yet, if any.
  assert(opened.leafId == vim.NIL or type(opened.leafId) == 'string', vim.inspect(opened.leafId))
  eq(memory_mod.stored(ds4.root(trusted_buf)).file, opened.file, 'remembered for the root')
  -- Asked again: the same session, reopened by its id.
  local err2, again = await(function(cb)
    ds4.session_open({}, cb, opts)
  end)
  assert(not err2, vim.inspect(err2))
  eq(again.file, opened.file, 'the same file')
  eq(again.sessionId, opened.sessionId, 'the same id')
  eq(again.created, false, 'reopened')

  local err3, appended = await(function(cb)
    ds4.session_append({
      messages = {
        { role = 'user', content = 'What is the retry budget?', timestamp = 1764666120000 },
        {
          role = 'assistant',
          content = { { type = 'text', text = 'Four retries.' } },
          provider = 'anthropic',
          model = 'claude-sonnet-4-5',
          stopReason = 'stop',
          timestamp = 1764666121000,
        },
      },
    }, cb, opts)
  end)
  assert(not err3, vim.inspect(err3))
  eq(#appended.entryIds, 2, 'entry ids')
  eq(appended.leafId, appended.entryIds[2], 'the new leaf')
  local lines = vim.fn.readfile(opened.file)
  local header = vim.json.decode(lines[1])
  eq(header.type, 'session', 'header')
  eq(header.version, 3, 'version')
  local last = vim.json.decode(lines[#lines])
  eq(last.id, appended.leafId, 'the last line is the leaf')
  eq(last.message.role, 'assistant', 'role')

  -- A bad message is named.
  local err4 = await(function(cb)
    ds4.session_append({ messages = { { role = 'wizard', content = 'x' } } }, cb, opts)
  end)
  eq(err4 and err4.code, -32602, 'InvalidParams')
  assert(err4.message:find('params.messages[', 1, true), err4.message)

  owned_file = opened.file
end)

test('a_write_to_an_owned_session_is_appended_by_the_server', function()
  if not owned_file then
    skip('needs session_open_and_append_own_a_session_the_server_writes (ds4/sessionOpen)')
  end
  local opts = { bufnr = trusted_buf }
  local err5, remembered = await(function(cb)
    ds4.remember({ session = { file = owned_file }, claim = 'the retry budget is 4' }, cb, opts)
  end)
  if missing(err5) then
    skip('this ds4-lsp owns sessions but has no ds4/remember yet')
  end
  assert(not err5, vim.inspect(err5))
  eq(remembered.appended, true, 'appended by the server')
  assert(type(remembered.entryId) == 'string', vim.inspect(remembered.entryId))
  local written = vim.fn.readfile(owned_file)
  local tail = vim.json.decode(written[#written])
  eq(tail.id, remembered.entryId, 'the entry in the file')
  eq(tail.customType, 'ds4-context-memory-v1', 'customType')
end)

test('ds4artifactsearch_finds_text_in_a_stored_tool_output', function()
  assert(trusted_buf, 'needs attaches_to_a_file_in_a_workspace')
  vim.api.nvim_set_current_buf(trusted_buf)
  local opts = { bufnr = trusted_buf }
  local session = { file = cfg.artifact_session }
  local err = await(function(cb)
    ds4.artifact_search({ query = 'zebraretryerror' }, cb, opts)
  end)
  if missing(err) then
    skip('this ds4-lsp has no ds4/artifactSearch yet')
  end
  eq(err and err.code, -32602, 'neither artifactId nor session')
  assert(err.message:find('params.artifactId', 1, true), err.message)
  -- A managed plan stores the large tool output as an artifact.
  local perr = await(function(cb)
    ds4.plan({
      session = session,
      request = 'why did the suite fail?',
      model = { provider = 'anthropic', id = 'claude-sonnet-4-5', contextWindow = 200000 },
    }, cb, opts)
  end)
  assert(not perr, vim.inspect(perr))
  local _, text = run_command(
    'Ds4ArtifactSearch --session=' .. vim.fn.fnameescape(cfg.artifact_session) .. ' zebraretryerror',
    'artifacts'
  )
  in_order(text, {
    '# ds4 artifact search: 1 matches in 1 artifacts',
    '  query    zebraretryerror',
    'artifact://sha256/',
    'E   ZebraRetryError: expected 3 retries, got 5',
  })
end)

-- Results, then stop every server before exiting.
local file = assert(io.open(cfg.results, 'w'))
file:write(vim.json.encode({ tests = results, notified = notified }))
file:close()

for _, client in ipairs(vim.lsp.get_clients()) do
  client:stop()
end
vim.wait(5000, function()
  return #vim.lsp.get_clients({ _uninitialized = true }) == 0
end, 10)

local failed = 0
for _, r in ipairs(results) do
  if not r.ok then
    failed = failed + 1
  end
end
os.exit(failed == 0 and 0 or 1)
