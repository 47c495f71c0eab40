--- Results as readable lines (no JSON dumps): plan, retrieve, manifest, health, rebuild,
--- compaction, summaries. The privacy parts are in `ds4.privacy`, the model awareness parts
--- (usage, calibration, continuation) in `ds4.usage`.
--- Every function takes the server's result table and returns a list of lines.

local M = {}

--- `x` unless it is JSON null.
local function val(x)
  if x == vim.NIL then
    return nil
  end
  return x
end
M.val = val

--- A number with thousands separators (integers) or 3 decimals; '-' when missing.
---@param n number?
---@return string
function M.num(n)
  n = val(n)
  if type(n) ~= 'number' then
    return '-'
  end
  if n ~= math.floor(n) then
    return ('%.3f'):format(n)
  end
  local s = ('%d'):format(n)
  local sign, digits = s:match('^(-?)(%d+)$')
  digits = digits:reverse():gsub('(%d%d%d)', '%1,'):reverse():gsub('^,', '')
  return sign .. digits
end

--- `text` on one line (whitespace, newlines included, collapsed to one space; any other
--- control character written as `\xNN`), cut to `limit` characters with '…'. What every
--- server string shown in a buffer goes through: `nvim_buf_set_lines` refuses a newline.
---@param text string?
---@param limit integer
---@return string
function M.one_line(text, limit)
  text = val(text)
  if type(text) ~= 'string' then
    return ''
  end
  local flat = vim.trim((text:gsub('%s+', ' '))):gsub('%c', function(c)
    return ('\\x%02x'):format(c:byte())
  end)
  if vim.fn.strchars(flat) <= limit then
    return flat
  end
  return vim.fn.strcharpart(flat, 0, limit - 1) .. '…'
end

--- Rows aligned under headers, indented by two spaces.
---@param rows string[][]
---@param headers string[]
---@return string[]
function M.table(rows, headers)
  local widths = {}
  for i, h in ipairs(headers) do
    widths[i] = vim.fn.strdisplaywidth(h)
  end
  for _, row in ipairs(rows) do
    for i, cell in ipairs(row) do
      widths[i] = math.max(widths[i] or 0, vim.fn.strdisplaywidth(tostring(cell)))
    end
  end
  local function line(cells)
    local parts = {}
    for i, cell in ipairs(cells) do
      local text = tostring(cell)
      parts[i] = text .. string.rep(' ', widths[i] - vim.fn.strdisplaywidth(text))
    end
    return (('  ' .. table.concat(parts, '  ')):gsub('%s+$', ''))
  end
  local lines = { line(headers) }
  for _, row in ipairs(rows) do
    lines[#lines + 1] = line(row)
  end
  return lines
end

local function append(lines, more)
  for _, l in ipairs(more) do
    lines[#lines + 1] = l
  end
end

local function sum_tokens(items)
  local total = 0
  for _, item in ipairs(items) do
    total = total + (tonumber(val(item.tokens)) or 0)
  end
  return total
end

--- How many messages a manifest item stands for: a bulk item's `count` (an integer over 1;
--- docs/protocol.md "bulk item"), else 1. Item counts count messages, as the server's
--- `planning.counts` do.
---@param item table
---@return integer
function M.message_count(item)
  local count = val(item.count)
  if type(count) == 'number' and count > 1 and count < 2 ^ 53 and count == math.floor(count) then
    return count
  end
  return 1
end

--- The messages `items` stand for: one each, a bulk item its `count`.
---@param items table[]
---@return integer
local function count_items(items)
  local total = 0
  for _, item in ipairs(items) do
    total = total + M.message_count(item)
  end
  return total
end

--- `path:start-end` of a manifest project snippet (`lines = { start, end }`) or of a
--- `ds4/retrieve` project hit (`startLine`, `endLine`).
---@param snippet table
---@return string
function M.snippet_label(snippet)
  local lines = val(snippet.lines)
  local first = lines and val(lines[1]) or val(snippet.startLine)
  local last = lines and val(lines[2]) or val(snippet.endLine)
  return ('%s:%s-%s'):format(
    tostring(val(snippet.path) or '?'),
    tostring(first or '?'),
    tostring(last or '?')
  )
end

--- The manifest's project snippets by snippet id (the `sourceId` of `project` items).
---@param manifest table?
---@return table<string, table>
local function snippets_by_id(manifest)
  local by_id = {}
  for _, snippet in ipairs(manifest and val(manifest.projectSnippets) or {}) do
    by_id[tostring(snippet.snippetId)] = snippet
  end
  return by_id
end

--- What to show for an item's source: `path:lines` for a project snippet the manifest
--- describes, the range `first … last (N messages)` for a bulk item, else the source id.
---@param item table
---@param snippets table<string, table>
---@return string
local function source_label(item, snippets)
  local id = tostring(val(item.sourceId) or '-')
  local count = M.message_count(item)
  if count > 1 then
    local last = tostring(val(item.lastSourceId) or '?')
    return ('%s … %s (%s messages)'):format(id, last, M.num(count))
  end
  local snippet = val(item.kind) == 'project' and snippets[id] or nil
  return snippet and M.snippet_label(snippet) or id
end

--- "## Project" of a manifest: status, revision, the snippets sent (path:lines, score,
--- reason) and the files left out. Empty for servers without project knowledge.
---@param manifest table
---@param items table[]? the manifest's `project` items (for their tokens), when listed
---@return string[]
function M.project_section(manifest, items)
  local project = val(manifest.project)
  local snippets = val(manifest.projectSnippets) or {}
  local revision = val(manifest.projectRevision)
  if not project and #snippets == 0 and not revision then
    return {}
  end
  local tokens = {}
  for _, item in ipairs(items or {}) do
    tokens[tostring(val(item.sourceId))] = val(item.tokens)
  end
  local lines = {
    '',
    ('## Project: %d snippets · status %s'):format(
      #snippets,
      tostring(project and val(project.status) or '-')
    ),
  }
  if revision then
    local dirty = val(revision.dirty)
    lines[#lines + 1] = ('  revision     branch %s · head %s · %s'):format(
      tostring(val(revision.branch) or '-'),
      tostring(val(revision.head) or '-'):sub(1, 12),
      dirty == nil and 'no git' or (dirty and 'dirty' or 'clean')
    )
  end
  local reindexed = project and val(project.reindexed) or {}
  if #reindexed > 0 then
    lines[#lines + 1] = ('  reindexed    %s'):format(table.concat(reindexed, ', '))
  end
  if #snippets > 0 then
    local rows = {}
    for _, snippet in ipairs(snippets) do
      rows[#rows + 1] = {
        ('%.3f'):format(tonumber(val(snippet.score)) or 0),
        M.snippet_label(snippet),
        M.num(tokens[tostring(snippet.snippetId)]),
        val(snippet.modified) and 'modified' or '',
        M.one_line(val(snippet.reason), 60),
      }
    end
    append(lines, M.table(rows, { 'score', 'lines', 'tokens', 'tree', 'reason' }))
  end
  for _, dropped in ipairs(project and val(project.dropped) or {}) do
    lines[#lines + 1] = ('  left out %s: %s'):format(tostring(dropped.path), tostring(dropped.reason))
  end
  return lines
end

--- Start index of a planner group id `group:<start>-<end>` (for sorting).
local function group_start(group_id)
  return tonumber(tostring(group_id):match('^group:(%d+)')) or -1
end

--- Map evidence source entry ids to their quoted excerpt, read from the plan's messages.
---@param messages table[]
---@return table<string, string>
function M.evidence_excerpts(messages)
  local found = {}
  for _, message in ipairs(messages or {}) do
    local content = type(message) == 'table' and message.content
    local first = type(content) == 'table' and content[1]
    local text = type(first) == 'table' and val(first.text)
    if type(text) == 'string' and vim.startswith(text, '[DS4 HISTORICAL EVIDENCE') then
      local source, excerpt
      for _, line in ipairs(vim.split(text, '\n', { plain = true })) do
        if vim.startswith(line, 'Source entry: ') then
          local ok, decoded = pcall(vim.json.decode, line:sub(#'Source entry: ' + 1))
          source = ok and decoded or nil
        elseif vim.startswith(line, 'Quoted content JSON: ') then
          local ok, decoded = pcall(vim.json.decode, line:sub(#'Quoted content JSON: ' + 1))
          excerpt = ok and decoded or nil
        end
      end
      if type(source) == 'string' and type(excerpt) == 'string' then
        found[source] = excerpt
      end
    end
  end
  return found
end

local SOURCES = {
  request = 'from the request',
  override = 'from modelAwareness.overrides',
  default = 'unknown model: the default window, see the warnings',
}

--- The reason an excluded item is grouped under: its own, except that the below-floor
--- reasons (`below the relevance floor (0.210 < 0.350)`, `below the relative floor (0.520 of
--- the best hit's score < 0.700)`, one score each) share one group per rule and floor
--- (`below the relevance floor (score < 0.350)`, `below the relative floor (share of the best
--- hit's score < 0.700)`).
---@param reason string?
---@return string
function M.reason_group(reason)
  reason = tostring(val(reason) or '')
  local floor = reason:match('^below the relevance floor %(%-?[%d.]+ < (%-?[%d.]+)%)$')
  if floor then
    return ('below the relevance floor (score < %s)'):format(floor)
  end
  local share =
    reason:match("^below the relative floor %(%-?[%d.]+ of the best hit's score < (%-?[%d.]+)%)$")
  if share then
    return ("below the relative floor (share of the best hit's score < %s)"):format(share)
  end
  return reason
end

--- Excluded items grouped by (kind, reason), most messages first (a bulk item counts its
--- `count`).
---@param excluded table[]
---@return string[]
local function excluded_by_reason(excluded)
  local groups, order = {}, {}
  for _, item in ipairs(excluded) do
    local reason = M.reason_group(item.reason)
    local key = tostring(val(item.kind) or '?') .. '\0' .. reason
    if not groups[key] then
      groups[key] = { kind = val(item.kind) or '?', reason = reason, items = {} }
      order[#order + 1] = key
    end
    table.insert(groups[key].items, item)
  end
  table.sort(order, function(a, b)
    return count_items(groups[a].items) > count_items(groups[b].items)
  end)
  local rows = {}
  for _, key in ipairs(order) do
    local g = groups[key]
    rows[#rows + 1] =
      { g.kind, M.num(count_items(g.items)), M.num(sum_tokens(g.items)), M.one_line(g.reason, 80) }
  end
  return M.table(rows, { 'kind', 'items', 'tokens', 'reason' })
end

local RELEVANCE_SCOPES = { 'history', 'project', 'git' }

--- The `why` of one scope of a `relevance` object (a `ds4/retrieve` answer's or a
--- manifest's): the sentence saying why nothing was sent, nil when something was (or the
--- scope was not searched).
---@param relevance table?
---@param scope string history|project|git
---@return string?
function M.relevance_why(relevance, scope)
  local entry = relevance and val(relevance[scope])
  local why = type(entry) == 'table' and val(entry.why) or nil
  return type(why) == 'string' and why or nil
end

--- "## Relevance": per scope searched, its status, what was sent, how many candidates fell
--- under the relevance floor (with the floor and the best of them), and why nothing was sent.
--- Empty when the answer has no `relevance` (older servers) or it is empty.
---@param relevance table?
---@return string[]
function M.relevance_section(relevance)
  relevance = val(relevance)
  if type(relevance) ~= 'table' then
    return {}
  end
  local rows = {}
  for _, scope in ipairs(RELEVANCE_SCOPES) do
    local r = val(relevance[scope])
    if type(r) == 'table' then
      local floor, best = val(r.floor), val(r.best)
      rows[#rows + 1] = {
        scope,
        tostring(val(r.status) or '-'),
        M.num(r.sent),
        M.num(r.belowFloor),
        floor and ('%.3f'):format(tonumber(floor) or 0) or '-',
        best and ('%.3f'):format(tonumber(best) or 0) or '-',
        M.one_line(M.relevance_why(relevance, scope) or '', 80),
      }
    end
  end
  if #rows == 0 then
    return {}
  end
  local lines = { '', '## Relevance' }
  append(
    lines,
    M.table(
      rows,
      { 'scope', 'status', 'sent', 'below floor', 'floor', 'best', 'why none was sent' }
    )
  )
  return lines
end

--- A commit's changed files on one line: the first three, then `+N more` (of `filesTotal`).
---@param hit table a `ds4/retrieve` git hit
---@return string
function M.commit_files(hit)
  local files = val(hit.files) or {}
  local total = tonumber(val(hit.filesTotal)) or #files
  local shown = {}
  for i = 1, math.min(#files, 3) do
    shown[i] = tostring(files[i])
  end
  local text = table.concat(shown, ', ')
  if total > #shown then
    text = text .. (#shown > 0 and ', ' or '') .. ('+%d more'):format(total - #shown)
  end
  return text ~= '' and text or '-'
end

--- "## Git" of a `ds4/retrieve` answer with the git scope: a table of the commits (short
--- hash, date, subject, files, score, reason), then each commit's subject, every file it lists
--- and why it matched; the `why` line when none was sent.
---@param result table
---@return string[]
local function git_section(result)
  local status = val(result.gitStatus)
  local commits = val(result.git) or {}
  if not status and #commits == 0 then
    return {}
  end
  local lines =
    { '', ('## Git: %d commits · status %s'):format(#commits, tostring(status or '-')) }
  local why = M.relevance_why(val(result.relevance), 'git')
  if #commits == 0 and why then
    lines[#lines + 1] = '  none sent: ' .. why
  end
  if #commits == 0 then
    return lines
  end
  local rows = {}
  for i, h in ipairs(commits) do
    rows[#rows + 1] = {
      tostring(i),
      ('%.3f'):format(tonumber(val(h.score)) or 0),
      tostring(val(h.hash) or '?'):sub(1, 10),
      tostring(val(h.committedAt) or ''):sub(1, 10),
      val(h.withheld) and '(withheld)' or M.one_line(val(h.subject), 50),
      M.one_line(M.commit_files(h), 40),
      M.one_line(val(h.reason), 50),
    }
  end
  append(lines, M.table(rows, { '#', 'score', 'commit', 'date', 'subject', 'files', 'reason' }))
  for i, h in ipairs(commits) do
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('## G%d. %s %s (score %.3f)'):format(
      i,
      tostring(val(h.hash) or '?'):sub(1, 10),
      tostring(val(h.committedAt) or ''):sub(1, 10),
      tonumber(val(h.score)) or 0
    )
    if val(h.withheld) then
      lines[#lines + 1] = '  message withheld: ' .. tostring(h.withheld)
    else
      lines[#lines + 1] = '  ' .. M.one_line(val(h.subject), 200)
    end
    lines[#lines + 1] = '  why: ' .. M.one_line(val(h.reason), 200)
    local files = val(h.files) or {}
    local total = tonumber(val(h.filesTotal)) or #files
    for _, f in ipairs(files) do
      lines[#lines + 1] = '    ' .. tostring(f)
    end
    if total > #files then
      lines[#lines + 1] = ('    … (%d more files)'):format(total - #files)
    end
  end
  return lines
end

--- A `ds4/plan` result, with the details of its manifest (`view = 'full'`) when given.
---@param result table
---@param manifest table?
---@return string[]
function M.plan(result, manifest)
  local lines = {}
  local model, budget = result.model or {}, result.budget or {}
  local stats = result.stats or {}
  local counts = stats.counts or {}
  local messages = result.messages or {}
  lines[#lines + 1] = ('# ds4 plan: mode %s'):format(result.mode)
  lines[#lines + 1] = ''
  lines[#lines + 1] = ('  manifest  %s (%s)'):format(
    result.manifestId,
    result.manifestStored and 'stored' or 'not stored: in the server memory only'
  )
  local session = val(result.session)
  if session then
    lines[#lines + 1] = ('  session   %s  leaf %s'):format(session.id, val(session.leafId) or '-')
    lines[#lines + 1] = ('            %s'):format(session.file)
  end
  local source = tostring(model.source or '')
  local source_text = SOURCES[source]
    or ('from the table of well-known models (%s)'):format(source:gsub('^table:', ''))
  lines[#lines + 1] = ('  model     %s/%s · window %s tokens (%s) · max output %s'):format(
    model.provider,
    model.id,
    M.num(model.contextWindow),
    source_text,
    M.num(model.maxOutputTokens)
  )
  lines[#lines + 1] = ('  budget    hard %s · target %s · output reserve %s · safety margin %s'):format(
    M.num(budget.hardInputLimit),
    M.num(budget.targetInputTokens),
    M.num(budget.outputReserve),
    M.num(budget.safetyMargin)
  )
  lines[#lines + 1] = ('            recent tail ≤ %s · history ≤ %s · project ≤ %s · summaries ≤ %s'):format(
    M.num(budget.recentTailTokens),
    M.num(budget.maxRetrievedHistoryTokens),
    M.num(budget.maxProjectTokens),
    M.num(budget.maxSummaryTokens)
  )
  lines[#lines + 1] = ('  result    %s messages and %s evidence candidates → %s sent · ~%s tokens · %s ms'):format(
    M.num(counts.messages),
    M.num(counts.supplements),
    M.num(#messages),
    M.num(result.estimatedTokens),
    M.num(stats.durationMs)
  )
  if val(result.fallbackReason) then
    lines[#lines + 1] = ('  fallback  %s (the original messages are sent unchanged)'):format(
      result.fallbackReason
    )
  end
  if val(stats.plannedTokens) then
    lines[#lines + 1] = ('  observer  a managed plan would send ~%s tokens'):format(
      M.num(stats.plannedTokens)
    )
  end
  local tokens = {}
  for kind, n in vim.spairs(stats.tokens or {}) do
    tokens[#tokens + 1] = ('%s %s'):format(kind, M.num(n))
  end
  if #tokens > 0 then
    lines[#lines + 1] = '  tokens    ' .. table.concat(tokens, ' · ')
  end
  local continuation = require('ds4.usage').continuation_line(result.continuation)
  if continuation then
    lines[#lines + 1] = '  continue  ' .. continuation
  end
  if manifest then
    append(lines, require('ds4.usage').section(manifest))
  end

  if not manifest then
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('  (no manifest details: included %s, excluded %s)'):format(
      M.num(counts.included),
      M.num(counts.excluded)
    )
  else
    local included = val(manifest.included) or {}
    local excluded = val(manifest.excluded) or {}
    local by_kind = {}
    for _, item in ipairs(included) do
      local kind = val(item.kind) or '?'
      by_kind[kind] = by_kind[kind] or {}
      table.insert(by_kind[kind], item)
    end

    -- Recent tail: whole turn groups, newest last.
    local tail = vim.list_extend(vim.list_extend({}, by_kind.recent or {}), by_kind.current or {})
    local group_set, groups = {}, {}
    for _, item in ipairs(tail) do
      local g = val(item.groupId)
      if g and not group_set[g] then
        group_set[g] = {}
        groups[#groups + 1] = g
      end
      if g then
        table.insert(group_set[g], item)
      end
    end
    table.sort(groups, function(a, b)
      return group_start(a) < group_start(b)
    end)
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('## Recent tail: %s messages in %s turn groups, %s tokens%s'):format(
      M.num(#tail),
      M.num(#groups),
      M.num(sum_tokens(tail)),
      stats.rescuedImmediatePredecessor == true and ' (immediate predecessor rescued)' or ''
    )
    if #groups > 0 then
      local rows = {}
      for i = math.max(1, #groups - 7), #groups do
        local members = group_set[groups[i]]
        local current = false
        for _, m in ipairs(members) do
          current = current or m.kind == 'current'
        end
        rows[#rows + 1] = {
          groups[i],
          M.num(#members),
          M.num(sum_tokens(members)),
          current and 'current' or 'recent',
          tostring(val(members[1].sourceId) or '-'),
        }
      end
      if #groups > 8 then
        lines[#lines + 1] = ('  (the newest 8 of %d groups)'):format(#groups)
      end
      append(lines, M.table(rows, { 'group', 'messages', 'tokens', 'kind', 'first entry' }))
    end

    -- Evidence: history items, with the retrieval reason and an excerpt.
    local evidence = by_kind.history or {}
    local excerpts = M.evidence_excerpts(messages)
    local reasons = {}
    for _, r in ipairs(val(manifest.retrieved) or {}) do
      reasons[r.entryKey] = val(r.reason)
    end
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('## Evidence: %s items, %s tokens'):format(
      M.num(#evidence),
      M.num(sum_tokens(evidence))
    )
    if #evidence == 0 then
      lines[#lines + 1] = '  none: '
        .. (
          M.relevance_why(val(manifest.relevance), 'history')
          or 'no older entry on the active branch matched the request'
        )
    else
      local rows = {}
      for _, item in ipairs(evidence) do
        local key = tostring(val(item.sourceId))
        local entry_id = key:match(':(.*)$') or key
        rows[#rows + 1] = {
          ('%.3f'):format(tonumber(val(item.score)) or 0),
          entry_id,
          M.num(item.tokens),
          M.one_line(reasons[key] or val(item.reason), 56),
          M.one_line(excerpts[entry_id], 60),
        }
      end
      append(lines, M.table(rows, { 'score', 'entry', 'tokens', 'why it matched', 'excerpt' }))
    end

    -- Project snippets: path:lines, score and why (never the snippet ids).
    append(lines, M.project_section(manifest, by_kind.project))

    -- Per scope: what was sent, what fell under the relevance floor, why none was sent.
    append(lines, M.relevance_section(manifest.relevance))

    -- Excluded, counted by reason.
    -- A stored manifest over 256 KiB lists only part of its excluded items; the rollup
    -- has the totals of the whole list.
    local rollup = val(manifest.excludedRollup)
    local excluded_total = rollup and val(rollup.total) or count_items(excluded)
    local excluded_tokens = rollup and val(rollup.tokens) or sum_tokens(excluded)
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('## Excluded: %s items, %s tokens%s'):format(
      M.num(excluded_total),
      M.num(excluded_tokens),
      rollup and (' (%s rolled up, not listed)'):format(M.num(rollup.omitted)) or ''
    )
    if #excluded > 0 then
      append(lines, excluded_by_reason(excluded))
    end
  end

  -- What the destination may see, and what the privacy policy held back.
  append(
    lines,
    require('ds4.privacy').section(
      val(result.privacy) or (manifest and val(manifest.privacy)),
      manifest and val(manifest.excluded)
    )
  )

  local warnings = val(result.warnings) or {}
  if #warnings > 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] = '## Warnings'
    for _, w in ipairs(warnings) do
      lines[#lines + 1] = '  warning: ' .. w
    end
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = ('Manifest %s · :Ds4Manifest %s'):format(
    result.manifestId,
    result.manifestId
  )
  return lines
end

--- A `ds4/retrieve` result: a table of hits, then each hit's excerpt (up to 12 lines); the
--- project hits, the commits (scope `git`), and per scope searched why nothing was sent.
--- With `scopes` (the scopes asked for) lacking `history`, the history status and stats are
--- left out.
---@param result table
---@param scopes string[]?
---@return string[]
function M.retrieve(result, scopes)
  local stats = result.stats or {}
  local hits = val(result.history) or {}
  local project = val(result.project) or {}
  local project_status = val(result.projectStatus)
  local git_status = val(result.gitStatus)
  local commits = val(result.git) or {}
  local relevance = val(result.relevance)
  -- Without the history scope the status and stats (which are the history search's) say
  -- nothing: e.g. a git-only search has no session, hence status `no-session`.
  local history_asked = scopes == nil or vim.tbl_contains(scopes, 'history') or #hits > 0
  local head = {}
  if history_asked then
    head[#head + 1] = ('status %s · %d hits'):format(result.status, #hits)
  end
  if project_status then
    head[#head + 1] = ('%d project hits (project %s)'):format(#project, project_status)
  end
  if git_status then
    head[#head + 1] = ('%d commits (git %s)'):format(#commits, git_status)
  end
  head[#head + 1] = ('%s ms'):format(M.num(stats.latencyMs))
  local lines = {
    '# ds4 retrieve: ' .. table.concat(head, ' · '),
    '',
    '  query     ' .. M.one_line(val(result.query) or '(none)', 200),
  }
  if history_asked then
    lines[#lines + 1] = ('  stats     candidates %s · duplicates %s · other branches %s · already in context %s'):format(
      M.num(stats.candidates),
      M.num(stats.duplicates),
      M.num(stats.alternateBranchCandidates),
      M.num(stats.alreadyInContext)
    )
  end
  local history_why = #hits == 0 and M.relevance_why(relevance, 'history') or nil
  if history_why then
    lines[#lines + 1] = '  history   none sent: ' .. history_why
  end
  if #hits > 0 then
    lines[#lines + 1] = ''
    local rows = {}
    for i, h in ipairs(hits) do
      rows[#rows + 1] = {
        tostring(i),
        ('%.3f'):format(tonumber(h.score) or 0),
        tostring(h.entryId),
        tostring(val(h.role) or '-'),
        (tostring(val(h.createdAt) or '')):sub(1, 19),
        M.num(h.tokens),
        M.one_line(h.reason, 60),
      }
    end
    append(lines, M.table(rows, { '#', 'score', 'entry', 'role', 'created', 'tokens', 'reason' }))
    for i, h in ipairs(hits) do
      lines[#lines + 1] = ''
      lines[#lines + 1] = ('## %d. %s (%s, score %.3f)'):format(
        i,
        h.entryId,
        val(h.role) or '-',
        tonumber(h.score) or 0
      )
      local excerpt = vim.split(tostring(val(h.excerpt) or ''), '\n', { plain = true })
      for j = 1, math.min(#excerpt, 12) do
        lines[#lines + 1] = '  ' .. excerpt[j]
      end
      if #excerpt > 12 then
        lines[#lines + 1] = ('  … (%d more lines)'):format(#excerpt - 12)
      end
    end
  end
  if project_status then
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('## Project: %d hits · status %s'):format(#project, project_status)
    local why = #project == 0 and M.relevance_why(relevance, 'project') or nil
    if why then
      lines[#lines + 1] = '  none sent: ' .. why
    end
  end
  if #project > 0 then
    local rows = {}
    for i, h in ipairs(project) do
      rows[#rows + 1] = {
        tostring(i),
        ('%.3f'):format(tonumber(val(h.score)) or 0),
        M.snippet_label(h),
        M.num(h.tokens),
        val(h.modified) and 'modified' or '',
        M.one_line(val(h.reason), 60),
      }
    end
    append(lines, M.table(rows, { '#', 'score', 'lines', 'tokens', 'tree', 'reason' }))
    for i, h in ipairs(project) do
      lines[#lines + 1] = ''
      lines[#lines + 1] = ('## P%d. %s (score %.3f)'):format(
        i,
        M.snippet_label(h),
        tonumber(val(h.score)) or 0
      )
      local text = vim.split(tostring(val(h.text) or ''), '\n', { plain = true })
      for j = 1, math.min(#text, 12) do
        lines[#lines + 1] = '  ' .. text[j]
      end
      if #text > 12 then
        lines[#lines + 1] = ('  … (%d more lines)'):format(#text - 12)
      end
    end
  end
  append(lines, git_section(result))
  append(lines, M.relevance_section(relevance))
  for _, w in ipairs(val(result.warnings) or {}) do
    lines[#lines + 1] = 'warning: ' .. w
  end
  return lines
end

--- A `ds4/manifest` result. Item lists are summarized by kind and reason; with
--- `list_items`, every included/excluded item is listed too.
---@param manifest table
---@param list_items boolean?
---@return string[]
function M.manifest(manifest, list_items)
  local planning = val(manifest.planning) or {}
  local lines = {
    ('# ds4 manifest %s'):format(manifest.id),
    '',
  }
  local fields = {
    { 'created', manifest.createdAt },
    { 'session', manifest.sessionId },
    { 'leaf', manifest.branchLeafId },
    {
      'model',
      ('%s/%s (%s)'):format(
        val(manifest.provider) or '-',
        val(manifest.model) or '-',
        val(manifest.modelSource) or '-'
      ),
    },
    {
      'mode',
      tostring(val(planning.mode) or '-')
        .. (val(planning.fallbackReason) and (' (' .. planning.fallbackReason .. ')') or ''),
    },
    { 'window', M.num(manifest.contextWindow) },
    { 'hard limit', M.num(manifest.hardInputLimit) },
    { 'target', M.num(manifest.targetInputTokens) },
    { 'estimated', M.num(manifest.estimatedTokens) },
    { 'actual', require('ds4.usage').actual(manifest) },
    { 'fixed', M.num(manifest.fixedTokens) },
    { 'prompt hash', manifest.promptHash },
    {
      'versions',
      ('%s · %s · %s'):format(
        val(manifest.plannerVersion) or '-',
        val(manifest.policyVersion) or '-',
        val(manifest.estimatorVersion) or '-'
      ),
    },
  }
  for _, f in ipairs(fields) do
    lines[#lines + 1] = ('  %-12s %s'):format(f[1], tostring(val(f[2]) or '-'))
  end
  local counts = val(planning.counts) or {}
  if next(counts) then
    local parts = {}
    for k, v in vim.spairs(counts) do
      parts[#parts + 1] = ('%s %s'):format(k, M.num(v))
    end
    lines[#lines + 1] = '  counts       ' .. table.concat(parts, ' · ')
  end
  append(lines, require('ds4.usage').section(manifest))

  local retrieved = val(manifest.retrieved) or {}
  lines[#lines + 1] = ''
  lines[#lines + 1] = ('## Retrieved evidence: %d'):format(#retrieved)
  if #retrieved > 0 then
    local rows = {}
    for _, r in ipairs(retrieved) do
      rows[#rows + 1] = {
        ('%.3f'):format(tonumber(r.score) or 0),
        tostring(r.entryKey):match(':(.*)$') or tostring(r.entryKey),
        M.one_line(r.reason, 70),
      }
    end
    append(lines, M.table(rows, { 'score', 'entry', 'reason' }))
  end

  local project_items = {}
  for _, i in ipairs(val(manifest.included) or {}) do
    if val(i.kind) == 'project' then
      project_items[#project_items + 1] = i
    end
  end
  append(lines, M.project_section(manifest, project_items))
  append(lines, M.relevance_section(manifest.relevance))
  append(lines, require('ds4.privacy').section(manifest.privacy, val(manifest.excluded)))

  local snippets = snippets_by_id(manifest)
  for _, section in ipairs({ 'included', 'excluded' }) do
    local items = val(manifest[section])
    if items then
      local rollup = section == 'excluded' and val(manifest.excludedRollup) or nil
      lines[#lines + 1] = ''
      lines[#lines + 1] = ('## %s: %s items, %s tokens%s'):format(
        section == 'included' and 'Included' or 'Excluded',
        M.num(rollup and val(rollup.total) or count_items(items)),
        M.num(sum_tokens(items)),
        rollup and (' (%s rolled up)'):format(M.num(rollup.omitted)) or ''
      )
      append(lines, excluded_by_reason(items))
      if list_items then
        lines[#lines + 1] = ''
        local rows = {}
        for _, i in ipairs(items) do
          rows[#rows + 1] = {
            tostring(val(i.kind) or '-'),
            source_label(i, snippets),
            tostring(val(i.groupId) or '-'),
            M.num(i.tokens),
            ('%.3f'):format(tonumber(val(i.score)) or 0),
            M.one_line(i.reason, 60),
          }
        end
        append(lines, M.table(rows, { 'kind', 'source', 'group', 'tokens', 'score', 'reason' }))
      end
    end
  end
  local item_counts = val(manifest.itemCounts)
  if item_counts then
    lines[#lines + 1] = ''
    lines[#lines + 1] = ('  items: %s included, %s excluded (:Ds4Manifest %s --view=full lists them)'):format(
      M.num(item_counts.included),
      M.num(item_counts.excluded),
      manifest.id
    )
  end
  for _, w in ipairs(val(manifest.warnings) or {}) do
    lines[#lines + 1] = 'warning: ' .. w
  end
  return lines
end

--- One line for a project status (`ds4.projectStatus`, or `project` of `ds4.health`): the
--- status, root, counts and git revision. nil without one (servers before project knowledge).
---@param project table?
---@return string?
function M.project_status_line(project)
  if type(project) ~= 'table' then
    return nil
  end
  local parts = { tostring(val(project.status) or '-') }
  if val(project.projectPath) then
    parts[#parts + 1] = tostring(project.projectPath)
  end
  if val(project.files) then
    parts[#parts + 1] = ('%s files · %s snippets'):format(M.num(project.files), M.num(project.snippets))
  end
  if val(project.commits) then
    parts[#parts + 1] = ('%s commits'):format(M.num(project.commits))
  end
  if val(project.staleSnippets) and project.staleSnippets > 0 then
    parts[#parts + 1] = ('%s stale snippets'):format(M.num(project.staleSnippets))
  end
  local git = val(project.git)
  if type(git) == 'table' and val(git.branch) then
    parts[#parts + 1] = ('branch %s%s'):format(git.branch, val(git.dirty) and ' (dirty)' or '')
  end
  if val(project.status) == 'untrusted' then
    parts[#parts + 1] = 'files not read (:Ds4Trust)'
  end
  return table.concat(parts, ' · ')
end

--- A `ds4.health` result, with what the plugin knows of the client.
---@param result table
---@param client_info {id: integer, root: string?, trust_source: string?}?
---@return string[]
function M.health(result, client_info)
  local server = val(result.server) or {}
  local lines = {
    ('# ds4 health: %s'):format(result.status),
    '',
    ('  server       %s %s · position encoding %s'):format(
      val(server.name) or '-',
      val(server.version) or '-',
      val(server.positionEncoding) or '-'
    ),
    ('  core         ds4-context-core %s · estimator %s'):format(
      val(result.version) or '-',
      val(result.estimator) or '-'
    ),
    ('  trusted      %s%s'):format(
      tostring(val(server.trusted)),
      client_info and client_info.trust_source and (' (' .. client_info.trust_source .. ')') or ''
    ),
  }
  if client_info then
    lines[#lines + 1] = ('  client       id %d · root %s'):format(
      client_info.id,
      client_info.root or '(none)'
    )
  end
  vim.list_extend(lines, {
    ('  database     %s'):format(val(result.databasePath) or '-'),
    ('  schema       %s · SQLite %s · FTS5 %s'):format(
      M.num(result.schemaVersion),
      val(result.sqliteVersion) or '-',
      tostring(val(result.fts5))
    ),
    ('  index        %s sessions · %s entries · %s manifests (+%s in memory)'):format(
      M.num(result.sessions),
      M.num(result.entries),
      M.num(result.manifests),
      M.num(result.ephemeralManifests)
    ),
  })
  local project_line = M.project_status_line(val(result.project))
  if project_line then
    lines[#lines + 1] = '  project      ' .. project_line
  end
  local privacy_line = require('ds4.privacy').health_line(result.privacy)
  if privacy_line then
    lines[#lines + 1] = '  privacy      ' .. privacy_line
  end
  append(lines, require('ds4.usage').health_lines(result.calibration))
  for _, n in ipairs(val(result.notices) or {}) do
    lines[#lines + 1] = '  notice: ' .. n
  end
  for _, w in ipairs(val(result.warnings) or {}) do
    lines[#lines + 1] = '  warning: ' .. w
  end
  for _, w in ipairs(val(result.configWarnings) or {}) do
    lines[#lines + 1] = '  setting ignored: ' .. w
  end
  return lines
end

--- A `ds4.rebuildIndex` result.
---@param result table
---@return string[]
function M.rebuild(result)
  local failed = val(result.failed) or {}
  local lines = {
    ('# ds4 rebuild: %s sessions, %s entries, %d failed, %s ms'):format(
      M.num(result.sessions),
      M.num(result.entries),
      #failed,
      M.num(result.durationMs)
    ),
  }
  local results = val(result.results) or {}
  if #results > 0 then
    lines[#lines + 1] = ''
    local rows = {}
    for _, r in ipairs(results) do
      rows[#rows + 1] = {
        tostring(val(r.outcome) or '-'),
        M.num(r.entriesTotal),
        M.num(r.malformedLines),
        M.num(r.durationMs),
        tostring(val(r.sessionFile) or '-'),
      }
    end
    vim.list_extend(
      lines,
      M.table(rows, { 'outcome', 'entries', 'malformed', 'ms', 'session file' })
    )
  end
  if #failed > 0 then
    lines[#lines + 1] = ''
    lines[#lines + 1] = '## Failed'
    for _, f in ipairs(failed) do
      lines[#lines + 1] = ('  %s: %s'):format(f.sessionFile, f.error)
    end
  end
  return lines
end

--- Said with every compaction result: ds4 itself never writes session files.
M.NOT_WRITTEN = 'note: ds4 never writes the session file. The agent (Pi) must append this '
  .. 'compaction entry, then report it with ds4.compact_committed() (or ds4.compact_failed()); '
  .. 'until then the new summary nodes stay prepared.'

local function list_or_none(items)
  items = val(items) or {}
  return #items == 0 and 'none' or table.concat(items, ', ')
end

--- A `ds4/compact` result: what was summarized, the new nodes, who wrote the summary (and
--- why offline), the validation, then the summary itself.
---@param result table
---@param context {session: string?, leaf: string?}?
---@return string[]
function M.compaction(result, context)
  context = context or {}
  local span = val(result.span) or {}
  local validation = val(result.validation) or {}
  local details = val(val(result.compaction) and result.compaction.details) or {}
  local record = val(details.ds4ContextEngine) or {}
  local writer = ''
  if val(record.provider) or val(record.model) then
    writer = (' (%s/%s)'):format(val(record.provider) or '?', val(record.model) or '?')
  end
  local lines = {
    ('# ds4 compaction: %s (%s, level %s)'):format(
      result.summaryId,
      tostring(val(result.summaryKind) or '-'),
      tostring(val(result.graphLevel) or '-')
    ),
    '',
    M.NOT_WRITTEN,
    '',
  }
  local segment = val(result.segmentSummaryId)
  local fields = {
    {
      'session',
      (context.session or '-') .. (context.leaf and (' (leaf ' .. context.leaf .. ')') or ''),
    },
    { 'summarizer', tostring(val(result.summarizer) or '-') .. writer },
    { 'root', result.summaryId },
    { 'segment', segment == result.summaryId and (segment .. ' (the root)') or segment },
    { 'previous', val(span.previousSummaryId) or 'none (first compaction of this branch)' },
    {
      'validation',
      ('%s · issues %s · repairs %s'):format(
        tostring(val(validation.status) or '-'),
        list_or_none(validation.issueCodes),
        list_or_none(validation.repairs)
      ),
    },
    {
      'span',
      ('%s messages · %s tokens summarized · first kept %s%s'):format(
        M.num(span.messageCount),
        M.num(span.tokens),
        tostring(val(span.firstKeptEntryId) or '-'),
        val(span.isSplitTurn) and ' · splits a turn' or ''
      ),
    },
  }
  local tokens = val(result.tokens)
  fields[#fields + 1] = {
    'tokens',
    ('before %s'):format(M.num(val(result.compaction) and result.compaction.tokensBefore))
      .. (
        tokens and (' · summary %s of %s'):format(M.num(tokens.summary), M.num(tokens.limit))
        or ''
      ),
  }
  for _, f in ipairs(fields) do
    lines[#lines + 1] = ('  %-12s %s'):format(f[1], tostring(f[2] or '-'))
  end
  local reason = val(result.fallbackReason)
  if reason then
    lines[#lines + 1] = '  fallback: ' .. M.one_line(reason, 400)
  end
  for _, w in ipairs(val(result.warnings) or {}) do
    lines[#lines + 1] = 'warning: ' .. w
  end
  lines[#lines + 1] = ''
  lines[#lines + 1] = '# Summary'
  lines[#lines + 1] = ''
  local summary = val(result.compaction) and val(result.compaction.summary) or ''
  append(lines, vim.split(vim.trim(tostring(summary)), '\n', { plain = true }))
  return lines
end

--- A `ds4.summaries` result: the active root and counts, then the server's text tree.
---@param result table
---@return string[]
function M.summaries(result)
  local counts = val(result.counts) or {}
  local lines = {
    ('# ds4 summaries: session %s'):format(tostring(val(result.sessionId) or '-')),
    '',
    ('  %-12s %s'):format('file', tostring(val(result.sessionFile) or '-')),
    ('  %-12s %s'):format('leaf', tostring(val(result.leafId) or '-')),
    ('  %-12s %s'):format('active root', tostring(val(result.activeRootId) or 'none')),
    ('  %-12s %s (committed %s · prepared %s · failed %s) · roots %s'):format(
      'nodes',
      M.num(counts.nodes or 0),
      M.num(counts.committed or 0),
      M.num(counts.prepared or 0),
      M.num(counts.failed or 0),
      M.num(counts.roots or 0)
    ),
    '',
  }
  append(lines, vim.split(tostring(val(result.tree) or ''), '\n', { plain = true }))
  return lines
end

return M
