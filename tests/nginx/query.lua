-- query.lua: reads a JSON document and prints what a Lua expression over it gives, for the nginx tests.
-- usage: luajit query.lua FILE EXPR   (EXPR sees the document as `j`; a
-- table result prints one value a line; nil prints nothing, exit 1)

local function decoder(s)
  local pos = 1
  local function fail(what)
    error(("query.lua: %s at byte %d"):format(what, pos), 0)
  end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local escapes = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t" }
  local function str()
    local out, i = {}, pos + 1
    while true do
      local j = s:find('["\\]', i)
      if not j then fail("unterminated string") end
      out[#out + 1] = s:sub(i, j - 1)
      if s:sub(j, j) == '"' then pos = j + 1; return table.concat(out) end
      local e = s:sub(j + 1, j + 1)
      if e == "u" then
        local cp = tonumber(s:sub(j + 2, j + 5), 16) or fail("bad \\u escape")
        out[#out + 1] = cp < 128 and string.char(cp) or "?"
        i = j + 6
      else
        out[#out + 1] = escapes[e] or e
        i = j + 2
      end
    end
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "}" then pos = pos + 1; return t end
      while true do
        ws()
        if s:sub(pos, pos) ~= '"' then fail("expected a key") end
        local k = str(); ws()
        if s:sub(pos, pos) ~= ":" then fail("expected ':'") end
        pos = pos + 1
        t[k] = value(); ws()
        c = s:sub(pos, pos); pos = pos + 1
        if c == "}" then return t end
        if c ~= "," then fail("expected ',' or '}'") end
      end
    elseif c == "[" then
      local t = {}
      pos = pos + 1; ws()
      if s:sub(pos, pos) == "]" then pos = pos + 1; return t end
      while true do
        t[#t + 1] = value(); ws()
        c = s:sub(pos, pos); pos = pos + 1
        if c == "]" then return t end
        if c ~= "," then fail("expected ',' or ']'") end
      end
    elseif c == '"' then
      return str()
    elseif s:find("^true", pos) then pos = pos + 4; return true
    elseif s:find("^false", pos) then pos = pos + 5; return false
    elseif s:find("^null", pos) then pos = pos + 4; return nil
    else
      local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
      if not num or num == "" then fail("unexpected character") end
      pos = pos + #num
      return tonumber(num)
    end
  end
  local v = value(); ws()
  if pos <= #s then fail("trailing bytes") end
  return v
end

local file, expr = arg[1], arg[2]
local f = assert(io.open(file, "rb"))
local text = f:read("*a")
f:close()
local ok, doc = pcall(decoder, text)
if not ok then io.stderr:write(doc, " (", file, ")\n"); os.exit(2) end
local fn = assert(loadstring("local j = ...; " .. expr, "expr"))
local r = fn(doc)
if r == nil then os.exit(1) end
if type(r) == "table" then
  for _, v in ipairs(r) do print(v) end
else
  print(r)
end
