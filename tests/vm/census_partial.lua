-- A stream stopped before its census completed: the census is partial,
-- and a second stream takes a census of its own, complete.
-- usage: census_partial.lua OUT (writes OUT.1 and OUT.2)
local out = assert(arg[1], "usage: census_partial.lua OUT")
local hold = {}
for i = 1, 5000 do hold[i] = { i } end

-- No allocation between the start and the stop: the collector never runs.
local opts, state = { path = out .. ".1" }, nil
assert(misc.memprof.start(opts))
assert(misc.memprof.stop())
state = misc.memprof.census()
print("first " .. state)

assert(misc.memprof.start(out .. ".2"))
for round = 1, 1e6 do
  hold[round % 5000 + 1] = { round }
  state = misc.memprof.census()
  if state ~= "waiting" and state ~= "sweeping" then break end
end
assert(misc.memprof.stop())
print("second " .. state)
