#!/usr/bin/env python3
"""Checks every #include of rondel's C and C++ files against the module graph declared in CMake.

The graph comes from build/module_graph.txt, which the top-level CMakeLists.txt writes from the
rondel_module() declarations and from every executable of the build (rondel_write_module_graph).

- A module's files are src/<module>/** and include/rondel/<module>/** (found here, so new files
  need no edit). They may include rondel/<m>/... only for m the module itself or a module it
  declares.
- A program's files (tools, tests) are its sources and the local headers they include. They may
  include the headers of the modules the program links and of the modules those declare; a
  module's internal headers (src/<m>/*.h, for white-box tests) count as module m.
- A third-party header (LIBRARY_HEADERS) may be included only where its library is linked: by
  the module itself (DEPS or PRIVATE_DEPS), or publicly (DEPS) by a module it may include; for a
  program, by the program or publicly by one of its modules. So yaml-cpp stays in config,
  prometheus-cpp in server, llhttp in http (and the test backend, which links it).
- A C or C++ file under src/, include/ or tools/ that belongs to no module or program (say, one
  left out of its CMakeLists.txt) may not include rondel headers at all.

Exit status 1 lists every violation as FILE:LINE: what crosses which edge. `--self-test` first
runs the checker on a small made-up tree with known violations, so this test is known to fail
when it should.
"""
import argparse
import os
import re
import sys
import tempfile

INCLUDE_RX = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
RONDEL_RX = re.compile(r"^rondel/([A-Za-z0-9_]+)/")
CODE_EXT = (".h", ".hpp", ".c", ".cc", ".cpp")

# Which library a third-party header belongs to: CMake library name -> header names or, ending
# in '/' or '_', prefixes. Headers of libraries not listed here are not checked.
LIBRARY_HEADERS = {
    "PkgConfig::LIBUV": ("uv.h", "uv/"),
    "PkgConfig::XXHASH": ("xxhash.h",),
    "PkgConfig::CARES": ("ares.h", "ares_"),
    "llhttp_strict": ("llhttp.h",),
    "PkgConfig::OPENSSL": ("openssl/",),
    "yaml-cpp": ("yaml-cpp/",),
    "prometheus-cpp::core": ("prometheus/",),
    "Boost::json": ("boost/json.hpp", "boost/json/"),
    "benchmark::benchmark": ("benchmark/",),
    "doctest::doctest": ("doctest/",),
}


def library_of(name):
    for lib, patterns in LIBRARY_HEADERS.items():
        for p in patterns:
            if name == p or (p.endswith(("/", "_")) and name.startswith(p)):
                return lib
    return None


def read_graph(path):
    """({module: set(deps)}, {module: (public libs, private libs)}, [program dicts])."""
    modules, libs, programs = {}, {}, []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if not parts or not parts[0]:
                continue
            fields = {}
            for p in parts[2:]:
                k, _, v = p.partition("=")
                fields[k] = [x for x in v.split(",") if x]
            if parts[0] == "module":
                modules[parts[1]] = set(fields.get("deps", []))
                libs[parts[1]] = (set(fields.get("libs", [])), set(fields.get("private_libs", [])))
            elif parts[0] == "program":
                fields["name"] = parts[1]
                fields["dir"] = fields["dir"][0] if fields.get("dir") else ""
                programs.append(fields)
    return modules, libs, programs


def includes(path):
    """[(line number, '<' or '"', included name)] of a file."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE_RX.match(line)
            if m:
                out.append((n, m.group(1), m.group(2)))
    return out


def code_files(root):
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            if name.endswith(CODE_EXT):
                yield os.path.join(dirpath, name)


class Checker:
    def __init__(self, source, modules, programs, libs=None):
        self.source = os.path.realpath(source)
        self.modules = modules
        self.libs = libs or {}
        self.programs = programs
        self.errors = []
        self.owned = set()

    def rel(self, path):
        return os.path.relpath(path, self.source)

    def module_of_file(self, path):
        """The module whose directory holds path (src/<m>/ or include/rondel/<m>/), or None."""
        parts = self.rel(path).split(os.sep)
        if len(parts) >= 2 and parts[0] == "src" and parts[1] in self.modules:
            return parts[1]
        if len(parts) >= 3 and parts[:2] == ["include", "rondel"] and parts[2] in self.modules:
            return parts[2]
        return None

    def public_libs(self, module):
        return self.libs.get(module, (set(), set()))[0]

    def check_edge(self, path, line, name, owner, allowed, allowed_libs):
        m = RONDEL_RX.match(name)
        if not m:
            lib = library_of(name)
            if lib is not None and lib not in allowed_libs:
                self.errors.append(f"{self.rel(path)}:{line}: includes {name} of {lib}, which "
                                   f"{owner} does not link")
            return
        target = m.group(1)
        if target not in self.modules:
            self.errors.append(f"{self.rel(path)}:{line}: includes {name}, but rondel_{target} "
                               f"is not a declared module")
        elif target not in allowed:
            self.errors.append(f"{self.rel(path)}:{line}: includes {name}: {owner} does not "
                               f"declare rondel_{target} (it may include: "
                               f"{', '.join(sorted(allowed)) or 'nothing'})")

    def check_modules(self):
        for m, deps in sorted(self.modules.items()):
            allowed = {m} | deps
            own = self.libs.get(m, (set(), set()))
            allowed_libs = own[0] | own[1]
            for d in deps:
                allowed_libs |= self.public_libs(d)
            roots = [os.path.join(self.source, "src", m),
                     os.path.join(self.source, "include", "rondel", m)]
            for root in roots:
                for path in code_files(root):
                    self.owned.add(os.path.realpath(path))
                    for line, _, name in includes(path):
                        self.check_edge(path, line, name, f"module rondel_{m}", allowed,
                                        allowed_libs)
                        local = os.path.join(os.path.dirname(path), name)
                        if not RONDEL_RX.match(name) and os.path.exists(local):
                            other = self.module_of_file(os.path.realpath(local))
                            if other not in (None, m) and other not in allowed:
                                self.errors.append(
                                    f"{self.rel(path)}:{line}: includes {name}, a file of "
                                    f"rondel_{other}, which rondel_{m} does not declare")

    def check_programs(self):
        for p in self.programs:
            linked = {l[len("rondel_"):] for l in p.get("links", []) if l.startswith("rondel_")}
            allowed = set()
            for m in linked:
                if m in self.modules:
                    allowed |= {m} | self.modules[m]
            allowed_libs = set(p.get("links", []))
            for m in allowed:
                allowed_libs |= self.public_libs(m)
            dirs = [os.path.realpath(d) for d in p.get("includes", [])
                    if os.path.realpath(d).startswith(self.source + os.sep)]
            todo = []
            for s in p.get("sources", []):
                path = os.path.realpath(s if os.path.isabs(s) else os.path.join(p["dir"], s))
                if path.startswith(self.source + os.sep) and path.endswith(CODE_EXT):
                    todo.append(path)
            seen = set()
            while todo:
                path = todo.pop()
                if path in seen or not os.path.exists(path):
                    continue
                seen.add(path)
                if self.module_of_file(path) is None:
                    self.owned.add(path)
                for line, kind, name in includes(path):
                    self.check_edge(path, line, name, f"program {p['name']}", allowed,
                                    allowed_libs)
                    if RONDEL_RX.match(name):
                        continue
                    bases = ([os.path.dirname(path)] if kind == '"' else []) + dirs
                    for base in bases:
                        local = os.path.realpath(os.path.join(base, name))
                        if not os.path.exists(local):
                            continue
                        other = self.module_of_file(local)
                        if other is not None and other not in allowed:
                            self.errors.append(
                                f"{self.rel(path)}:{line}: includes {name}, a file of "
                                f"rondel_{other}, which program {p['name']} does not link")
                        elif other is None:
                            todo.append(local)
                        break

    def check_unowned(self):
        for top in ("src", "include", "tools"):
            for path in code_files(os.path.join(self.source, top)):
                real = os.path.realpath(path)
                if real in self.owned or self.module_of_file(real) is not None:
                    continue
                for line, _, name in includes(path):
                    if RONDEL_RX.match(name):
                        self.errors.append(f"{self.rel(path)}:{line}: includes {name}, but the "
                                           f"file belongs to no module or program")

    def run(self):
        self.check_modules()
        self.check_programs()
        self.check_unowned()
        return self.errors


def self_test():
    """The checker on a made-up tree: a -> nothing, b -> a; the violations must be found."""
    with tempfile.TemporaryDirectory() as root:
        files = {
            "include/rondel/a/a.h": '#include <string>\n#include <uv.h>\n',  # a links uv
            "include/rondel/b/b.h": '#include "rondel/a/a.h"\n',
            "src/a/a.cpp": '#include "rondel/a/a.h"\n#include "rondel/b/b.h"\n',  # a -> b: bad
            "src/b/b.cpp": '#include "rondel/b/b.h"\n#include "rondel/zz/z.h"\n'  # no module zz
                           '#include <uv.h>\n#include <yaml-cpp/yaml.h>\n',  # yaml: a's, private
            "tools/p/p.cpp": '#include "rondel/a/a.h"\n#include "local.h"\n',  # via b: fine
            "tools/p/local.h": '#include "rondel/b/b.h"\n',
            "tools/q/q.cpp": '#include "rondel/b/b.h"\n',  # q links only a: bad
            "tools/r/r.cpp": '#include "rondel/a/a.h"\n',  # in no program: unchecked
        }
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)
        programs = [
            {"name": "p", "dir": os.path.join(root, "tools/p"), "links": ["rondel_b"],
             "sources": ["p.cpp"], "includes": []},
            {"name": "q", "dir": os.path.join(root, "tools/q"), "links": ["rondel_a"],
             "sources": ["q.cpp"], "includes": []},
        ]
        libs = {"a": ({"PkgConfig::LIBUV"}, {"yaml-cpp"}), "b": (set(), set())}
        errors = Checker(root, {"a": set(), "b": {"a"}}, programs, libs).run()
        expected = ["src/a/a.cpp:2:", "src/b/b.cpp:2:", "src/b/b.cpp:4:", "tools/q/q.cpp:1:",
                    "tools/r/r.cpp:1:"]
        found = sorted(e.split(" ")[0] for e in errors)
        if found != sorted(expected):
            print("self-test FAILED: expected violations at", expected, "got:")
            print("\n".join(errors))
            return False
    print("self-test: the made-up violations were all found")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True, help="build/module_graph.txt")
    ap.add_argument("--source", required=True, help="the source tree")
    ap.add_argument("--no-self-test", action="store_true")
    args = ap.parse_args()
    if not args.no_self_test and not self_test():
        return 1
    modules, libs, programs = read_graph(args.graph)
    errors = Checker(args.source, modules, programs, libs).run()
    for m, deps in sorted(modules.items()):
        print(f"rondel_{m} -> {', '.join('rondel_' + d for d in sorted(deps)) or '(none)'}")
    print(f"{len(programs)} programs checked")
    if errors:
        print(f"{len(errors)} include(s) cross an undeclared edge:")
        print("\n".join(errors))
        return 1
    print("every #include follows the declared module graph")
    return 0


if __name__ == "__main__":
    sys.exit(main())
