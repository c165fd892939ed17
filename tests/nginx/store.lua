-- store.lua: the nginx tests' request handler, keeping a string per request in a store that only grows.
local M = {}

local store, n = {}, 0

-- GET /: one more entry, kept for good (the line the tests look for).
function M.handle()
  n = n + 1
  store[n] = ("entry %d "):format(n) .. ngx.var.request_uri:rep(8) -- KEEP
  ngx.say("ok ", n)
end

-- GET /fill?n=N&bytes=B: N small tables holding a string of about B
-- bytes each, a heap of many objects (the latency case).
function M.fill()
  local args = ngx.req.get_uri_args()
  local count, bytes = tonumber(args.n) or 0, tonumber(args.bytes) or 0
  local pad = ("f"):rep(bytes)
  for i = 1, count do
    n = n + 1
    store[n] = { pad .. i }
  end
  ngx.say("filled ", count, ", ", n, " entries")
end

return M
