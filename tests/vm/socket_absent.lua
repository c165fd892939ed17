-- No listener at the socket: start fails, nothing else changes.
print(misc.memprof.start{socket = "/nonexistent-dir/ingest.sock"})
print(misc.memprof.status())
local t = {}
for i = 1, 100 do t[i] = {} end
print(#t)
