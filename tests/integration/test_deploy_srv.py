"""DNS SRV discovery (deployment issue, discovery part), with a real dnsmasq as in
test_dns_discovery.py.

A backend entry `srv: _http._tcp.caches.test` makes every target of the lowest-priority SRV records
a backend: id TARGET:PORT, the target's address, the record's port and weight (a Kubernetes
headless Service publishes named ports this way). A higher-priority-value record is a fallback and
not used. When a target's address changes (a pod restarted) its id stays, so its keys stay on it.
Config errors: `srv` next to `address`/`weight`/`id`, or not a DNS name.
"""
import os
import subprocess
import tempfile
import unittest

from harness import RONDEL_BIN, Backend, Rondel, http_get, main, wait_until
from test_dns_discovery import DNSMASQ, Dnsmasq, backends_on_one_port

SRV = "_http._tcp.caches.test"


def hosts(t1_ip):
    return [f"{t1_ip} t1.test", "127.0.0.3 t2.test", "127.0.0.4 t3.test", "127.0.0.9 caches.test"]


@unittest.skipIf(DNSMASQ is None, "dnsmasq is not installed (Debian package dnsmasq-base)")
class SrvDiscovery(unittest.TestCase):
    def test_srv_targets_ports_weights_and_a_moved_target(self):
        moved = backends_on_one_port(["b1", "b1moved"], ["127.0.0.2", "127.0.0.5"])
        b1, b1moved = moved["127.0.0.2"], moved["127.0.0.5"]
        b2 = Backend("b2", host="127.0.0.3")
        b3 = Backend("b3", host="127.0.0.4")
        srv = [f"--srv-host={SRV},t1.test,{b1.port},0,30",
               f"--srv-host={SRV},t2.test,{b2.port},0,10",
               f"--srv-host={SRV},t3.test,{b3.port},10,50"]  # priority 10: a fallback
        dns = Dnsmasq(tempfile.mkdtemp(prefix="rondel-srv-"), [], extra=srv,
                      lines=hosts("127.0.0.2"))
        text = (f"dns: {{ nameservers: [127.0.0.1:{dns.port}], ttl: 1s }}\n"
                "listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: p }\n"
                "pools:\n  - name: p\n"
                "    passive_health: { consecutive_failures: 0 }\n"
                f"    backends: [{{ srv: {SRV} }}]\n"
                "admin: { bind: 127.0.0.1:0 }\nlog: { level: info }\n")
        rondel = Rondel(text)

        def backends():
            return {b["id"]: (b["address"], b["weight"])
                    for b in rondel.pools()["pools"][0]["backends"]}

        self.assertEqual(backends(), {
            f"t1.test:{b1.port}": (f"127.0.0.2:{b1.port}", 30),
            f"t2.test:{b2.port}": (f"127.0.0.3:{b2.port}", 10)})
        seen = set()
        for i in range(60):
            status, headers, _ = http_get(rondel.port, f"/obj/{i}")
            self.assertEqual(status, 200)
            seen.add(headers["x-backend"])
        self.assertEqual(seen, {"b1", "b2"})
        keys = [f"/obj/{i}" for i in range(200)]
        owners = {k: rondel.route("p", k)["owner"] for k in keys}

        # t1 moves to another address (same port): same id, so no key moves; traffic follows.
        dns.change_lines(hosts("127.0.0.5"))
        t1 = f"t1.test:{b1.port}"
        wait_until(lambda: backends().get(t1, ("",))[0] == f"127.0.0.5:{b1.port}", timeout=10,
                   interval=0.05, what="t1's new address")
        self.assertEqual({k: rondel.route("p", k)["owner"] for k in keys}, owners)
        on_t1 = [k for k in keys if owners[k] == t1][:10]
        self.assertTrue(on_t1)
        for k in on_t1:
            status, headers, _ = http_get(rondel.port, k)
            self.assertEqual(status, 200)
            self.assertEqual(headers["x-backend"], "b1moved")
        self.assertEqual(rondel.stop(), 0)
        dns.stop()

    def test_srv_config_errors(self):
        d = tempfile.mkdtemp(prefix="rondel-it-")
        path = os.path.join(d, "r.yaml")
        lines = ["listeners:", "  - { name: web, bind: 127.0.0.1:0, pool: p }",
                 "pools:", "  - name: p", "    backends:",
                 f"      - {{ srv: {SRV} }}",
                 f"      - {{ srv: {SRV}, weight: 3 }}",
                 "      - { srv: 'not a name' }",
                 f"      - {{ srv: {SRV}. }}"]
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, timeout=10)
        err = p.stderr.decode()
        self.assertEqual(p.returncode, 1, err)
        col = lines[6].index("weight") + 1
        self.assertIn(f"{path}:7:{col}: 'weight' cannot be set next to 'srv'", err)
        col = lines[7].index("'not") + 1
        self.assertIn(f"{path}:8:{col}: 'srv' must be a DNS name", err)
        # A trailing dot names the same SRV name.
        self.assertIn(f"{path}:9:", err)
        self.assertIn("duplicate SRV name '" + SRV + "' (first at line 6)", err)


if __name__ == "__main__":
    main()
