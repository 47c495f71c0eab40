--- :checkhealth ds4

local M = {}

local health = vim.health

---@param cmd string[]
---@return string? version
---@return string? problem
local function server_version(cmd)
  local argv = vim.list_extend(vim.deepcopy(cmd), { '--version' })
  local ok, proc = pcall(vim.system, argv, { text = true })
  if not ok then
    return nil, tostring(proc)
  end
  local done = proc:wait(10000)
  if done.code ~= 0 then
    return nil, ('exit %s: %s'):format(tostring(done.code), vim.trim(done.stderr or ''))
  end
  return vim.trim(done.stdout or ''), nil
end

--- The calibration of each provider/model profile (`ds4.health`'s `calibration`): ok when
--- it has no warning, else warn (a `critical` one too) with its warnings as advice.
--- Nothing for a server without model awareness.
---@param profiles any
function M.report_calibration(profiles)
  if type(profiles) ~= 'table' then
    return
  end
  if #profiles == 0 then
    health.info('calibration: no usage reported yet (ds4.report_usage() after each response)')
    return
  end
  local usage = require('ds4.usage')
  for _, p in ipairs(profiles) do
    local line = ('calibration %s/%s: %s · cache share %s'):format(
      usage.text(p.provider),
      usage.text(p.model),
      usage.calibration_line(p),
      usage.share(p.cacheShare)
    )
    local advice = {}
    for _, w in ipairs(type(p.warnings) == 'table' and p.warnings or {}) do
      advice[#advice + 1] = ('%s %s: %s'):format(
        usage.text(w.severity),
        usage.text(w.code),
        usage.message(w.message)
      )
    end
    -- A critical drift is the model's estimate, not a broken install: a warning either way.
    if usage.severity(p) then
      health.warn(line, advice)
    else
      health.ok(line)
    end
  end
end

function M.check()
  health.start('ds4: Neovim')
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. tostring(vim.version()))
  else
    health.error('Neovim >= 0.11 is required (vim.lsp.config)')
    return
  end
  local config = vim.lsp.config.ds4
  if not config then
    health.error("no LSP config 'ds4': add editors/nvim to 'runtimepath' (:help ds4-install)")
    return
  end
  health.ok(
    ("LSP config 'ds4' found; %s"):format(
      vim.lsp.is_enabled and vim.lsp.is_enabled('ds4') and 'enabled (vim.lsp.enable)'
        or 'not enabled: servers start on demand (:Ds4Plan, the Lua API); '
          .. 'call setup() or vim.lsp.enable("ds4") to attach to buffers'
    )
  )

  health.start('ds4: server executable')
  local cmd = config.cmd
  if type(cmd) ~= 'table' then
    health.info('cmd is a function; cannot check the executable')
  elseif vim.fn.executable(cmd[1]) == 0 then
    health.error(("'%s' is not executable"):format(tostring(cmd[1])), {
      'ds4-lsp is not on PyPI: in a checkout of the ds4-lsp repository run ./scripts/demo.sh '
        .. '(it creates .venv/bin/ds4-lsp), or `pip install ./core .` from the repository root',
      "then setup({ cmd = { '~/src/ds4-lsp/.venv/bin/ds4-lsp' } }) (`~` is expanded)",
    })
  else
    health.ok(('%s (%s)'):format(vim.fn.exepath(cmd[1]), table.concat(cmd, ' ')))
    local version, problem = server_version(cmd)
    if version then
      health.ok('version: ' .. version)
    else
      health.error('`' .. table.concat(cmd, ' ') .. ' --version` failed: ' .. tostring(problem))
    end
  end

  health.start('ds4: clients')
  local client_mod = require('ds4.client')
  local trust = require('ds4.trust')
  local clients = client_mod.clients()
  local current = vim.api.nvim_get_current_buf()
  if #clients == 0 then
    health.warn('no ds4 client is running', {
      'open a file in a workspace after vim.lsp.enable("ds4") / setup(), or run :Ds4Health',
    })
    local root = client_mod.root_for(current)
    local trusted, source = trust.decide(root)
    health.info(
      ('workspace of this buffer: %s; trusted: %s (%s)'):format(
        root or '(none)',
        tostring(trusted),
        source
      )
    )
    return
  end
  for _, c in ipairs(clients) do
    local state = client_mod.state[c.id] or {}
    local attached = c.attached_buffers
        and c.attached_buffers[current]
        and ', attached to this buffer'
      or ''
    health.ok(('client %d: root %s%s'):format(c.id, state.root or c.root_dir or '(none)', attached))
    local trusted, source, decided_by = trust.decide(state.root)
    local line = ('trusted: %s (%s%s)'):format(
      tostring(trusted),
      source,
      decided_by and (': ' .. decided_by) or ''
    )
    if state.trusted ~= nil and state.trusted ~= trusted then
      health.warn(line .. '; the server was told ' .. tostring(state.trusted))
    else
      health.info(line)
    end
    if state.summarize then
      health.info('compaction summaries: written by the setup() summarize function')
    else
      health.info('compaction summaries: written offline by the server (no summarize function)')
    end
    if not c.initialized then
      health.warn('still initializing')
    else
      local response = c:request_sync('workspace/executeCommand', { command = 'ds4.health' }, 10000)
      if not response then
        health.error('ds4.health did not answer within 10 s')
      elseif response.err then
        health.error('ds4.health: ' .. tostring(response.err.message))
      else
        local r = response.result
        local server = r.server or {}
        health.ok(
          ('server %s %s (core %s), position encoding %s, server reports trusted=%s'):format(
            tostring(server.name),
            tostring(server.version),
            tostring(r.version),
            tostring(server.positionEncoding),
            tostring(server.trusted)
          )
        )
        health.ok(
          ('database: %s (schema %s, FTS5 %s): %s sessions, %s entries, %s manifests'):format(
            tostring(r.databasePath),
            tostring(r.schemaVersion),
            tostring(r.fts5),
            tostring(r.sessions),
            tostring(r.entries),
            tostring(r.manifests)
          )
        )
        local project = r.project
        if type(project) ~= 'table' then
          -- Older servers: ask ds4.projectStatus (an error means no project knowledge).
          local status = c:request_sync(
            'workspace/executeCommand',
            { command = 'ds4.projectStatus' },
            10000
          )
          project = status and not status.err and status.result or nil
        end
        local line = require('ds4.render').project_status_line(project)
        if not line then
          health.info('project: this server has no project knowledge')
        elseif project.status == 'error' then
          health.warn('project: ' .. line)
        elseif project.status == 'untrusted' then
          health.info('project: ' .. line .. ' (trust the workspace to index its files)')
        else
          health.ok('project: ' .. line)
        end
        M.report_calibration(r.calibration)
        for _, notice in ipairs(r.notices or {}) do
          health.warn('notice: ' .. notice)
        end
        for _, warning in ipairs(r.warnings or {}) do
          health.warn(warning)
        end
        for _, warning in ipairs(r.configWarnings or {}) do
          health.warn('setting ignored: ' .. warning)
        end
      end
    end
  end
end

return M
