-- The binary-trees benchmark (depth 16).
local function bottom_up(depth)
  if depth == 0 then return {} end
  depth = depth - 1
  return {bottom_up(depth), bottom_up(depth)}
end

local function check(tree)
  if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
  return 1
end

local N = 16
local maxdepth = math.max(6, N)
local long_lived = bottom_up(maxdepth)
local total = 0
for depth = 4, maxdepth, 2 do
  local iters = 2 ^ (maxdepth - depth + 4)
  for _ = 1, iters do total = total + check(bottom_up(depth)) end
end
print(total, check(long_lived))
