-- A program whose output must not change when it is profiled.
local out = arg[1]
if out then assert(misc.memprof.start(out)) end
local words = {}
for i = 1, 500 do words[#words + 1] = ("w%d"):format(i * 7 % 113) end
table.sort(words)
local counts = {}
for _, w in ipairs(words) do counts[w] = (counts[w] or 0) + 1 end
local keys = {}
for k in pairs(counts) do keys[#keys + 1] = k end
table.sort(keys)
for i = 1, #keys, 10 do io.write(keys[i], "=", counts[keys[i]], "\n") end
collectgarbage()
io.write(("%d %s\n"):format(#words, table.concat(words, ",", 1, 5)))
if out then assert(misc.memprof.stop()) end
