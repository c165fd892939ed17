-- Waits in C (reading stdin) without running Lua: an attach cannot start
-- until a line arrives.
local line = io.read("*l")
print("got", line)
