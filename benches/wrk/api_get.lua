-- wrk script: one API read with a key, again and again (the key check's cost beside the
-- request's). Usage: wrk ... --script benches/wrk/api_get.lua http://HOST:PORT -- KEY PATH

function init(args)
  wrk.headers["Authorization"] = "Bearer " .. (args[1] or "")
  wrk.path = args[2] or "/api/v1/me"
end
