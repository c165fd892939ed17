-- Profiles into a FIFO whose reader goes away: no SIGPIPE reaches the
-- program; the profile stops and says why.
local path = assert(arg[1], "usage: fifo_gone.lua FIFO")
assert(misc.memprof.start(path))
-- Allocate until the profile stops, as socket_peer_gone.lua does: a pipe
-- holds 64 KiB by default, but its size is the host's to change.
local t = {}
for round = 1, 2000 do
  if not misc.memprof.status() then break end
  for i = 1, 2000 do t[i] = {round, i} end
end
print(misc.memprof.status())
print(misc.memprof.stop())
