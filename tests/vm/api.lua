-- The Lua API's answers: start twice, stop twice, bad paths.
local out = assert(arg[1], "usage: api.lua OUT.bin")
local function same(got, want)
  assert(got == want, ("got %s, want %s"):format(tostring(got), tostring(want)))
end
assert(misc.memprof.status() == false)
local ok, msg, err = misc.memprof.stop()
same(ok, nil) same(msg, "profiler is not running") same(err, 22)
ok, msg, err = misc.memprof.start("/nonexistent-dir/x.bin")
same(ok, nil) same(msg, "/nonexistent-dir/x.bin: No such file or directory")
same(err, 2)
assert(misc.memprof.start(out))
assert(misc.memprof.status() == true)
local keep = {}
for i = 1, 100 do keep[i] = {} end
-- A second start fails and must not truncate the running profile.
local size = io.open(out):seek("end")
ok, msg, err = misc.memprof.start(out)
same(ok, nil) same(msg, "profiler is running already") same(err, 22)
assert(io.open(out):seek("end") >= size)
assert(misc.memprof.stop())
same(misc.memprof.status(), false)
print("api ok")
