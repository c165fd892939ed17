-- Streams several pipes' worth of allocations to a reader that takes its
-- time (test_vm's "pipe waits for the answer"), then stops cleanly.
local path = assert(arg[1], "usage: pipe_wake.lua SOCKET")
assert(misc.memprof.start{socket = path})
local t = {}
for round = 1, 400 do
  for i = 1, 2000 do t[i] = {round, i} end
end
assert(misc.memprof.stop())
print("done")
