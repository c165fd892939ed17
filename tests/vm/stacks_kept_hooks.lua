-- Stacks taken in a finalizer, a count hook and an error handler that run
-- compiled loops, over frames of compiled code: a walk on a trace meets
-- frames below C frames, whose lines LuaJIT finds from the trace's base.
-- Run on the checked VMs (see stacks_kept.lua).
-- usage: stacks_kept_hooks.lua DEPTH
local depth = tonumber(arg[1])
assert(misc.memprof.start{path = "/dev/null", stacks = depth})
local sink, n = {}, 0
local function keep(v) n = n % 64 + 1 sink[n] = v return v end
local function fin()
  local s = 0
  for i = 1, 120 do s = s + #keep({i}) end
  return s
end
for _ = 1, 20 do fin() end -- compiled
local function proxy() local p = newproxy(true) getmetatable(p).__gc = fin return p end
local function work(d)
  if d > 0 then local r = work(d - 1) keep({}) return r end
  for i = 1, 200 do proxy() keep({i, i}) end
  return 1
end
local function tailed(d) if d > 0 then return tailed(d - 1) end return work(d % 3) end
for r = 1, 60 do work(r % 12) tailed(r % 5) end
local co = coroutine.wrap(function() while true do coroutine.yield(fin()) end end)
debug.sethook(function() fin() co() pcall(fin) end, "", 97)
for r = 1, 30 do work(r % 7) tailed(r % 4) end
debug.sethook()
xpcall(function() local t = nil return t.x end, function(e) fin() return e end)
misc.memprof.stop()
print("ok")
