"""testssl.sh (Debian package testssl.sh) against a TLS listener with the default policy: no
HIGH or CRITICAL finding about rondel's TLS (protocols, ciphers, their order, vulnerabilities,
renegotiation, compression...). Findings about the certificate the test itself signs (a private
CA, no revocation URI, a short validity, a name that is not the scanned address) judge the test's
certificate, not rondel, and are listed and left out.

The scan runs the sections that judge the TLS endpoint: protocols (-p), cipher categories (-s),
forward secrecy (-f), server preference (-P), server defaults (-S) and vulnerabilities (-U). It
leaves out client simulation (-c: which cipher each browser would pick, all INFO) and the HTTP
headers (-h: HSTS and the like, set by the application behind rondel); leaving them out halves
the scan (65 s against 137 s on a 2-core machine). RONDEL_TESTSSL_ARGS replaces the sections, e.g. with
nothing for testssl's full default run. Labelled soak."""
import json
import os
import shutil
import subprocess
import unittest

from harness import Backend, Rondel, main
from tls_certs import Certs, listeners_config, tls_block

# Findings about the test's own certificate (see the docstring).
CERTIFICATE_FINDINGS = {"cert_trust", "cert_chain_of_trust", "cert_expirationStatus",
                        "cert_notAfter", "cert_revocation"}


SECTIONS = "-p -s -f -P -S -U"


class TestSsl(unittest.TestCase):
    def test_default_policy_has_no_high_finding(self):
        testssl = shutil.which("testssl") or shutil.which("testssl.sh")
        if testssl is None:
            self.skipTest("testssl not installed (Debian package testssl.sh)")
        certs = Certs()
        cert = certs.leaf("site", ["site.test"])
        backend = Backend("b0")
        self.addCleanup(backend.stop)
        r = Rondel(listeners_config([("secure", tls_block([cert]))], [backend]))
        self.addCleanup(lambda: self.assertEqual(r.stop(), 0))
        report = os.path.join(certs.dir, "testssl.json")
        extra = os.environ.get("RONDEL_TESTSSL_ARGS", SECTIONS).split()
        p = subprocess.run([testssl, "--quiet", "--color", "0", "--warnings", "off", *extra,
                            "--jsonfile", report, f"127.0.0.1:{r.ports['secure']}"],
                           capture_output=True, timeout=840)
        with open(report) as f:
            findings = json.load(f)
        self.assertGreater(len(findings), 50, p.stdout.decode(errors="replace")[-3000:])
        by_id = {x["id"]: x for x in findings}
        for proto, offered in (("SSLv2", False), ("SSLv3", False), ("TLS1", False),
                               ("TLS1_1", False), ("TLS1_2", True), ("TLS1_3", True)):
            self.assertEqual(by_id[proto]["finding"].startswith("offered"), offered,
                             by_id[proto])
        bad = [(x["id"], x["severity"], x["finding"]) for x in findings
               if x["severity"] in ("HIGH", "CRITICAL") and x["id"] not in CERTIFICATE_FINDINGS]
        self.assertEqual(bad, [])


if __name__ == "__main__":
    main()
