"""sd_notify for a systemd Type=notify unit (deployment issue, systemd part).

The test plays the service manager: a Python AF_UNIX SOCK_DGRAM socket passed to rondel as
NOTIFY_SOCKET. rondel sends READY=1 once it serves, RELOADING=1 then READY=1 (with STATUS=) around
each SIGHUP (good file and bad file alike: after a bad one the old configuration keeps serving),
and STOPPING=1 when SIGTERM starts the drain. Without NOTIFY_SOCKET nothing is sent and rondel
serves as before (every other test).
"""
import os
import shutil
import socket
import tempfile
import time
import unittest

from harness import Backend, Rondel, http_get, main, make_config


class Manager:
    """The service manager's end of the notify socket: one datagram per sd_notify() call."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-notify-")
        self.path = os.path.join(self.dir, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)

    def next(self, timeout=10.0):
        """{key: value} of the next message (bounded wait)."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(4096).decode()
        return dict(line.split("=", 1) for line in data.split("\n") if "=" in line)

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Notify(unittest.TestCase):
    def setUp(self):
        self.manager = Manager()
        os.environ["NOTIFY_SOCKET"] = self.manager.path
        self.backend = Backend("b1")

    def tearDown(self):
        os.environ.pop("NOTIFY_SOCKET", None)
        self.manager.close()

    def test_ready_reloading_ready_stopping(self):
        rondel = Rondel(make_config([self.backend]))
        msg = self.manager.next()
        self.assertEqual(msg.get("READY"), "1", msg)
        self.assertIn("serving generation=1", msg.get("STATUS", ""))
        # READY=1 means served: a request through the listener succeeds now.
        self.assertEqual(http_get(rondel.port, "/k")[0], 200)

        rondel.reload(make_config([self.backend], pool={"balance_factor": 150}))
        msg = self.manager.next()
        self.assertEqual(msg.get("RELOADING"), "1", msg)
        usec = int(msg["MONOTONIC_USEC"])
        self.assertLessEqual(usec, time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)
        msg = self.manager.next()
        self.assertEqual(msg.get("READY"), "1", msg)
        self.assertIn("generation=2", msg.get("STATUS", ""))
        self.assertIn("reload ok", msg.get("STATUS", ""))

        rondel.reload("pools: [\n", expect_ok=False)
        self.assertEqual(self.manager.next().get("RELOADING"), "1")
        msg = self.manager.next()
        self.assertEqual(msg.get("READY"), "1", msg)
        self.assertIn("reload failed", msg.get("STATUS", ""))
        self.assertIn("generation=2", msg.get("STATUS", ""))
        self.assertEqual(http_get(rondel.port, "/k")[0], 200)

        rondel.proc.send_signal(15)
        msg = self.manager.next()
        self.assertEqual(msg.get("STOPPING"), "1", msg)
        self.assertEqual(rondel.stop(), 0)


if __name__ == "__main__":
    main()
