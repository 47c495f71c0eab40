--- Privacy as readable lines: the "## Privacy" section of a plan or manifest (destination,
--- counters by level, secrets redacted, the items excluded due to privacy policy: metadata
--- only, never text), the `ds4.privacy` answer of :Ds4Privacy, and the active policy of
--- `ds4.health`. A result without `privacy` (a server before the privacy policy) gives no lines.

local M = {}

--- The levels, lowest first (docs/privacy.md).
M.LEVELS = { 'normal', 'internal', 'sensitive', 'local-only' }

--- The reason of a manifest item dropped for privacy.
M.EXCLUSION_REASON = 'excluded due to privacy policy'

-- ds4.render requires this module only inside its functions, so requiring it here is safe.
local render = require('ds4.render')
local val = render.val

--- `normal, internal`, or `none` for an empty list.
---@param levels any
---@return string
local function level_list(levels)
  levels = val(levels)
  if type(levels) ~= 'table' or #levels == 0 then
    return 'none'
  end
  local out = {}
  for i, level in ipairs(levels) do
    out[i] = tostring(val(level) or '?')
  end
  return table.concat(out, ', ')
end

--- The levels counted in any of `records`: the known ones in order, then the others sorted.
---@param records table[]
---@return string[]
local function ordered_levels(records)
  local seen = {}
  for _, record in ipairs(records) do
    for level in pairs(record) do
      seen[tostring(level)] = true
    end
  end
  local out = {}
  for _, level in ipairs(M.LEVELS) do
    if seen[level] then
      out[#out + 1] = level
      seen[level] = nil
    end
  end
  local other = vim.tbl_keys(seen)
  table.sort(other)
  return vim.list_extend(out, other)
end

---@param record any
---@return table<string, number>
local function counts(record)
  record = val(record)
  return type(record) == 'table' and record or {}
end

--- `destination openai (remote) · may see normal, internal · secrets redacted`.
---@param destination table?
---@return string
local function destination_line(destination)
  if type(destination) ~= 'table' then
    return 'no destination named: texts were classified, not held back or redacted'
  end
  local provider = val(destination.provider)
  return ('%s (%s) · may see %s · secrets %s'):format(
    provider and ('destination ' .. tostring(provider)) or 'destination unknown',
    tostring(val(destination.kind) or 'remote'),
    level_list(destination.allowed),
    val(destination.redactSecrets) and 'redacted' or 'not redacted'
  )
end

--- The items of `excluded` dropped for privacy.
---@param excluded table[]?
---@return table[]
function M.exclusions(excluded)
  local out = {}
  for _, item in ipairs(val(excluded) or {}) do
    if val(item.reason) == M.EXCLUSION_REASON then
      out[#out + 1] = item
    end
  end
  return out
end

--- "## Privacy" of a plan or manifest: the destination, classified/withheld/excluded by
--- level, the secrets redacted by kind, and the items excluded due to privacy policy (kind,
--- source, level, tokens). `{}` without `privacy`.
---@param privacy table? the `privacy` object of a plan or manifest
---@param excluded table[]? the manifest's excluded items, when listed
---@return string[]
function M.section(privacy, excluded)
  privacy = val(privacy)
  if type(privacy) ~= 'table' then
    return {}
  end
  local r = render
  if val(privacy.enabled) == false then
    return {
      '',
      '## Privacy: policy off (privacy.enabled = false): nothing classified, held back or redacted',
    }
  end
  local lines = { '', '## Privacy: ' .. destination_line(val(privacy.destination)) }
  local classified, withheld, dropped =
    counts(privacy.classified), counts(privacy.withheld), counts(privacy.excluded)
  local levels = ordered_levels({ classified, withheld, dropped })
  if #levels == 0 then
    lines[#lines + 1] = '  nothing classified above normal, withheld or excluded'
  else
    local rows = {}
    for _, level in ipairs(levels) do
      rows[#rows + 1] = {
        level,
        r.num(classified[level] or 0),
        r.num(withheld[level] or 0),
        r.num(dropped[level] or 0),
      }
    end
    vim.list_extend(lines, r.table(rows, { 'level', 'classified', 'withheld', 'excluded' }))
  end
  local kinds = {}
  for kind, n in pairs(counts(privacy.redactedByKind)) do
    kinds[#kinds + 1] = { tostring(kind), tonumber(val(n)) or 0 }
  end
  table.sort(kinds, function(a, b)
    if a[2] ~= b[2] then
      return a[2] > b[2]
    end
    return a[1] < b[1]
  end)
  local parts = {}
  for i, kind in ipairs(kinds) do
    parts[i] = ('%s %s'):format(kind[1], r.num(kind[2]))
  end
  local redacted = tonumber(val(privacy.redacted)) or 0
  lines[#lines + 1] = ('  redacted: %s secret(s)%s'):format(
    r.num(redacted),
    #parts > 0 and (': ' .. table.concat(parts, ', ')) or ''
  )
  local items = M.exclusions(excluded)
  if #items > 0 then
    lines[#lines + 1] = ('  %s: %d item(s)'):format(M.EXCLUSION_REASON, #items)
    local rows = {}
    for _, item in ipairs(items) do
      rows[#rows + 1] = {
        tostring(val(item.kind) or '-'),
        tostring(val(item.sourceId) or '-'),
        tostring(val(item.classification) or '-'),
        r.num(item.tokens),
      }
    end
    vim.list_extend(lines, r.table(rows, { 'kind', 'source', 'level', 'tokens' }))
  end
  return lines
end

--- A destination checked: `provider/model` (e.g. `openai/gpt-4o`) or a bare provider id
--- (`ollama`; the policy decides by the provider), without spaces. nil and the problem else.
---@param value string?
---@return string? model
---@return string? problem
function M.parse_model(value)
  local model = vim.trim(value or '')
  if model:match('^[^/%s]+$') or model:match('^[^/%s]+/%S+$') then
    return model, nil
  end
  return nil,
    ('Ds4Privacy: give the destination as PROVIDER/MODEL or PROVIDER (e.g. openai/gpt-4o), '
      .. 'got %q'):format(model)
end

--- A `ds4.privacy` answer for :Ds4Privacy: the facts, then the explanation.
---@param answer table
---@param model string the destination asked about
---@return string[]
function M.answer(answer, model)
  local enabled = val(answer.enabled) ~= false
  local lines = {
    ('# ds4 privacy: %s'):format(model),
    '',
    ('  provider     %s'):format(tostring(val(answer.provider) or 'unknown (treated as remote)')),
    ('  class        %s'):format(tostring(val(answer.kind) or '-')),
    ('  policy       %s'):format(enabled and 'on' or 'off (privacy.enabled = false)'),
    ('  may see      %s'):format(level_list(answer.allowed)),
    ('  withheld     %s'):format(level_list(answer.withheld)),
    ('  secrets      %s'):format(val(answer.redactSecrets) and 'redacted' or 'not redacted'),
  }
  if val(answer.rule) then
    lines[#lines + 1] = ('  decided by   %s'):format(tostring(answer.rule))
  end
  vim.list_extend(lines, { '', '## Explanation' })
  local explanation = vim.trim(tostring(val(answer.explanation) or ''))
  if explanation == '' then
    explanation = '(the server gave none)'
  end
  for _, paragraph in ipairs(vim.split(explanation, '\n', { plain = true })) do
    lines[#lines + 1] = '  ' .. paragraph
  end
  vim.list_extend(lines, {
    '',
    'Levels, lowest first: normal < internal < sensitive < local-only. Mark text with',
    '[ds4:LEVEL]...[/ds4:LEVEL]; setup({ settings = { privacy = { ... } } }) says who may see',
    'which level (:help ds4-privacy). Markers and patterns reduce accidental disclosure; they',
    'do not replace keeping secrets out of sessions and repositories.',
  })
  return lines
end

--- One line for the active policy of `ds4.health` (`privacy`: the privacy settings), or nil.
---@param policy table?
---@return string?
function M.health_line(policy)
  policy = val(policy)
  if type(policy) ~= 'table' then
    return nil
  end
  if val(policy.enabled) == false then
    return 'off'
  end
  local parts = { 'on' }
  for key, value in vim.spairs(policy) do
    if key ~= 'enabled' then
      value = val(value)
      local text
      if type(value) == 'table' then
        text = vim.islist(value) and level_list(value) or vim.json.encode(value)
      else
        text = tostring(value)
      end
      parts[#parts + 1] = ('%s %s'):format(key, text)
    end
  end
  return table.concat(parts, ' · ')
end

return M
