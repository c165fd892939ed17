-- One line reached from two callers, for the daemon's test of call
-- stacks: in directory arg[1], says "ready" in file ready, waits for file
-- go (while it waits, an attach starts at its next Lua call), then keeps
-- 300 tables made through one caller and 700 through another, says
-- "done", and waits for file stop.  Interpreted only.
jit.off()
local ffi = require("ffi")
ffi.cdef("int poll(void *fds, unsigned long nfds, int timeout);")
local dir = assert(arg[1])

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

local keep = {}
local function hot(n) return {n} end -- SITE hot
local function first(k) for i = 1, k do keep[#keep + 1] = hot(i) end end -- SITE first
local function second(k) for i = 1, k do keep[#keep + 1] = hot(i) end end -- SITE second
say("ready", "ready")
while not exists("go") do ffi.C.poll(nil, 0, 10) end
first(300)
second(700)
say("done", "done")
while not exists("stop") do ffi.C.poll(nil, 0, 10) end
