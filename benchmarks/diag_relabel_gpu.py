"""Where the GPU relabeling's time goes, step by step and synchronised, in the order the pipeline runs the
steps on one worker: the 16 files of an input from ``bench_ingest_gpu.py --make`` as 4 chunks of 4 files
(read, check, split), the owner's union, each chunk's lookup and dense ids, the part to the host; twice in
one process (the first pass shows first-use costs; run it with ``CUDA_MODULE_LOADING=EAGER`` to see which
of them is lazy module loading):

    python benchmarks/diag_relabel_gpu.py /tmp/wc28
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict

import cudf
import cupy as cp
import numpy as np

from breadth.io.cudf_edges import device_edges
from breadth.pipeline import hash_relabel_gpu as steps

TOTALS: dict = defaultdict(float)


def timed(name: str, fn, *args, **kw):
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    out = fn(*args, **kw)
    cp.cuda.Device().synchronize()
    dt = time.perf_counter() - t
    TOTALS[name] += dt
    print(f"  {name:24s} {1e3 * dt:8.1f} ms", flush=True)
    return out


def main(inp: str) -> None:
    files = sorted(os.path.join(inp, f) for f in os.listdir(inp) if f.endswith(".parquet"))
    chunks = [files[i:i + len(files) // 4] for i in range(0, len(files), len(files) // 4)]
    i64 = np.dtype(np.int64)
    timed("CUDA context", lambda: cp.zeros(1))
    for rep in range(2):
        print("--- pass", rep)
        TOTALS.clear()
        t0 = time.perf_counter()
        splits = []
        for c in chunks:
            df = timed("read", cudf.read_parquet, c, columns=["src", "dst"])
            e, _ = timed("device_edges (checks)", device_edges, df, "src", "dst", "x")
            del df
            splits.append(timed("chunk_split", steps.chunk_split, e, 1, i64))
            del e
        part = timed("owner_part", steps.owner_part, i64, *[s[2][0] for s in splits])
        dense = [timed("chunk_dense", steps.chunk_dense, s, timed("lookup_piece", steps.lookup_piece, part, 0, s[2][0]),
                       dtype=np.int32) for s in splits]
        timed("part_ids", steps.part_ids, part, i64)
        print(f"pass {rep}: {time.perf_counter() - t0:.3f} s;",
              ", ".join(f"{k} {1e3 * v:.0f} ms" for k, v in TOTALS.items()))
        del splits, part, dense


if __name__ == "__main__":
    main(sys.argv[1])
