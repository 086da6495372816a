"""Graceful shutdown and signals (configuration and lifecycle issue).

SIGTERM with requests in flight on a slow backend: every request completes, idle keep-alive
connections are closed, new connections are refused, rondel exits 0. Past drain_timeout the rest
is cut and rondel still exits 0. SIGINT behaves like SIGTERM. SIGUSR1 reopens the log files.
"""
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

from harness import Backend, HttpConn, Rondel, http_get, make_config, main, wait_until


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


def in_flight_requests(rondel, n, path):
    """Starts n GETs of `path` in threads; returns (threads, results list)."""
    results = []
    lock = threading.Lock()

    def one(i):
        try:
            status, headers, body = http_get(rondel.port, f"{path}&i={i}", timeout=20)
            r = (status, body)
        except Exception as e:  # noqa: BLE001
            r = ("error", repr(e))
        with lock:
            results.append(r)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


class GracefulShutdown(unittest.TestCase):
    def setUp(self):
        self.backend = Backend("slow")

    def tearDown(self):
        self.backend.stop()

    def test_sigterm_lets_in_flight_requests_finish_and_exits_0(self):
        rondel = Rondel(make_config([self.backend], extra="drain_timeout: 10s\n"))
        idle = HttpConn(rondel.port)
        idle.request("GET", "/warm")
        self.assertEqual(idle.read_response()[0], 200)
        threads, results = in_flight_requests(rondel, 5, "/slow?delay=1500")
        wait_until(lambda: rondel.requests_in_flight() >= 5, timeout=5, what="5 requests in flight")
        t0 = time.monotonic()
        rondel.proc.send_signal(signal.SIGTERM)
        rondel.out.wait_for(r"shutdown_started in_flight=5", timeout=5)
        # The idle keep-alive connection is closed at once; new connections are refused.
        self.assertTrue(idle.closed_by_peer(timeout=2))
        idle.close()
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", rondel.port), timeout=1).close()
        code = rondel.proc.wait(timeout=15)
        elapsed = time.monotonic() - t0
        for t in threads:
            t.join(timeout=5)
        self.assertEqual(code, 0)
        self.assertEqual(sorted(r[0] for r in results), [200] * 5, results)
        self.assertLess(elapsed, 5)
        self.assertTrue(rondel.lines(r"shutdown_complete"))
        self.assertFalse(rondel.lines(r"drain_timeout"))

    def test_drain_timeout_cuts_what_is_left_and_exits_0(self):
        rondel = Rondel(make_config([self.backend], extra="drain_timeout: 500ms\n"))
        threads, results = in_flight_requests(rondel, 2, "/slow?delay=8000")
        wait_until(lambda: rondel.requests_in_flight() >= 2, timeout=5, what="2 requests in flight")
        t0 = time.monotonic()
        rondel.proc.send_signal(signal.SIGINT)
        code = rondel.proc.wait(timeout=10)
        self.assertEqual(code, 0)
        self.assertLess(time.monotonic() - t0, 3)
        for t in threads:
            t.join(timeout=5)
        self.assertTrue(rondel.lines(r"warn drain_timeout"))
        self.assertEqual(len(results), 2)
        self.assertNotIn(200, [r[0] for r in results])

    def test_sigusr1_reopens_log_files(self):
        rondel_dir = tempfile.mkdtemp(prefix="rondel-it-")
        log_path = os.path.join(rondel_dir, "error.log")
        rondel = Rondel(make_config([self.backend], log={"error_log": log_path, "level": "info"}),
                        workdir=rondel_dir, expect_start=False)
        wait_until(lambda: "started" in read_text(log_path),
                   timeout=10, what="log file written")
        rotated = log_path + ".1"
        os.rename(log_path, rotated)
        rondel.proc.send_signal(signal.SIGUSR1)
        wait_until(lambda: "logs_reopened" in read_text(log_path),
                   timeout=5, what="log reopened")
        self.assertNotIn("logs_reopened", read_text(rotated))
        rondel.proc.send_signal(signal.SIGTERM)
        self.assertEqual(rondel.proc.wait(timeout=10), 0)


if __name__ == "__main__":
    main()
