-- A JIT-heavy numeric loop with few allocations.
local acc = 0
for i = 1, 3e8 do acc = (acc + i * 7) % 1000003 end
print(acc)
