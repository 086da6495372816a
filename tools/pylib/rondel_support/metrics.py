"""Prometheus text exposition: parse a scrape of rondel's /metrics, sum samples by labels."""

import re

from .httpio import http_get

_SAMPLE_RX = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$')
_LABEL_RX = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """(samples, types) of a Prometheus text exposition: samples is a list of
    (name, {label: value}, float); types maps each family name to its # TYPE."""
    samples, types = [], {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(None, 3)
            types[name] = kind.strip()
            continue
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE_RX.match(line)
        if not m:
            raise AssertionError(f"unparsable metrics line: {line!r}")
        labels = {k: re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), v)
                  for k, v in _LABEL_RX.findall(m.group(3) or "")}
        samples.append((m.group(1), labels, float(m.group(4))))
    return samples, types


def metric_sum(samples, name, **labels):
    """Sum of the samples named `name` whose labels include `labels`."""
    return sum(v for n, l, v in samples
               if n == name and all(l.get(k) == str(want) for k, want in labels.items()))


def scrape(admin_port):
    """(text, samples, types) of one GET /metrics."""
    status, _, body = http_get(admin_port, "/metrics")
    if status != 200:
        raise AssertionError(f"/metrics answered {status}")
    text = body.decode("utf-8")
    samples, types = parse_metrics(text)
    return text, samples, types
