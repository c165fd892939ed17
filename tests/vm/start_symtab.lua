-- A stream started in a running VM announces every live prototype and
-- trace: those made before the start, not those collected before it; and
-- a prototype freed while one stream ran is not in the next one's.
-- usage: start_symtab.lua OUT (writes OUT.1 and OUT.2, without census:
-- only the symbols are checked)
local out = assert(arg[1], "usage: start_symtab.lua OUT")

-- Two prototypes a chunk (the chunk, and the function on its line 2).
local function load(name)
  local chunk = assert(loadstring("local n = ...\nreturn function() return {n} end",
    "=" .. name))
  return { chunk, chunk(1) }
end

local live = {}
for i = 1, 30 do live[i] = load(("live%02d"):format(i)) end
for i = 1, 30 do load(("dead%02d"):format(i)) end
collectgarbage("collect")

-- A trace made before the start (when the JIT is on), kept alive by
-- its function.
local hot = assert(loadstring(
  "return function(t)\nlocal s = 0\nfor i = 1, #t do s = s + t[i] end\n" ..
  "return s end", "=hot"))()
local t = {}
for i = 1, 200 do t[i] = i end
for _ = 1, 200 do hot(t) end

assert(misc.memprof.start{ path = out .. ".1", census = false })
-- One allocation at each live function's line 2.
for i = 1, 30 do live[i][2]() end
-- Freed while streaming: the first ten chunks.
for i = 1, 10 do live[i] = nil end
collectgarbage("collect")
assert(misc.memprof.stop())

assert(misc.memprof.start{ path = out .. ".2", census = false })
for i = 11, 30 do live[i][2]() end
assert(misc.memprof.stop())
hot(t)
