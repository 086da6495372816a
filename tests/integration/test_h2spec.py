"""An h2spec-style conformance battery (issue 32): every case h2spec has for RFC 9113 sections
3.4-8 (its `http2` group, numbered by RFC 7540 as h2spec does), RFC 7541 (its `hpack` group) and
its `generic` group, written anew on raw frames (h2_raw), plus rondel's own h2->h1 cases: what a
request carries to the HTTP/1.1 backend (`h2h1/...`, read back from the test backend's /_echo).

rondel starts once, with an h2c prior-knowledge listener and a TLS listener offering h2 by ALPN,
in front of one rondel-test-backend; every case runs on a connection of its own on both
listeners. The test prints every case with its outcome on each listener and what rondel did when
it failed, then `N passed, N failed`, and fails if any case failed. H2SPEC_ONLY=<regex> runs the
cases whose name matches (by hand: python3 tests/integration/test_h2spec.py).

The verdicts follow h2spec's rules (h2spec_core): a connection error is a GOAWAY with the code or
the connection closed, a stream error RST_STREAM with the code or that connection error; unlike
h2spec, a GOAWAY or RST_STREAM with another code than the expected one or a generic one
(PROTOCOL_ERROR, INTERNAL_ERROR: RFC 9113 5.4) fails the case. Each wait is bounded (2 s).
"""
import os
import re
import ssl
import time
import unittest

import h2spec_frame_types  # noqa: F401  (registers its cases)
import h2spec_frames  # noqa: F401
import h2spec_generic  # noqa: F401
import h2spec_messages  # noqa: F401
from h2_raw import READ_ERRORS
from h2spec_core import CASES, Client, Verdict
from harness import Backend, Rondel, main
from tls_certs import Certs, listeners_config, tls_block

LISTENERS = ("h2c", "tls")


def run_case(c, port, tls):
    """The Verdict of case c on a fresh connection to port (TLS when tls is a context)."""
    client = Client(port, tls=tls)
    try:
        if tls and client.sock.selected_alpn_protocol() != "h2":
            return Verdict(False, f"ALPN chose {client.sock.selected_alpn_protocol()}, not h2")
        if c.handshake and not client.handshake():
            return Verdict(False, "the SETTINGS exchange did not complete")
        return c.run(client)
    except READ_ERRORS as e:
        return Verdict(False, f"{type(e).__name__}: {e}")
    finally:
        client.close()


def report(results):
    """The table: one line per case, then what rondel did on each listener where it failed."""
    lines = [f"{'case':<16} {'RFC':<26} {'h2c':<5} {'tls':<5} sent -> expected"]
    for c, verdicts in results:
        marks = ["pass" if v.ok else "FAIL" for v in verdicts]
        lines.append(f"{c.name:<16} {c.rfc:<26} {marks[0]:<5} {marks[1]:<5} {c.desc}")
        for name, v in zip(LISTENERS, verdicts):
            if not v.ok:
                lines.append(f"{'':<16} {'':<26} {name}: {v.actual}")
    return "\n".join(lines)


class H2specBattery(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        certs = Certs()
        cert = certs.leaf("site", ["site.test"])
        cls.backend = Backend("b0")
        cls.r = Rondel(listeners_config(
            [("h2c", "    http2: prior_knowledge"),
             ("tls", tls_block([cert], alpn="[h2, http/1.1]"))], [cls.backend]))
        cls.tls = ssl.create_default_context(cafile=certs.ca)
        cls.tls.set_alpn_protocols(["h2"])

    @classmethod
    def tearDownClass(cls):
        cls.r.stop()
        cls.backend.stop()

    def test_battery(self):
        only = re.compile(os.environ.get("H2SPEC_ONLY", ""))
        cases = [c for c in CASES if only.search(c.name)]
        names = [c.name for c in CASES]
        self.assertEqual(len(names), len(set(names)), "two cases share a name")
        t0 = time.monotonic()
        results = [(c, [run_case(c, self.r.ports["h2c"], None),
                        run_case(c, self.r.ports["tls"], self.tls)]) for c in cases]
        took = time.monotonic() - t0
        failed = [(c, v) for c, v in results if not all(x.ok for x in v)]
        passed = len(results) - len(failed)
        print("\n" + report(results))
        print(f"\nh2spec battery: {len(results)} cases, each on h2c and on TLS (ALPN h2), "
              f"in {took:.1f} s: {passed} passed, {len(failed)} failed", flush=True)
        self.assertIsNone(self.r.proc.poll(), "rondel exited during the battery")
        self.assertEqual([c.name for c, _ in failed], [], "cases that did not hold")


if __name__ == "__main__":
    main()
