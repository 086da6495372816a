"""The test backend's --ledger file: one line per request, "REQUEST_ID METHOD TARGET BYTES"
("-" when the request had no X-Request-Id)."""

import os
from collections import Counter


def read_ledger(path):
    """[(request_id, method, target, body_bytes)] from a test backend's --ledger file; [] when
    the file does not exist (yet)."""
    if not os.path.exists(path):
        return []
    out = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 4:
                out.append((parts[0], parts[1], parts[2], int(parts[3])))
    return out


def target_counts(path):
    """Counter(target -> requests) of one ledger file."""
    return Counter(target for _, _, target, _ in read_ledger(path))
