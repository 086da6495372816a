"""The admin listener and the state file under hostile or careless use (issue 32, items 3, 4, 5,
9 and the admin bind). Each test failed on 0676d42:

- item 3: a symlink planted at the state file's old temporary name (STATE.tmp) made a PUT
  overwrite its target; the state file's directory is checked at start and in `rondel -c`.
- item 4: weight 0 kept on z of q = {z, y}, then a configuration without y: `rondel -c` said OK,
  SIGHUP failed and the next start exited 2. Now the override is skipped with a warning naming
  the state file and line, the same in `rondel -c`, at reload and at start.
- item 5: a half-sent request held an admin connection forever, and 80 idle admin connections
  under a small descriptor limit made the data listener refuse clients. Now: header and idle
  timeouts, a cap, and the cap kept to 1/16 of the descriptor limit.
- item 9: `+` in an admin path was decoded as a space.
- admin.bind beyond loopback is warned about at start and by `rondel -c`.
"""
import json
import os
import socket
import subprocess
import tempfile
import time
import unittest

from harness import (RONDEL_BIN, Backend, HttpConn, Rondel, http_get, http_request, main,
                     make_config, wait_until)

TOKEN = "hardening-token"


def workdir(mode=0o700):
    d = tempfile.mkdtemp(prefix="rondel-adm-")
    os.chmod(d, mode)
    with open(os.path.join(d, "token"), "w") as f:
        f.write(TOKEN)
    return d


def put(rondel, pool, backend_id, body):
    status, _, out = http_request(rondel.admin_port, "PUT",
                                  f"/api/pools/{pool}/backends/{backend_id}",
                                  headers={"Authorization": f"Bearer {TOKEN}"},
                                  body=json.dumps(body))
    return status, json.loads(out)


def check(path):
    """(exit code, stdout, stderr) of `rondel -c -f path`."""
    p = subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


class StateFile(unittest.TestCase):
    def test_a_symlink_at_the_old_temporary_name_is_never_followed(self):
        d = workdir()
        state = os.path.join(d, "state.jsonl")
        victim = write(os.path.join(d, "victim"), "precious\n")
        os.symlink(victim, state + ".tmp")
        backends = [Backend("t0"), Backend("t1")]
        try:
            r = Rondel(make_config(backends, admin={"token_file": os.path.join(d, "token"),
                                                    "state_file": state}), workdir=d)
            self.assertEqual(put(r, "p", backends[0].address, {"state": "drain"})[0], 200)
            with open(victim) as f:
                self.assertEqual(f.read(), "precious\n")
            self.assertFalse(os.path.islink(state))
            with open(state) as f:
                self.assertEqual(json.loads(f.read())["state"], "drain")
            # Only the state file itself is new in the directory (no temporary file left).
            self.assertEqual(sorted(os.listdir(d)),
                             sorted(["rondel.yaml", "token", "victim", "state.jsonl",
                                     "state.jsonl.tmp"]))
            self.assertEqual(oct(os.stat(state).st_mode & 0o777), oct(0o600))
            self.assertEqual(r.stop(), 0)
        finally:
            for b in backends:
                b.stop()

    def test_a_state_directory_others_can_write_to_is_warned_about(self):
        backends = [Backend("w0")]
        try:
            for mode, warned in ((0o777, True), (0o700, False)):
                d = workdir(mode)
                cfg = make_config(backends, admin={"state_file": os.path.join(d, "state.jsonl")})
                path = write(os.path.join(d, "rondel.yaml"), cfg)
                rc, out, err = check(path)
                self.assertEqual((rc, out.strip()), (0, "OK"), err)
                self.assertEqual("writable by every user (mode 0777)" in err, warned, err)
                r = Rondel(cfg, workdir=d)
                lines = r.lines(r"admin_state_dir_unsafe")
                self.assertEqual(len(lines), 1 if warned else 0, lines)
                if warned:
                    self.assertIn(f"the state file's directory {d} is writable by every user",
                                  lines[0])
                self.assertEqual(r.stop(), 0)
        finally:
            backends[0].stop()


class BadLines(unittest.TestCase):
    def test_a_malformed_state_line_is_skipped_by_line_and_the_rest_applies(self):
        d = workdir()
        state = os.path.join(d, "state.jsonl")
        backends = [Backend("m0"), Backend("m1")]
        write(state, '{"pool": "p", "backend": "x", "state": "drain",}\n'
                     f'{{"pool": "p", "backend": "{backends[1].address}", "state": "maint"}}\n'
                     '{"pool": "p", "backend": "y", "state": "paused"}\n')
        try:
            cfg = make_config(backends, admin={"state_file": state})
            rc, out, err = check(write(os.path.join(d, "r.yaml"), cfg))
            self.assertEqual((rc, out.strip()), (0, "OK"), err)
            self.assertIn(f"rondel: warning: {state}:1: syntax error at byte 47", err)
            self.assertIn(f'rondel: warning: {state}:3: unknown state "paused"', err)
            r = Rondel(cfg, workdir=d)
            self.assertEqual(len(r.lines(rf"warn admin_state_skipped {state}:1: syntax error "
                                         r"at byte 47")), 1)
            self.assertEqual(len(r.lines(rf'warn admin_state_skipped {state}:3: unknown state '
                                         r'"paused"')), 1)
            r.out.wait_for(r"admin_state_loaded file=\S+ entries=1", timeout=5)
            states = {b["id"]: b["admin_state"] for b in r.pools()["pools"][0]["backends"]}
            self.assertEqual(states, {backends[0].address: "ready", backends[1].address: "maint"})
            self.assertEqual(r.stop(), 0)
        finally:
            for b in backends:
                b.stop()


class KeptWeight(unittest.TestCase):
    """Item 4 as reported: PUT weight 0 on z while q = {z, y}; the configuration then drops y."""

    def test_a_kept_weight_never_makes_a_valid_config_unloadable(self):
        d = workdir()
        state = os.path.join(d, "state.jsonl")
        z, y = Backend("z"), Backend("y")
        admin = {"token_file": os.path.join(d, "token"), "state_file": state}

        def config(members):
            return make_config([{"address": b.address, "id": b.name} for b in members],
                               pool_name="q", admin=admin)
        try:
            r = Rondel(config([z, y]), workdir=d)
            self.assertEqual(put(r, "q", "z", {"weight": 0})[0], 200)
            self.assertEqual(http_get(r.port, "/a")[1]["x-backend"], "y")
            skipped = (rf"{state}:1: weight 0 of backend \"z\" in pool \"q\" not applied "
                       r"\(all backend weights are zero with it\); the configured weight 1 is used")

            # rondel -c reads the state file and reports what a start would skip, still OK.
            path = write(os.path.join(d, "next.yaml"), config([z]))
            rc, out, err = check(path)
            self.assertEqual((rc, out.strip()), (0, "OK"), err)
            self.assertRegex(err, "rondel: warning: " + skipped)

            # SIGHUP: loads, says what it skipped and where; z serves with its configured weight.
            start = r.out.count()
            r.reload(config([z]))
            r.out.wait_for(r"warn admin_state_skipped " + skipped, timeout=5, start=start)
            self.assertEqual(http_get(r.port, "/b")[1]["x-backend"], "z")
            # The setting is kept (for when y comes back), and shown as kept but left out.
            view = json.loads(http_get(r.admin_port, "/api/pools/q/backends/z")[2])
            self.assertEqual((view["weight"], view["weight_override"],
                              view["weight_override_skipped"]), (1, True, True))
            self.assertEqual(r.stop(), 0)

            # A restart: starts, serves, with the same warning.
            r = Rondel(config([z]), workdir=d)
            r.out.wait_for(r"warn admin_state_skipped " + skipped, timeout=5)
            self.assertEqual(http_get(r.port, "/c")[1]["x-backend"], "z")
            # y back: the kept weight 0 applies again, with no warning.
            start = r.out.count()
            r.reload(config([z, y]))
            self.assertEqual(http_get(r.port, "/d")[1]["x-backend"], "y")
            view = json.loads(http_get(r.admin_port, "/api/pools/q/backends/z")[2])
            self.assertEqual((view["weight"], view["weight_override_skipped"]), (0, False))
            self.assertFalse(any("admin_state_skipped" in l for l in r.out.lines[start:]))
            # A PUT that would leave no weight is still refused outright (409), not kept.
            status, err = put(r, "q", "y", {"weight": 0})
            self.assertEqual(status, 409)
            self.assertIn("all backend weights are zero", err["error"])
            self.assertEqual(r.stop(), 0)
        finally:
            z.stop()
            y.stop()


def half_request(port):
    """A connection that sent half a request head to `port`."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    return s


def closed_after(s, timeout):
    """(bytes received, seconds) until the peer closed `s`, within `timeout`; None if still open."""
    start = time.monotonic()
    data = b""
    s.settimeout(0.2)
    while time.monotonic() - start < timeout:
        try:
            chunk = s.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return data, time.monotonic() - start
        if not chunk:
            return data, time.monotonic() - start
        data += chunk
    return None


class Connections(unittest.TestCase):
    def test_a_half_sent_request_is_answered_408_at_the_default_header_timeout(self):
        backends = [Backend("h0")]
        try:
            r = Rondel(make_config(backends))
            s = half_request(r.admin_port)
            got = closed_after(s, 20)
            s.close()
            self.assertIsNotNone(got, "the half-sent request was still open after 20 s")
            data, seconds = got
            print(f"half-sent admin request: closed after {seconds:.2f} s", flush=True)
            self.assertTrue(data.startswith(b"HTTP/1.1 408 "), data)
            self.assertGreater(seconds, 9.0)   # default header_timeout 10s, from the accept
            self.assertLess(seconds, 13.0)
            self.assertEqual(http_get(r.admin_port, "/healthz")[0], 200)
            self.assertEqual(r.stop(), 0)
        finally:
            backends[0].stop()

    def test_header_and_idle_timeouts_and_the_cap(self):
        backends = [Backend("c0")]
        try:
            r = Rondel(make_config(backends, admin={"max_connections": 3,
                                                    "header_timeout": "5s",
                                                    "idle_timeout": "600ms"}))
            # A body that stops: closed after idle_timeout (408), long before header_timeout.
            s = socket.create_connection(("127.0.0.1", r.admin_port), timeout=5)
            s.sendall(b"PUT /api/pools/p/backends/x HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Length: 10\r\n\r\n{")
            data, seconds = closed_after(s, 5)
            s.close()
            print(f"stalled admin body: 408 after {seconds:.2f} s (idle_timeout 0.6 s)", flush=True)
            self.assertTrue(data.startswith(b"HTTP/1.1 408 "), data)
            self.assertGreater(seconds, 0.5)
            self.assertLess(seconds, 3.0)
            # The cap: three idle connections held, the fourth closed at once with no byte.
            idle = [half_request(r.admin_port) for _ in range(3)]
            extra = socket.create_connection(("127.0.0.1", r.admin_port), timeout=5)
            data, seconds = closed_after(extra, 3)
            extra.close()
            print(f"over the admin cap: closed after {1000 * seconds:.1f} ms", flush=True)
            self.assertEqual(data, b"")
            self.assertLess(seconds, 1.0)
            r.out.wait_for(r"warn admin_connection_refused open=3 max=3 refused_total=1",
                           timeout=5)
            self.assertEqual(http_get(r.port, "/data")[0], 200)  # the data path is untouched
            idle[0].close()
            wait_until(lambda: self.healthy(r), timeout=5, what="/healthz once a slot is free")
            for s in idle[1:]:
                s.close()
            self.assertEqual(r.stop(), 0)
        finally:
            backends[0].stop()

    def test_shutdown_does_not_wait_for_an_idle_admin_client(self):
        backends = [Backend("s0")]
        try:
            r = Rondel(make_config(backends, top={"drain_timeout": "1s"}))
            s = half_request(r.admin_port)
            # Answered after it on the same listener: the idle one was accepted (FIFO queue).
            self.assertEqual(http_get(r.admin_port, "/healthz")[0], 200)
            start = time.monotonic()
            self.assertEqual(r.stop(timeout=8), 0)  # not after the 10 s header timeout
            seconds = time.monotonic() - start
            print(f"SIGTERM with an idle admin client: exited after {seconds:.2f} s", flush=True)
            self.assertLess(seconds, 3.0)
            s.close()
        finally:
            backends[0].stop()

    @staticmethod
    def healthy(r):
        try:
            return http_get(r.admin_port, "/healthz", timeout=2)[0] == 200
        except OSError:
            return False

    def test_idle_admin_connections_cannot_take_the_data_listeners_descriptors(self):
        # The case: a descriptor limit of 64 and 80 idle admin connections.
        nofile, flood = 64, 80
        backends = [Backend("f0")]
        socks = []
        try:
            r = Rondel(make_config(backends, listener={"idle_timeout": "60s"}),
                       prefix=("prlimit", f"--nofile={nofile}:{nofile}", "--"))
            # A warm-up request first: its pooled backend connection is in the base count.
            started_fds = r.open_fds()
            self.assertEqual(http_get(r.port, "/warm")[0], 200)
            wait_until(lambda: r.open_fds() <= started_fds + 1, timeout=5,
                       what="the warm-up client connection closed")
            base_fds = r.open_fds()
            for _ in range(flood):
                try:
                    socks.append(half_request(r.admin_port))
                except OSError:
                    pass
            for i in range(10):
                with HttpConn(r.port, timeout=5) as c:
                    c.request("GET", f"/during/{i}")
                    self.assertEqual(c.read_response(timeout=5)[0], 200)
            # The admin listener is at its cap (4: 1/16 of 64 descriptors) and refused the rest.
            r.out.wait_for(r"warn admin_connection_refused open=4 max=4", timeout=5)
            # (The data requests' connections close as rondel reads their end: waited for.)
            wait_until(lambda: r.open_fds() <= base_fds + 4, timeout=5,
                       what="at most 4 descriptors more than before the flood")
            print(f"{flood} idle admin connections under nofile={nofile}: rondel fds "
                  f"{base_fds} -> {r.open_fds()}", flush=True)
            self.assertIsNone(r.proc.poll(), "rondel died")
            # The cap was lowered to 1/16 of the limit, and said so.
            r.out.wait_for(r"warn admin_max_connections_lowered configured=10 used=4 "
                           r"nofile=64", timeout=5)
            for s in socks:
                s.close()
            socks = []
            self.assertEqual(r.stop(), 0)
        finally:
            for s in socks:
                s.close()
            backends[0].stop()


class Paths(unittest.TestCase):
    def test_plus_in_a_path_is_a_plus(self):
        d = workdir()
        backends = [Backend("p0"), Backend("p1")]
        try:
            r = Rondel(make_config([{"address": backends[0].address, "id": "c+1"},
                                    {"address": backends[1].address, "id": "c2"}],
                                   admin={"token_file": os.path.join(d, "token")}), workdir=d)
            status, _, body = http_get(r.admin_port, "/api/pools/p/backends/c+1")
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["id"], "c+1")
            status, view = put(r, "p", "c+1", {"state": "drain"})
            self.assertEqual((status, view["id"], view["state"]), (200, "c+1", "drain"))
            self.assertEqual(json.loads(http_get(r.admin_port, "/api/pools/p/backends/c%2B1")[2])
                             ["state"], "drain")
            # In a query, '+' is still a space (form encoding).
            self.assertEqual(r.route("p", "a b")["key"], "a b")
            self.assertEqual(json.loads(http_get(r.admin_port, "/api/route?pool=p&key=a+b")[2])
                             ["key"], "a b")
            self.assertEqual(r.stop(), 0)
        finally:
            for b in backends:
                b.stop()


class Bind(unittest.TestCase):
    def test_an_admin_api_beyond_loopback_is_warned_about(self):
        # Tests listen on loopback only: the warning beyond it is checked through `rondel -c`
        # (which binds nothing) and the start's silence on loopback through a real start; the
        # start's warning is the same function's (server_tests, "admin warnings").
        backends = [Backend("l0")]
        try:
            for bind, warned in (("0.0.0.0:9901", True), ("\"[::]:9901\"", True),
                                 ("127.0.0.1:0", False)):
                d = workdir()
                cfg = make_config(backends, admin={"bind": bind})
                rc, out, err = check(write(os.path.join(d, "r.yaml"), cfg))
                self.assertEqual((rc, out.strip()), (0, "OK"), err)
                self.assertEqual("beyond loopback" in err, warned, err)
                if warned:
                    self.assertIn("rondel: warning: the admin API listens on " + bind.strip('"') +
                                  ", beyond loopback: its reads", err)
                    continue
                r = Rondel(cfg, workdir=d)
                self.assertEqual(r.lines(r"admin_not_loopback"), [])
                self.assertEqual(r.stop(), 0)
        finally:
            backends[0].stop()


if __name__ == "__main__":
    main()
