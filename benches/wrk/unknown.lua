-- wrk script: request codes that were never created: random 6-character codes of [0-9a-zA-Z].
-- Usage: wrk ... --script benches/wrk/unknown.lua http://HOST:PORT [-- CODES_FILE [COUNT]]
-- CODES_FILE (optional) lists codes that exist; a random code found in it is drawn again, so no
-- request ever hits a real link. COUNT (default 100000) random codes are made per thread in
-- init() and requested round-robin, so that the per-request Lua cost is a table lookup, as in
-- cycle.lua.

local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

local alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
local requests = {}
local n = 0
local i = 0

function init(args)
  local known = {}
  if args[1] and args[1] ~= "" then
    for line in io.lines(args[1]) do
      known[line:match("^%s*(.-)%s*$")] = true
    end
  end
  local count = tonumber(args[2] or "") or 100000
  math.randomseed(os.time() * 1000 + (id or 0) * 7919)
  local chars = {}
  while n < count do
    for k = 1, 6 do
      local r = math.random(1, 62)
      chars[k] = alphabet:sub(r, r)
    end
    local code = table.concat(chars)
    if not known[code] then
      n = n + 1
      requests[n] = wrk.format("GET", "/" .. code)
    end
  end
end

function request()
  i = i + 1
  if i > n then
    i = 1
  end
  return requests[i]
end
