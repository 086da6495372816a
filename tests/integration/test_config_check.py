"""`rondel -c -f FILE` exit codes and FILE:LINE:COL output, and start-up with a bad file.

Configuration and lifecycle issue: -c exits 0 with OK for a valid file, 1 with every error for a
broken one; a bad file at start-up exits 2 without binding anything.
"""
import os
import re
import subprocess
import tempfile
import unittest

from harness import RONDEL_BIN, SOURCE_DIR, main

EXAMPLE = os.path.join(SOURCE_DIR, "conf", "rondel.yaml")
BROKEN_DIR = os.path.join(SOURCE_DIR, "tests", "unit", "config", "broken")
ERROR_LINE = re.compile(r"^(.+):(\d+):(\d+): (.+)$")


def run(*args, timeout=10):
    p = subprocess.run([RONDEL_BIN, *args], capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


class ConfigCheck(unittest.TestCase):
    def test_example_is_ok(self):
        rc, out, err = run("-c", "-f", EXAMPLE)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "OK")
        self.assertEqual(err, "")

    def test_broken_file_lists_every_error_with_position(self):
        path = os.path.join(BROKEN_DIR, "dns_errors.yaml")
        rc, out, err = run("-c", "-f", path)
        self.assertEqual(rc, 1)
        self.assertEqual(out, "")
        lines = err.strip().splitlines()
        errors = [l for l in lines if ERROR_LINE.match(l)]
        self.assertEqual(len(errors), 9, err)
        for l in errors:
            m = ERROR_LINE.match(l)
            self.assertEqual(m.group(1), path)
            self.assertGreater(int(m.group(2)), 0)
            self.assertGreater(int(m.group(3)), 0)
        self.assertIn(f"{path}:3:8: 'ttl' must be at least 100ms, got 50ms", lines)
        self.assertTrue(lines[-1].startswith("rondel: 9 error(s)"), lines[-1])

    def test_every_broken_file_fails_the_check(self):
        for name in sorted(os.listdir(BROKEN_DIR)):
            with self.subTest(file=name):
                rc, _, err = run("-c", "-f", os.path.join(BROKEN_DIR, name))
                self.assertEqual(rc, 1, err)
                self.assertTrue(any(ERROR_LINE.match(l) for l in err.splitlines()), err)

    def test_missing_file_is_an_error_at_0_0(self):
        path = os.path.join(tempfile.mkdtemp(prefix="rondel-it-"), "absent.yaml")
        rc, _, err = run("-c", "-f", path)
        self.assertEqual(rc, 1)
        self.assertIn(f"{path}:0:0: cannot read file", err)

    def test_bad_file_at_start_up_exits_2(self):
        d = tempfile.mkdtemp(prefix="rondel-it-")
        path = os.path.join(d, "bad.yaml")
        with open(path, "w") as f:
            f.write("listeners:\n  - { name: web, bind: 127.0.0.1:0, pool: nope }\n"
                    "pools:\n  - name: p\n    backends: [{ address: 127.0.0.1:9 }]\n")
        rc, _, err = run("-f", path)
        self.assertEqual(rc, 2)
        self.assertIn(f"{path}:2:43: listener 'web' uses unknown pool 'nope'", err)

    def test_usage_errors_exit_2(self):
        rc, _, _ = run("--no-such-flag")
        self.assertEqual(rc, 2)
        rc, _, _ = run("-c")
        self.assertEqual(rc, 2)


if __name__ == "__main__":
    main()
