"""sha256 of every file of a shard store, to show that two stores hold the same bytes.

    python benchmarks/store_digest.py STORE > digests.txt      # then: diff before.txt after.txt

One line per file (``sha256  relative/path``), sorted by path.  The JSON files (``manifest.json``, each
shard's ``shard.json``) are hashed with the fields that record times removed (``created``, ``started``,
``construction_time``, ``read_s``) and their keys sorted; every other file is hashed as it is on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

TIME_KEYS = frozenset({"created", "started", "construction_time", "read_s"})


def _without_times(v):
    if isinstance(v, dict):
        return {k: _without_times(x) for k, x in v.items() if k not in TIME_KEYS}
    if isinstance(v, list):
        return [_without_times(x) for x in v]
    return v


def digests(root: str) -> list[tuple[str, str]]:
    """``(sha256, path)`` of every file under ``root`` (paths relative to it), sorted by path."""
    out = []
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                b = fh.read()
            rel = os.path.relpath(p, root)
            if f.endswith(".json"):
                b = json.dumps(_without_times(json.loads(b)), sort_keys=True).encode()
                rel += " (json, time fields removed)"
            out.append((hashlib.sha256(b).hexdigest(), rel))
    return sorted(out, key=lambda t: t[1])


def main() -> None:
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        raise SystemExit("usage: python benchmarks/store_digest.py STORE_DIRECTORY")
    for h, rel in digests(sys.argv[1]):
        print(h, rel)


if __name__ == "__main__":
    main()
