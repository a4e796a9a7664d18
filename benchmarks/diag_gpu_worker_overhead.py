"""Where a one-GPU search loses in a Dask worker against the same search in a plain process (issue #26).

The same 64 roots searched by the device engine over one GPU, three ways: (a) in this process's main
thread, (b) in a task on an in-process Dask worker's thread, (c) in a task on a dask-cuda worker process
(what ``breadth bench --device gpu`` runs).  Prints per way the median search time and the median time
outside the levels' records (start of search, direction switches, Python between levels).

    python benchmarks/diag_gpu_worker_overhead.py --scale 26
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def searches(shard, roots, switch_s: float | None = None) -> dict:
    import sys

    import cupy as cp

    from breadth.bfs.engine.device_engine import DeviceEngine
    from breadth.bfs.transport.solo_gpu import SoloGpuCommunicator

    old = sys.getswitchinterval()
    if switch_s is not None:
        sys.setswitchinterval(switch_s)
    try:
        e = DeviceEngine(shard, SoloGpuCommunicator(), backend="gpu")
        e.search(int(roots[0]))
        ts, outside = [], []
        for r in roots:
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            recs = e.search(int(r))
            t = time.perf_counter() - t0
            ts.append(t)
            outside.append(t - sum(x.local_s + x.exchange_s for x in recs))
        e.close()
    finally:
        sys.setswitchinterval(old)
    return {"median_ms": float(np.median(ts) * 1e3), "outside_ms": float(np.median(outside) * 1e3)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--skip-in-process", action="store_true", help="only (c)")
    ap.add_argument("--small-first", action="store_true", help="(c) after searches of a scale-12 graph")
    a = ap.parse_args()
    from distributed import Client

    from breadth.bfs.graph500.roots import choose_roots
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    if not a.skip_in_process:
        with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
            g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu")
            roots = choose_roots(g, 64, 2)
            shard = client.gather(g.shards)[0]
            print("(a) main thread         ", searches(shard, roots), flush=True)
            print("(b) in-process worker   ", client.submit(searches, g.shards[0], roots, pure=False).result(), flush=True)
            print("(b') same, switch 5 ms  ", client.submit(searches, g.shards[0], roots, 5e-3, pure=False).result(),
                  flush=True)
            del shard, g
    client = local_cuda_cluster(workers=1)
    g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu")
    roots = choose_roots(g, 64, 2)
    w = g.workers[0]
    if a.small_first:
        small = prepare(kronecker(12, seed=1, device="gpu"), client, device="gpu")
        print("(c0) scale 12 first     ", client.submit(searches, small.shards[0], choose_roots(small, 8, 2), pure=False,
                                                      workers=[w]).result(), flush=True)
    for label in ("(c) dask-cuda worker    ", "(c') again             ", "(c'') again            "):
        print(label, client.submit(searches, g.shards[0], roots, pure=False, workers=[w]).result(), flush=True)
    client.close()


if __name__ == "__main__":
    main()
