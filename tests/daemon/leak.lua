-- A cache that only grows (the leak to find) beside transient garbage
-- several times larger, paced by a 10 ms sleep: until the file arg[1]
-- exists, or for arg[2] seconds.
local ffi = require("ffi")
ffi.cdef("int poll(void *fds, unsigned long nfds, int timeout);")
local stop, limit = assert(arg[1]), tonumber(arg[2]) or 30
local cache, n, sink = {}, 0, nil
local t0, rounds = os.time(), 0
while true do
  for i = 1, 50 do
    n = n + 1
    cache[n] = {n, n, n, n} -- SITE cache
    for j = 1, 10 do
      sink = {j, j, j, j, j, j, j, j} -- SITE transient table
    end
    sink = ("x"):rep(300 + i) -- SITE transient string
  end
  rounds = rounds + 1
  ffi.C.poll(nil, 0, 10)
  if rounds % 20 == 0 then
    local f = io.open(stop)
    if f then
      f:close()
      break
    end
    if os.time() - t0 > limit then break end
  end
end
print("cached", n)
