-- Profiles into a socket or a FIFO whose reader goes away: no SIGPIPE
-- reaches the program, the profile stops, and the script goes on and can
-- tell why.  arg[1] is socket:PATH or fifo:PATH.
local kind, path = (arg[1] or ""):match("^(%a+):(.+)$")
assert(kind == "socket" or kind == "fifo",
       "usage: reader_gone.lua socket:PATH|fifo:PATH")
assert(misc.memprof.start(kind == "socket" and {socket = path} or path))
-- Allocate until the profile stops: a round streams about 37 KB, and the
-- socket may hold megabytes (its buffer follows net.core.wmem_max; a
-- pipe's size is the host's to change), so a fixed amount could all fit
-- before the reader goes.  The cap (about 75 MB) only keeps a broken
-- profiler from looping for ever.
local t = {}
for round = 1, 2000 do
  if not misc.memprof.status() then break end
  for i = 1, 2000 do t[i] = {round, i} end
end
print(misc.memprof.status())
print(misc.memprof.stop())
print(misc.memprof.stop())
