-- Writes over its environment's strings, as nginx does when it sets its
-- process titles, so that /proc/PID/environ no longer shows LJMP_INGEST;
-- then allocates until the file named by arg[1] exists.
local ffi = require("ffi")
ffi.cdef [[
extern char **environ;
size_t strlen(const char *s);
]]
local env = ffi.C.environ
local i = 0
while env[i] ~= nil do
  ffi.fill(env[i], ffi.C.strlen(env[i]), 0x20)
  i = i + 1
end
local stop = assert(arg[1])
local keep = {}
while true do
  for k = 1, 1000 do
    keep[k % 200 + 1] = {k} -- SITE title
  end
  local f = io.open(stop)
  if f then
    f:close()
    break
  end
end
