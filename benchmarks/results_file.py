"""The benchmarks' one way to write their JSON: a temporary file beside the target, then a rename, so a
run killed mid-write never leaves a half-written result (nor replaces a good one)."""

from __future__ import annotations

import json
import os
import tempfile


def write_json(path: str, doc: dict, default=None) -> None:
    """``doc`` as indented JSON at ``path`` (folders created), through a temporary file and a rename;
    ``default`` as in :func:`json.dump` (e.g. ``float`` for NumPy scalars)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, default=default)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
