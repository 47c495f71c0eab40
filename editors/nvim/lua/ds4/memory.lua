--- Durable context (docs/memory.md, docs/artifacts.md): pins, memory, artifact search and the
--- server-owned session, for :Ds4Pin, :Ds4Remember, :Ds4Memory, :Ds4ArtifactSearch and the
--- Lua API (`ds4.pin()`, `ds4.remember()`, `ds4.session_open()`, ...).
---
--- The default session of these commands and API calls is the Pi session file
--- (|ds4.session_file()|), else the workspace's server-owned session: opened once per
--- workspace root with `ds4/sessionOpen`, its id kept in `stdpath('state')/ds4/sessions.json`
--- and reopened by that id later (a failed reopen keeps the id and reports the error). For an
--- owned session the server appends each pin or memory entry itself (`appended`); a Pi session
--- is never written by ds4: the write is only prepared, and the complete entry line is shown
--- for the agent's Pi extension (`pi.appendEntry`) or you to append.
---
--- Item text is user data: lines are shown as they are, with control characters escaped.

local M = {}

local render = require('ds4.render')
local val = render.val

--- JSON-RPC `RequestFailed`: a write the server refused.
M.REQUEST_FAILED = -32803

local function notify_error(message)
  vim.notify(message, vim.log.levels.ERROR)
end

-- ------------------------------------------------------------------ the owned session

--- The file keeping each root's owned session: `{ version = 1, roots = { [root] = { sessionId,
--- file } } }`.
---@return string
function M.store_path()
  return vim.fs.joinpath(vim.fn.stdpath('state'), 'ds4', 'sessions.json')
end

---@return table<string, {sessionId: string, file: string}>
local function read_store()
  return require('ds4.trust').read_roots(M.store_path())
end

local function write_store(roots)
  require('ds4.trust').write_roots(M.store_path(), roots)
end

--- The owned session remembered for `root` (may be stale: the server is not asked).
---@param root string
---@return {sessionId: string, file: string}?
function M.stored(root)
  local entry = read_store()[root]
  if
    type(entry) == 'table'
    and type(entry.sessionId) == 'string'
    and type(entry.file) == 'string'
  then
    return entry
  end
  return nil
end

--- The title of the sessions the plugin opens (Pi's `session_info` name).
M.OWNED_TITLE = 'DS4 session (Neovim)'

--- The owned session of the workspace of `opts.bufnr`: reopened by the remembered id, else
--- (nothing remembered for the root) created and remembered. When reopening fails (a server
--- restarting, a timeout, a moved data directory) the remembered id is kept and `cb` gets the
--- error, its message naming the session and |ds4.forget_owned_session()|: a new session
--- never replaces the old one silently. `cb(err, result)` gets the `ds4/sessionOpen` result
--- `{ sessionId, file, leafId, created, cwd }`.
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
function M.owned_session(cb, opts)
  local root = require('ds4').root(opts and opts.bufnr) or vim.fn.getcwd()
  local client = require('ds4.client')
  local function create()
    client.request('ds4/sessionOpen', { title = M.OWNED_TITLE }, function(err, result)
      if err then
        return cb(err, nil)
      end
      local roots = read_store()
      roots[root] = { sessionId = result.sessionId, file = result.file }
      write_store(roots)
      cb(nil, result)
    end, opts)
  end
  local stored = M.stored(root)
  if not stored then
    return create()
  end
  client.request('ds4/sessionOpen', { sessionId = stored.sessionId }, function(err, result)
    if err then
      local message = (
        'could not reopen the DS4-owned session %s (%s) of %s: %s. It is kept and tried again '
        .. 'next time; if it is gone for good, :lua require("ds4").forget_owned_session() and a '
        .. 'new one is opened'
      ):format(
        stored.sessionId,
        stored.file,
        root,
        render.one_line(err.message, 300)
      )
      return cb(vim.tbl_extend('force', err, { message = message }), nil)
    end
    cb(nil, result)
  end, opts)
end

--- Forget the owned session remembered for the workspace of `opts.bufnr` (its file stays where
--- it is): the next write or |ds4.session_open()| opens a new one. The forgotten entry, or nil.
---@param opts {bufnr: integer?}?
---@return {sessionId: string, file: string}?
function M.forget_owned(opts)
  local root = require('ds4').root(opts and opts.bufnr) or vim.fn.getcwd()
  local stored = M.stored(root)
  if stored then
    local roots = read_store()
    roots[root] = nil
    write_store(roots)
  end
  return stored
end

--- The session for a write or list: `{ file = explicit }` when given, else the Pi session file
--- (|ds4.session_file()|), else the owned session. `cb(err, session, owned)`.
---@param explicit string?
---@param cb fun(err: table?, session: table?, owned: boolean?)
---@param opts {bufnr: integer?}?
function M.default_session(explicit, cb, opts)
  local file = require('ds4').session_file(explicit)
  if file then
    local root = require('ds4').root(opts and opts.bufnr) or vim.fn.getcwd()
    local stored = M.stored(root)
    return cb(nil, { file = file }, stored ~= nil and stored.file == file)
  end
  M.owned_session(function(err, result)
    if err then
      return cb(err, nil, nil)
    end
    cb(nil, { file = result.file }, true)
  end, opts)
end

--- `params` with `session` filled in by |ds4-memory| defaults when it is missing, then `fn`.
---@param params table
---@param cb fun(err: table?, result: table?)
---@param opts {bufnr: integer?}?
---@param fn fun(params: table)
function M.with_session(params, cb, opts, fn)
  if params.session ~= nil then
    return fn(params)
  end
  M.default_session(nil, function(err, session)
    if err then
      return cb(err, nil)
    end
    fn(vim.tbl_extend('force', params, { session = session }))
  end, opts)
end

-- ------------------------------------------------------------------ writes

--- A refused write: `{ message, conflicts_with?, kind?, supersede? }` when `err` is the
--- server's RequestFailed, else nil. `conflicts_with` and `kind` are `err.data.conflictsWith`
--- and `err.data.kind` (`conflict` or `repeat`); `supersede` is the item a "Supersede" would
--- replace: `conflicts_with` for a conflict, or when an older server sends no `kind`; nil for
--- a repeat, where superseding would change nothing.
---@param err table?
---@return {message: string, conflicts_with: string?, kind: string?, supersede: string?}?
function M.refused(err)
  if type(err) ~= 'table' or err.code ~= M.REQUEST_FAILED then
    return nil
  end
  local data = val(err.data)
  local function named(field)
    local value = type(data) == 'table' and val(data[field]) or nil
    return type(value) == 'string' and value ~= '' and value or nil
  end
  local conflict, kind = named('conflictsWith'), named('kind')
  return {
    message = tostring(err.message),
    conflicts_with = conflict,
    kind = kind,
    supersede = (kind == nil or kind == 'conflict') and conflict or nil,
  }
end

--- The Pi entry of a write as one JSON line: the server's complete `result.entry` (`type`,
--- `id`, `parentId`, `timestamp`, `customType`, `data`) when it sends one, else (older
--- servers) `{"type":"custom","customType":...,"data":...}`.
---@param result table
---@return string
function M.entry_json(result)
  local entry = val(result.entry)
  if type(entry) == 'table' then
    return vim.json.encode(entry)
  end
  return vim.json.encode({ type = 'custom', customType = result.customType, data = result.data })
end

--- What became of a write of `what` ('pin', 'memory'): one line when the server appended it,
--- else a note that it is only prepared (ds4 never writes a Pi session; the agent's Pi
--- extension records it with `pi.appendEntry`, or you append the line) and the entry line.
---@param result table
---@param what string
---@return string[]
function M.write_lines(result, what)
  if result.appended == true then
    return {
      ('ds4: %s %s recorded (entry %s appended to the DS4-owned session)'):format(
        what,
        tostring(result.itemId),
        tostring(val(result.entryId) or '?')
      ),
    }
  end
  return {
    ('# ds4 %s %s: prepared, not yet recorded'):format(what, tostring(result.itemId)),
    '',
    'This is a Pi session: ds4 never writes it, and nothing has sent this entry to Pi.',
    'It is recorded once the agent\'s Pi extension calls',
    ('pi.appendEntry("%s", data), or once you append the line below to the'):format(
      tostring(result.customType)
    ),
    'session file as its last line (the server then imports it). Or write to the',
    'workspace\'s DS4-owned session instead (|ds4-owned-session|).',
    '',
    M.entry_json(result),
  }
end

--- Show what became of a write: a message for an owned session, else the entry in `ds://entry`.
---@param result table
---@param what string
function M.show_write(result, what)
  local lines = M.write_lines(result, what)
  if result.appended == true then
    vim.notify(lines[1])
  else
    require('ds4.ui').show('entry', lines, 'ds4 entry, not yet recorded')
  end
end

--- Send `method` with `params`; a conflict is offered as "Supersede" (the write sent again
--- with `supersedes` set to the conflicting item), a repeat and other refusals and errors are
--- shown. On
--- success the result is shown (|ds4-memory|) and `done(result)` is called.
---@param method string
---@param params table
---@param what string 'pin'|'memory'
---@param done fun(result: table)?
function M.write(method, params, what, done)
  require('ds4.client').request(method, params, function(err, result)
    if err then
      local refused = M.refused(err)
      if refused and refused.supersede then
        return vim.ui.select(
          { 'Supersede', 'Cancel' },
          { prompt = ('%s: %s'):format(method, refused.message) },
          function(choice)
            if choice == 'Supersede' then
              local again = vim.tbl_extend('force', params, { supersedes = refused.supersede })
              M.write(method, again, what, done)
            end
          end
        )
      end
      return notify_error(method .. ': ' .. err.message)
    end
    M.show_write(result, what)
    if done then
      done(result)
    end
  end)
end

-- ------------------------------------------------------------------ the memory list

--- `text` as lines, each prefixed by `indent`, control characters escaped.
local function block(text, indent)
  local out = {}
  for _, line in ipairs(vim.split(tostring(text), '\n', { plain = true })) do
    local clean = line:gsub('\r$', ''):gsub('%c', function(c)
      return ('\\x%02x'):format(c:byte())
    end)
    out[#out + 1] = indent .. clean
  end
  return out
end

--- A ms-since-the-epoch time as ISO 8601 UTC; `-` when it is not a number within ±8.64e15 ms
--- (what a JavaScript Date holds; the server accepts up to 2^53-1) or the C library cannot
--- format it.
local function time(ms)
  ms = val(ms)
  if type(ms) ~= 'number' or ms ~= ms or math.abs(ms) > 8.64e15 then
    return '-'
  end
  local ok, text = pcall(os.date, '!%Y-%m-%dT%H:%M:%SZ', math.floor(ms / 1000))
  return ok and type(text) == 'string' and text or '-'
end

local function str(x)
  x = val(x)
  return type(x) == 'string' and x ~= '' and x or nil
end

--- A server value for one line of a buffer: |ds4-memory| shows ids, paths and keys through
--- `render.one_line` (whitespace runs folded, control characters escaped, at most `limit`
--- characters); `-` when it is not a non-empty string. A newline in a value the server
--- accepted (a source file, a project path) must not break `nvim_buf_set_lines`.
local function fact(x, limit)
  return str(x) and render.one_line(x, limit or 200) or '-'
end

--- The memory list as lines, and which item each line belongs to: `items[line] = { kind =
--- 'pin'|'memory', item = <table> }` (1-based buffer lines).
---@param result table the `ds4/memory` result
---@param session string? the session file listed for
---@return string[] lines
---@return table<integer, {kind: string, item: table}> items
function M.render_list(result, session)
  local pins = val(result.pins) or {}
  local memory = val(result.memory) or {}
  local lines = {
    ('# ds4 memory: %d pins, %d memory items'):format(#pins, #memory),
    ('  session  %s'):format(session and render.one_line(session, 300) or 'every indexed session'),
    '  keys     d forget (memory) or unpin (pin)   s supersede   r refresh   q close',
  }
  local items = {}
  local function add(kind, item, text_lines, facts)
    lines[#lines + 1] = ''
    local active = val(item.status) == 'active'
    lines[#lines + 1] = ('%s %s  %s  %s'):format(
      active and '*' or '-',
      fact(item.id, 100),
      fact(item.scope, 40),
      fact(item.status, 40)
    )
    items[#lines] = { kind = kind, item = item }
    for _, line in ipairs(text_lines) do
      lines[#lines + 1] = line
      items[#lines] = { kind = kind, item = item }
    end
    lines[#lines + 1] = '    ' .. table.concat(facts, ' · ')
    items[#lines] = { kind = kind, item = item }
  end
  local function state_facts(item, facts)
    if str(item.supersededBy) then
      facts[#facts + 1] = 'superseded by ' .. fact(item.supersededBy, 100)
    end
    if str(item.statusReason) then
      facts[#facts + 1] = 'reason: ' .. render.one_line(item.statusReason, 200)
    end
    if str(item.projectPath) then
      facts[#facts + 1] = 'project ' .. fact(item.projectPath, 300)
    end
    if str(item.classification) then
      facts[#facts + 1] = 'classification ' .. fact(item.classification, 40)
    end
    facts[#facts + 1] = 'created ' .. time(item.createdAt)
    return facts
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = '## Pins'
  if #pins == 0 then
    lines[#lines + 1] = '  none (:Ds4Pin on a selection)'
  end
  for _, pin in ipairs(pins) do
    local provenance = val(pin.provenance) or {}
    local facts = { 'from ' .. fact(provenance.mutationKey, 200) }
    if str(provenance.sourceFile) then
      facts[#facts + 1] = 'file ' .. fact(provenance.sourceFile, 300)
    end
    if str(provenance.sourceEntryId) then
      facts[#facts + 1] = 'source entry ' .. fact(provenance.sourceEntryId, 100)
    end
    add('pin', pin, block(val(pin.content) or '', '    │ '), state_facts(pin, facts))
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = '## Memory'
  if #memory == 0 then
    lines[#lines + 1] = '  none (:Ds4Remember CLAIM)'
  end
  for _, item in ipairs(memory) do
    local provenance = val(item.provenance) or {}
    local facts = {}
    if str(item.key) then
      facts[#facts + 1] = 'key ' .. render.one_line(item.key, 80)
    end
    facts[#facts + 1] = 'from ' .. fact(provenance.mutationKey, 200)
    local sources = val(provenance.sourceEntryIds) or {}
    if type(sources) == 'table' and #sources > 0 then
      local ids = {}
      for i, id in ipairs(sources) do
        ids[i] = fact(id, 100)
      end
      facts[#facts + 1] = 'source entries ' .. table.concat(ids, ', ')
    end
    add('memory', item, block(val(item.claim) or '', '    │ '), state_facts(item, facts))
  end
  local counts = val(result.counts) or {}
  lines[#lines + 1] = ''
  lines[#lines + 1] = ('  counts   %s applied, %s rejected, %s invalid'):format(
    render.num(counts.applied),
    render.num(counts.rejected),
    render.num(counts.invalid)
  )
  local problems = val(result.problems) or {}
  if #problems > 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] = '## Rejected or invalid entries'
    for _, problem in ipairs(problems) do
      lines[#lines + 1] = ('  %s (%s): %s'):format(
        fact(problem.mutationKey, 200),
        fact(problem.kind, 40),
        render.one_line(problem.problem, 300)
      )
    end
  end
  return lines, items
end

--- What the `ds://memory` buffer shows: `{ session = {file}, owned, items }` by buffer.
---@type table<integer, {session: table, owned: boolean, items: table}>
M.shown = {}

--- List the pins and memory of `session` (inactive items too) in `ds://memory`, with the
--- buffer mappings of |:Ds4Memory|.
---@param session table `{ file }`
---@param owned boolean
function M.show_list(session, owned)
  require('ds4').memory({ session = session, includeInactive = true }, function(err, result)
    if err then
      return notify_error('ds4/memory: ' .. err.message)
    end
    local lines, items = M.render_list(result, session.file .. (owned and ' (owned by DS4)' or ''))
    local buf = require('ds4.ui').show('memory', lines, 'ds4 memory')
    M.shown[buf] = { session = session, owned = owned, items = items }
    local function map(lhs, fn, desc)
      vim.keymap.set('n', lhs, fn, { buffer = buf, silent = true, nowait = true, desc = desc })
    end
    map('d', function()
      M.act(buf, 'remove')
    end, 'ds4: forget the memory item / unpin the pin under the cursor')
    map('s', function()
      M.act(buf, 'supersede')
    end, 'ds4: supersede the item under the cursor')
    map('r', function()
      M.show_list(session, owned)
    end, 'ds4: refresh the memory list')
  end)
end

--- Act on the item under the cursor of the memory buffer `buf`: `remove` (forget a memory
--- item, unpin a pin; asks for an optional reason) or `supersede` (asks for the new text).
---@param buf integer
---@param action 'remove'|'supersede'
function M.act(buf, action)
  local shown = M.shown[buf]
  local line = vim.api.nvim_win_get_cursor(0)[1]
  local entry = shown and shown.items[line]
  if not entry then
    return vim.notify('ds4: put the cursor on a pin or memory item', vim.log.levels.WARN)
  end
  local item, kind = entry.item, entry.kind
  if val(item.status) ~= 'active' then
    return vim.notify(
      ('ds4: %s %s is %s; only active items change'):format(kind, fact(item.id, 100), fact(item.status, 40)),
      vim.log.levels.WARN
    )
  end
  local function refresh()
    M.show_list(shown.session, shown.owned)
  end
  local session = shown.session
  if action == 'remove' then
    local verb = kind == 'pin' and 'unpin' or 'forget'
    return vim.ui.input({ prompt = ('%s %s, reason (optional): '):format(verb, fact(item.id, 100)) }, function(reason)
      if reason == nil then
        return
      end
      local why = vim.trim(reason) ~= '' and vim.trim(reason) or nil
      local method, id_field = 'ds4/forget', 'memoryId'
      if kind == 'pin' then
        method, id_field = 'ds4/unpin', 'pinId'
      end
      M.write(method, { session = session, [id_field] = item.id, reason = why }, kind, refresh)
    end)
  end
  local current = kind == 'pin' and val(item.content) or val(item.claim)
  vim.ui.input(
    { prompt = ('supersede %s with: '):format(fact(item.id, 100)), default = tostring(current or '') },
    function(text)
      if text == nil or vim.trim(text) == '' then
        return
      end
      local params = { session = session, scope = val(item.scope), supersedes = item.id }
      if kind == 'pin' then
        params.content = text
        M.write('ds4/pin', params, 'pin', refresh)
      else
        params.claim = vim.trim(text)
        M.write('ds4/remember', params, 'memory', refresh)
      end
    end
  )
end

-- ------------------------------------------------------------------ artifact search

--- `ds4/artifactSearch` results as lines: per match the artifact, line:column, the entry that
--- referenced it and the redacted excerpt; the artifacts that could not be searched.
---@param result table
---@return string[]
function M.render_artifacts(result)
  local matches = val(result.matches) or {}
  local searched = val(result.searched) or {}
  local lines = {
    ('# ds4 artifact search: %d matches in %d artifacts%s'):format(
      #matches,
      #searched,
      result.truncated == true and ' (truncated: narrow the query)' or ''
    ),
    ('  query    %s'):format(render.one_line(result.query, 200)),
  }
  for _, match in ipairs(matches) do
    lines[#lines + 1] = ''
    local source = str(match.sourceId) and fact(match.sourceId, 100)
    lines[#lines + 1] = ('artifact://sha256/%s %s:%s%s'):format(
      fact(match.artifactId, 100),
      render.num(match.line),
      render.num(match.column),
      source and (' (entry ' .. source .. ')') or ''
    )
    vim.list_extend(lines, block(val(match.excerpt) or '', '    '))
  end
  local unreadable = {}
  for _, s in ipairs(searched) do
    if val(s.status) ~= 'ok' then
      unreadable[#unreadable + 1] = ('  not searched: %s (%s)'):format(
        fact(s.artifactId, 100),
        fact(s.status, 40)
      )
    end
  end
  if #unreadable > 0 then
    lines[#lines + 1] = ''
    vim.list_extend(lines, unreadable)
  end
  if #searched == 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] =
      '  no artifact to search: the session references no stored tool output on its active branch'
  end
  return lines
end

return M
