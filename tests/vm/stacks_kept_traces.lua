-- Stacks joined to the last one walked, where compiled code makes the
-- frames: a trace's exit that writes the frames it inlined, at the depths
-- where other functions allocated last; a trace whose end writes frames
-- (up-recursion, a call it links to) or replaces its root frame by a tail
-- call; down-recursion, stitching, side exits, vararg calls.  Run on the
-- checked VMs (see stacks_kept.lua), also with -Ohotloop=1.  With "gc",
-- a round runs unprofiled first, and the stream starts in a finalizer,
-- where the traces compiled so far cannot be flushed.
-- usage: stacks_kept_traces.lua DEPTH [gc]
local depth, in_gc = tonumber(arg[1]), arg[2] == "gc"
local function start() return misc.memprof.start{path = "/dev/null", stacks = depth} end
if not in_gc then assert(start()) end
local sink, n = {}, 0
local function keep(v) n = n % 64 + 1 sink[n] = v return v end

-- A loop's trace inlines a() and b(); it exits inside b() where c2() from
-- c1() allocated last, at the same bases.
local function b(i, lim) if i == lim then keep({}) end return i end
local function a(i, lim) local r = b(i, lim) return r + 1 end
local function c2(i, lim) keep({}) return 1 end
local function c1(i, lim) local r = c2(i, lim) return r + 1 end
local function exits(lim)
  local s = 0
  for i = 1, 300 do s = s + (i == lim - 1 and c1 or a)(i, lim) end
  return s
end

local function up(d) if d == 0 then return keep({}) end keep({d}) return (up(d - 1)) end
local function down(d) if d == 0 then return 0 end return down(d - 1) + #keep({d}) end
local function stitch()
  local s = 0
  for i = 1, 50 do keep({}) s = s + #os.date("%Y") keep({i}) end
  return s
end
local function tailrec(d, acc) if d == 0 then return keep(acc) end return tailrec(d - 1, {acc}) end
local odd
local function even(d) if d == 0 then return keep({}) end keep({}) return odd(d - 1) end
odd = function(d) if d == 0 then return keep({}) end return even(d - 1) end
local function va(...) keep({...}) return select('#', ...) end
local function valoop(d)
  local s = 0
  for i = 1, 100 do s = s + va(i, d, i % 3 == 0 and keep({}) or nil) end
  return s
end
local function side(d)
  local s = 0
  for i = 1, 200 do
    if i % 7 == 0 then s = s + #keep({i, d}) elseif i % 3 == 0 then keep({}) else s = s + 1 end
  end
  return s
end
-- A root frame replaced by a tail call, below frames that allocate.
local g2 = function(i) keep({}) return keep({i}) end
local g = function(i) keep({i}) return g2(i) end
local f = function(i) return g(i) end
local function rec(d, i) if d == 0 then return f(i) end local r = rec(d - 1, i) keep({}) return r end
local function trec(d, i) if d == 0 then return f(i) end keep({}) return trec(d - 1, i) end

local function round()
for r = 1, 400 do
  if r <= 60 then exits(100 + r) end
  up(r % 30)
  down(r % 25)
  stitch()
  tailrec(r % 20, {})
  even(r % 17)
  valoop(r)
  side(r)
  rec(r % (depth + 5), r)
  trec(r % (depth + 3), r)
  local co = coroutine.wrap(function()
    for k = 1, 3 do up(k * 3) coroutine.yield(down(k)) end
  end)
  co() up(2) co() side(1) co()
end
end
if in_gc then
  round()
  local started
  do
    local p = newproxy(true)
    getmetatable(p).__gc = function() started = start() end
  end
  collectgarbage()
  collectgarbage()
  assert(started)
end
round()
misc.memprof.stop()
print("ok")
