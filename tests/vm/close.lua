-- Profiling still on when the VM closes: lua_close ends the stream.
local out = assert(arg[1], "usage: close.lua OUT.bin")
assert(misc.memprof.start(out))
local t = {}
for i = 1, 100 do t[i] = tostring(i) end
-- No stop: the interpreter exits and closes the VM.
