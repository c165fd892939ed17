-- Profiles into a FIFO whose reader goes away: no SIGPIPE reaches the
-- program; the profile stops and says why.
local path = assert(arg[1], "usage: fifo_gone.lua FIFO")
assert(misc.memprof.start(path))
local t = {}
for round = 1, 50 do
  for i = 1, 2000 do t[i] = {round, i} end
end
print(misc.memprof.status())
print(misc.memprof.stop())
