-- A plugin of the demo server, reloaded now and then: its tables are
-- built when it loads.
local M = {}
local labels = {}
for i = 1, 2000 do
  labels[i] = "label-" .. i  -- built at load time
end

function M.label(i)
  return labels[i % #labels + 1]
end

return M
