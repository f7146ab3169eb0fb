-- wrk script: request codes of a file with Zipf(s = 1) popularity: the k-th code of the file is
-- drawn with probability proportional to 1/k (real traffic is skewed: a few links get most
-- visits). Usage: wrk ... --script benches/wrk/zipf.lua http://HOST:PORT -- CODES_FILE [uniform]
-- With "uniform" as the second argument every code is equally likely instead.
-- Requests are formatted once in init(); a draw is one random number and one table lookup.

local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

local requests = {}
local n = 0
local uniform = false
local log_n = 0
local euler = 0.5772156649

function init(args)
  local path = args[1]
  if not path then
    error("zipf.lua: pass the codes file after --")
  end
  uniform = args[2] == "uniform"
  for line in io.lines(path) do
    local code = line:match("^%s*(.-)%s*$")
    if code ~= "" then
      n = n + 1
      requests[n] = wrk.format("GET", "/" .. code)
    end
  end
  if n == 0 then
    error("zipf.lua: no codes in " .. path)
  end
  log_n = math.log(n) + euler
  math.randomseed(os.time() + (id or 0) * 7919)
end

function request()
  local k
  if uniform then
    k = math.random(n)
  else
    -- The inverse of the Zipf(1) CDF, H(k)/H(n) ~ (ln k + gamma)/(ln n + gamma).
    k = math.floor(math.exp(math.random() * log_n - euler))
    if k < 1 then k = 1 elseif k > n then k = n end
  end
  return requests[k]
end
