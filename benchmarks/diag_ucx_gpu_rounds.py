"""Where a small level's exchange goes when two GPU ranks share one GPU over UCX: each primitive of the device
engine's UCX rounds timed alone, both ranks in step.

    python benchmarks/diag_ucx_gpu_rounds.py --json $OUT/ucx_gpu_rounds.json

Two dask-cuda workers on one GPU (``local_cuda_cluster(ranks_per_gpu=2)``), a Kronecker graph in two shards and a
UCX session; then, per primitive, ``--reps`` calls after 20 warm-up calls and a barrier, median microseconds per
rank: a stream synchronisation with nothing queued, a tiny kernel then a synchronisation (each process's work
waits for the GPU to switch from the other's context), 8-element copies each way, the host and device counter
rounds, the top-down level's ``exchange_device`` of counters and pairs (and the same round written out step by
step: wait for the stream, stage to the host, post, wait, stage back), and a small top-down level's whole
sequence (expansion kernel, pair round, claim kernel, counters round).  ``benchmarks/bench_multigpu.py
--ranks-per-gpu 2 --commbench --raw-ucxx`` gives the level's exchange and raw ucxx's round trip beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import write_json  # noqa: E402


def _rounds_rank(engine, setup_s, reps):
    import cupy as cp

    from breadth.bfs.transport import ucx

    comm = engine.comm
    st = cp.cuda.get_current_stream()
    dev8, pairs = cp.arange(8, dtype=cp.int64), cp.ones((20, 2), cp.int64)
    h8 = np.arange(8, dtype=np.int64)
    rctr, rp = cp.empty((2, 8), cp.int64), cp.empty((20, 2), cp.int64)
    peer = 1 - comm.rank
    tiny = cp.ElementwiseKernel("int64 x", "int64 y", "y = x + 1", "breadth_diag_inc")
    out: dict = {}

    def timeit(name, fn):
        for _ in range(20):
            fn()
        comm.barrier()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        out[name] = float(np.median(ts) * 1e6)

    def exchange():
        comm.exchange_device({peer: [dev8, pairs]}, {peer: [rctr[peer], rp]})

    steps: dict = {k: [] for k in ("wait_stream", "to_host", "post", "wait", "to_device")}

    def exchange_by_steps():  # exchange()'s sized round written out (UCXCommunicator._sized_round)
        t = [time.perf_counter()]
        comm._dseq += 1
        seq = comm._dseq
        st.synchronize()
        t.append(time.perf_counter())
        a, b = dev8.get(), pairs.get()
        t.append(time.perf_counter())
        h1, h2 = np.empty(8, np.int64), np.empty((20, 2), np.int64)
        reqs = [(peer, comm._recv(peer, h1, ucx._SIZED, seq, 0)), (peer, comm._recv(peer, h2, ucx._SIZED, seq, 1)),
                (peer, comm._send(peer, a, ucx._SIZED, seq, 0)), (peer, comm._send(peer, b, ucx._SIZED, seq, 1))]
        t.append(time.perf_counter())
        comm._wait(reqs, "diag", (2, seq))
        t.append(time.perf_counter())
        rctr[peer].set(h1)
        rp.set(h2)
        t.append(time.perf_counter())
        for i, k in enumerate(steps):
            steps[k].append(t[i + 1] - t[i])

    timeit("sync_empty", st.synchronize)
    timeit("kernel_then_sync", lambda: (tiny(dev8, dev8), st.synchronize()))
    timeit("get_8", dev8.get)
    timeit("set_8", lambda: dev8.set(h8))
    timeit("kernel_then_get_8", lambda: (tiny(dev8, dev8), dev8.get()))
    timeit("allreduce_host", lambda: comm.allreduce(h8))
    timeit("gather_device_host_vector", lambda: comm.gather_device(h8))
    timeit("gather_device_device_vector", lambda: comm.gather_device(dev8))
    timeit("kernel_then_gather_device", lambda: (tiny(dev8, dev8), comm.gather_device(dev8)))
    timeit("exchange_device_counters_and_pairs", exchange)
    timeit("exchange_by_steps", exchange_by_steps)
    out["exchange_steps"] = {k: float(np.median(v) * 1e6) for k, v in steps.items()}
    timeit("small_top_down_level",
           lambda: (tiny(dev8, dev8), exchange(), tiny(dev8, dev8), comm.gather_device(dev8[:2])))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    import cupy as cp

    from breadth.bfs import run_session
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=2, ranks_per_gpu=2, protocol="tcp")
    g = prepare(kronecker(args.scale, seed=1, device="gpu"), client, nparts=2, device="gpu")
    ranks = run_session(g, _rounds_rank, args.reps, protocol="ucx", timeout=60.0)
    doc = {"benchmark": "ucx_gpu_rounds", "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
           "unit": "median microseconds per call, per rank", "args": vars(args), "ranks": ranks}
    write_json(args.json, doc)
    for k, v in ranks[0].items():
        if not isinstance(v, dict):
            print(f"{k:36s} " + "  ".join(f"{r[k]:8.1f}" for r in ranks))
    print("exchange steps: " + ", ".join(f"{k} {v:.0f}" for k, v in ranks[0]["exchange_steps"].items()))


if __name__ == "__main__":
    main()
