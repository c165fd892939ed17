-- Streams to a listener that goes away: the profile stops, the script goes
-- on and can tell why.
local path = assert(arg[1], "usage: socket_peer_gone.lua SOCKET")
assert(misc.memprof.start{socket = path})
-- Enough to fill the socket buffers once the reader is gone.
local t = {}
for round = 1, 50 do
  for i = 1, 2000 do t[i] = {round, i} end
end
print(misc.memprof.status())
print(misc.memprof.stop())
print(misc.memprof.stop())
