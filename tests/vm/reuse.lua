-- Prototypes die and new ones are born, likely at the same addresses:
-- each chunk's allocation must keep its own chunk's name.
local out = assert(arg[1], "usage: reuse.lua OUT.bin")
assert(misc.memprof.start(out))
for i = 1, 40 do
  local f = assert(loadstring("return {" .. i .. "}", ("c%02d"):format(i)))
  f()
  f = nil
  collectgarbage("collect")
end
assert(misc.memprof.stop())
