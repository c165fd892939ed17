-- Tables the JIT sinks: one in 25 escapes, at first at a trace exit that
-- makes it (snapshot restore), then on a side trace made for the exit.
local out = assert(arg[1], "usage: jit_sunk.lua OUT.bin")
jit.on()
jit.flush()
jit.opt.start("hotloop=5", "hotexit=3")
local N, kept = 300, {}
local function sunk(t)
  for i = 1, N do
    local p = { i, i + 1 }  -- line 10
    if i % 25 == 0 then  -- line 11
      t[#t + 1] = p
    end
  end
end
local t = require("table.new")(N, 0)
assert(misc.memprof.start(out))
sunk(t)
assert(misc.memprof.stop())
kept[1] = t
print(#t)
