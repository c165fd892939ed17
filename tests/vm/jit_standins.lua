-- A loop compiled before the stream starts, run while it streams, then
-- flushed and compiled anew: what it allocates is named by its line, and
-- by trace through the stand-ins the VM announces (in the symbol table for
-- the first trace, when it is made for the second).
local out = assert(arg[1], "usage: jit_standins.lua OUT.bin")
jit.on()
jit.opt.start("hotloop=1")
local keep = {}
local function fill(n, base)
  for i = 1, n do  -- line 10: where the traces start
    keep[base + i] = { i }  -- line 11
  end
end
fill(100, 0)  -- compiled before the stream starts
assert(misc.memprof.start(out))
fill(1000, 100)  -- on the trace made before
jit.flush()
fill(1000, 1100)  -- on a new one, which may take the old one's number
assert(misc.memprof.stop())
