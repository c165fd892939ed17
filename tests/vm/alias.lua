-- An unnamed chunk is named by its source: the report shows an alias.  The
-- last line has no newline.
local out = assert(arg[1], "usage: alias.lua OUT.bin")
assert(misc.memprof.start(out))
local f = assert(loadstring("local s = ...\nlocal r = string.rep(s, 200)\nreturn r"))
f("ab")
assert(misc.memprof.stop())
