-- Allocates until the file named by arg[1] exists (or for arg[2] seconds),
-- then prints the profiler's status: for killing the daemon or the VM
-- mid-stream.
local stop, limit = assert(arg[1]), tonumber(arg[2]) or 30
local keep, rounds = {}, 0
local t0 = os.time()
while true do
  for i = 1, 1000 do
    keep[i % 200 + 1] = {i} -- SITE busy
  end
  rounds = rounds + 1
  if rounds % 50 == 0 then
    local f = io.open(stop)
    if f then
      f:close()
      break
    end
    if os.time() - t0 > limit then break end
  end
end
print("status", misc.memprof.status())
print("stop", misc.memprof.stop())
print("rounds", rounds)
