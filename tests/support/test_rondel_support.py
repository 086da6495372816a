#!/usr/bin/env python3
"""Unit tests of tools/pylib/rondel_support, the Python support package of the integration
tests, the benchmark and the test backend's selftest. Fast; no network but 127.0.0.1. Starts
short Python children, rondel-test-backend and rondel (binaries from RONDEL_TEST_BACKEND and
RONDEL_BIN, as ctest sets them; the tests that need one are skipped without it)."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

SOURCE_DIR = os.environ.get("RONDEL_SOURCE_DIR", os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tools", "pylib"))
from rondel_support import config, daemons, httpio, ledger, metrics, ports, procfs, procs  # noqa: E402

BACKEND_BIN = os.environ.get("RONDEL_TEST_BACKEND")
RONDEL_BIN = os.environ.get("RONDEL_BIN")


def python_child(code):
    return [sys.executable, "-u", "-c", code]


class ProcsTest(unittest.TestCase):
    def setUp(self):
        self.registry = procs.ProcessRegistry()
        self.addCleanup(self.registry.kill_all)

    def test_wait_for_sees_lines_in_order_and_from_start(self):
        p = procs.Process(python_child("print('a 1'); print('b 2'); print('a 3')"), self.registry)
        self.assertEqual(p.wait_for(r"a (\d)").group(1), "1")
        self.assertEqual(p.wait_for(r"a (\d)", start=1).group(1), "3")
        self.assertEqual([m.group(1) for m in p.out.wait_for_all(r"\w (\d)", 3)], ["1", "2", "3"])
        self.assertEqual(p.lines(r"^b"), ["b 2"])

    def test_wait_for_fails_when_the_output_ends_without_the_line(self):
        p = procs.Process(python_child("print('only line')"), self.registry)
        with self.assertRaisesRegex(AssertionError, "(?s)output ended.*only line"):
            p.wait_for("never", timeout=30)  # fails at the end of the output, not after 30 s

    def test_join_fails_while_something_holds_the_output_open(self):
        # The child leaves a grandchild holding the pipe: the output has not ended at its exit.
        code = ("import subprocess, sys, time; print('up'); "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1)'])")
        p = procs.Process(python_child(code), self.registry)
        p.proc.wait(timeout=10)
        with self.assertRaisesRegex(AssertionError, "did not end"):
            p.out.join(timeout=0.2)
        p.out.join(timeout=10)  # the grandchild exits: the stream ends
        self.assertTrue(p.out.ended)
        self.assertEqual(p.lines(), ["up"])

    def test_pause_waits_until_the_process_is_stopped(self):
        p = procs.Process(python_child("import time; print('up'); time.sleep(30)"), self.registry)
        p.wait_for("up")
        procs.pause(p.proc)
        self.assertEqual(procfs.state(p.pid), "T")
        p.proc.send_signal(signal.SIGCONT)
        procs.wait_until(lambda: procfs.state(p.pid) != "T", timeout=5)

    def test_wait_for_times_out_on_a_silent_process(self):
        p = procs.Process(python_child("import time; time.sleep(30)"), self.registry)
        with self.assertRaisesRegex(AssertionError, "0.2s passed"):
            p.wait_for("never", timeout=0.2)

    def test_stop_kills_a_process_that_ignores_sigterm_and_says_so(self):
        code = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('ready'); time.sleep(30)")
        p = procs.Process(python_child(code), self.registry)
        p.wait_for("ready")
        self.assertFalse(p.stop(timeout=0.3))
        self.assertEqual(p.proc.returncode, -signal.SIGKILL)
        self.assertNotIn(p.proc, self.registry)

    def test_stop_all_stops_every_registered_process(self):
        ps = [procs.Process(python_child("import time; print('up'); time.sleep(30)"), self.registry)
              for _ in range(3)]
        for p in ps:
            p.wait_for("up")
        own = self.registry.append(subprocess.Popen(python_child("import time; time.sleep(30)")))
        self.registry.stop_all()
        self.assertEqual([p.proc.returncode for p in ps], [-signal.SIGTERM] * 3)
        self.assertEqual(own.returncode, -signal.SIGTERM)  # one registered by hand too

    def test_wait_until_returns_the_value_or_raises(self):
        self.assertEqual(procs.wait_until(lambda: 7, timeout=1), 7)
        with self.assertRaisesRegex(AssertionError, "waiting for nothing"):
            procs.wait_until(lambda: 0, timeout=0.1, what="nothing")


class ScriptedServer:
    """Accepts one connection on 127.0.0.1 port 0 and sends `data`, then closes (or not)."""

    def __init__(self, data, close=True):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self._t = threading.Thread(target=self._serve, args=(data, close), daemon=True)
        self._t.start()

    def _serve(self, data, close):
        c, _ = self.sock.accept()
        c.settimeout(5)
        try:
            self.received = c.recv(65536)
            c.sendall(data)
            if not close:
                c.recv(1)  # until the client closes
        finally:
            c.close()
            self.sock.close()


class HttpioTest(unittest.TestCase):
    def conn(self, data, close=True):
        srv = ScriptedServer(data, close)
        c = httpio.HttpConn(srv.port, timeout=5)
        self.addCleanup(c.close)
        c.request("GET", "/x", headers={"X-A": "1"})
        return c, srv

    def test_request_bytes(self):
        self.assertEqual(httpio.format_request("POST", "/p", {"X-A": "1"}, b"abc"),
                         b"POST /p HTTP/1.1\r\nX-A: 1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc")
        self.assertEqual(httpio.format_request("GET", "/", {"Host": "h"}, host="t"),
                         b"GET / HTTP/1.1\r\nHost: h\r\n\r\n")

    def test_pipelined_responses_with_every_framing(self):
        data = (b"HTTP/1.1 100 Continue\r\n\r\n"
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-B: v\r\n\r\nabc"
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2;ext=1\r\nde\r\n1\r\nf\r\n0\r\nTrailer: t\r\n\r\n"
                b"HTTP/1.1 204 No Content\r\n\r\n"
                b"HTTP/1.1 200 OK\r\n\r\nuntil close")
        c, srv = self.conn(data)
        self.assertEqual(c.read_response(skip_interim=False), (100, {}, b""))
        self.assertEqual(c.read_response(), (200, {"content-length": "3", "x-b": "v"}, b"abc"))
        status, headers, body = c.read_response()
        self.assertEqual((status, body), (200, b"def"))
        self.assertEqual(c.read_response()[0], 204)
        self.assertEqual(c.read_response()[2], b"until close")
        self.assertTrue(c.closed_by_peer(1))
        self.assertTrue(srv.received.startswith(b"GET /x HTTP/1.1\r\nX-A: 1\r\nHost: t\r\n"))

    def test_interim_responses_are_skipped_by_default(self):
        c, _ = self.conn(b"HTTP/1.1 103 Early Hints\r\nLink: x\r\n\r\nHTTP/1.1 404 NF\r\n"
                         b"Content-Length: 0\r\n\r\n")
        self.assertEqual(c.read_response()[0], 404)

    def test_a_truncated_body_says_how_much_came(self):
        c, _ = self.conn(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n1234")
        with self.assertRaisesRegex(ConnectionError, "after 4 of 10 body bytes"):
            c.read_response()

    def test_a_silent_peer_times_out_and_is_not_closed(self):
        c, _ = self.conn(b"", close=False)
        with self.assertRaises(socket.timeout):
            c.read_response(timeout=0.2)
        self.assertFalse(c.closed_by_peer(0.1))

    def test_parse_responses_and_raw_exchange(self):
        data = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhiHTTP/1.1 503 U\r\nContent-Length: 0\r\n\r\n"
        srv = ScriptedServer(data)
        got = httpio.raw_exchange(srv.port, b"GET / HTTP/1.1\r\n\r\n", timeout=5)
        self.assertEqual([(s, b) for s, _, b in httpio.parse_responses(got)], [(200, b"hi"), (503, b"")])


class PortsConfigTest(unittest.TestCase):
    def test_held_listener_keeps_its_port_bound(self):
        h = ports.HeldListener()
        self.addCleanup(h.close)
        self.assertNotEqual(h.port, 0)
        with socket.socket() as s:
            with self.assertRaises(OSError):  # nobody else can take it while it is held
                s.bind(("127.0.0.1", h.port))
        self.assertEqual(ports.nginx_inherit_env([h], {})["NGINX"], f"{h.fd};")

    def test_closed_port_refuses_connects_and_stays_taken_while_held(self):
        c = ports.closed_port()
        self.addCleanup(c.close)
        self.assertEqual(c.address, f"127.0.0.1:{c.port}")
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", c.port), timeout=5).close()
        with socket.socket() as s:
            with self.assertRaises(OSError):  # no other process can bind and then accept on it
                s.bind(("127.0.0.1", c.port))

    def test_read_listening_from_a_log_line(self):
        registry = procs.ProcessRegistry()
        self.addCleanup(registry.kill_all)
        line = 'ts=x level=info msg="Listening on" address=127.0.0.1:45621'
        p = procs.Process(python_child(f"print('noise'); print({line!r}); print('listening 127.0.0.1:7')"),
                          registry)
        self.assertEqual(ports.read_listening(p.out, ports.PROMETHEUS_LISTENING), [("127.0.0.1", 45621)])
        self.assertEqual(ports.read_listening(p.out), [("127.0.0.1", 7)])

    def test_rondel_ports_later_lines_win(self):
        lines = ["2026 info listening name=web addr=127.0.0.1:1000",
                 "2026 info admin_listening addr=127.0.0.1:2000",
                 "2026 info listening name=web addr=127.0.0.1:1001",
                 "2026 info listening name=api addr=127.0.0.1:3000"]
        self.assertEqual(ports.rondel_ports(lines), ({"web": 1001, "api": 3000}, 2000))

    def test_make_config_text(self):
        b = type("B", (), {"address": "127.0.0.1:9"})()
        text = config.make_config([b, {"address": "127.0.0.1:8", "id": "x"}],
                                  pool={"hash_key": "uri"}, top={"workers": 2},
                                  admin={"enabled": "true"}, log={"access_log": ""})
        self.assertEqual(text, "workers: 2\nlisteners:\n  - name: web\n    bind: 127.0.0.1:0\n"
                         "    pool: p\npools:\n  - name: p\n    hash_key: uri\n    backends:\n"
                         "      - { address: 127.0.0.1:9 }\n      - { address: 127.0.0.1:8, id: x }\n"
                         "admin:\n  bind: 127.0.0.1:0\n  enabled: true\nlog:\n  access_log: \"\"\n"
                         "  level: \"info\"\n")

    def test_write_file_replaces_atomically(self):
        path = os.path.join(tempfile.mkdtemp(prefix="support-test-"), "f")
        config.write_file(path, "one")
        config.write_file(path, "two")
        with open(path) as f:
            self.assertEqual(f.read(), "two")
        self.assertEqual(os.listdir(os.path.dirname(path)), ["f"])

    def test_ledger_and_metrics_parsing(self):
        path = os.path.join(tempfile.mkdtemp(prefix="support-test-"), "ledger")
        with open(path, "w") as f:
            f.write("r1 GET /a 0\n- POST /b 5\n- GET /a 0\nshort\n")
        self.assertEqual(ledger.read_ledger(path)[1], ("-", "POST", "/b", 5))
        self.assertEqual(ledger.target_counts(path), {"/a": 2, "/b": 1})
        samples, types = metrics.parse_metrics(
            '# TYPE x_total counter\nx_total{a="1",b="q\\""} 2\nx_total{a="2"} 3\n')
        self.assertEqual(types, {"x_total": "counter"})
        self.assertEqual(metrics.metric_sum(samples, "x_total"), 5)
        self.assertEqual(metrics.metric_sum(samples, "x_total", b='q"'), 2)


class ProcfsTest(unittest.TestCase):
    def test_readers_on_a_child(self):
        registry = procs.ProcessRegistry()
        self.addCleanup(registry.kill_all)
        code = "import time; x = bytearray(32 << 20); print('ready'); time.sleep(30)"
        p = procs.Process(python_child(code), registry)
        p.wait_for("ready")
        me = os.getpid()
        self.assertIn(p.pid, procfs.proc_tree(me))
        self.assertGreater(procfs.rss_kib([p.pid]), 32 * 1024)
        self.assertGreaterEqual(procfs.hwm_kib([p.pid]), procfs.rss_kib([p.pid]))
        self.assertGreaterEqual(procfs.open_fds([p.pid]), 3)
        self.assertGreater(procfs.max_open_files(p.pid), 0)
        self.assertTrue(procfs.comm(p.pid).startswith("python"))
        self.assertGreater(procfs.cpu_ticks([me]), 0)
        self.assertGreaterEqual(procfs.voluntary_switches([me]),
                                procfs.status_sum([me], "voluntary_ctxt_switches"))
        self.assertGreater(procfs.core_busy_ticks(), procfs.core_busy_ticks(0) - 1)
        self.assertGreater(procfs.machine_switches(), 0)
        self.assertEqual(len(procfs.loadavg().split()), 3)
        self.assertTrue(all(v >= 0 for v in procfs.ipi_counts().values()))


@unittest.skipUnless(BACKEND_BIN and RONDEL_BIN, "RONDEL_TEST_BACKEND and RONDEL_BIN not set")
class DaemonsTest(unittest.TestCase):
    def setUp(self):
        self.registry = procs.ProcessRegistry()
        self.addCleanup(self.registry.kill_all)

    def test_test_backend_groups_report_their_ports(self):
        b = daemons.TestBackendProcess(BACKEND_BIN, ["--name", "m1", "--and", "--name", "m2"],
                                       self.registry)
        self.assertEqual(len(set(b.ports)), 2)
        names = [httpio.exchange(port, "GET", "/k")[1]["x-backend"] for port in b.ports]
        self.assertEqual(names, ["m1", "m2"])
        self.assertEqual(b.stats(b.ports[1])["requests"], 1)
        self.assertTrue(b.stop())
        self.assertEqual(b.proc.returncode, 0)

    def test_test_backend_group_members_in_order(self):
        g = daemons.TestBackendGroup(["x", "y", "z"], "--size", "2", binary=BACKEND_BIN,
                                     registry=self.registry,
                                     member_args=lambda n: ["--fail-mode", "status-500"] if n == "y" else [])
        self.assertEqual([m.name for m in g.members], ["x", "y", "z"])
        got = [httpio.exchange(m.port, "GET", "/")[:3:2] for m in g.members]
        self.assertEqual([(s, b) for s, b in got], [(200, b"x\n"), (500, b"y\n"), (200, b"z\n")])
        g.stop_process()
        with self.assertRaises(socket.timeout):
            httpio.exchange(g.members[0].port, "GET", "/", timeout=0.3)
        g.signal(signal.SIGCONT)
        self.assertEqual(httpio.exchange(g.members[0].port, "GET", "/")[0], 200)
        self.assertTrue(g.stop())

    def test_sanitizer_rx_matches_every_sanitizer_report_start(self):
        starts = ["==1==ERROR: AddressSanitizer: heap-use-after-free on address 0x1",
                  "==1==ERROR: LeakSanitizer: detected memory leaks",
                  "src/proxy/session.cpp:10:5: runtime error: signed integer overflow",
                  "WARNING: ThreadSanitizer: data race (pid=1)"]
        self.assertEqual([bool(daemons.SANITIZER_RX.search(l)) for l in starts], [True] * 4)
        self.assertIsNone(daemons.SANITIZER_RX.search("2026 info started workers=1"))

    def test_rondel_on_port_0_in_front_of_a_backend(self):
        b = daemons.TestBackend("b1", binary=BACKEND_BIN, registry=self.registry)
        r = daemons.Rondel(config.make_config([b]), binary=RONDEL_BIN, registry=self.registry)
        self.assertNotEqual(r.port, 0)
        self.assertIsNotNone(r.admin_port)
        status, headers, body = httpio.http_get(r.port, "/obj/1")
        self.assertEqual((status, headers["x-backend"], body), (200, "b1", b"b1\n"))
        self.assertEqual(r.pools()["pools"][0]["name"], "p")
        _, samples, _ = metrics.scrape(r.admin_port)
        self.assertGreater(len(samples), 0)
        self.assertTrue(r.reload())
        self.assertEqual(r.stop(), 0)
        self.assertTrue(b.stop())


if __name__ == "__main__":
    unittest.main(verbosity=2)
