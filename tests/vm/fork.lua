-- Forks while profiling to socket:PATH or file:PATH (arg[1]): the
-- parent's stream goes on untouched; a child of a socket's streams a
-- session of its own.  Interpreted only, so that each allocation is
-- counted at its line.
jit.off()
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int getpid(void);
int waitpid(int pid, int *status, int options);
]]
local new_tab = require("table.new")
local kind, path = (arg[1] or ""):match("^(%a+):(.+)$")
assert(kind == "socket" or kind == "file",
       "usage: fork.lua socket:PATH|file:PATH")
assert(misc.memprof.start(kind == "socket" and {socket = path} or path))
local before, after = new_tab(100, 0), new_tab(300, 0)
for i = 1, 100 do before[i] = {} end -- the parent, before the fork
local pid = ffi.C.fork()
if pid == 0 then
  for _ = 1, 2000 do end -- its session starts after a thousand bytecodes
  for i = 1, 200 do after[i] = {} end -- the child
  print("child", ffi.C.getpid(), misc.memprof.status())
  os.exit(0) -- without a stop: the stream ends at exit
end
local status = ffi.new("int[1]")
assert(ffi.C.waitpid(pid, status, 0) == pid and status[0] == 0)
for i = 1, 300 do after[i] = {} end -- the parent, after it
print("parent", misc.memprof.status())
assert(misc.memprof.stop())
