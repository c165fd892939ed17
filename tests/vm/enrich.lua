-- Prototypes made while profiling are announced (the seed's check).
local out = assert(arg[1], "usage: enrich.lua OUT.bin")
assert(misc.memprof.start(out))
local payload_str = [[
  local M = {
    tmp = string.rep("1", 100)  -- line 2.
  }

  function M.payload()
    local str = string.rep("42", 100)  -- line 6.
  end

  return M
  ]]
local str_chunk = assert(loadstring(payload_str, 'str_chunk'))()
str_chunk.payload()
assert(misc.memprof.stop())
