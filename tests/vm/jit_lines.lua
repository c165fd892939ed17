-- Every kind of allocation compiled code makes, in loops hot enough to
-- compile: run with "off" and "on", the same lines allocate as often.
local mode, out = arg[1], arg[2]
assert(mode == "on" or mode == "off", "usage: jit_lines.lua on|off OUT.bin")
local dir = arg[0]:match("^(.*)/") or "."
package.path = dir .. "/?.lua;" .. package.path
local ffi, tnew = require("ffi"), require("table.new")
local mod = require("jit_lines_mod")
jit.flush()
if mode == "on" then
  jit.on()
  jit.opt.start("hotloop=5", "hotexit=3", "minstitch=0")
else
  jit.off()
end
local N = 300
local keep = {}

local function tables(t)  -- A new table and a template's copy.
  for i = 1, N do
    t[i] = { i }  -- line 21
    t[N + i] = { 1, 2, 3 }  -- line 22
  end
end

local function strings(t)  -- Concatenation, a buffer, a library call.
  for i = 1, N do
    t[i] = "str-" .. i  -- line 28
    t[N + i] = string.format("%d-%s", i, "f")  -- line 29
  end
end

local function growth(t)  -- Hash and array parts grown by stores.
  for i = 1, N do
    t[i] = i  -- line 35
    t["k" .. i] = i  -- line 36
  end
end

local function cdata(t, int4, int64)  -- An array, a boxed 64-bit integer.
  for i = 1, N do
    t[i] = ffi.new(int4)  -- line 42
    t[N + i] = ffi.new(int64, i)  -- line 43
  end
end

local function inlined(t)  -- Calls into another module, inlined.
  for i = 1, N do
    mod.push(t, i)
    t[#t + 1] = mod.label(i)
  end
end

local function side(t)  -- A branch taken one time in three: a side trace.
  for i = 1, N do
    if i % 3 == 0 then
      t[i] = { i, 1 }  -- line 57
    else
      t[i] = "side-" .. i  -- line 59
    end
  end
end

local function exits(t, vals)  -- A guard failing midway: the trace exits.
  for i = 1, #vals do
    local v = vals[i]
    if type(v) == "number" then
      t[i] = { v }  -- line 68
    else
      t[i] = v .. "!"  -- line 70
    end
  end
end

local function tail(t)  -- An inner loop, then more work in the outer one.
  for i = 1, 40 do
    for j = 1, 8 do
      t[#t + 1] = { i, j }  -- line 78
    end
    t[#t + 1] = "tail-" .. i  -- line 80
  end
end

local function stitched(t)  -- A C function not compiled: traces stitch.
  for i = 1, N do
    t[i] = { i }  -- line 86
    local c = os.clock()
    t[N + i] = "st-" .. i .. (c > -1 and "" or "x")  -- line 88
  end
end

local vals = {}
for i = 1, N do
  vals[i] = (i > N / 2 and i % 2 == 0) and ("v" .. i) or i
end

assert(misc.memprof.start(out))
-- Stores go to presized arrays: a trace exit taken to grow a table would
-- make the interpreter run again an instruction the trace had run, its
-- allocation included (growth and tail grow theirs, alike on both runs).
-- The calls are not in a loop: a trace through one would start their
-- loops with constant counters, and the recorder would fold the first
-- iteration's strings into constants of its own.
local function run(f, t, ...)
  f(t, ...)
  keep[#keep + 1] = t
end
local int4, int64 = ffi.typeof("int[4]"), ffi.typeof("int64_t")
run(tables, tnew(2 * N, 0))
run(strings, tnew(2 * N, 0))
run(growth, {})
run(cdata, tnew(2 * N, 0), int4, int64)
run(inlined, tnew(2 * N, 0))
run(side, tnew(N, 0))
run(tail, {})
run(stitched, tnew(2 * N, 0))
run(exits, tnew(N, 0), vals)
keep[#keep + 1] = t
assert(misc.memprof.stop())
print(#keep)
