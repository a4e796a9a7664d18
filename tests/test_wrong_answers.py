"""Issue 14, deliverable 5: inputs and commands that gave wrong answers or lost/left files.

CLI cases run the command as a user types it (a subprocess) and check the exit status, a one-line
``breadth: error:`` message naming what is wrong, no traceback, and the files before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest


def _cli(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _one_error_line(r, needle: str, code: int = 1) -> str:
    """The run failed with ``code`` and exactly one ``breadth: error:`` line containing ``needle``."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and "warn" not in ln.lower()
             and "Perhaps you already have a cluster" not in ln and "Hosting the HTTP server" not in ln]
    assert r.returncode == code, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("breadth: error: "), r.stderr[-3000:]
    assert needle in lines[0], lines[0]
    return lines[0]


def _listing(path) -> dict:
    """Every file under ``path`` with its bytes: what a failed command must leave unchanged."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
    return out


# -- 2. uint64 ids through `breadth bfs --out` -------------------------------------------------------
def test_bfs_results_with_uint64_ids_are_uint64_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = 2**63
    src = np.array([big + 1, big + 2, big + 3, 5], np.uint64)
    dst = np.array([big + 2, big + 3, 2**64 - 1, big + 1], np.uint64)
    pq.write_table(pa.table({"src": pa.array(src, pa.uint64()), "dst": pa.array(dst, pa.uint64())}),
                   tmp_path / "e.parquet")
    store, out = tmp_path / "u.store", tmp_path / "levels.parquet"
    r = _cli("ingest", tmp_path / "e.parquet", "--out", store)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli("bfs", store, "--root", big + 1, "--out", out)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    t = pq.read_table(out)
    assert [t.schema.field(c).type for c in ("root", "vertex", "parent")] == [pa.uint64()] * 3
    got = dict(zip(t.column("vertex").to_pylist(), zip(t.column("parent").to_pylist(), t.column("level").to_pylist())))
    assert got == {big + 1: (big + 1, 0), big + 2: (big + 1, 1), 5: (big + 1, 1), big + 3: (big + 2, 2),
                   2**64 - 1: (big + 3, 3)}
    assert set(t.column("root").to_pylist()) == {big + 1}
    assert sorted(os.listdir(tmp_path)) == ["e.parquet", "levels.parquet", "u.store"]  # no temporary left
