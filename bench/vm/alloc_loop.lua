-- Allocation-heavy: small tables and strings that escape into rings, so
-- the compiler cannot sink them; the GC frees them a ring later.
local tables, strings = {}, {}
for i = 1, 3e6 do
  tables[i % 4096 + 1] = {i, i + 1}
  strings[i % 4096 + 1] = "k" .. i
end
print(#tables, #strings)
