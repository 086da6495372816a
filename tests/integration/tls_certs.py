"""Test certificates made with the openssl command in a temporary directory: a CA, leaf
certificates signed by it (ECDSA P-256), an expired one, a client certificate. Test-only: no key
is ever checked in."""

import os
import subprocess
import tempfile


class Certs:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-tls-")
        self.ca = self._ca("ca", "rondel test CA")

    def path(self, name):
        return os.path.join(self.dir, name)

    def _run(self, *args):
        subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=30)

    def _ca(self, name, cn):
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", self.path(name + ".key"), "-out", self.path(name + ".pem"),
                  "-days", "30", "-subj", "/CN=" + cn)
        return self.path(name + ".pem")

    def leaf(self, name, dns_names, days=10, expired=False, client=False, ca="ca", ips=()):
        """Signs a certificate for `dns_names` (first = CN) and IP addresses `ips`; returns
        (cert path, key path)."""
        key, csr, cert = (self.path(name + s) for s in (".key", ".csr", ".pem"))
        ext = self.path(name + ".ext")
        with open(ext, "w") as f:
            if dns_names or ips:
                f.write("subjectAltName=" + ",".join(["DNS:" + n for n in dns_names] +
                                                     ["IP:" + a for a in ips]) + "\n")
            f.write("extendedKeyUsage=" + ("clientAuth" if client else "serverAuth") + "\n")
        cn = dns_names[0] if dns_names else name
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                  "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
        sign = ["x509", "-req", "-in", csr, "-CA", self.path(ca + ".pem"),
                "-CAkey", self.path(ca + ".key"), "-CAcreateserial", "-out", cert,
                "-extfile", ext]
        # An expired certificate: not after a day before now (openssl 3.0 takes a negative -days).
        sign += ["-days", "-1" if expired else str(days)]
        self._run(*sign)
        return cert, key


def tls_block(certs, indent="    ", **keys):
    """YAML for a listener's `tls:` section: certs = [(cert, key)], keys = extra tls keys."""
    lines = [indent + "tls:", indent + "  certificates:"]
    lines += [f"{indent}    - {{ cert: {c}, key: {k} }}" for c, k in certs]
    lines += [f"{indent}  {k}: {v}" for k, v in keys.items()]
    return "\n".join(lines)


def listeners_config(listeners, backends, admin=True, log_extra=""):
    """A config with several listeners in front of pool p: listeners = [(name, extra yaml)]."""
    lines = ["listeners:"]
    for name, extra in listeners:
        lines += [f"  - name: {name}", "    bind: 127.0.0.1:0", "    pool: p"]
        if extra:
            lines.append(extra)
    lines += ["pools:", "  - name: p", "    backends:"]
    lines += [f"      - {{ address: {b.address} }}" for b in backends]
    if admin:
        lines += ["admin:", "  bind: 127.0.0.1:0"]
    lines += ["log:", "  level: info", log_extra]
    return "\n".join(lines) + "\n"
