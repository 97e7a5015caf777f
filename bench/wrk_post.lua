-- wrk script for the claudex benchmarks: POST the JSON body in $BENCH_BODY, or in the file
-- $BENCH_BODY_FILE (an environment variable holds at most 128 KB).
wrk.method = "POST"
local path = os.getenv("BENCH_BODY_FILE")
if path then
  local file = assert(io.open(path, "rb"))
  wrk.body = file:read("*a")
  file:close()
else
  wrk.body = os.getenv("BENCH_BODY")
end
wrk.headers["Content-Type"] = "application/json"
wrk.headers["anthropic-version"] = "2023-06-01"
