-- wrk script: durable creates through the HTTP API, each with a URL never used before (no
-- dedup hit). Usage: wrk ... --script benches/wrk/create.lua http://HOST:PORT -- API_KEY TAG
-- TAG (any word) keeps the URLs of two runs apart.

local counter = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

local key = ""
local tag = ""
local i = 0

function init(args)
  key = args[1] or ""
  tag = args[2] or "run"
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. key
end

function request()
  i = i + 1
  local body = string.format('{"url":"https://bench.example/%s/%d/%d"}', tag, id or 0, i)
  return wrk.format("POST", "/api/v1/links", nil, body)
end
