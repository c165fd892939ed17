-- Stacks under stress: random calls through tail calls (self, vararg,
-- mutual), pcall, xpcall, error, coroutines, metamethods and deep
-- recursion, while memprof starts and stops with stacks of random depth
-- (some sampled) and the JIT is flushed at random.  Prints a checksum of
-- the program's own results, which must not depend on the profiler.
-- usage: stacks_stress.lua SEED on|off  (LJMP_STRESS_JOFF=1: JIT off)
local seed, mode, rounds = tonumber(arg[1]), arg[2], 4000
if os.getenv("LJMP_STRESS_JOFF") then jit.off() end
math.randomseed(seed)
local R = math.random
local sink = {}
local function alloc(n) local t = {} for i = 1, n do t[i] = {i} end sink[#sink % 64 + 1] = t return n end
local f = {}
local function pick() return f[R(#f)] end
f[1] = function(d, n) if d <= 0 then return alloc(n) end return pick()(d - 1, n) end        -- tail call
f[2] = function(d, n) if d <= 0 then return alloc(n) end local r = pick()(d - 1, n) return r + 0 end
f[3] = function(d, n, ...) if d <= 0 then return alloc(n + select('#', ...)) end return pick()(d - 1, n, ...) end -- vararg tail
f[4] = function(d, n) local ok, r = pcall(pick(), d - 1, n) if ok then return r end return -1 end
f[5] = function(d, n)
  local co = coroutine.wrap(function(a, b) coroutine.yield(alloc(1)) return pick()(a, b) end)
  local first = co(d - 1, n) return first + co()
end
f[6] = function(d, n) if d <= 0 then error("e" .. alloc(n), 0) end return pick()(d - 1, n) end
local mt = {__index = function(t, k) return f[1](k % 5, 2) end, __add = function(a, b) return f[2](3, 3) end}
f[7] = function(d, n) local o = setmetatable({}, mt) return o[d] + (o + o) end
f[8] = function(d, n) if d > 0 then return f[8](d - 1, n) end return select(2, xpcall(alloc, debug.traceback, n)) end -- self tail
f[9] = function(d, n) local s = string.rep("x", n) .. d return #s + (d > 0 and pick()(d - 1, n) or 0) end
f[10] = function(d, n) local t = {} for i = 1, n do t[i] = tostring(i * d) end return table.concat(t):len() end
local function deep(k) if k == 0 then return alloc(1) end return 1 + deep(k - 1) end
local sum, on = 0, false
for r = 1, rounds do
  -- The draws are the same in both modes, so that the runs match.
  if R(50) == 1 then
    local st = R(4) == 1 and true or R(64)
    local sample = R(3) == 1 and R(1, 65536) or nil
    if on then
      misc.memprof.stop()
      on = false
    elseif mode == "on" then
      on = misc.memprof.start{path = "/dev/null", stacks = st,
        stack_sample = sample} and true or false
    end
  end
  if R(200) == 1 then jit.flush() end
  local ok, v = pcall(pick(), R(0, 30), R(1, 8))
  if ok and type(v) == "number" then sum = (sum + v) % 2^31 end
  if R(500) == 1 then sum = (sum + deep(R(100, 400))) % 2^31 end
end
if on then misc.memprof.stop() end
print(sum)
