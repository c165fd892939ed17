-- Allocation sites with known counts, for the daemon tests: the tests find
-- the lines by their SITE markers.  Interpreted only, so every allocation
-- is attributed to its line.
jit.off()
local new_tab = require("table.new")
local n = tonumber(arg and arg[1]) or 5000
local keep = new_tab(n, 0)
local function make(count)
  for i = 1, count do
    keep[i] = {} -- SITE tables
  end
end
make(n)
local tmp
for i = 1, 2 * n do
  tmp = {i} -- SITE garbage
end
collectgarbage()
print(#keep, tmp[1])
