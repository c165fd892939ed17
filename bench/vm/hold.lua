-- Holds many small blocks: the daemon's memory per live block.  arg[1]
-- tables (default 1e6), each kept until the end.
local n = tonumber(arg[1]) or 1e6
local keep = {}
for i = 1, n do
  keep[i] = {i}
end
print(#keep)
