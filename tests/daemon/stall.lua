-- A program at work while ljmpd may stop reading: for SECONDS, makes
-- tables and strings (a stream of events that fills the socket within
-- milliseconds once nobody reads it) and reads a clock between them.
-- Prints the longest gap between two reads, in ms, and then what
-- misc.memprof.status() says.
-- usage: stall.lua SECONDS
local ffi = require("ffi")
local seconds = assert(tonumber(arg[1]), "usage: stall.lua SECONDS")

-- CLOCK_MONOTONIC in 32-bit halves, which Lua reads as plain numbers.
ffi.cdef [[
typedef struct { int32_t s, s_hi, ns, ns_hi; } ljmp_test_ts;
int clock_gettime(int clk, ljmp_test_ts *ts);
]]
local ts = ffi.new("ljmp_test_ts")
local function now_ms()
  ffi.C.clock_gettime(1, ts)
  return ts.s * 1e3 + ts.ns * 1e-6
end

local keep, longest = {}, 0
local start = now_ms()
local last = start
local i = 0
while last - start < seconds * 1000 do
  i = i + 1
  keep[i % 1000] = { i, tostring(i) }
  local t = now_ms()
  if t - last > longest then longest = t - last end
  last = t
end
print(("longest_ms %.1f"):format(longest))
print(misc.memprof.status())
