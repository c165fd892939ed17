-- Allocations on a compiled trace are attributed to the trace.
local out = assert(arg[1], "usage: jit.lua OUT.bin")
jit.on()
jit.opt.start("hotloop=1")
assert(misc.memprof.start(out))
local t = {}
for i = 1, 2000 do
  t[i] = {i}  -- line 8.
end
assert(misc.memprof.stop())
