"""Which allocator a dask-cuda worker's CuPy uses, and what an RMM pool changes for the GPU ingest
(fresh process per setting; the ingest of bench_ingest_gpu.py, twice).  Measured on one H200 before CuPy's
own pool was restored on the workers (``bfs.gpu.backend.use_cupy_pool``): RMM without a pool 1.39-1.42 s +
0.46-0.51 s, with a 60 GB pool 1.03-1.16 s + 0.42-0.50 s (read and relabel + prepare, 2^28 tuples).

    python benchmarks/diag_ingest_gpu_alloc.py /tmp/wc28 none 60GB
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def one(inp, pool):
    import dask.array  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    from bench_ingest_gpu import _import_cudf, _ingest
    from breadth.pipeline.cluster import local_cuda_cluster

    kw = {"rmm_pool_size": pool} if pool else {}
    client = local_cuda_cluster(workers=1, **kw)
    client.run(_import_cudf)

    def alloc():
        import cupy
        return repr(cupy.cuda.get_allocator())[:90]

    out = {"pool": pool, "allocator": list(client.run(alloc).values())[0], "runs": []}
    for _ in range(2):
        g, el, tr, tp = _ingest(client, inp)
        out["runs"].append([round(tr, 3), round(tp, 3)])
        g.release()
    client.close()
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        print(json.dumps(one(sys.argv[2], sys.argv[3] if sys.argv[3] != "none" else None)))
    else:
        for pool in sys.argv[2:]:
            r = subprocess.run([sys.executable, __file__, "--one", sys.argv[1], pool], capture_output=True, text=True)
            print(r.stdout.strip().splitlines()[-1] if r.returncode == 0 else r.stderr[-1500:], flush=True)
