-- One line allocates on a trace, then in the interpreter: the stream says
-- which trace made what (its stand-ins), while the line stays one line.
local out = assert(arg[1], "usage: jit_trace.lua OUT.bin")
jit.on()
jit.opt.start("hotloop=1")
local keep = {}
local function fill(n, base)
  for i = 1, n do  -- line 8: where the trace starts
    keep[base + i] = { i }  -- line 9
  end
end
assert(misc.memprof.start(out))
fill(1000, 0)  -- compiled: nearly every table on the trace
jit.off()
jit.flush()
fill(500, 1000)  -- interpreted
assert(misc.memprof.stop())
