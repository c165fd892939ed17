-- Stacks joined to the last one walked (lj_memprof_stacks.h, StackKept):
-- recursion up and down by a frame or two, and by more frames than a
-- walk keeps past the depth; tail calls, vararg frames, pcall, coroutines
-- switching, metamethods, a stack that is reallocated; compiled (up- and
-- down-recursive traces, loops) and interpreted.  The checked VMs compare
-- every stack sent with a walk of the stack to the depth and abort on a
-- difference.
-- usage: stacks_kept.lua DEPTH
local depth = tonumber(arg[1])
assert(misc.memprof.start{path = "/dev/null", stacks = depth})
local sink, n = {}, 0
local function keep(v) n = n % 64 + 1 sink[n] = v return v end
local function tree(d)
  if d == 0 then return keep({}) end
  return keep({tree(d - 1), tree(d - 1)})
end
local function tree2(d) -- the second call from another line
  if d == 0 then return keep({}) end
  local l = tree2(d - 1)
  local r = tree2(d - 1)
  return keep({l, r})
end
local function climb(d) -- allocates on the way down and on the way back
  keep({d})
  if d > 0 then climb(d - 1) end
  return keep({d})
end
local function tail(d, ...)
  if d == 0 then return keep({...}) end
  return tail(d - 1, d, ...)
end
local function guarded(d)
  local ok, v = pcall(function() return climb(d) end)
  return v
end
local function zigzag(d, w) -- the same depths, from other lines by turns
  if d == 0 then return keep({w}) end
  if w % 3 == 0 then
    return keep({zigzag(d - 1, w)})
  elseif w % 3 == 1 then
    return keep({zigzag(d - 1, w), 1})
  end
  return keep({zigzag(d - 1, w), 1, 2})
end
local mt = {__index = function(t, k) return tree(k % 3) end}
local function grow(d)
  local a, b, c, e, f, g, h, i = 1, 2, 3, 4, 5, 6, 7, 8
  if d == 0 then return keep({a, b, c, e, f, g, h, i}) end
  return grow(d - 1)
end
for r = 1, 120 do
  tree(5)
  tree2(5)
  for w = 1, 6 do zigzag(8 + w % 4, r + w) end
  climb(r % 45)
  tail(r % 25, r)
  guarded(r % 9)
  local _ = setmetatable({}, mt)[r]
  local co = coroutine.wrap(function(m)
    for j = 1, m do coroutine.yield(tree(j % 4)) end
    return climb(m)
  end)
  co(4) climb(3) co() tree(2) co() co() co()
  if r % 40 == 0 then grow(2000 + r) end -- the stack grows (and moves)
  if r % 30 == 0 then collectgarbage() end -- and may shrink
end
misc.memprof.stop()
print("ok")
