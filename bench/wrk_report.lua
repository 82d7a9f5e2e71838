-- wrk script: optional method/body/headers from the environment, and a JSON summary
-- with throughput and p50/p95/p99 latency (milliseconds) at the end.
local token = os.getenv("BENCH_TOKEN")
local body_file = os.getenv("BENCH_BODY_FILE")
if token then wrk.headers["Authorization"] = "Bearer " .. token end
if body_file then
  local f = assert(io.open(body_file, "r"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

done = function(summary, latency, requests)
  local seconds = summary.duration / 1e6
  io.write(string.format(
    '{"requests": %d, "errors": %d, "non_2xx": %d, "rps": %.1f, "p50_ms": %.3f, "p95_ms": %.3f, "p99_ms": %.3f}\n',
    summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status,
    summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
