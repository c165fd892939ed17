-- Call stacks for the daemon tests: one line reached from two callers,
-- 300 and 700 times, streamed with LJMP_STACKS; the tests find the lines
-- by their SITE markers.
local keep = {}
local function hot(n) return {n} end -- SITE hot
local function from_a(k) for i = 1, k do keep[#keep + 1] = hot(i) end end -- SITE from_a
local function from_b(k) for i = 1, k do keep[#keep + 1] = hot(i) end end -- SITE from_b
from_a(300)
from_b(700)
print(#keep)
