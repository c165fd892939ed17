-- A running program to attach to from outside: allocates in a loop until
-- the file arg[1] exists (or 20 s pass), then says whether it is profiled.
local stopfile = assert(arg[1], "usage: attach_target.lua STOPFILE")
local deadline = os.clock() + 20
local t = {}
while os.clock() < deadline do
  for i = 1, 1000 do
    t[i % 100 + 1] = {i}  -- line 8.
  end
  local f = io.open(stopfile)
  if f then f:close() break end
end
print(misc.memprof.status())
