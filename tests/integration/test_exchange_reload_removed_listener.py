"""A pipelined request that arrives after a reload removed its listener (issue 13, defect 4): rondel answers 503 and writes its access-log line without
touching the Pool that the reload freed. Run under the sanitize build, where AddressSanitizer
turns the old use-after-free into a report that Rondel.stop() fails on; in every build the
access-log line names no pool of the old configuration."""
import os
import tempfile
import unittest

from harness import Backend, HttpConn, Rondel, access_records, main, wait_until


def config(backend, access, with_second):
    text = ["listeners:",
            "  - { name: web, bind: 127.0.0.1:0, pool: p }"]
    if with_second:
        text.append("  - { name: web2, bind: 127.0.0.1:0, pool: gone }")
    text += ["pools:",
             "  - name: p",
             "    backends:",
             f"      - {{ address: {backend.address} }}"]
    if with_second:
        text += ["  - name: gone",
                 "    backends:",
                 f"      - {{ address: {backend.address}, id: gone-backend }}"]
    text += ["admin:", "  bind: 127.0.0.1:0", "log:", "  level: info",
             f"  access_log: \"{access}\""]
    return "\n".join(text) + "\n"


class ReloadRemovesListener(unittest.TestCase):
    def test_request_after_its_listener_was_removed(self):
        backend = Backend("b")
        access = os.path.join(tempfile.mkdtemp(prefix="rondel-uaf-"), "access.log")
        rondel = Rondel(config(backend, access, True))
        try:
            with HttpConn(rondel.ports["web2"]) as c:
                # The first request is in flight (the backend answers after 2 s) while the reload
                # removes its listener; the next one is pipelined behind it, so the connection
                # keeps its exchange state from one request to the next.
                c.request("GET", "/first?delay=2000")
                wait_until(lambda: rondel.requests_in_flight() == 1, what="first request in flight")
                rondel.reload(config(backend, access, False))
                c.send(b"GET /second HTTP/1.1\r\nHost: t\r\n\r\n")
                self.assertEqual(c.read_response()[0], 200)
                self.assertEqual(c.read_response()[0], 503)
                self.assertTrue(c.closed_by_peer())
            recs = access_records(access, min_count=2)
            second = [r for r in recs if r.get("target") == "/second"]
            self.assertEqual(len(second), 1, recs)
            self.assertEqual(second[0]["status"], "503")
            self.assertNotEqual(second[0].get("pool"), "gone")
            self.assertEqual(second[0].get("backend"), "-")
        finally:
            self.assertEqual(rondel.stop(), 0)  # fails on a sanitizer report
            backend.stop()


if __name__ == "__main__":
    main()
