-- Lends memprof's buffers, each partly filled, to a pipe that is read only
-- once the script has ended (test_vm's "pipe last flush"): ROUNDS stale
-- flushes, the last one the stop's, when every other buffer is still in
-- the pipe.  The stream must end whole all the same.
local path, rounds = assert(arg[1]), assert(tonumber(arg[2]))
assert(misc.memprof.start{socket = path, max_stall_ms = 200})
local t = {}
for round = 1, rounds do
  for i = 1, 2000 do t[i] = {round, i} end
  -- Past memprof's 20 ms: the next allocation flushes the buffer.
  local t0 = os.clock()
  while os.clock() - t0 < 0.03 do end
end
print(misc.memprof.stop())
