"""Reload on configuration-file change (deployment issue, discovery part: `config_watch`).

With `config_watch:` rondel reloads by itself, exactly as on SIGHUP, when its file's bytes change:
after an atomic rename over the file (what editors and config tools do), and after a Kubernetes
ConfigMap update, where the file is a symlink through `..data`, a symlink to a timestamped
directory that kubelet swaps for a new one (then deletes the old). A broken file is refused and
the running configuration keeps serving; it is tried once, not again on later events with the
same bytes. `enabled: false` on a reload stops the watch.
"""
import os
import shutil
import tempfile
import unittest

from harness import Backend, Rondel, http_get, main, make_config

WATCH = {"config_watch": "{ debounce: 100ms }"}


def backend_ids(rondel):
    return sorted(b["id"] for b in rondel.pools()["pools"][0]["backends"])


class ConfigMapDir:
    """A directory laid out as kubelet mounts a ConfigMap: rondel.yaml -> ..data/rondel.yaml,
    ..data -> ..<version>/ ."""

    def __init__(self, text):
        self.dir = tempfile.mkdtemp(prefix="rondel-cm-")
        self.version = 0
        self.current = None
        self.update(text)
        os.symlink("..data/rondel.yaml", os.path.join(self.dir, "rondel.yaml"))
        self.path = os.path.join(self.dir, "rondel.yaml")

    def update(self, text):
        """kubelet's AtomicWriter: a new versioned directory, a ..data_tmp symlink to it renamed
        over ..data, then the old directory removed."""
        self.version += 1
        name = f"..2026_12_01_00_00_{self.version:02d}.{1000 + self.version}"
        os.mkdir(os.path.join(self.dir, name))
        with open(os.path.join(self.dir, name, "rondel.yaml"), "w") as f:
            f.write(text)
        tmp = os.path.join(self.dir, "..data_tmp")
        os.symlink(name, tmp)
        os.rename(tmp, os.path.join(self.dir, "..data"))
        if self.current is not None:
            shutil.rmtree(os.path.join(self.dir, self.current))
        self.current = name


class ConfigWatch(unittest.TestCase):
    def setUp(self):
        self.b1 = Backend("b1")
        self.b2 = Backend("b2")

    def test_rename_over_the_file_reloads_and_a_broken_file_is_refused_once(self):
        rondel = Rondel(make_config([self.b1], top=WATCH))
        rondel.out.wait_for(r"config_watch_started")
        start = rondel.out.count()
        rondel.write_config(make_config([self.b1, self.b2], top=WATCH))
        rondel.out.wait_for(r"\breload_ok\b", start=start)
        self.assertEqual(backend_ids(rondel), sorted([self.b1.address, self.b2.address]))
        self.assertEqual(len(rondel.lines(r"\bconfig_changed\b")), 1)

        start = rondel.out.count()
        rondel.write_config("pools: [\n")
        rondel.out.wait_for(r"\breload_failed\b", start=start)
        self.assertEqual(http_get(rondel.port, "/k")[0], 200)
        self.assertEqual(len(backend_ids(rondel)), 2)
        # The same broken bytes again (a new inode, events in the directory): not reloaded.
        # Then a good file: reloaded. Between the two outcomes there is exactly one new reload.
        rondel.write_config("pools: [\n")
        start = rondel.out.count()
        rondel.write_config(make_config([self.b2], top=WATCH))
        rondel.out.wait_for(r"\breload_ok\b", start=start)
        self.assertEqual(backend_ids(rondel), [self.b2.address])
        self.assertEqual(len(rondel.lines(r"\breload_started\b")), 3, rondel.lines(r"reload"))

        # SIGHUP still reloads; a reload with enabled: false stops the watch.
        rondel.reload(make_config([self.b1], top={"config_watch": "{ enabled: false }"}))
        rondel.out.wait_for(r"config_watch_stopped")
        self.assertEqual(rondel.stop(), 0)

    def test_configmap_symlink_swap_reloads(self):
        cm = ConfigMapDir(make_config([self.b1], top=WATCH))
        # Rondel writes its own file in workdir; the later -f (the ConfigMap path) is the one used.
        rondel = Rondel(make_config([self.b1]), args=("-f", cm.path))
        rondel.out.wait_for(r"config_watch_started dir=" + cm.dir)
        for n, backends in enumerate([[self.b1, self.b2], [self.b2]], start=1):
            start = rondel.out.count()
            cm.update(make_config(backends, top=WATCH))
            rondel.out.wait_for(r"\breload_ok\b", start=start)
            self.assertEqual(backend_ids(rondel), sorted(b.address for b in backends))
            self.assertEqual(len(rondel.lines(r"\breload_ok\b")), n)
            self.assertEqual(http_get(rondel.port, "/k")[0], 200)
        self.assertEqual(rondel.stop(), 0)


if __name__ == "__main__":
    main()
