-- Latency probe of the daemon benchmark: a light allocator (64 tables a
-- millisecond) that every 100 ms allocates one table at the MARK line and
-- prints its number and the Unix time in ms.  Runs until the file arg[1]
-- exists.
jit.off() -- every allocation attributed to its line
local ffi = require("ffi")
ffi.cdef [[
struct probe_ts { long sec, nsec; };
int clock_gettime(int clock, struct probe_ts *ts);
int poll(void *fds, unsigned long nfds, int timeout);
]]
local ts = ffi.new("struct probe_ts")
local function now_ms()
  ffi.C.clock_gettime(0, ts)
  return tonumber(ts.sec) * 1000 + math.floor(tonumber(ts.nsec) / 1e6)
end
local stop = assert(arg[1], "usage: probe.lua STOPFILE")
local ring, marks, k = {}, {}, 0
local next_mark = now_ms() + 100
while true do
  ffi.C.poll(nil, 0, 1)
  for i = 1, 64 do
    ring[i] = {i}
  end
  if now_ms() >= next_mark then
    k = k + 1
    marks[k] = {} -- MARK
    local t = now_ms()
    io.write(k, " ", t, "\n")
    next_mark = t + 100
    local f = io.open(stop)
    if f then
      f:close()
      break
    end
  end
end
