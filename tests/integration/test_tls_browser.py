"""Headless Chromium loads a page through a TLS listener (SNI, ALPN offering h2 and http/1.1,
the certificate trusted by its public-key pin), and the page is what the backend served, with
X-Forwarded-Proto: https."""
import base64
import hashlib
import shutil
import subprocess
import tempfile
import unittest

from harness import Backend, Rondel, main, metric_sum, scrape
from tls_certs import Certs, listeners_config, tls_block


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def spki_pin(cert):
    """base64(sha256(SubjectPublicKeyInfo)) of a PEM certificate, for Chromium's pin list."""
    pub = subprocess.run(["openssl", "x509", "-in", cert, "-noout", "-pubkey"], check=True,
                         capture_output=True, timeout=10).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "DER"], input=pub, check=True,
                         capture_output=True, timeout=10).stdout
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


class ChromiumThroughTls(unittest.TestCase):
    def test_page_loads(self):
        chromium = find_chromium()
        if chromium is None:
            self.skipTest("chromium not installed (Debian package chromium)")
        certs = Certs()
        cert = certs.leaf("site", ["site.test"])
        backend = Backend("b0")
        self.addCleanup(backend.stop)
        r = Rondel(listeners_config([("secure", tls_block([cert]))], [backend]))
        self.addCleanup(lambda: self.assertEqual(r.stop(), 0))
        port = r.ports["secure"]
        profile = tempfile.mkdtemp(prefix="rondel-chromium-")
        try:
            p = subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-quic", f"--user-data-dir={profile}",
                 "--host-resolver-rules=MAP site.test 127.0.0.1",
                 f"--ignore-certificate-errors-spki-list={spki_pin(cert[0])}",
                 "--virtual-time-budget=3000", "--dump-dom",
                 f"https://site.test:{port}/_echo"],
                capture_output=True, timeout=120)
        finally:
            shutil.rmtree(profile, ignore_errors=True)
        dom = p.stdout.decode(errors="replace")
        self.assertIn("X-Forwarded-Proto: https", dom, p.stderr.decode(errors="replace")[-2000:])
        self.assertIn("Host: site.test:", dom)
        _, samples, _ = scrape(r.admin_port)
        self.assertGreaterEqual(metric_sum(samples, "rondel_tls_handshakes_alpn_total",
                                           protocol="http/1.1"), 1)


if __name__ == "__main__":
    main()
