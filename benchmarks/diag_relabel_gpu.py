"""Where the GPU relabeling's time goes, step by step, on one chunk of 2^26 rows (4 files of an input from
``bench_ingest_gpu.py --make``), twice in one process (the first pass shows first-use costs; run it with ``CUDA_MODULE_LOADING=EAGER``
to see which of them is lazy module loading):

    python benchmarks/diag_relabel_gpu.py /tmp/wc28
"""

from __future__ import annotations

import os
import sys
import time

import cudf
import cupy as cp
import numpy as np

from breadth.bfs.id_map import owner_of
from breadth.io.cudf_edges import device_edges
from breadth.pipeline import hash_relabel_gpu as steps


def timed(name: str, fn, *args, **kw):
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    out = fn(*args, **kw)
    cp.cuda.Device().synchronize()
    print(f"{name:28s} {1e3 * (time.perf_counter() - t):8.1f} ms", flush=True)
    return out


def main(inp: str) -> None:
    files = sorted(os.path.join(inp, f) for f in os.listdir(inp))[:4]
    i64 = np.dtype(np.int64)
    timed("CUDA context + first array", lambda: cp.zeros(1))
    for rep in range(2):
        print("--- pass", rep)
        df = timed("read 4 files", cudf.read_parquet, files, columns=["src", "dst"])
        e, _ = timed("device_edges (checks)", device_edges, df, "src", "dst", "x")
        flat = e.ravel()
        timed("cp.unique with inverse", cp.unique, flat, return_inverse=True)
        uniq = timed("cp.unique", cp.unique, flat)
        owner = timed("owner_of", owner_of, uniq, 2)
        key = (owner.astype(cp.uint64) << np.uint64(40)) | cp.arange(uniq.size, dtype=cp.uint64)
        timed("cp.argsort uint64", cp.argsort, key)
        timed("cp.bincount", cp.bincount, owner, minlength=2)
        timed("cp.sort", cp.sort, flat)
        timed("cudf factorize", lambda: cudf.Series(flat).factorize())
        split = timed("chunk_split, 1 owner", steps.chunk_split, e, 1, i64)
        timed("chunk_split, 2 owners", steps.chunk_split, e, 2, i64)
        part = timed("owner_part", steps.owner_part, i64, split[2][0])
        looked = timed("lookup_piece", steps.lookup_piece, part, 0, split[2][0])
        timed("chunk_dense", steps.chunk_dense, split, looked)


if __name__ == "__main__":
    main(sys.argv[1])
