-- Run with LJMP_SOCKET set: profiled from the VM's start, so the chunk
-- itself and what it loads are in the stream.  Reports status() at the end.
local t = {}
for i = 1, 300 do
  t[i] = ("item %d"):format(i)  -- line 5.
end
print(misc.memprof.status())
