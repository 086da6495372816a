"""The rondel YAML config writer: one listener in front of one pool, admin and log sections,
extra top-level keys; and an atomic file write for reloads."""

import os


def _address_of(backend):
    """A backend entry as a dict: dicts as given, anything else by its `.address`."""
    return backend if isinstance(backend, dict) else {"address": backend.address}


def make_config(backends, pool=None, listener=None, admin=True, log=None, extra="",
                pool_name="p", listener_name="web", top=None, bind="127.0.0.1:0"):
    """YAML text for one listener (`bind`, default port 0) in front of one pool of `backends`.

    backends: objects with an `.address` ("host:port") or dicts {address, weight, id, ...}.
    pool / listener: dicts of extra keys, values written as-is (YAML flow text). admin: True for
    an admin listener on 127.0.0.1 port 0, or a dict of admin keys (bind defaults to that).
    log: dict of log keys (level defaults to info, which rondel needs to log its ports; strings
    are quoted). top: dict of top-level keys written first (e.g. workers). extra: text appended.
    """
    lines = [f"{k}: {v}" for k, v in (top or {}).items()]
    lines += ["listeners:", f"  - name: {listener_name}", f"    bind: {bind}",
              f"    pool: {pool_name}"]
    lines += [f"    {k}: {v}" for k, v in (listener or {}).items()]
    lines += ["pools:", f"  - name: {pool_name}"]
    lines += [f"    {k}: {v}" for k, v in (pool or {}).items()]
    lines.append("    backends:")
    for b in backends:
        fields = ", ".join(f"{k}: {v}" for k, v in _address_of(b).items())
        lines.append(f"      - {{ {fields} }}")
    if admin:
        keys = {"bind": "127.0.0.1:0", **(admin if isinstance(admin, dict) else {})}
        lines.append("admin:")
        lines += [f"  {k}: {v}" for k, v in keys.items()]
    log = dict(log or {})
    log.setdefault("level", "info")
    lines.append("log:")
    for k, v in log.items():
        lines.append(f"  {k}: \"{v}\"" if isinstance(v, str) else f"  {k}: {v}")
    return "\n".join(lines) + "\n" + extra


def write_file(path, text):
    """Writes `text` to `path` atomically (a temporary file renamed over it), so a reader (rondel
    on SIGHUP) never sees half a file. Returns path."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path
