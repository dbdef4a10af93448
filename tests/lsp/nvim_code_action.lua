-- Headless Neovim (0.7+, built-in LSP client) as a real editor for the language server.
--
--   nvim --headless -u NONE -i NONE -n -S tests/lsp/nvim_code_action.lua
--
-- Driven by environment variables (tests/lsp/test_neovim.py sets them):
--   APPRENTICE_NVIM_CMD    JSON list: the server command, e.g. ["apprentice", "lsp"]
--   APPRENTICE_NVIM_ROOT   the project folder (the client's root)
--   APPRENTICE_NVIM_FILE   the file to open in it
--   APPRENTICE_NVIM_RANGE  JSON [start_row, start_col, end_row, end_col] (1-based rows,
--                          0-based inclusive columns, as marks): the selection
--   APPRENTICE_NVIM_ACTION the code action title to choose
--   APPRENTICE_NVIM_OUT    where the JSON report goes
-- It opens the file, attaches the server, asks for code actions on the selection, picks
-- the named one through vim.ui.select (what a person does), lets Neovim resolve and apply
-- it, waits for the action's command (apprentice.accept) to be answered, asks
-- apprentice.status, writes the buffer (:write) and reports. Every wait is bounded, and
-- a Lua error ends Neovim too (reported), so the test never waits on a stuck editor.

local function env(name)
  local value = os.getenv(name)
  assert(value, name .. " is not set")
  return value
end
local cmd = vim.fn.json_decode(env("APPRENTICE_NVIM_CMD"))
local root, file, out = env("APPRENTICE_NVIM_ROOT"), env("APPRENTICE_NVIM_FILE"), env("APPRENTICE_NVIM_OUT")
local range = vim.fn.json_decode(env("APPRENTICE_NVIM_RANGE"))
local wanted = env("APPRENTICE_NVIM_ACTION")
local report = { offered = {}, notifications = {}, command_result = vim.NIL, status = vim.NIL }

local function lines() return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), "\n") .. "\n" end

local function finish(outcome)
  report.outcome = outcome
  report.text = lines()
  local f = assert(io.open(out, "w"))
  f:write(vim.fn.json_encode(report))
  f:close()
  vim.lsp.stop_client(vim.lsp.get_active_clients())
  vim.wait(5000, function() return #vim.lsp.get_active_clients() == 0 end, 50)
  vim.cmd("qall!")
end

vim.notify = function(message, level) table.insert(report.notifications, message) end
vim.ui.select = function(items, opts, on_choice)
  for _, item in ipairs(items) do table.insert(report.offered, item[2].title) end
  for index, item in ipairs(items) do
    if item[2].title == wanted then return on_choice(item, index) end
  end
  on_choice(nil)
end
local command_done = false
vim.lsp.handlers["workspace/executeCommand"] = function(err, result)
  report.command_result = err and { error = err.message } or result
  command_done = true
end

local function main()
vim.cmd("cd " .. vim.fn.fnameescape(root))
vim.cmd("edit " .. vim.fn.fnameescape(file))
local before = lines()
local exited = nil
local client_id = vim.lsp.start_client({
  name = "apprentice", cmd = cmd, root_dir = root,
  on_exit = function(code) exited = code end,
})
if not client_id then return finish("server did not start") end
vim.lsp.buf_attach_client(0, client_id)
local client = vim.lsp.get_client_by_id(client_id)
if not vim.wait(120000, function() return client.initialized or exited ~= nil end, 50)
    or exited ~= nil then
  return finish("not initialized (server exit code " .. tostring(exited) .. ")")
end

vim.lsp.buf.range_code_action({ diagnostics = {} }, { range[1], range[2] }, { range[3], range[4] })
local changed = vim.wait(240000, function()
  return lines() ~= before or #report.notifications > 0
end, 100)
if not changed then return finish("no edit and no message") end
if lines() == before then return finish("message") end
if not vim.wait(60000, function() return command_done end, 50) then
  return finish("edit applied, command not answered")
end
local status = client.request_sync("workspace/executeCommand", { command = "apprentice.status" }, 60000, 0)
report.status = status and status.result or vim.NIL
vim.cmd("write")
finish("applied")
end

-- Any Lua error still ends Neovim, with the error in the report (never a hung editor).
local ok, err = xpcall(main, debug.traceback)
if not ok then
  report.error = err
  finish("lua error")
end
