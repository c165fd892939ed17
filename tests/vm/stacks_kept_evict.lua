-- A frame entered by a tail call, whose mark in the table of tail calls
-- (by base, lj_dispatch.h) a tail call 64 KiB higher up takes: the stack
-- joined at that frame must lose its [tail call] as a walk does.  Run on
-- the checked VMs (see stacks_kept.lua), with the JIT off.
assert(misc.memprof.start{path = "/dev/null", stacks = 8})
local sink, args = {}, {}
for i = 1, 7990 do args[i] = i end
local function callee() return 1 end
local function tailer() return callee() end -- callee: by a tail call
local function high2(...) local r = tailer() return r end
local function high(...) local r = high2(unpack(args, 1, 600)) return r end
collectgarbage("stop")
local function x()
  for k = 0, 1200 do
    sink[1] = {} -- x, [tail call], ...: kept
    high(unpack(args, 1, 7000 + k % 990)) -- frames made only above x
    sink[2] = {} -- joins at x
  end
end
local function start() return x() end -- x: by a tail call
high(unpack(args, 1, 7989)) -- the stack grown first
start()
misc.memprof.stop()
print("ok")
