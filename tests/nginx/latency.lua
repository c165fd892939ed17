-- latency.lua: a wrk script writing each request's start (Unix seconds) and latency (ms) to a file, for the latency case.
-- usage: wrk -t1 -c1 ... -s latency.lua URL -- FILE   (one connection:
-- a request starts when the one before it is answered)
local ffi = require "ffi"
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } ljmp_timespec;
int clock_gettime(int clock, ljmp_timespec *ts);
]]
local ts = ffi.new("ljmp_timespec")
local function now()
  ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME, as date(1) prints it
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local out, started

function init(args)
  out = assert(io.open(args[1], "w"))
end

function request()
  started = now()
  return wrk.format()
end

function response(status)
  local t = now()
  out:write(("%.6f %.3f %d\n"):format(started, (t - started) * 1e3, status))
  out:flush()
end
