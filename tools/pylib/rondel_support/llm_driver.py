"""The open-loop load driver of the inference-routing benchmark (docs/benchmarks.md): replays a
trace (llm_traces) at its arrival times whatever the latency, streams every answer, and records
per request its time to first token (the first SSE event), end-to-end time, output tokens,
cached tokens and errors.

One asyncio loop on one thread; keep-alive connections pooled per target, a new one opened when
none is idle. Times are measured in real seconds; model seconds = real x speedup.
"""
import asyncio
import json
import time
import zlib

from . import llm_traces


class Result:
    __slots__ = ("index", "conv", "turn", "target", "scheduled", "lag", "ttft", "e2e", "prompt",
                 "cached", "output", "error")

    def __init__(self, index, conv, turn, target, scheduled):
        self.index, self.conv, self.turn, self.target = index, conv, turn, target
        self.scheduled = scheduled
        self.lag = self.ttft = self.e2e = None
        self.prompt = self.cached = self.output = 0
        self.error = None

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


class _Pool:
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.idle = []
        self.opened = 0

    async def get(self):
        while self.idle:
            r, w = self.idle.pop()
            if not w.is_closing() and not r.at_eof():
                return r, w
        self.opened += 1
        return await asyncio.open_connection(self.host, self.port, limit=1 << 22)

    def put(self, conn):
        self.idle.append(conn)

    def close(self):
        for _, w in self.idle:
            w.close()
        self.idle = []


async def _read_head(r):
    head = await r.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body_pieces(r, headers):
    """Yields the body's bytes as they arrive (de-chunked)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await r.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await r.readuntil(b"\r\n")
                return
            data = await r.readexactly(size + 2)
            yield data[:-2]
    else:
        n = int(headers.get("content-length", "0"))
        if n:
            yield await r.readexactly(n)


def _usage(obj, res):
    u = obj.get("usage")
    if u:
        res.prompt = u.get("prompt_tokens", 0)
        res.output = u.get("completion_tokens", 0)
        res.cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) or 0


async def _one(pool, body, res, t_start, timeout):
    conn = await pool.get()
    r, w = conn
    req = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: kvsim\r\nContent-Type: application/json\r\n"
           f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    w.write(req)
    status, headers = await asyncio.wait_for(_read_head(r), timeout)
    buf = b""
    done = False
    async for piece in _body_pieces(r, headers):
        if status != 200:
            buf += piece
            continue
        if res.ttft is None:
            res.ttft = time.monotonic() - t_start
        buf += piece
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data: "):
                continue
            data = event[6:]
            if data == b"[DONE]":
                done = True
                continue
            if b'"usage"' in data:
                _usage(json.loads(data), res)
    res.e2e = time.monotonic() - t_start
    if status != 200:
        res.error = f"status {status}: {buf[:200].decode('utf-8', 'replace')}"
    elif not done:
        res.error = "stream ended without [DONE]"
    if headers.get("connection", "").lower() == "close":
        w.close()
    else:
        pool.put(conn)


async def _request(pool, body, res, t_start, timeout):
    try:
        await asyncio.wait_for(_one(pool, body, res, t_start, timeout), timeout)
    except asyncio.TimeoutError:
        res.error = "timeout"
    except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.LimitOverrunError) as e:
        res.error = f"{type(e).__name__}: {e}"


def target_of(rec, index, targets):
    """Which target a record goes to: by conversation, so that a client (a conversation) keeps
    to one proxy instance, as clients split between instances would."""
    key = rec.get("conv", str(index))
    return zlib.crc32(key.encode()) % targets


async def replay(records, targets, speedup, seed, timeout=120.0, model="kvsim"):
    """Replays `records` against targets [(host, port)] open-loop; returns (results, stats)."""
    bank = llm_traces.TextBank(seed)
    pools = [_Pool(h, p) for h, p in targets]
    results = []
    tasks = []
    loop = asyncio.get_running_loop()
    cpu0 = time.process_time()
    t0 = time.monotonic() + 0.1
    for i, rec in enumerate(records):
        at = t0 + llm_traces.record_time(rec) / speedup
        delay = at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        res = Result(i, rec.get("conv"), rec.get("turn"), target_of(rec, i, len(targets)),
                     llm_traces.record_time(rec))
        res.lag = time.monotonic() - at
        body = json.dumps({"model": model, "messages": llm_traces.messages_of(rec, bank),
                           "max_tokens": llm_traces.record_output(rec), "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        results.append(res)
        tasks.append(loop.create_task(_request(pools[res.target], body, res, time.monotonic(),
                                               timeout)))
    send_end = time.monotonic()
    if tasks:
        await asyncio.wait(tasks)
    wall = time.monotonic() - t0
    for p in pools:
        p.close()
    stats = {"wall": wall, "send_wall": send_end - t0, "cpu": time.process_time() - cpu0,
             "connections": sum(p.opened for p in pools)}
    return results, stats


def run(records, targets, speedup, seed, timeout=120.0):
    return asyncio.run(replay(records, targets, speedup, seed, timeout))
