--- Result buffers: one scratch buffer per kind (`ds://plan`, `ds://retrieve`, ...), shown in
--- a split, vertical split, tab or floating window (setup option `view`).

local M = {}

---@type table<string, integer>
local buffers = {}

---@param kind string
---@return integer bufnr
local function buffer_for(kind)
  local buf = buffers[kind]
  if buf and vim.api.nvim_buf_is_valid(buf) then
    return buf
  end
  buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].buftype = 'nofile'
  vim.bo[buf].bufhidden = 'hide'
  vim.bo[buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, buf, 'ds://' .. kind)
  vim.keymap.set(
    'n',
    'q',
    '<Cmd>close<CR>',
    { buffer = buf, silent = true, desc = 'Close the ds4 window' }
  )
  buffers[kind] = buf
  return buf
end

---@param buf integer
---@param view string
---@param title string
---@return integer win
local function open_window(buf, view, title)
  for _, win in ipairs(vim.api.nvim_list_wins()) do
    if vim.api.nvim_win_get_buf(win) == buf then
      vim.api.nvim_set_current_win(win)
      return win
    end
  end
  if view == 'float' then
    local width = math.max(40, math.floor(vim.o.columns * 0.85))
    local height = math.max(10, math.floor((vim.o.lines - vim.o.cmdheight) * 0.8))
    local float = {
      relative = 'editor',
      width = width,
      height = height,
      row = math.floor((vim.o.lines - height) / 2) - 1,
      col = math.floor((vim.o.columns - width) / 2),
      style = 'minimal',
      border = 'rounded',
      title = ' ' .. title .. ' ',
      title_pos = 'center',
    }
    return vim.api.nvim_open_win(buf, true, float)
  end
  local open = ({ split = 'botright split', vsplit = 'botright vsplit', tab = 'tab split' })[view]
    or 'botright split'
  vim.cmd(open)
  local win = vim.api.nvim_get_current_win()
  vim.api.nvim_win_set_buf(win, buf)
  return win
end

--- Show `lines` in the `ds://<kind>` buffer and focus its window.
---@param kind string plan|retrieve|manifest|health|rebuild|compaction|summaries|summaries.dot|
---   memory|entry|artifacts
---@param lines string[]
---@param title string?
---@param opts {filetype: string?}? filetype of the buffer (default `ds4`)
---@return integer bufnr
function M.show(kind, lines, title, opts)
  local buf = buffer_for(kind)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  local filetype = (opts and opts.filetype) or 'ds4'
  if vim.bo[buf].filetype ~= filetype then
    vim.bo[buf].filetype = filetype
  end
  local win = open_window(buf, require('ds4.config').options.view, title or ('ds4 ' .. kind))
  vim.wo[win].wrap = false
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].cursorline = true
  vim.api.nvim_win_set_cursor(win, { 1, 0 })
  return buf
end

--- The buffer of a kind, if it was shown (for tests and other plugins).
---@param kind string
---@return integer?
function M.buffer(kind)
  local buf = buffers[kind]
  return buf and vim.api.nvim_buf_is_valid(buf) and buf or nil
end

return M
