-- wrk script: request every code of a file, one per line, round-robin.
-- Usage: wrk ... --script benches/wrk/cycle.lua http://HOST:PORT -- CODES_FILE
-- Each wrk thread starts at its own offset in the file, so the threads do not walk the same
-- codes in lock-step. Requests are formatted once in init(), so that the per-request Lua cost is
-- a table lookup (the same for every server measured).

local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

local requests = {}
local n = 0
local i = 0

function init(args)
  local path = args[1]
  if not path then
    error("cycle.lua: pass the codes file after --")
  end
  for line in io.lines(path) do
    local code = line:match("^%s*(.-)%s*$")
    if code ~= "" then
      n = n + 1
      requests[n] = wrk.format("GET", "/" .. code)
    end
  end
  if n == 0 then
    error("cycle.lua: no codes in " .. path)
  end
  -- id is set by setup(); threads spread evenly over the file (wrk runs at most a few).
  local threads = tonumber(args[2] or "") or 2
  i = math.floor(((id or 0) % threads) * n / threads)
end

function request()
  i = i + 1
  if i > n then
    i = 1
  end
  return requests[i]
end
