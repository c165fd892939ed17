-- A prototype read from bytecode (string.dump, then load) is announced.
local out = assert(arg[1], "usage: bytecode.lua OUT.bin")
local src = assert(loadstring([[
  return function()
    local s = string.rep("x", 300)  -- line 2 (not a tail call).
    return s
  end
]], 'dumped_chunk'))()
local bc = string.dump(src)
assert(misc.memprof.start(out))
local f = assert(load(bc))
f()
assert(misc.memprof.stop())
