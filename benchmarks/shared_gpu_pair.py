"""Two ranks sharing one GPU, for the UCX diagnostics (``diag_ucx_gpu_rounds.py``, ``diag_ucx_sized_round.py``,
``diag_one_round_levels.py``): a dask-cuda cluster of two workers on the GPU, a Kronecker graph in two shards,
and a call timed on the ranks in step."""

from __future__ import annotations

import time

import numpy as np


def shared_gpu_pair(scale: int):
    """Two dask-cuda workers on one GPU (``local_cuda_cluster(ranks_per_gpu=2)``, Dask over TCP) and a Kronecker
    graph of ``scale`` (seed 1) prepared on them in two shards; returns ``(graph, the GPU's name)``."""
    import cupy as cp

    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=2, ranks_per_gpu=2, protocol="tcp")
    g = prepare(kronecker(scale, seed=1, device="gpu"), client, nparts=2, device="gpu")
    return g, cp.cuda.runtime.getDeviceProperties(0)["name"].decode()


def in_step_us(comm, fn, reps: int, warmup: int = 20) -> float:
    """Median microseconds of ``reps`` calls of ``fn`` on this rank, after ``warmup`` calls and a barrier of
    ``comm`` (collective: every rank calls it with its own ``fn``)."""
    for _ in range(warmup):
        fn()
    comm.barrier()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts) * 1e6)
