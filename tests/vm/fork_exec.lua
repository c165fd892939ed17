-- Forks while streaming to a socket (arg[1]) and execs in the child at
-- once, as a Lua program that spawns through the FFI does: the child
-- opens no session of its own.
jit.off()
local ffi = require("ffi")
ffi.cdef[[
int fork(void);
int execv(const char *path, char *const argv[]);
int waitpid(int pid, int *status, int options);
void _exit(int status);
]]
assert(misc.memprof.start{socket = assert(arg[1])})
local arg0 = ffi.new("char[5]", "true")
local argv = ffi.new("char *[2]") -- { "true", NULL }
argv[0] = arg0
local pid = ffi.C.fork()
if pid == 0 then
  ffi.C.execv("/bin/true", argv)
  ffi.C._exit(127)
end
local status = ffi.new("int[1]")
assert(ffi.C.waitpid(pid, status, 0) == pid and status[0] == 0)
print("parent", misc.memprof.status())
assert(misc.memprof.stop())
