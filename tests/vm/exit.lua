-- Run with LJMP_SOCKET set: allocates, then exits without stopping the
-- profile (os.exit without its close flag: no lua_close).
jit.off()
local keep = require("table.new")(100, 0)
for i = 1, 100 do keep[i] = {} end
os.exit(3)
