-- wrk load script for tools/bench: GET /obj/<i> over BENCH_PATHS distinct paths.
--
-- Environment:
--   BENCH_PATHS  number of distinct paths (default 10000); paths are /obj/1 .. /obj/N
--   BENCH_ZIPF   0 = uniform (default); s > 0 = Zipf-skewed: path i drawn with probability
--                proportional to 1/i^s (/obj/1 is the hottest)
--   BENCH_MODE   "random" (default) or "sweep": request /obj/1, /obj/2, ... /obj/N, /obj/1, ...
--                in order (used to learn every path's owner)
--   BENCH_SEED   random seed (default 1)
--   BENCH_THREADS  if set (wrk -t N with N threads): each thread seeds with BENCH_SEED * 7919 +
--                its number, and in sweep mode thread t starts at /obj/((t-1)*N/T + 1), so the
--                threads together touch every path once quickly (primes each key's home cache)
--   BENCH_DELAY_MS  if set: each connection waits that many milliseconds after a response
--                before sending its next request (wrk's latency does not include the wait)
-- done() prints one line "BENCH_RESULT {json}" with the request count, errors and latency
-- percentiles in microseconds. wrk counts a response as a status error when its status > 399.

local paths = tonumber(os.getenv("BENCH_PATHS") or "10000")
local s = tonumber(os.getenv("BENCH_ZIPF") or "0")
local mode = os.getenv("BENCH_MODE") or "random"
local seed = tonumber(os.getenv("BENCH_SEED") or "1")
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "")
local next_path = 0
math.randomseed(seed)

-- Numbers the threads (tid 1..T, a global of each thread's state, read in init()).
local counter = 0
setup = function(thread)
  counter = counter + 1
  thread:set("tid", counter)
end

-- Pre-formatted requests: request() only indexes a table. Built in init(), after wrk.init()
-- has added the Host header (a request formatted at load time has none: 400 from nginx).
local reqs = {}

init = function(args)
  if nthreads then
    math.randomseed(seed * 7919 + (tid or 0))
    next_path = math.floor(((tid or 1) - 1) * paths / nthreads)
  end
  for i = 1, paths do
    reqs[i] = wrk.format("GET", "/obj/" .. i)
  end
end

local cdf = nil
if s > 0 then
  cdf = {}
  local sum = 0
  for i = 1, paths do
    sum = sum + 1 / (i ^ s)
    cdf[i] = sum
  end
  for i = 1, paths do cdf[i] = cdf[i] / sum end
end

local delay_ms = tonumber(os.getenv("BENCH_DELAY_MS") or "")
if delay_ms then
  delay = function() return delay_ms end
end

request = function()
  local i
  if mode == "sweep" then
    next_path = next_path % paths + 1
    i = next_path
  elseif cdf == nil then
    i = math.random(paths)
  else
    local u = math.random()
    local lo, hi = 1, paths
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if cdf[mid] < u then lo = mid + 1 else hi = mid end
    end
    i = lo
  end
  return reqs[i]
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
