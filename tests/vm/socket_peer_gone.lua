-- Streams to a listener that goes away: the profile stops, the script goes
-- on and can tell why.
local path = assert(arg[1], "usage: socket_peer_gone.lua SOCKET")
assert(misc.memprof.start{socket = path})
-- Allocate until the profile stops: a round streams about 37 KB, and the
-- socket may hold megabytes (its buffer follows net.core.wmem_max), so a
-- fixed amount could all fit before the reader goes. The cap (about
-- 75 MB) only keeps a broken profiler from looping for ever.
local t = {}
for round = 1, 2000 do
  if not misc.memprof.status() then break end
  for i = 1, 2000 do t[i] = {round, i} end
end
print(misc.memprof.status())
print(misc.memprof.stop())
print(misc.memprof.stop())
