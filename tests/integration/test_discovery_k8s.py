"""Kubernetes EndpointSlice discovery against a fake API server (issue 36).

There is no API server on this machine, so FakeApiServer (below) serves list and watch of
discovery.k8s.io/v1 EndpointSlices in the shapes of the Kubernetes API reference: an
EndpointSliceList with metadata.resourceVersion, watch events {"type": ADDED | MODIFIED |
DELETED | BOOKMARK | ERROR, "object": ...} one per line of a chunked body, BOOKMARK objects that
carry only metadata.resourceVersion, and ERROR objects that are a Status with code 410 when the
version is too old. Test backends listen on one port on 127.0.0.2-.5, as the endpoints of one
slice do. rondel lists, watches from the list's version, resumes a cut watch from the last
version (bookmarks included), lists again on 410, keeps its membership while the server fails,
names each backend by its pod (targetRef.name) so a pod replaced under the same name keeps its
keys, drains a terminating endpoint and drops one that stops serving.
"""
import json
import os
import queue
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from harness import RONDEL_BIN, Backend, Rondel, http_get, main, metric_sum, scrape, wait_until
from test_discovery_etcd import served_by
from test_dns_discovery import backends_on_one_port
from tls_certs import Certs

IPS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]
NS, SERVICE = "shop", "cache"
LIST_PATH = f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices"


def endpoint(ip, pod, ready=True, serving=None, terminating=False, zone="z1"):
    """One entry of EndpointSlice.endpoints, as the EndpointSlice controller writes it."""
    return {"addresses": [ip],
            "conditions": {"ready": ready, "serving": ready if serving is None else serving,
                           "terminating": terminating},
            "targetRef": {"kind": "Pod", "namespace": NS, "name": pod,
                          "uid": f"uid-{pod}"},
            "nodeName": "node-1", "zone": zone}


def would_see_a_connection():
    """A listening socket on 127.0.0.1 and its port: accept() raises socket.timeout after
    0.5 s when nothing connected (what `rondel -c` must not do)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    return listener, listener.getsockname()[1]


class FakeApiServer:
    """List and watch of one Service's EndpointSlices over HTTP/1.1 on 127.0.0.1, with a bearer
    token. Tests change slices (each change is a watch event with a new resourceVersion), send
    bookmarks, cut watches, expire the next watch (410) or fail every request (500)."""

    def __init__(self, port, token, tls=None):
        self.port, self.token = port, token
        self.rv = 100
        self.slices = {}
        self.lists = 0
        self.watch_versions = []   # resourceVersion of each watch request, in order
        self.tokens_seen = []
        self.failing = False
        self.expire_next_watch = False
        self.watchers = []         # one queue per open watch
        self.lock = threading.Lock()
        self.stopping = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:  # an ssl.SSLContext: https, handshake on the handler's thread
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True,
                                                do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping = True
        self.cut()
        self.httpd.shutdown()
        self.httpd.server_close()

    # --- what tests do
    def set_slice(self, name, endpoints, port_name="http", port=0, notify=True):
        with self.lock:
            self.rv += 1
            kind = "MODIFIED" if name in self.slices else "ADDED"
            self.slices[name] = {
                "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"name": name, "namespace": NS, "resourceVersion": str(self.rv),
                             "generateName": f"{SERVICE}-",
                             "labels": {"kubernetes.io/service-name": SERVICE,
                                        "endpointslice.kubernetes.io/managed-by":
                                            "endpointslice-controller.k8s.io"}},
                "addressType": "IPv4", "endpoints": endpoints,
                "ports": [{"name": port_name, "protocol": "TCP", "port": port}]}
            if notify:
                self._send({"type": kind, "object": self.slices[name]})

    def delete_slice(self, name):
        with self.lock:
            self.rv += 1
            obj = self.slices.pop(name)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._send({"type": "DELETED", "object": obj})

    def bookmark(self):
        with self.lock:
            self.rv += 1
            self._send({"type": "BOOKMARK", "object": {
                "kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
                "metadata": {"resourceVersion": str(self.rv),
                             "annotations": {"k8s.io/initial-events-end": "true"}}}})
            return str(self.rv)

    def cut(self):
        """Ends every open watch by closing its connection mid-body."""
        with self.lock:
            for q in self.watchers:
                q.put(None)

    def watching(self):
        with self.lock:
            return len(self.watchers)

    def _send(self, event):
        for q in self.watchers:
            q.put(event)

    # --- serving
    def handle(self, h):
        url = urlparse(h.path)
        q = parse_qs(url.query)
        auth = h.headers.get("Authorization", "")
        self.tokens_seen.append(auth)
        if url.path != LIST_PATH or q.get("labelSelector") != [
                f"kubernetes.io/service-name={SERVICE}"]:
            return self._status(h, 404, "NotFound", "no such path")
        if auth != f"Bearer {self.token}":
            return self._status(h, 401, "Unauthorized", "Unauthorized")
        if self.failing:
            return self._status(h, 500, "InternalError", "etcdserver: request timed out")
        if q.get("watch") == ["1"]:
            return self._watch(h, q)
        with self.lock:
            self.lists += 1
            body = json.dumps({"kind": "EndpointSliceList", "apiVersion": "discovery.k8s.io/v1",
                               "metadata": {"resourceVersion": str(self.rv)},
                               "items": list(self.slices.values())}).encode()
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _status(self, h, code, reason, message):
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {},
                           "status": "Failure", "message": message, "reason": reason,
                           "code": code}).encode()
        h.send_response(code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _watch(self, h, q):
        self.watch_versions.append(q.get("resourceVersion", [""])[0])
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        events = queue.Queue()
        with self.lock:
            if self.expire_next_watch:
                self.expire_next_watch = False
                events.put({"type": "ERROR", "object": {
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "too old resource version: 1 (101)", "reason": "Expired",
                    "code": 410}})
                events.put("end")
            self.watchers.append(events)
        deadline = time.monotonic() + 60
        try:
            while not self.stopping and time.monotonic() < deadline:
                try:
                    ev = events.get(timeout=0.1)
                except queue.Empty:
                    continue
                if ev is None:
                    return  # cut: the connection closes without the last chunk
                if ev == "end":
                    h.wfile.write(b"0\r\n\r\n")
                    return
                line = json.dumps(ev).encode() + b"\n"
                h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                h.wfile.flush()
        except OSError:
            pass
        finally:
            with self.lock:
                self.watchers.remove(events)
            h.close_connection = True


class K8sDiscovery(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="rondel-it-k8s-")
        cls.backends = backends_on_one_port([f"k{ip.rsplit('.', 1)[1]}" for ip in IPS], IPS)
        cls.port = cls.backends[IPS[0]].port
        cls.token_file = os.path.join(cls.dir, "token")
        cls.write_token("token-1")
        cls.api = FakeApiServer(0, "token-1")
        cls.initial()
        text = ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    passive_health: { consecutive_failures: 0 }\n"
                "    discovery:\n"
                f"      kubernetes: {{ service: {SERVICE}, namespace: {NS}, port: http, "
                f"server: http://127.0.0.1:{cls.api.port}, token_file: {cls.token_file} }}\n"
                "      retry: 200ms\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
        cls.rondel = Rondel(text, workdir=cls.dir)

    @classmethod
    def write_token(cls, token):
        with open(cls.token_file + ".tmp", "w") as f:
            f.write(token + "\n")
        os.replace(cls.token_file + ".tmp", cls.token_file)

    @classmethod
    def initial(cls):
        cls.api.set_slice("cache-abc", [endpoint(IPS[0], "cache-0", zone="z1"),
                                        endpoint(IPS[1], "cache-1", zone="z2")],
                          port=cls.port)

    @classmethod
    def tearDownClass(cls):
        code = cls.rondel.stop()
        cls.api.stop()
        for b in cls.backends.values():
            b.stop()
        assert code == 0, code

    def setUp(self):
        self.api.failing = False
        # The fake server replays no missed event: a change made between rondel's list and its
        # watch (after the previous test's relist or cut) would never reach it. Change only
        # while its watch is open.
        wait_until(lambda: self.api.watching() == 1, timeout=5, what="rondel watching")
        for name in list(self.api.slices):
            if name != "cache-abc":
                self.api.delete_slice(name)
        self.initial()
        wait_until(lambda: self.members() == {"cache-0": 1, "cache-1": 1}, timeout=5,
                   interval=0.05, what="the initial endpoints")
        wait_until(lambda: self.api.watching() == 1, timeout=5, what="rondel watching")

    def view(self):
        return {b["id"]: b for b in self.rondel.pools()["pools"][0]["backends"]}

    def members(self):
        return {i: b["weight"] for i, b in self.view().items()}

    def served_by(self, n=60, prefix="/o/"):
        return served_by(self.rondel, n, prefix)

    def test_list_then_watch_ids_zones_and_an_added_pod_within_1s(self):
        v = self.view()
        self.assertEqual(v["cache-0"]["address"], f"{IPS[0]}:{self.port}")
        self.assertEqual(v["cache-0"]["labels"], ["zone.z1"])
        self.assertEqual(v["cache-1"]["labels"], ["zone.z2"])
        self.assertEqual(self.served_by(), {"k2", "k3"})
        self.api.set_slice("cache-def", [endpoint(IPS[2], "cache-2")], port=self.port)
        t0 = time.monotonic()
        wait_until(lambda: "cache-2" in self.members(), timeout=5, interval=0.01,
                   what="the pod of a new slice")
        took = time.monotonic() - t0
        print(f"\nk8s: a new slice reached the pool in {took:.3f}s")
        self.assertLess(took, 1.0)
        self.assertIn("k4", self.served_by(120, "/new/"))

    def test_a_pod_replaced_under_the_same_name_keeps_its_keys(self):
        keys = [f"/keep/{i}" for i in range(200)]
        owners = {k: self.rondel.route("p", k)["owner"] for k in keys}
        self.api.set_slice("cache-abc", [endpoint(IPS[0], "cache-0"),
                                         endpoint(IPS[3], "cache-1")], port=self.port)
        wait_until(lambda: self.view()["cache-1"]["address"] == f"{IPS[3]}:{self.port}",
                   timeout=5, interval=0.02, what="cache-1 at its new address")
        self.assertEqual({k: self.rondel.route("p", k)["owner"] for k in keys}, owners)
        on_1 = [k for k in keys if owners[k] == "cache-1"][:10]
        self.assertTrue(on_1)
        for k in on_1:
            status, headers, _ = http_get(self.rondel.port, k)
            self.assertEqual((status, headers["x-backend"]), (200, "k5"))

    def test_terminating_drains_and_not_serving_is_gone(self):
        self.api.set_slice("cache-abc", [
            endpoint(IPS[0], "cache-0", ready=False, serving=True, terminating=True),
            endpoint(IPS[1], "cache-1")], port=self.port)
        wait_until(lambda: self.members() == {"cache-0": 0, "cache-1": 1}, timeout=5,
                   interval=0.01, what="cache-0 draining")
        self.assertEqual(self.served_by(60, "/term/"), {"k3"})  # no new request reaches it
        self.api.set_slice("cache-abc", [
            endpoint(IPS[0], "cache-0", ready=False, serving=False, terminating=True),
            endpoint(IPS[1], "cache-1")], port=self.port)
        wait_until(lambda: self.members() == {"cache-1": 1}, timeout=5, interval=0.01,
                   what="cache-0 gone")

    def test_a_cut_watch_resumes_from_the_last_bookmark_without_listing(self):
        lists = self.api.lists
        rv = self.api.bookmark()
        time.sleep(0.2)  # the bookmark reaches rondel before the cut
        n = len(self.api.watch_versions)
        self.api.cut()
        wait_until(lambda: len(self.api.watch_versions) > n, timeout=5, what="a new watch")
        self.assertEqual(self.api.watch_versions[n], rv)
        self.assertEqual(self.api.lists, lists)
        self.assertEqual(self.members(), {"cache-0": 1, "cache-1": 1})

    def test_410_gone_lists_again(self):
        lists = self.api.lists
        start = self.rondel.out.count()
        # A change the watch never reports, then a watch that answers 410: only a new list
        # can find the change.
        self.api.set_slice("cache-abc", [endpoint(IPS[0], "cache-0")], port=self.port,
                           notify=False)
        self.api.expire_next_watch = True
        self.api.cut()
        wait_until(lambda: self.members() == {"cache-0": 1}, timeout=5, interval=0.02,
                   what="the change found by a new list")
        self.assertGreaterEqual(self.api.lists, lists + 1)
        self.rondel.out.wait_for(r"info discovery_relist pool=p source=kubernetes:shop/cache "
                                 r"reason=gone", timeout=5, start=start)

    def test_a_failing_api_server_keeps_the_membership(self):
        start = self.rondel.out.count()
        _, m, _ = scrape(self.rondel.admin_port)
        errors = metric_sum(m, "rondel_discovery_errors_total", pool="p", source="kubernetes",
                            reason="status")
        self.api.failing = True
        self.api.cut()  # logged as the start of a run of failures; the 500s that follow count

        def status_errors():
            _, m, _ = scrape(self.rondel.admin_port)
            return metric_sum(m, "rondel_discovery_errors_total", pool="p",
                              source="kubernetes", reason="status") > errors
        wait_until(status_errors, timeout=5, what="the 500s counted")
        self.rondel.out.wait_for(r"warn discovery_failed pool=p reason=connect "
                                 r"error=\"kubernetes:shop/cache: http://127\.0\.0\.1:"
                                 r"\d+: watch: closed\" keeping=2", timeout=5, start=start)
        for _ in range(10):
            self.assertEqual(self.members(), {"cache-0": 1, "cache-1": 1})
            time.sleep(0.1)
        self.assertEqual(self.served_by(30, "/fail/"), {"k2", "k3"})
        _, m, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(m, "rondel_discovery_up", pool="p", source="kubernetes"), 0)
        self.api.failing = False
        wait_until(lambda: self.api.watching() == 1, timeout=5, what="watching again")
        _, m, _ = scrape(self.rondel.admin_port)
        self.assertEqual(metric_sum(m, "rondel_discovery_up", pool="p", source="kubernetes"), 1)

    def test_a_rotated_token_is_read_again(self):
        self.write_token("token-2")
        self.api.token = "token-2"
        n = len(self.api.tokens_seen)
        self.api.cut()
        wait_until(lambda: self.api.watching() == 1 and len(self.api.tokens_seen) > n,
                   timeout=5, what="a watch with the new token")
        self.assertEqual(self.api.tokens_seen[n], "Bearer token-2")
        self.write_token("token-1")
        self.api.token = "token-1"


class CheckOnly(unittest.TestCase):
    """`rondel -c` checks discovery settings without contacting the source."""

    def test_check_contacts_no_source(self):
        listener, port = would_see_a_connection()
        workdir = tempfile.mkdtemp(prefix="rondel-it-k8s-check-")
        good = os.path.join(workdir, "good.yaml")
        with open(good, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n    discovery:\n"
                    f"      kubernetes: {{ service: cache, port: http, server: http://127.0.0.1:{port} }}\n"
                    "  - name: q\n"
                    f"    discovery: {{ etcd: {{ endpoints: [http://127.0.0.1:{port}], prefix: /q/ }} }}\n")
        p = subprocess.run([RONDEL_BIN, "-c", "-f", good], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "OK"), p.stderr)
        with self.assertRaises(socket.timeout):
            listener.accept()
        listener.close()
        bad = os.path.join(workdir, "bad.yaml")
        with open(bad, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n"
                    "    discovery: { kubernetes: { service: Cache, port: http } }\n")
        p = subprocess.run([RONDEL_BIN, "-c", "-f", bad], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"{bad}:5:41: 'service' must be a Service name", p.stderr)
        # Files a start would read are read (CA bundle, token): each problem as FILE: reason.
        files = os.path.join(workdir, "files.yaml")
        missing = os.path.join(workdir, "missing")
        with open(files, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                    "pools:\n  - name: p\n    discovery:\n"
                    f"      kubernetes: {{ service: c, port: http, server: https://127.0.0.1:{port}, "
                    f"ca: {missing}/ca.pem, token_file: {missing}/token }}\n")
        p = subprocess.run([RONDEL_BIN, "-c", "-f", files], capture_output=True, text=True,
                           timeout=10)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr.splitlines(), [
            f"pool p discovery: {missing}/ca.pem: cannot open: No such file or directory",
            f"pool p discovery: {missing}/token: cannot read the token file: No such file or "
            "directory"])


class K8sOverTls(unittest.TestCase):
    """An https API server: its CA verifies (the watch streams over TLS); another CA does not,
    and the pool stays as it was (empty at start) with the reason logged."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="rondel-it-k8s-tls-")
        self.certs = Certs()
        cert, key = self.certs.leaf("api", ["kubernetes.default.svc"], ips=["127.0.0.1"])
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.api = FakeApiServer(0, "t", tls=ctx)
        self.backend = Backend("kt")
        self.api.set_slice("cache-tls", [endpoint("127.0.0.1", "cache-0")],
                           port=self.backend.port)
        with open(os.path.join(self.dir, "token"), "w") as f:
            f.write("t\n")

    def tearDown(self):
        self.api.stop()
        self.backend.stop()

    def config(self, ca):
        return ("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    discovery:\n"
                f"      kubernetes: {{ service: {SERVICE}, namespace: {NS}, port: http, "
                f"server: https://127.0.0.1:{self.api.port}, "
                f"token_file: {os.path.join(self.dir, 'token')}, ca: {ca} }}\n"
                "      retry: 200ms\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")

    def test_https_with_the_right_ca_lists_and_watches(self):
        r = Rondel(self.config(self.certs.ca), workdir=self.dir)
        try:
            ids = lambda: [b["id"] for b in r.pools()["pools"][0]["backends"]]  # noqa: E731
            self.assertEqual(ids(), ["cache-0"])
            self.assertEqual(http_get(r.port, "/x")[0], 200)
            wait_until(lambda: self.api.watching() == 1, timeout=5, what="a watch over TLS")
            self.api.set_slice("cache-tls", [endpoint("127.0.0.1", "cache-9")],
                               port=self.backend.port)
            wait_until(lambda: ids() == ["cache-9"], timeout=5, interval=0.02,
                       what="a watch event over TLS")
        finally:
            self.assertEqual(r.stop(), 0)

    def test_another_ca_is_refused_and_logged(self):
        other = Certs()
        r = Rondel(self.config(other.ca), workdir=self.dir)
        try:
            r.out.wait_for(r"warn discovery_failed pool=p reason=connect error=\"kubernetes:"
                           r"shop/cache: https://127\.0\.0\.1:\d+: list: tls: verify",
                           timeout=5)
            self.assertEqual(r.pools()["pools"][0]["backends"], [])
            self.assertEqual(http_get(r.port, "/x")[0], 503)
        finally:
            self.assertEqual(r.stop(), 0)


if __name__ == "__main__":
    main()
