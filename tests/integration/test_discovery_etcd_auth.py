"""etcd discovery with credentials (issue 36: "TLS and a bearer/basic credential optional"),
against a real etcd 3.4 with authentication enabled:

- `username` + `password_file`: rondel buys a token at /v3/auth/authenticate and sends it with
  every request; keys put and deleted reach routing, through the watch too;
- `token_file`: the file's token (one a test bought the same way) is sent as is;
- a wrong password: the source is down (`rondel_discovery_up` 0, an error counted as `status`),
  the pool answers 503, nothing crashes; a reload with the right password fixes it;
- the token refused (etcd restarted: its simple tokens live in memory; the password changed
  meanwhile): the source authenticates again with the password file's new content and goes on;
- `rondel -c` refuses `username` without `password_file`, and a password file it cannot read.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import (Backend, Rondel, http_get, http_request, main, metric_sum, scrape,
                     wait_until)
from test_discovery_etcd import ETCD, ETCDCTL, Etcd

PREFIX = "/rondel/pools/p/"
ROOT_PW = "root-secret"
USER, USER_PW = "rondel", "reader-secret"


def served_by(rondel):
    """The backend names a few requests to the pool reach (503s as None)."""
    names = set()
    for i in range(6):
        status, headers, _ = http_get(rondel.port, f"/k{i}")
        names.add(headers.get("x-backend") if status == 200 else None)
    return names


@unittest.skipIf(not (ETCD and ETCDCTL), "etcd-server and etcd-client are not installed")
class EtcdAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-etcdauth-")
        cls.etcd = Etcd(cls.dir)
        cls.backends = {n: Backend(n) for n in ("a1", "a2")}
        # A root user, a read-only user for rondel on the prefix, then authentication on.
        cls.etcd.ctl("user", "add", f"root:{ROOT_PW}")
        cls.etcd.ctl("user", "add", f"{USER}:{USER_PW}")
        cls.etcd.ctl("role", "add", "reader")
        cls.etcd.ctl("role", "grant-permission", "--prefix=true", "reader", "read", PREFIX)
        cls.etcd.ctl("user", "grant-role", USER, "reader")
        cls.etcd.ctl("auth", "enable")
        cls.put("a1")
        cls.password = os.path.join(cls.dir, "password")
        with open(cls.password, "w") as f:
            f.write(USER_PW + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.etcd.stop()
        for b in cls.backends.values():
            b.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    @classmethod
    def root(cls, *args):
        return cls.etcd.ctl("--user", f"root:{ROOT_PW}", *args)

    @classmethod
    def restart_etcd(cls):
        """Starts the stopped etcd again (same ports and data); its health check of Etcd asks
        without credentials, which auth refuses, so readiness is a root read here."""
        try:
            cls.etcd.start(timeout=1)
        except AssertionError:
            pass  # Etcd.start's unauthenticated probe timed out: expected with auth on

        def answers():
            try:
                cls.root("get", PREFIX, "--prefix", "--keys-only")
                return True
            except (AssertionError, subprocess.TimeoutExpired):
                return False
        wait_until(answers, timeout=10, interval=0.1, what="etcd answering root")

    @classmethod
    def passwd(cls, password):
        """Sets rondel's user's password (etcd then revokes the user's tokens)."""
        env = dict(os.environ, ETCDCTL_API="3")
        r = subprocess.run([ETCDCTL, "--endpoints", cls.etcd.url, "--user", f"root:{ROOT_PW}",
                            "user", "passwd", USER, "--interactive=false"],
                           input=password + "\n", env=env, capture_output=True, text=True,
                           timeout=10)
        if r.returncode != 0:
            raise AssertionError(f"etcdctl user passwd: {r.stderr.strip()}")

    @classmethod
    def put(cls, name):
        b = cls.backends[name]
        cls.root("put", PREFIX + name, json.dumps({"address": b.address, "id": name}))

    def config(self, credentials):
        return ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    passive_health: { consecutive_failures: 0 }\n"
                f"    discovery: {{ etcd: {{ endpoints: [{self.etcd.url}], prefix: {PREFIX}, "
                f"{credentials} }}, retry: 200ms }}\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")

    def errors(self, r, reason):
        _, samples, _ = scrape(r.admin_port)
        return metric_sum(samples, "rondel_discovery_errors_total", pool="p", reason=reason)

    def up(self, r):
        _, samples, _ = scrape(r.admin_port)
        return metric_sum(samples, "rondel_discovery_up", pool="p")

    def test_username_and_password_file_read_and_watch_the_prefix(self):
        r = Rondel(self.config(f"username: {USER}, password_file: {self.password}"),
                   workdir=self.dir)
        try:
            wait_until(lambda: served_by(r) == {"a1"}, timeout=5, what="a1 from etcd")
            self.assertEqual(self.up(r), 1)
            self.put("a2")  # through the watch, which carries the token too
            wait_until(lambda: served_by(r) == {"a1", "a2"}, timeout=5, what="a2 added")
            self.root("del", PREFIX + "a2")
            wait_until(lambda: served_by(r) == {"a1"}, timeout=5, what="a2 removed")
            # The user's password changes and etcd restarts (its simple tokens live in memory):
            # rondel's token is refused (HTTP 401), it authenticates again with the new
            # password from the file, reads and watches on.
            status_before = self.errors(r, "status")
            self.passwd("changed")
            with open(self.password, "w") as f:
                f.write("changed\n")
            self.etcd.stop()
            self.restart_etcd()
            self.put("a2")
            wait_until(lambda: served_by(r) == {"a1", "a2"}, timeout=10,
                       what="a2 seen after the token was refused")
            # The old token was refused once (an error by status, after the connection errors of
            # the restart), then the new one worked.
            self.assertGreater(self.errors(r, "status"), status_before)
        finally:
            with open(self.password, "w") as f:
                f.write(USER_PW + "\n")
            self.passwd(USER_PW)
            self.root("del", PREFIX + "a2")
            self.assertEqual(r.stop(), 0)

    def test_token_file_is_sent_as_is(self):
        status, _, body = http_request(
            self.etcd.port, "POST", "/v3/auth/authenticate",
            body=json.dumps({"name": USER, "password": USER_PW}).encode(), timeout=5)
        self.assertEqual(status, 200, body)
        token_file = os.path.join(self.dir, "etcd-token")
        with open(token_file, "w") as f:
            f.write(json.loads(body)["token"] + "\n")
        r = Rondel(self.config(f"token_file: {token_file}"), workdir=self.dir)
        try:
            wait_until(lambda: served_by(r) == {"a1"}, timeout=5, what="a1 with the token")
        finally:
            self.assertEqual(r.stop(), 0)

    def test_a_wrong_password_is_a_source_down_until_a_reload_fixes_it(self):
        wrong = os.path.join(self.dir, "wrong")
        with open(wrong, "w") as f:
            f.write("not-it\n")
        r = Rondel(self.config(f"username: {USER}, password_file: {wrong}"), workdir=self.dir)
        try:
            wait_until(lambda: r.lines("authenticate: HTTP"), timeout=5,
                       what="the refused authentication logged")
            self.assertEqual(self.up(r), 0)
            self.assertEqual(served_by(r), {None})  # nothing known: 503
            _, samples, _ = scrape(r.admin_port)
            self.assertGreater(metric_sum(samples, "rondel_discovery_errors_total", pool="p",
                                          reason="status"), 0)
            r.reload(self.config(f"username: {USER}, password_file: {self.password}"))
            wait_until(lambda: served_by(r) == {"a1"}, timeout=5, what="a1 after the fix")
            self.assertEqual(self.up(r), 1)
        finally:
            self.assertEqual(r.stop(), 0)

    def test_rondel_c_checks_the_credentials_settings(self):
        rondel_bin = os.environ["RONDEL_BIN"]
        cases = [
            (f"username: {USER}", "'username' and 'password_file' go together"),
            (f"username: {USER}, password_file: {self.dir}/missing",
             "cannot read the password file"),
            (f"username: {USER}, password_file: {self.password}, token_file: {self.password}",
             "two ways to authenticate"),
        ]
        for credentials, want in cases:
            with self.subTest(credentials):
                path = os.path.join(self.dir, "check.yaml")
                with open(path, "w") as f:
                    f.write(self.config(credentials))
                out = subprocess.run([rondel_bin, "-c", "-f", path], capture_output=True,
                                     text=True, timeout=10)
                self.assertNotEqual(out.returncode, 0)
                self.assertIn(want, out.stderr)


if __name__ == "__main__":
    main()
