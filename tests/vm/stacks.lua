-- Call stacks of allocations: usage stacks.lua on|off SCENARIO OUT.bin.
-- Line numbers matter: tests/test_vm.c names these lines.
local mode, scenario, out = arg[1], arg[2], arg[3]
assert(mode == "on" or mode == "off", "usage: stacks.lua on|off SCENARIO OUT")
jit.flush()
if mode == "on" then
  jit.on()
  jit.opt.start("hotloop=5", "hotexit=3")
else
  jit.off()
end
local keep = {}
local function hot(n) return {n} end                          -- line 13
local function from_a(k) for i = 1, k do keep[#keep + 1] = hot(i) end end
local function from_b(k) for i = 1, k do keep[#keep + 1] = hot(i) end end
local function deep(d) if d == 0 then return hot(d) end local t = deep(d - 1) return t end
local function in_pcall() local ok, v = pcall(hot, 1) keep[#keep + 1] = v end
local mt = {__index = function(t, k) local v = hot(k) return v end} -- l. 18
local function via_index() keep[#keep + 1] = setmetatable({}, mt).x end
local function in_coroutine()
  local co = coroutine.create(function() keep[#keep + 1] = hot(1) end)
  coroutine.resume(co)                                          -- line 22
end
local function rep() keep[#keep + 1] = string.rep("x", 200) end

local runs = {}
function runs.callers() from_a(300) from_b(700) end
function runs.kinds()
  for _ = 1, 50 do
    keep[#keep + 1] = deep(40)
    in_pcall()
    via_index()
    in_coroutine()
    rep()
  end
end
-- More distinct stacks than the VM's table holds: a call from each of
-- 40000 lines of a chunk made here.
function runs.many()
  local src = {"local hot = ..."}
  for i = 1, 40000 do src[#src + 1] = "hot(" .. i .. ")" end
  local f = assert(loadstring(table.concat(src, "\n"), "=many"))
  f(hot)
end
-- Sizes from 16 bytes to 1 MiB, many of each, sampled.
function runs.sampled()
  local sizes = {16, 100, 1000, 10000, 100000, 1000000}
  for round = 1, 10 do
    for _, n in ipairs(sizes) do
      for i = 1, 2000000 / n do keep[i % 64 + 1] = string.rep("y", n - 1) .. round .. i end
    end
  end
end
-- Tail calls: the line reached through two tail calls, through a plain
-- call and one tail call, and a builtin reached by a tail call.
local function tail_hot(n) return hot(n) end                    -- line 56
local function tail_twice(n) return tail_hot(n) end             -- line 57
local function plain(n) local t = tail_hot(n) return t end      -- line 58
local function tail_string(n) return string.rep("z", n) end     -- line 59
function runs.tails()
  for i = 1, 100 do
    keep[#keep + 1] = tail_twice(i)                             -- line 62
    keep[#keep + 1] = plain(i)                                  -- line 63
    keep[#keep + 1] = tail_string(100 + i)                      -- line 64
  end
end
-- The same, with the loop compiled before the stream began.
function runs.tails_late()
  assert(misc.memprof.stop())
  for _ = 1, 3 do runs.tails() end
  keep = {}
  assert(misc.memprof.start{path = out, stacks = 8, census = false})
  runs.tails()
end

local stacks = tonumber(os.getenv("STACKS_DEPTH") or "8")
local sample = tonumber(os.getenv("STACKS_SAMPLE") or "0")
assert(misc.memprof.start{path = out, stacks = stacks, stack_sample = sample,
                           census = false})
runs[scenario]()
assert(misc.memprof.stop())
print("ok")
