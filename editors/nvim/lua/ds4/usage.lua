--- Model awareness (docs/model-awareness.md): checking `ds4/usage` params before they are sent,
--- and as readable lines what a provider reported for a planned call (actual against estimated
--- input tokens, the cache share, output tokens, the stop reason), the model's calibration
--- (ratio, samples, drift warnings), a model switch, the native continuation decision, and each
--- profile's calibration of `ds4.health`. A result without these fields (a server before model
--- awareness) gives no lines. The server's tables are read defensively: a missing or mistyped
--- field shows as '-'.

local M = {}

local render = require('ds4.render')
local val = render.val

--- `value` for an error message: JSON, cut to 40 characters; 'nothing' for nil.
---@param value any
---@return string
local function shown(value)
  if value == nil then
    return 'nothing'
  end
  local ok, text = pcall(vim.json.encode, value)
  text = ok and text or type(value)
  return vim.fn.strchars(text) > 40 and (vim.fn.strcharpart(text, 0, 39) .. '…') or text
end

--- A non-negative integer a JSON number can hold exactly (token counts).
local function is_count(v)
  return type(v) == 'number' and v >= 0 and v == math.floor(v) and v < 2 ^ 53
end

local function is_object(v)
  return type(v) == 'table' and (next(v) == nil or not vim.islist(v))
end

local function list_of(check)
  return function(v)
    if type(v) ~= 'table' or not vim.islist(v) then
      return false
    end
    for _, item in ipairs(v) do
      if not check(item) then
        return false
      end
    end
    return true
  end
end

local function is_string(v)
  return type(v) == 'string'
end

--- The longest `provider` / `model` and `stopReason` the server accepts (characters).
M.MAX_NAME_CHARS = 256
M.MAX_STOP_REASON_CHARS = 64

--- What is wrong with `ds4/usage` params, one sentence per field naming it
--- (`params.usage.input must be an integer >= 0, got -1`); empty when they fit the contract
--- (docs/protocol.md `ds4/usage`): `manifestId` a non-empty string, `provider` and `model`
--- non-empty strings of at most 256 characters; `usage.input` and, when given,
--- `usage.output`, `usage.cacheRead`, `usage.cacheWrite` integers >= 0 (other keys of Pi's
--- `Usage`, e.g. `totalTokens`, `cost`, are allowed and ignored); `stopReason` a string of
--- 1..64 characters, `outputItems` tables, `outputItemHashes` strings, `hasResponseId` a
--- boolean, when given. `vim.NIL` is not "not given".
---@param params any
---@return string[]
function M.problems(params)
  if not is_object(params) then
    return { 'params must be a table, got ' .. shown(params) }
  end
  local problems = {}
  local function need(ok, field, what, got)
    if not ok then
      problems[#problems + 1] = ('params.%s must be %s, got %s'):format(field, what, shown(got))
    end
  end
  local id = params.manifestId
  need(type(id) == 'string' and vim.trim(id) ~= '', 'manifestId', 'a non-empty string', id)
  for _, key in ipairs({ 'provider', 'model' }) do
    local v = params[key]
    need(
      type(v) == 'string' and vim.trim(v) ~= '' and vim.fn.strchars(v) <= M.MAX_NAME_CHARS,
      key,
      ('a non-empty string of at most %d characters'):format(M.MAX_NAME_CHARS),
      v
    )
  end
  local usage = params.usage
  if not is_object(usage) then
    need(
      false,
      'usage',
      'a table with integer token counts ({ input, output?, cacheRead?, cacheWrite? })',
      usage
    )
  else
    need(is_count(usage.input), 'usage.input', 'an integer >= 0', usage.input)
    for _, key in ipairs({ 'output', 'cacheRead', 'cacheWrite' }) do
      local v = usage[key]
      need(v == nil or is_count(v), 'usage.' .. key, 'an integer >= 0 when given', v)
    end
  end
  local function optional(key, check, what)
    local v = params[key]
    need(v == nil or check(v), key, what .. ' when given', v)
  end
  optional('stopReason', function(v)
    return type(v) == 'string' and v ~= '' and vim.fn.strchars(v) <= M.MAX_STOP_REASON_CHARS
  end, ("Pi's stop reason (1..%d characters)"):format(M.MAX_STOP_REASON_CHARS))
  optional('outputItems', list_of(is_object), 'a list of tables')
  optional('outputItemHashes', list_of(is_string), 'a list of strings')
  optional('hasResponseId', function(v)
    return type(v) == 'boolean'
  end, 'true or false')
  return problems
end

--- What is wrong with `ds4/continuationFailed` params, one sentence per field naming it;
--- empty when they fit: `session.file` a non-empty string; `provider`, `model`, `reason`
--- strings when given.
---@param params any
---@return string[]
function M.continuation_failed_problems(params)
  if not is_object(params) then
    return { 'params must be a table, got ' .. shown(params) }
  end
  local problems = {}
  local session = params.session
  local file = session
  if is_object(session) then
    file = session.file
  end
  if not (is_object(session) and type(file) == 'string' and vim.trim(file) ~= '') then
    problems[1] = "params.session.file must be a non-empty string (the plan's session file), got "
      .. shown(file)
  end
  -- `reason` may be any JSON (the provider's error object): the server never reads it.
  for _, key in ipairs({ 'provider', 'model' }) do
    local v = params[key]
    if v ~= nil and type(v) ~= 'string' then
      problems[#problems + 1] = ('params.%s must be a string when given, got %s'):format(key, shown(v))
    end
  end
  return problems
end

---@param v any
---@return number
local function count(v)
  v = val(v)
  return (type(v) == 'number' and v > 0) and v or 0
end

--- A server string on one line (`render.one_line`: no newline or control character can reach
--- the buffer), at most 120 characters; '-' when missing, empty or not a string.
---@param v any
---@return string
local function text(v)
  local flat = render.one_line(v, 120)
  return flat ~= '' and flat or '-'
end
M.text = text

--- A server sentence (a warning's message) on one line, longer than `text` allows: the advice
--- at the end of a drift warning must survive (messages are up to ~210 characters).
---@param v any
---@return string
function M.message(v)
  local flat = render.one_line(v, 400)
  return flat ~= '' and flat or '-'
end

--- `89.8%` of a share in 0..1; '-' for nil or null.
---@param share any
---@return string
function M.share(share)
  share = val(share)
  return type(share) == 'number' and ('%.1f%%'):format(100 * share) or '-'
end

--- The cache share of a usage report: its `cacheShare`, else `cacheRead / (input + cacheRead +
--- cacheWrite)`; nil when there was no input.
---@param usage table
---@return number?
function M.cache_share(usage)
  local given = val(usage.cacheShare)
  if type(given) == 'number' then
    return given
  end
  local input = count(usage.input) + count(usage.cacheRead) + count(usage.cacheWrite)
  return input > 0 and count(usage.cacheRead) / input or nil
end

--- `+7.6% vs the estimate 36,349` (actual over estimated).
---@param actual number
---@param estimated any
---@return string
function M.vs_estimate(actual, estimated)
  estimated = val(estimated)
  if type(estimated) ~= 'number' or estimated <= 0 then
    return ('the estimate was %s'):format(render.num(estimated))
  end
  local percent = 100 * (actual - estimated) / estimated
  return ('%s%.1f%% vs the estimate %s'):format(
    percent > 0 and '+' or (percent < 0 and '-' or '±'),
    math.abs(percent),
    render.num(estimated)
  )
end

--- The `actual` field of a manifest: `39,100 (+7.6% vs the estimate 36,349) · cache share
--- 89.8%`, or `not reported (the provider has not reported usage)`.
---@param manifest table
---@return string
function M.actual(manifest)
  local actual = val(manifest.actualTokens)
  if type(actual) ~= 'number' then
    return 'not reported (the provider has not reported usage)'
  end
  local usage = val(manifest.usage)
  local share = type(usage) == 'table' and M.cache_share(usage) or nil
  return ('%s (%s)%s'):format(
    render.num(actual),
    M.vs_estimate(actual, manifest.estimatedTokens),
    share and (' · cache share ' .. M.share(share)) or ''
  )
end

--- One profile's calibration: `ratio 1.310 · calibrated from 5 accepted samples (6 in the
--- window, 1 outlier)`, `ratio 1.000 · not calibrated: 1 of 3 accepted samples` (of the
--- `minimumSamples` the server gives, else `1 of 2 samples accepted`), or `ratio 1.000 · not
--- calibrated: no usage reported yet (needs 3 accepted samples)` when `samples` is 0.
---@param calibration table
---@return string
function M.calibration_line(calibration)
  local ratio = val(calibration.ratio)
  local state
  if val(calibration.calibrated) == true then
    local outliers = count(calibration.outliers)
    state = ('calibrated from %s accepted samples (%s in the window, %s outlier%s)'):format(
      render.num(count(calibration.accepted)),
      render.num(count(calibration.samples)),
      render.num(outliers),
      outliers == 1 and '' or 's'
    )
  elseif count(calibration.samples) == 0 then
    local minimum = val(calibration.minimumSamples)
    state = 'not calibrated: no usage reported yet'
      .. (
        type(minimum) == 'number' and (' (needs %s accepted samples)'):format(render.num(minimum))
        or ''
      )
  elseif type(val(calibration.minimumSamples)) == 'number' then
    state = ('not calibrated: %s of %s accepted samples'):format(
      render.num(count(calibration.accepted)),
      render.num(calibration.minimumSamples)
    )
  else
    state = ('not calibrated: %s of %s samples accepted'):format(
      render.num(count(calibration.accepted)),
      render.num(count(calibration.samples))
    )
  end
  return ('ratio %s · %s'):format(type(ratio) == 'number' and ('%.3f'):format(ratio) or '-', state)
end

--- `  warning persistent-underestimate: the estimate is 31% below ...` for each warning.
---@param warnings any
---@param indent string
---@return string[]
local function warning_lines(warnings, indent)
  local lines = {}
  for _, w in ipairs(val(warnings) or {}) do
    if type(w) == 'table' then
      lines[#lines + 1] = ('%s%s %s: %s'):format(
        indent,
        text(w.severity),
        text(w.code),
        render.one_line(val(w.message), 400)
      )
    end
  end
  return lines
end

--- The continuation decision in words: `delta: send the messages from index 12 on
--- (openai-previous-response-v1)`, `full: send the whole request · reason state-expired (...)`;
--- nil without one.
---@param continuation any
---@return string?
function M.continuation_line(continuation)
  continuation = val(continuation)
  if type(continuation) ~= 'table' then
    return nil
  end
  local mode = text(continuation.mode)
  local reason = val(continuation.reason)
  local what = mode == 'delta'
      and ('delta: send the messages from index %s on'):format(render.num(continuation.deltaStart))
    or (mode .. ': send the whole request')
  return ('%s%s (%s)'):format(
    what,
    type(reason) == 'string' and reason ~= '' and (' · reason ' .. text(reason)) or '',
    text(continuation.strategy)
  )
end

--- "## Model awareness" of a manifest: a model switch, the usage the provider reported (or
--- that it has not), the calibration with its warnings, the continuation decision. Empty for
--- a server without model awareness (no `usage`, `modelAwareness` or `continuation` key).
---@param manifest table
---@return string[]
function M.section(manifest)
  if manifest.usage == nil and manifest.modelAwareness == nil and manifest.continuation == nil then
    return {}
  end
  local lines = { '', '## Model awareness' }
  local awareness = val(manifest.modelAwareness)
  awareness = type(awareness) == 'table' and awareness or nil
  local switch = awareness and val(awareness.modelSwitch)
  if type(switch) == 'table' then
    lines[#lines + 1] = ('  switch       switched from %s to %s (its own limits and calibration)'):format(
      text(switch.from),
      text(switch.to)
    )
  end
  local usage = val(manifest.usage)
  if type(usage) ~= 'table' then
    lines[#lines + 1] = '  usage        the provider has not reported usage (ds4.report_usage())'
  else
    local actual = val(manifest.actualTokens)
    if type(actual) ~= 'number' then
      actual = count(usage.input) + count(usage.cacheRead) + count(usage.cacheWrite)
    end
    lines[#lines + 1] = ('  usage        reported by %s/%s at %s · stop reason %s'):format(
      text(usage.provider),
      text(usage.model),
      text(usage.reportedAt),
      text(usage.stopReason)
    )
    lines[#lines + 1] = ('  input        actual %s (%s)'):format(
      render.num(actual),
      M.vs_estimate(actual, manifest.estimatedTokens)
    )
    lines[#lines + 1] = ('  cache        share %s · read %s · write %s · uncached input %s'):format(
      M.share(M.cache_share(usage)),
      render.num(val(usage.cacheRead)),
      render.num(val(usage.cacheWrite)),
      render.num(val(usage.input))
    )
    lines[#lines + 1] = ('  output       %s tokens'):format(render.num(val(usage.output)))
  end
  local calibration = awareness and val(awareness.calibration)
  if type(calibration) == 'table' then
    lines[#lines + 1] = ('  calibration  %s/%s · %s · estimator %s'):format(
      text(calibration.provider),
      text(calibration.model),
      M.calibration_line(calibration),
      text(awareness.estimatorVersion)
    )
    vim.list_extend(lines, warning_lines(calibration.warnings, '    '))
  elseif awareness and awareness.calibration == vim.NIL then
    -- null: not looked up (the plan's provider is unknown); a model without reports yet comes
    -- as a calibration with `samples` 0; absent: a server before calibration.
    lines[#lines + 1] = "  calibration  not looked up (the plan's provider is unknown)"
  end
  local continuation = M.continuation_line(manifest.continuation)
  if continuation then
    lines[#lines + 1] = '  continuation ' .. continuation
  end
  return lines
end

--- The `calibration` lines of :Ds4Health: per provider/model its ratio, samples, cache
--- share, last report and warnings. Empty for a server without model awareness; one line
--- saying so when no usage was reported yet.
---@param profiles any `ds4.health`'s `calibration`
---@return string[]
function M.health_lines(profiles)
  profiles = val(profiles)
  if type(profiles) ~= 'table' then
    return {}
  end
  if #profiles == 0 then
    return { '  calibration  no usage reported yet (ds4.report_usage())' }
  end
  local lines = {}
  for i, p in ipairs(profiles) do
    lines[#lines + 1] = ('  %s %s/%s (%s): %s · cache share %s · last report %s'):format(
      i == 1 and 'calibration ' or '            ',
      text(p.provider),
      text(p.model),
      text(p.estimatorVersion),
      M.calibration_line(p),
      M.share(p.cacheShare),
      text(p.lastReportedAt)
    )
    vim.list_extend(lines, warning_lines(p.warnings, '                 '))
  end
  return lines
end

--- The most severe warning of a profile: 'critical', 'warning' or nil.
---@param profile table
---@return string?
function M.severity(profile)
  local worst
  for _, w in ipairs(val(profile.warnings) or {}) do
    local severity = type(w) == 'table' and val(w.severity)
    if severity == 'critical' then
      return 'critical'
    end
    worst = worst or (severity and 'warning')
  end
  return worst
end

return M
