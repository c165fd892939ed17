-- Objects kept between two marks, for the daemon's test of marks and diffs:
-- in directory arg[1], says "ready" in file ready, waits for file go, then
-- keeps arg[2] tables at one line and frees as many of another's, says
-- "done", and allocates a little garbage at a third line (so that its
-- buffer is flushed every 20 ms) until file stop exists.  When the file
-- record exists, it profiles itself into file runN.bin (N: arg[2]) there
-- instead, waits for nothing, and ends at "done".  Interpreted only, so
-- every allocation is attributed to its line.
jit.off()
local ffi = require("ffi")
ffi.cdef("int poll(void *fds, unsigned long nfds, int timeout);")
local new_tab = require("table.new")
local dir, n = assert(arg[1]), assert(tonumber(arg[2]))

local function say(name, text)
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(text)
  f:close()
end

local function exists(name)
  local f = io.open(dir .. "/" .. name)
  if f then f:close() end
  return f ~= nil
end

local out = exists("record") and (dir .. "/run" .. arg[2] .. ".bin")
if out then assert(misc.memprof.start(out)) end
local kept, dropped = new_tab(n, 0), new_tab(n, 0)
say("ready", "ready")
while not out and not exists("go") do ffi.C.poll(nil, 0, 10) end
for i = 1, n do
  kept[i] = {} -- SITE kept
end
for i = 1, n do
  dropped[i] = {} -- SITE dropped
end
dropped = nil
collectgarbage()
collectgarbage()
say("done", "done")
if out then
  misc.memprof.stop()
  os.exit(0)
end
local sink
while not exists("stop") do
  for i = 1, 100 do
    sink = {i} -- SITE idle
  end
  ffi.C.poll(nil, 0, 10)
end
print(#kept, sink[1])
