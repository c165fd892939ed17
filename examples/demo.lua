-- A small program that allocates in recognisable places, for the demo:
-- a module loaded from source, a cache that keeps growing (a "leak"),
-- short-lived strings, and a table that is resized as it fills.
local cache_module = assert(loadstring([[
local M = {}
local cache = {}
function M.remember(key, value)
  cache[key] = {value = value, seen = os.time()}  -- line 4: held for good
end
function M.size()
  local n = 0
  for _ in pairs(cache) do n = n + 1 end
  return n
end
return M
]], "@demo/cache.lua"))()

local function render(i)
  return ("<li id=%d>item %d</li>"):format(i, i * 7)  -- short-lived
end

local list = {}
for i = 1, 20000 do
  list[#list + 1] = render(i)
  if i % 4 == 0 then cache_module.remember(i, render(i)) end
end
print(("rendered %d items, cached %d"):format(#list, cache_module.size()))
