-- String building: buffers that grow, concatenation, formatting.
local total = 0
for round = 1, 300 do
  local parts = {}
  for i = 1, 2000 do parts[#parts + 1] = ("%d:%s"):format(i, round) end
  local s = table.concat(parts, ",")
  total = total + #s
end
print(total)
