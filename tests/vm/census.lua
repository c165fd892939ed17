-- A census of a known heap, started with the collector in a given phase,
-- while the program allocates, frees and grows old objects.
-- usage: census.lua OUT PHASE [N]
--   PHASE: pause, propagate, sweepstring, sweep or finalize (the atomic
--   phase is one step, never seen between two steps from Lua)
-- Prints "heap" counts of what it built, then the census's own figures.
local ffi = require("ffi")
local buffer_ok, buffer = pcall(require, "string.buffer")
local out = assert(arg[1], "usage: census.lua OUT PHASE [N]")
local phase = assert(arg[2], "usage: census.lua OUT PHASE [N]")
local n = tonumber(arg[3]) or 2000

-- The heap, by kind; counts printed for the test to compare.
local T = { __name = "CensusTable" }
local proxy = newproxy(true)
getmetatable(proxy).__name = "CensusUdata"
local hold = { tables = {}, strings = {}, funcs = {}, udata = {}, cdata = {},
  vla = {}, threads = {}, bufs = {} }
for i = 1, n do
  local t = setmetatable({}, T)
  for j = 1, 9 do t[j] = j end  -- an array part of its own
  hold.tables[i] = t
  hold.strings[i] = ("census string %d"):format(i)
  hold.funcs[i] = function() return i end  -- and its upvalue
  hold.udata[i] = newproxy(proxy)
  hold.cdata[i] = ffi.new("int[4]")
  hold.vla[i] = ffi.new("char[?]", 100 + i % 7)
end
for i = 1, 20 do
  local co = coroutine.create(function(x)
    local keep = { x }
    coroutine.yield(function() return keep end)  -- an open upvalue
  end)
  coroutine.resume(co, i)
  hold.threads[i] = co
end
if buffer_ok then
  for i = 1, 20 do hold.bufs[i] = buffer.new():put(("b"):rep(100 + i)) end
end
print(("heap tables %d udata %d threads %d bufs %d"):format(n, n,
  #hold.threads, #hold.bufs))

-- Garbage with finalizers, so that the collector has a finalize phase.
local function finalizable(k)
  for _ = 1, k do
    local u = newproxy(true)
    getmetatable(u).__gc = function() end
    ffi.gc(ffi.new("int[2]"), function() end)
  end
end

-- Steps the collector, a step at a time, until it is in phase.
local function reach(want)
  collectgarbage("collect")
  collectgarbage("setstepmul", 1)
  for _ = 1, 1e6 do
    if want == "finalize" then finalizable(50) end
    local _, c = misc.memprof.census()
    if c.gc_phase == want then return end
    collectgarbage("step", 0)
  end
  error("the collector never reached " .. want)
end

-- Nothing is allocated between the phase read and the start.
local opts = { path = out }
reach(phase)
assert(misc.memprof.start(opts))
print("started in " .. phase)
collectgarbage("setstepmul", 200)
local c

-- The program goes on: new garbage, old objects freed and grown.
local churn, state = {}, nil
for round = 1, 1e6 do
  for j = 1, 50 do churn[j] = { round, j } end
  local i = round % n + 1
  if round % 3 == 0 then hold.tables[i] = nil end
  if round % 5 == 0 and hold.tables[i] then
    hold.tables[i][100] = round  -- grows an old table's hash part
  end
  if round % 7 == 0 then hold.strings[i] = nil end
  state, c = misc.memprof.census()
  if state ~= "waiting" and state ~= "sweeping" then break end
end
print(("census %s blocks %d bytes %d begin %d end %d"):format(state, c.blocks,
  c.bytes, c.total_begin, c.total_end))

-- Old objects freed after the census: each must match its announced block.
for i = 1, n, 2 do
  hold.funcs[i], hold.udata[i], hold.cdata[i], hold.vla[i] = nil, nil, nil,
    nil
end
hold.threads = nil
hold.bufs = nil
collectgarbage("collect")
collectgarbage("collect")
assert(misc.memprof.stop())
