-- wrk load script for the large-body pass (tools/bench/rondel_bench/bodies.py):
-- GET /<size>/obj/<i>, the size drawn per request from a weighted list, i uniform.
--
-- Environment:
--   BENCH_SIZES  "name:weight,name:weight,..." e.g. "32b:60,16k:30,256k:8,4m:2"; each name is
--                an object size the static backends serve (default "32b:1")
--   BENCH_PATHS  distinct paths per size (default 10000): /<size>/obj/1 .. /<size>/obj/N
--   BENCH_SEED   random seed (default 1)
--   BENCH_DELAY_MS  if set, each connection waits that long after a response before its next
--                request (wrk's delay(); its latency does not include the wait)
-- done() prints "BENCH_RESULT {json}" as tools/bench/load.lua does (requests, bytes, errors,
-- latency percentiles in microseconds).

local paths = tonumber(os.getenv("BENCH_PATHS") or "10000")
math.randomseed(tonumber(os.getenv("BENCH_SEED") or "1"))

local names, cdf = {}, {}
local total = 0
for name, weight in string.gmatch(os.getenv("BENCH_SIZES") or "32b:1", "([%w]+):([%d.]+)") do
  total = total + tonumber(weight)
  names[#names + 1] = name
  cdf[#cdf + 1] = total
end
for i = 1, #cdf do cdf[i] = cdf[i] / total end

local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if delay_ms then
  delay = function() return delay_ms end
end

-- Pre-formatted requests, built in init() once wrk.init() has added the Host header.
local reqs = {}

init = function(args)
  for s = 1, #names do
    reqs[s] = {}
    for i = 1, paths do
      reqs[s][i] = wrk.format("GET", "/" .. names[s] .. "/obj/" .. i)
    end
  end
end

request = function()
  local u = math.random()
  local s = 1
  while cdf[s] < u do s = s + 1 end
  return reqs[s][math.random(paths)]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"bytes":%d,"err_connect":%d,' ..
    '"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status,
    e.timeout, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max, latency.mean))
end
