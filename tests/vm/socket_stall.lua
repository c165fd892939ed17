-- Streams to a reader that never reads, with a bound on the stall: the
-- profile stops once a write blocks that long, and the script goes on.
-- It allocates until then: how much the socket holds before a write
-- blocks depends on the kernel (net.core.wmem_max caps the VM's request).
local path = assert(arg[1], "usage: socket_stall.lua SOCKET")
assert(misc.memprof.start{socket = path, max_stall_ms = 200})
local t = {}
for round = 1, 20000 do
  for i = 1, 2000 do t[i] = {round, i} end
  if not misc.memprof.status() then break end
end
print(misc.memprof.status())
