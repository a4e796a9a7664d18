"""What searching a stored graph holds: a loaded shard costs its own bytes once, and a results dataset is
written a slice of each rank at a time (the real-datasets issue's 2^30-tuple search within 12 GiB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture(scope="module")
def kron_store(tmp_path_factory, lclient):
    """A stored Kronecker scale-18 graph in 2 shards (about 2 x 16 MiB of columns)."""
    from breadth.io.shard_store import write_store
    from breadth.pipeline import kronecker, prepare

    path = str(tmp_path_factory.mktemp("mem") / "k18.store")
    g = prepare(kronecker(18, 16, seed=3), lclient, nparts=2)
    write_store(g, path, parameters={"test": "memory"})
    g.release()
    return path


_MEASURE = r"""
import json, sys
import numpy as np
from breadth.bfs.shard import Shard  # imported before the measurement: the load's own bytes only
from breadth.io.shard_store import _load_shard, read_manifest

def status():
    with open("/proc/self/status") as f:
        return {k: int(v.split()[0]) * 1024 for k, _, v in (l.partition(":") for l in f) if k in ("VmRSS", "VmHWM")}

store, nparts = sys.argv[1], int(sys.argv[2])
m = read_manifest(store)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the peak (VmHWM) starts again from the RSS now
before = status()["VmRSS"]
s = _load_shard(store, m, 0, nparts, True)
print(json.dumps({"grew": status()["VmHWM"] - before, "nbytes": s.nbytes(),
                  "columns": int(s.columns.nbytes), "memmap": isinstance(s.columns, np.memmap),
                  "meta": sorted(s.meta)}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux /proc peak-RSS reset")
@pytest.mark.parametrize("nparts", [2, 1])
def test_a_loaded_shard_holds_its_bytes_once(kron_store, nparts):
    """The peak RSS of loading a shard (stored as is: 2 ranks; re-cut from both stored shards: 1) is the
    shard's bytes, not the shard's bytes plus the mapped files it was copied from."""
    r = subprocess.run([sys.executable, "-c", _MEASURE, kron_store, str(nparts)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["columns"] > 12 << 20  # large enough that a second copy of the columns would show
    # an array of its own, and no second (reordered) column array: load_store orders the rows after this
    assert not got["memmap"] and "bu_columns" not in got["meta"]
    assert got["grew"] <= got["nbytes"] + (6 << 20), got


def test_damage_is_found_while_a_whole_file_is_read(kron_store, tmp_path, lclient):
    """Shards loaded as stored are hashed as they are read (one pass): a flipped byte is still refused."""
    import shutil

    from breadth.io import CorruptStoreError
    from breadth.io.shard_store import load_store

    bad = tmp_path / "bad.store"
    shutil.copytree(kron_store, bad)
    for name in ("columns.npy", "offsets.npy"):
        f = bad / "shard-00000" / name
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x01
        f.write_bytes(bytes(data))
        with pytest.raises(CorruptStoreError, match=rf"shard-00000/{name}: sha256 checksum mismatch"):
            load_store(str(bad), lclient, nparts=2)
        data[len(data) // 2] ^= 0x01
        f.write_bytes(bytes(data))
    g = load_store(str(bad), lclient, nparts=2)  # repaired: loads again, and as the original does
    ref = load_store(kron_store, lclient, nparts=1)
    a, b = lclient.gather(g.shards), lclient.gather(ref.shards)[0]
    np.testing.assert_array_equal(np.concatenate([a[0].columns, a[1].columns]), b.columns)
    np.testing.assert_array_equal(np.concatenate([a[0].offsets[:-1], a[1].offsets + a[0].offsets[-1]]), b.offsets)
    g.release()
    ref.release()


def test_results_dataset_in_slices_equals_the_frames(tmp_path, lclient, monkeypatch):
    """With slices of 64 vertices, each rank writes one file per slice, and the dataset holds exactly the
    rows of the results' frames (sparse 64-bit ids: every slice's ids translated by the id map's parts)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from breadth.bfs import bfs, results
    from breadth.bfs.engine.search import write_results_dataset
    from breadth.pipeline import prepare, read_parquet

    rng = np.random.default_rng(7)
    ids = np.unique(rng.integers(0, np.iinfo(np.int64).max, size=700, dtype=np.int64))
    e = ids[rng.integers(0, ids.size, size=(2000, 2))]
    pq.write_table(pa.table({"src": e[:, 0], "dst": e[:, 1]}), tmp_path / "e.parquet")
    g = prepare(read_parquet(str(tmp_path / "e.parquet"), client=lclient), lclient)
    res = bfs(g, [e[0, 0], e[9, 1], e[0, 0]])
    want = pd.concat([r.to_pandas() for r in res], ignore_index=True)
    monkeypatch.setattr(results, "SLICE_VERTICES", 64)
    out = tmp_path / "res"
    rows = write_results_dataset(res, str(out))
    per_rank = [-(-n // 64) for n in res[0]._sizes()]
    assert len(os.listdir(out)) == len(res) * sum(per_rank) and len(per_rank) == 2
    assert results.is_results_dataset(str(out))
    got = pd.read_parquet(out)
    key = ["root", "vertex", "parent", "level"]
    assert rows == len(got) == len(want) > 2 * 64
    pd.testing.assert_frame_equal(got.sort_values(key).reset_index(drop=True),
                                  want.sort_values(key).reset_index(drop=True), check_dtype=True)
    g.release()
