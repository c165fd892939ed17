-- A loop compiled after 10 iterations allocates one string an iteration:
-- the iteration the JIT records runs in the interpreter, on its line.
local out = assert(arg[1], "usage: jit_output.lua OUT.bin")
local tnew = require("table.new")
jit.on()
jit.flush()
jit.opt.start(3, "hotloop=10")
local t = tnew(20, 0)  -- No array growth inside the loop.
assert(misc.memprof.start(out))
for i = 1, 20 do
  t[i] = "jit-output-" .. i  -- line 11.
end
assert(misc.memprof.stop())
assert(#t == 20)
