--- Workspace trust: which roots ds4 may treat as trusted (`:help ds4-trust`).
---
--- A root is trusted when the most specific decision covering it says so. Decisions come from
--- `trusted_roots` (setup option: allow) and from the user's remembered answers, stored like
--- `vim.secure`'s trust database (realpath -> allow/deny) in
--- `stdpath('state')/ds4/trust.json`. A remembered answer wins over `trusted_roots` for the
--- same directory. Without any decision a root is NOT trusted; neither is a buffer without a
--- root.

local M = {}

---@alias ds4.TrustSource 'trusted_roots'|'allowed'|'denied'|'default'|'no-root'

--- Roots already asked about in this Neovim session (answered "not now" or pending).
---@type table<string, boolean>
local asked = {}

--- Canonical form of a directory: absolute, symlinks resolved, no trailing slash.
---@param path string
---@return string
function M.normalize(path)
  local expanded = vim.fs.normalize(vim.fn.fnamemodify(vim.fs.normalize(path), ':p'))
  local real = vim.uv.fs_realpath(expanded)
  local result = vim.fs.normalize(real or expanded)
  if #result > 1 then
    result = result:gsub('/+$', '')
  end
  return result
end

--- Whether `path` is `dir` or inside it (both normalized).
---@param path string
---@param dir string
---@return boolean
function M.is_within(path, dir)
  if path == dir or dir == '/' then
    return true
  end
  return path:sub(1, #dir + 1) == dir .. '/'
end

--- The trust database file.
---@return string
function M.store_path()
  return vim.fs.joinpath(vim.fn.stdpath('state'), 'ds4', 'trust.json')
end

--- The `roots` table of a state file `{ version = 1, roots = { [root] = value } }` (also the
--- owned sessions of `ds4.memory`); `{}` when the file is missing or not such JSON. The values
--- are not checked: the caller does.
---@param path string
---@return table<string, any>
function M.read_roots(path)
  local file = io.open(path, 'r')
  if not file then
    return {}
  end
  local text = file:read('*a')
  file:close()
  local ok, decoded = pcall(vim.json.decode, text)
  if not ok or type(decoded) ~= 'table' or type(decoded.roots) ~= 'table' then
    return {}
  end
  return decoded.roots
end

--- Write `roots` as the state file `path` (its directory created, private to the user): to
--- a temporary file beside it, then renamed over it, so a reader (another Neovim) sees the old
--- file or the new one, never a truncated one. Raises on a write or rename error.
---@param path string
---@param roots table<string, any>
function M.write_roots(path, roots)
  vim.fn.mkdir(vim.fs.dirname(path), 'p', tonumber('700', 8))
  local temp = ('%s.%d.%d.tmp'):format(path, vim.fn.getpid(), vim.uv.hrtime())
  local file = assert(io.open(temp, 'w'))
  local text = vim.json.encode({ version = 1, roots = next(roots) and roots or vim.empty_dict() })
  local ok, problem = file:write(text)
  file:close()
  local renamed, rename_problem
  if ok then
    renamed, rename_problem = vim.uv.fs_rename(temp, path)
  end
  if not renamed then
    os.remove(temp)
    error(('ds4: writing %s: %s'):format(path, tostring(problem or rename_problem)))
  end
end

--- The remembered decisions: `{ [realpath] = 'allow'|'deny' }`.
---@return table<string, 'allow'|'deny'>
function M.read()
  local roots = {}
  for path, decision in pairs(M.read_roots(M.store_path())) do
    if type(path) == 'string' and (decision == 'allow' or decision == 'deny') then
      roots[path] = decision
    end
  end
  return roots
end

---@param roots table<string, 'allow'|'deny'>
local function write(roots)
  M.write_roots(M.store_path(), roots)
end

--- Remember a decision for `root`: 'allow', 'deny', or 'remove' (forget it).
---@param root string
---@param action 'allow'|'deny'|'remove'
---@return string root the normalized root
function M.set(root, action)
  vim.validate('action', action, function(a)
    return a == 'allow' or a == 'deny' or a == 'remove'
  end, "'allow', 'deny' or 'remove'")
  local normalized = M.normalize(root)
  local roots = M.read()
  roots[normalized] = action ~= 'remove' and action or nil
  write(roots)
  asked[normalized] = nil
  return normalized
end

--- Decide whether `root` is trusted.
---@param root string? the workspace root (nil: no workspace)
---@param trusted_roots string[]? defaults to the setup option
---@return boolean trusted
---@return ds4.TrustSource source why
---@return string? decided_by the directory whose decision applied
function M.decide(root, trusted_roots)
  if not root or root == '' then
    return false, 'no-root', nil
  end
  trusted_roots = trusted_roots or require('ds4.config').options.trusted_roots
  local path = M.normalize(root)
  local best, best_source, best_dir = nil, nil, nil
  local function consider(dir, source, trusted)
    if
      M.is_within(path, dir)
      and (not best_dir or #dir > #best_dir or (#dir == #best_dir and source ~= 'trusted_roots'))
    then
      best, best_source, best_dir = trusted, source, dir
    end
  end
  for _, dir in ipairs(trusted_roots or {}) do
    consider(M.normalize(dir), 'trusted_roots', true)
  end
  for dir, decision in pairs(M.read()) do
    consider(dir, decision == 'allow' and 'allowed' or 'denied', decision == 'allow')
  end
  if best == nil then
    return false, 'default', nil
  end
  return best, best_source, best_dir
end

--- Whether the user should be asked about `root` now: no decision covers it and it was not
--- asked about in this session. Marks it as asked.
---@param root string?
---@return boolean
function M.should_ask(root)
  if not root then
    return false
  end
  local _, source = M.decide(root)
  local path = M.normalize(root)
  if source ~= 'default' or asked[path] then
    return false
  end
  asked[path] = true
  return true
end

--- Ask the user (once per root, via `vim.ui.select`) whether to trust `root`.
--- `on_decided(action)` gets 'allow', 'deny' or nil (not now / cancelled).
---@param root string
---@param on_decided fun(action: 'allow'|'deny'|nil)
function M.prompt(root, on_decided)
  local choices = { 'Trust', 'Deny', 'Not now' }
  vim.ui.select(choices, {
    prompt = ('ds4: trust the workspace %s? (remembered; lets ds4 use project files as context)'):format(
      M.normalize(root)
    ),
  }, function(choice)
    if choice == 'Trust' then
      on_decided('allow')
    elseif choice == 'Deny' then
      on_decided('deny')
    else
      on_decided(nil)
    end
  end)
end

return M
