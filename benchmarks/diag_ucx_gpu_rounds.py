"""Where a small level's exchange goes when two GPU ranks share one GPU over UCX: each primitive of the device
engine's UCX rounds timed alone, both ranks in step.

    python benchmarks/diag_ucx_gpu_rounds.py --json $OUT/ucx_gpu_rounds.json

Two dask-cuda workers on one GPU (``local_cuda_cluster(ranks_per_gpu=2)``), a Kronecker graph in two shards and a
UCX session; then, per primitive, ``--reps`` calls after 20 warm-up calls and a barrier, median microseconds per
rank: a stream synchronisation with nothing queued, a tiny kernel then a synchronisation (each process's work
waits for the GPU to switch from the other's context), 8-element copies each way, the host and device counter
rounds, the top-down level's ``exchange_device`` of counters and pairs (and the same round written out step by
step: wait for the stream, stage to the host, post, wait, stage back), and a small top-down level's whole
sequence (expansion kernel, pair round, claim kernel, counters round).  Then a 64 MB round both ways, the
issue's transfer target: ``exchange_device`` beside the same transfer posted on the communicator's endpoints
with arrays wrapped once (raw ucxx) and the steps in between added one at a time, all alternating call by call
(``diag_ucx_sized_round.py`` times them in blocks, per size); the counters and pairs round, apart; what posting one 8-byte receive or send costs from host, pinned and device
memory; then a profile of both rounds.  ``benchmarks/bench_multigpu.py
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
from shared_gpu_pair import in_step_us, shared_gpu_pair  # noqa: E402


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
        out[name] = in_step_us(comm, fn, reps)

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
    # a 64 MB sized round both ways (the transfer target), beside the same transfer posted on the
    # communicator's endpoints with arrays wrapped once (what the round adds in Python), and its parts
    big, into = cp.ones(1 << 26, cp.uint8), cp.zeros(1 << 26, cp.uint8)
    ep, worker, api = comm._eps[peer], comm._worker, comm._api
    wb, wi = comm._array(big), comm._array(into)
    n = [0]

    def raw_64mb():
        n[0] += 1
        reqs = [ep.tag_recv(wi, api.UCXXTag((3 << 60) + 2 * n[0] + peer)),
                ep.tag_send(wb, api.UCXXTag((3 << 60) + 2 * n[0] + comm.rank))]
        while not all(q.completed for q in reqs):
            worker.progress()

    def polled_per_request(reqs):  # UCXCommunicator._wait's busy phase alone: each request's error tested a step
        pending, until = reqs, time.perf_counter() + ucx._DEVICE_SPIN_S
        while pending and time.perf_counter() < until:
            worker.progress()
            pending = [(p, r) for p, r in pending if not comm._done(p, r, "diag")]

    def lean_64mb(wrap=True, sync=False, comm_wait=False, old_wait=False):
        n[0] += 1
        if sync:
            st.synchronize()
        a, b = (comm._array(comm._bytes(into)), comm._array(comm._bytes(big))) if wrap else (wi, wb)
        reqs = [ep.tag_recv(a, api.UCXXTag((3 << 60) + 2 * n[0] + peer)),
                ep.tag_send(b, api.UCXXTag((3 << 60) + 2 * n[0] + comm.rank))]
        if old_wait:
            polled_per_request([(peer, q) for q in reqs])
        elif comm_wait:
            comm._wait([(peer, q) for q in reqs], "diag", None, spin=ucx._DEVICE_SPIN_S)
        else:
            while not all(q.completed for q in reqs):
                worker.progress()

    def comm_posts_64mb():  # the round's own posts and wait, after the wait for the stream
        st.synchronize()
        comm._dseq += 1
        seq = comm._dseq
        reqs = [(peer, comm._recv(peer, into, ucx._SIZED, seq, 1)), (peer, comm._send(peer, big, ucx._SIZED, seq, 1))]
        comm._wait(reqs, f"diag (round #{seq})", (2, seq), spin=ucx._DEVICE_SPIN_S)

    # interleaved, one call of each variant a round, so that the machine's drift falls on all alike; the
    # large rounds and the small ones apart (a round after a 64 MB one waits for the peer's end of it)
    groups = [{"raw_on_comm_endpoints_64MB": raw_64mb,
               "lean_64MB_wrap_sync": lambda: lean_64mb(sync=True),
               "lean_64MB_wrap_sync_commwait": lambda: lean_64mb(sync=True, comm_wait=True),
               "lean_64MB_wrap_sync_polled_per_request": lambda: lean_64mb(sync=True, old_wait=True),
               "comm_posts_64MB": comm_posts_64mb,
               "exchange_device_64MB": lambda: comm.exchange_device({peer: big}, {peer: into})},
              {"exchange_device_counters_and_pairs": exchange}]
    for variants in groups:
        for fn in variants.values():
            for _ in range(10):
                fn()
        comm.barrier()
        times = {k: [] for k in variants}
        for _ in range(reps):
            for k, fn in variants.items():
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
        out.update({f"interleaved_{k}": float(np.median(v) * 1e6) for k, v in times.items()})
    # what posting one 8-byte message costs, by the buffer's memory: each rank posts 200 receives, then 200
    # sends, each post timed alone (UCX finds a buffer's memory type itself, per message)
    import cupyx

    for kind, make in (("host", lambda: np.zeros(8, np.uint8)), ("pinned", lambda: cupyx.zeros_pinned(8, np.uint8)),
                       ("device", lambda: cp.zeros(8, cp.uint8))):
        bufs_r, bufs_s = [make() for _ in range(200)], [make() for _ in range(200)]
        comm.barrier()
        base = (3 << 60) + (1 << 40) + n[0] * 1000
        n[0] += 1
        posts_r, posts_s, reqs = [], [], []
        for i, b in enumerate(bufs_r):
            t0 = time.perf_counter()
            reqs.append(ep.tag_recv(comm._array(comm._bytes(b)), api.UCXXTag(base + 2 * i + peer)))
            posts_r.append(time.perf_counter() - t0)
        for i, b in enumerate(bufs_s):
            t0 = time.perf_counter()
            reqs.append(ep.tag_send(comm._array(comm._bytes(b)), api.UCXXTag(base + 2 * i + comm.rank)))
            posts_s.append(time.perf_counter() - t0)
        while not all(q.completed for q in reqs):
            worker.progress()
        out[f"post_recv_{kind}_8B"] = float(np.median(posts_r) * 1e6)
        out[f"post_send_{kind}_8B"] = float(np.median(posts_s) * 1e6)
    timeit("wrap_device_array", lambda: comm._array(comm._bytes(big)))
    timeit("wrap_device_array_as_view", lambda: comm._array(ucx._flat_bytes(big)))
    timeit("wrap_host_array", lambda: comm._array(comm._bytes(h8)))
    timeit("tag", lambda: api.UCXXTag(12345))
    import cProfile
    import io
    import pstats

    for name, fn in (("64MB", lambda: comm.exchange_device({peer: big}, {peer: into})), ("small", exchange)):
        comm.barrier()
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(reps):
            fn()
        pr.disable()
        text = io.StringIO()
        pstats.Stats(pr, stream=text).sort_stats("tottime").print_stats(14)
        out[f"profile_{name}"] = text.getvalue()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    from breadth.bfs import run_session

    g, gpu = shared_gpu_pair(args.scale)
    ranks = run_session(g, _rounds_rank, args.reps, protocol="ucx", timeout=60.0)
    doc = {"benchmark": "ucx_gpu_rounds", "gpu": gpu,
           "unit": "median microseconds per call, per rank", "args": vars(args), "ranks": ranks}
    write_json(args.json, doc)
    for k, v in ranks[0].items():
        if isinstance(v, float):
            print(f"{k:36s} " + "  ".join(f"{r[k]:8.1f}" for r in ranks))
    print("exchange steps: " + ", ".join(f"{k} {v:.0f}" for k, v in ranks[0]["exchange_steps"].items()))
    for k in ("profile_64MB", "profile_small"):
        print(f"rank 0, {k}:\n{ranks[0][k]}")


if __name__ == "__main__":
    main()
