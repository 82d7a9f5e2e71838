-- wrk script: the request from the environment, and a JSON summary with throughput and
-- p50/p95/p99 latency (milliseconds) at the end.
--   BENCH_TOKEN          Authorization: Bearer <token>
--   BENCH_BODY_FILE      POST this file's contents (application/json)
--   BENCH_IF_NONE_MATCH  send If-None-Match: <tag> (revalidating a cached decision)
--   BENCH_SPEND          "single": POST one spend entry per request; "batch": POST
--                        {"entries": [...]} of BENCH_BATCH_SIZE entries (default 1000).
--                        Every entry has a unique request_id (BENCH_RUN_ID, the wrk
--                        thread and a counter), cost_usd null and tokens, so the server
--                        prices it; one in BENCH_PLAN_EVERY goes to BENCH_PLAN, the rest
--                        to BENCH_PAID (each "connection_id:provider:model").
local token = os.getenv("BENCH_TOKEN")
local body_file = os.getenv("BENCH_BODY_FILE")
local if_none_match = os.getenv("BENCH_IF_NONE_MATCH")
local spend = os.getenv("BENCH_SPEND")
local batch_size = tonumber(os.getenv("BENCH_BATCH_SIZE") or "1000")
local run_id = os.getenv("BENCH_RUN_ID") or tostring(os.time())
local plan_every = tonumber(os.getenv("BENCH_PLAN_EVERY") or "4")

if token then wrk.headers["Authorization"] = "Bearer " .. token end
if if_none_match then wrk.headers["If-None-Match"] = if_none_match end
if body_file then
  local f = assert(io.open(body_file, "r"))
  wrk.body = f:read("*a")
  f:close()
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

local thread_count = 0
setup = function(thread)
  thread_count = thread_count + 1
  thread:set("thread_id", thread_count)
end

if spend then
  local function split(spec)
    local a, b, c = string.match(spec, "^([^:]+):([^:]+):(.+)$")
    return {a, b, c}
  end
  local paid = split(os.getenv("BENCH_PAID") or "openai-key:openai:gpt-4o-mini")
  local plan = split(os.getenv("BENCH_PLAN") or "claude-max-1:claude:claude-sonnet-4-5")
  local counter = 0
  local function entry()
    counter = counter + 1
    local target = paid
    if plan_every > 0 and counter % plan_every == 0 then target = plan end
    return string.format(
      '{"request_id":"%s-%d-%d","connection_id":"%s","provider":"%s","model":"%s",'
        .. '"cost_usd":null,"input_tokens":%d,"output_tokens":%d}',
      run_id, thread_id, counter, target[1], target[2], target[3],
      1000 + counter % 500, 200 + counter % 100)
  end
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  request = function()
    local body
    if spend == "batch" then
      local parts = {}
      for i = 1, batch_size do parts[i] = entry() end
      body = '{"entries":[' .. table.concat(parts, ",") .. ']}'
    else
      body = entry()
    end
    return wrk.format(nil, nil, nil, body)
  end
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
