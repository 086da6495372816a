"""The deployment files check out (deployment issue, part "running it where fleets run").

There is no Docker engine or Kubernetes cluster here, so each file is checked as far as this
machine can: the container config and the ConfigMap's config pass `rondel -c` and bind every
interface; the Dockerfile copies that config, checks it with `rondel -c` in its build stage, runs
as a non-root user and has a HEALTHCHECK on the admin /healthz; the Kubernetes manifests parse
(python yaml) and hold the Deployment's probes on the admin port, the Prometheus annotations, the
ConfigMap mounted as a directory (so config_watch sees updates), a headless Service and a
PodDisruptionBudget; the systemd unit passes `systemd-analyze verify`; the logrotate file passes
`logrotate -d`; `rondel -v`, `-V` and `--version` print the version.
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import RONDEL_BIN, SOURCE_DIR, main

try:
    import yaml
except ImportError:  # python3-yaml (scripts/setup-deps.sh test)
    yaml = None

CONF = os.path.join(SOURCE_DIR, "conf")


def check(path):
    """(exit code, stdout, stderr) of `rondel -c -f path`."""
    p = subprocess.run([RONDEL_BIN, "-c", "-f", path], capture_output=True, timeout=10)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


# A container's admin port must be reachable from outside it (HEALTHCHECK aside, Prometheus
# scrapes it), so these configurations bind it beyond loopback on purpose: `rondel -c` says so,
# and says nothing else.
BEYOND_LOOPBACK = re.compile(r"^rondel: warning: the admin API listens on 0\.0\.0\.0:\d+, "
                             r"beyond loopback: its reads .* need no token; .*$")


def assert_ok_with_bind_warning(test, path):
    rc, out, err = check(path)
    test.assertEqual((rc, out.strip()), (0, "OK"), err)
    test.assertEqual(len(err.splitlines()), 1, err)
    test.assertRegex(err.strip(), BEYOND_LOOPBACK)


def project_version():
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        return re.search(r"project\(rondel VERSION (\S+)", f.read()).group(1)


class Version(unittest.TestCase):
    def test_v_and_V_print_the_version(self):
        for flag in ("-v", "-V", "--version"):
            with self.subTest(flag=flag):
                p = subprocess.run([RONDEL_BIN, flag], capture_output=True, timeout=10)
                self.assertEqual(p.returncode, 0)
                self.assertEqual(p.stdout.decode(), f"rondel {project_version()}\n")


@unittest.skipIf(yaml is None, "python3-yaml is not installed")
class ContainerConfig(unittest.TestCase):
    path = os.path.join(CONF, "docker", "rondel.yaml")

    def test_passes_check_and_binds_every_interface(self):
        assert_ok_with_bind_warning(self, self.path)
        with open(self.path) as f:
            cfg = yaml.safe_load(f)
        self.assertTrue(all(l["bind"].startswith("0.0.0.0:") for l in cfg["listeners"]))
        self.assertEqual(cfg["listeners"][0]["bind"], "0.0.0.0:8080")
        self.assertTrue(cfg["admin"]["bind"].startswith("0.0.0.0:"))

    def test_dockerfile(self):
        with open(os.path.join(SOURCE_DIR, "Dockerfile")) as f:
            text = f.read()
        stages = re.split(r"^FROM ", text, flags=re.M)[1:]
        self.assertEqual(len(stages), 2, "a build stage and a runtime stage")
        build, runtime = stages
        self.assertTrue(build.startswith("debian:bookworm AS build"))
        self.assertTrue(runtime.startswith("debian:bookworm-slim"))
        self.assertIn("scripts/setup-deps.sh build", build)
        self.assertIn("rondel -c -f conf/docker/rondel.yaml", build)
        self.assertIn("COPY conf/docker/rondel.yaml /etc/rondel/rondel.yaml", runtime)
        user = re.search(r"^USER (\S+)", runtime, re.M)
        self.assertTrue(user and not user.group(1).startswith(("root", "0:", "0\n")), user)
        self.assertNotEqual(user.group(1).split(":")[0], "0")
        with open(self.path) as f:
            admin_port = yaml.safe_load(f)["admin"]["bind"].rsplit(":", 1)[1]
        hc = re.search(r"^HEALTHCHECK .*\n?.*CMD (.*)$", runtime, re.M)
        self.assertTrue(hc, "no HEALTHCHECK")
        self.assertIn(f"http://127.0.0.1:{admin_port}/healthz", hc.group(1))
        self.assertIn("curl", runtime.split("HEALTHCHECK")[0])  # the client it runs is installed
        self.assertIn(f"EXPOSE 8080 {admin_port}", runtime)
        # Each file the Dockerfile copies from the source tree exists.
        for src in re.findall(r"^COPY (?!--from)(\S+) ", text, re.M):
            if src != ".":
                self.assertTrue(os.path.exists(os.path.join(SOURCE_DIR, src)), src)


@unittest.skipIf(yaml is None, "python3-yaml is not installed")
class Kubernetes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = []
        for path in sorted(glob.glob(os.path.join(CONF, "k8s", "*.yaml"))):
            with open(path) as f:
                cls.docs += [d for d in yaml.safe_load_all(f) if d]
        cls.by_kind = {}
        for d in cls.docs:
            cls.by_kind.setdefault(d["kind"], []).append(d)

    def test_every_document_has_the_basics(self):
        self.assertGreaterEqual(len(self.docs), 5)
        for d in self.docs:
            self.assertIn("apiVersion", d)
            self.assertIn("name", d["metadata"])

    def test_configmap_config_passes_check(self):
        (cm,) = self.by_kind["ConfigMap"]
        text = cm["data"]["rondel.yaml"]
        d = tempfile.mkdtemp(prefix="rondel-k8s-")
        path = os.path.join(d, "rondel.yaml")
        with open(path, "w") as f:
            f.write(text)
        assert_ok_with_bind_warning(self, path)
        cfg = yaml.safe_load(text)
        self.assertIn("config_watch", cfg)
        self.assertTrue(cfg["listeners"][0]["bind"].startswith("0.0.0.0:"))
        self.assertTrue(cfg["admin"]["bind"].startswith("0.0.0.0:"))
        shutil.rmtree(d)

    def test_deployment_probes_annotations_and_mount(self):
        (dep,) = self.by_kind["Deployment"]
        (cm,) = self.by_kind["ConfigMap"]
        cfg = yaml.safe_load(cm["data"]["rondel.yaml"])
        admin_port = int(cfg["admin"]["bind"].rsplit(":", 1)[1])
        web_port = int(cfg["listeners"][0]["bind"].rsplit(":", 1)[1])
        tpl = dep["spec"]["template"]
        ann = tpl["metadata"]["annotations"]
        self.assertEqual(ann["prometheus.io/scrape"], "true")
        self.assertEqual(int(ann["prometheus.io/port"]), admin_port)
        self.assertEqual(ann["prometheus.io/path"], "/metrics")
        (c,) = tpl["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"http": web_port, "admin": admin_port})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "admin"})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "admin"})
        self.assertTrue(tpl["spec"]["securityContext"]["runAsNonRoot"])
        (mount,) = c["volumeMounts"]
        self.assertNotIn("subPath", mount)  # a subPath mount never sees ConfigMap updates
        self.assertEqual(os.path.join(mount["mountPath"], "rondel.yaml"), c["args"][-1])
        (vol,) = tpl["spec"]["volumes"]
        self.assertEqual(vol["configMap"]["name"], cm["metadata"]["name"])
        # The grace period covers the drain.
        drain = int(str(cfg["drain_timeout"]).rstrip("s"))
        self.assertGreater(tpl["spec"]["terminationGracePeriodSeconds"], drain)

    def test_headless_backends_service_and_pdb(self):
        headless = [s for s in self.by_kind["Service"] if s["spec"].get("clusterIP") == "None"]
        self.assertEqual(len(headless), 1)
        svc = headless[0]
        (cm,) = self.by_kind["ConfigMap"]
        srv = yaml.safe_load(cm["data"]["rondel.yaml"])["pools"][0]["backends"][0]["srv"]
        port_name = svc["spec"]["ports"][0]["name"]
        self.assertTrue(srv.startswith(f"_{port_name}._tcp.{svc['metadata']['name']}."), srv)
        (pdb,) = self.by_kind["PodDisruptionBudget"]
        (dep,) = self.by_kind["Deployment"]
        self.assertEqual(pdb["spec"]["selector"]["matchLabels"],
                         dep["spec"]["selector"]["matchLabels"])


class Systemd(unittest.TestCase):
    unit = os.path.join(CONF, "systemd", "rondel.service")

    def read(self):
        with open(self.unit) as f:
            return f.read()

    def test_unit_shape(self):
        text = self.read()
        self.assertRegex(text, r"(?m)^Type=notify$")
        self.assertRegex(text, r"(?m)^ExecStartPre=\S+/rondel -c -f ")
        self.assertRegex(text, r"(?m)^ExecReload=/bin/kill -HUP \$MAINPID$")
        for opt in ("NoNewPrivileges=yes", "ProtectSystem=strict", "DynamicUser=yes"):
            self.assertIn(opt, text)

    @unittest.skipIf(shutil.which("systemd-analyze") is None, "systemd-analyze is not installed")
    def test_systemd_analyze_verify(self):
        # The unit names /usr/local/bin/rondel; verify a copy that names the binary under test.
        d = tempfile.mkdtemp(prefix="rondel-unit-")
        path = os.path.join(d, "rondel.service")
        with open(path, "w") as f:
            f.write(self.read().replace("/usr/local/bin/rondel", os.path.abspath(RONDEL_BIN)))
        p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, timeout=60)
        out = (p.stdout + p.stderr).decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertNotIn("rondel.service:", out)  # no warning about the unit itself
        shutil.rmtree(d)


class Logrotate(unittest.TestCase):
    @unittest.skipIf(shutil.which("logrotate") is None and not os.path.exists("/usr/sbin/logrotate"),
                     "logrotate is not installed (scripts/setup-deps.sh test)")
    def test_logrotate_debug_run_accepts_the_file(self):
        binary = shutil.which("logrotate") or "/usr/sbin/logrotate"
        d = tempfile.mkdtemp(prefix="rondel-logrotate-")
        with open(os.path.join(CONF, "logrotate", "rondel")) as f:
            text = f.read().replace("/var/log/rondel", d)
        conf = os.path.join(d, "rondel.conf")
        with open(conf, "w") as f:
            f.write(text)
        with open(os.path.join(d, "access.log"), "w") as f:
            f.write("x\n")
        p = subprocess.run([binary, "-d", "-s", os.path.join(d, "state"), conf],
                           capture_output=True, timeout=30)
        out = (p.stdout + p.stderr).decode()
        self.assertEqual(p.returncode, 0, out)
        self.assertNotRegex(out, r"(?i)error")
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
