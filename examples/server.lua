-- A pretend web server for the live demo: it renders pages (short-lived
-- strings), keeps a session cache that only grows (the "leak" to find),
-- and reloads a plugin module now and then (module loading, while being
-- watched).  Runs for arg[1] seconds (default 60), or until the file
-- arg[2] exists.
local dir = arg[0]:match("^(.*)/[^/]*$") or "."
package.path = dir .. "/?.lua;" .. package.path
local ffi = require("ffi")
ffi.cdef [[ int poll(void *fds, unsigned long nfds, int timeout); ]]

local sessions = require("demo.sessions")
local plugin = require("demo.plugin")
local seconds, stop = tonumber(arg[1]) or 60, arg[2]
local started, request = os.time(), 0

local function render(id)
  local rows = {}
  for i = 1, 8 do
    rows[i] = ("<tr><td>%d</td><td>%s</td></tr>"):format(i, plugin.label(id + i))
  end
  return "<table>" .. table.concat(rows) .. "</table>"  -- a page, dropped
end

while os.time() - started < seconds do
  for _ = 1, 50 do
    request = request + 1
    local page = render(request)
    if request % 3 == 0 then sessions.remember(request, #page) end
  end
  if request % 20000 == 0 then
    -- A new version of the plugin: loaded again from its source.
    package.loaded["demo.plugin"] = nil
    plugin = require("demo.plugin")
  end
  if stop and request % 5000 == 0 and io.open(stop) then break end
  ffi.C.poll(nil, 0, 1)
end
print(("served %d requests, %d sessions cached"):format(request, sessions.count()))
