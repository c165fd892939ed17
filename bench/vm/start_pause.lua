-- The longest pause a program sees when a stream starts in it: holds a
-- heap of N objects and a few thousand prototypes, reads a clock in a
-- tight loop that makes a small table every 64 times round (a program at
-- work, some 100 000 tables a second, whose allocations drive the
-- collector, and with it a census), and prints the longest gap between
-- two reads.
-- usage: start_pause.lua N start OUT [nocensus]   (starts a stream to OUT
--                                                  itself)
--        start_pause.lua N attach SECONDS   (waits for ljmpctl attach)
-- A census's time to complete is printed as census_s.
local ffi = require("ffi")
local n = assert(tonumber(arg[1]), "usage: start_pause.lua N start|attach ...")
local mode = arg[2]

-- The clock: CLOCK_MONOTONIC read into 32-bit halves, which Lua reads
-- as numbers (a 64-bit field would be boxed, an allocation per read;
-- the loop must not allocate, or the collector's steps would be timed).
ffi.cdef [[
typedef struct { int32_t s, s_hi, ns, ns_hi; } ljmp_bench_ts;
int clock_gettime(int clk, ljmp_bench_ts *ts);
]]
local ts = ffi.new("ljmp_bench_ts")
local C = ffi.C
local function now_ms()
  C.clock_gettime(1, ts)
  return ts.s * 1e3 + ts.ns * 1e-6
end

-- The heap: four tenths tables, four tenths strings, a tenth closures
-- (with an upvalue each), a tenth userdata.
local hold = {}
local function build(count)
  local t = {}
  for i = 1, count do
    local k = i % 10
    if k < 4 then
      t[i] = { i }
    elseif k < 8 then
      t[i] = "s" .. i
    elseif k == 8 then
      t[i] = function() return i end
    else
      t[i] = newproxy(false)
    end
  end
  return t
end
for _ = 1, 10 do hold[#hold + 1] = build(math.floor(n / 10)) end

-- A thousand chunks of three prototypes each, kept alive.
local protos = {}
for i = 1, 1000 do
  local src = ("local b = %d\nreturn function(x) return x + b end,\n" ..
    "function(t) local s = 0 for j = 1, #t do s = s + t[j] end return s end")
    :format(i)
  local chunk = assert(loadstring(src, ("=chunk%04d"):format(i)))
  local f, g = chunk()
  protos[#protos + 1] = { chunk, f, g }
end
-- Some traces: a few of those functions made hot.
local sum = 0
for i = 1, 40 do
  local g = protos[i][3]
  for _ = 1, 100 do sum = sum + g({ 1, 2, 3 }) end
end
collectgarbage("collect")

-- Runs in the interpreter, where an attach's hook can start the stream.
-- Returns the longest gap, the one at the start (start mode) and the
-- longest before it.  It goes on while a census runs (at most 20 s
-- more).
local function census_over()
  local state = misc.memprof.census()
  return state ~= "waiting" and state ~= "sweeping"
end

local function measure(seconds, start_at, opts)
  local t0 = now_ms()
  local last, max, before, at_start = t0, 0, 0, 0
  local started = false
  local stop = t0 + seconds * 1e3
  local junk, k = nil, 0
  while last < stop or (not census_over() and last < stop + 20e3) do
    if not started and start_at and last - t0 >= start_at * 1e3 then
      started = true
      local s0 = now_ms()
      assert(misc.memprof.start(opts))
      at_start = now_ms() - s0
      before = max
    end
    k = k + 1
    if k % 64 == 0 then junk = { last } end
    local t = now_ms()
    local gap = t - last
    if gap > max then max = gap end
    last = t
  end
  return max, at_start, before, junk
end
jit.off(measure)
measure(0.2)  -- Warm-up: the clock's function is compiled by now.

local function census_line()
  local state, c = misc.memprof.census()
  return ("census %s census_s %.3f"):format(state, c.seconds)
end

if mode == "start" then
  local opts = { path = assert(arg[3]), census = arg[4] ~= "nocensus" }
  local max, at_start, before = measure(0.6, 0.3, opts)
  local census = census_line()
  assert(misc.memprof.stop())
  print(("objects %d max_gap_ms %.3f start_ms %.3f before_ms %.3f %s")
    :format(n, max, at_start, before, census))
elseif mode == "attach" then
  io.write("ready\n")
  io.stdout:flush()
  local max = measure(assert(tonumber(arg[3])))
  print(("objects %d max_gap_ms %.3f streaming %s %s")
    :format(n, max, tostring(misc.memprof.status()), census_line()))
else
  error("mode: start or attach")
end
