"""Do NCCL rounds captured in CUDA graphs through CuPy run, and what does a replayed round cost?

    python benchmarks/diag_graphs.py --json $OUT/diag_graphs.json

Two processes (one GPU each), no Dask: a NCCL communicator, then, each step printed as it finishes (a
stalled step dumps every thread's stack after ``--stall`` seconds): an all-gather captured on a
non-blocking stream and replayed; a grouped send/recv captured before any uncaptured send/recv between the
two ranks (NCCL connects point-to-point peers lazily) and after; the captured rounds mixed with uncaptured
all-reduces on the default stream; and the time of one replayed (all-gather + copy to host + wait) against
the same queued from Python; the communicator destroyed once the graphs are (ncclCommDestroy never
returns while a graph holding NCCL operations exists).
"""

from __future__ import annotations

import argparse
import faulthandler
import multiprocessing as mp
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_processes import run_ranks  # noqa: E402


def _rank(rank: int, size: int, uid, stall: float, q) -> None:
    import cupy as cp
    import numpy as np
    from cupy.cuda import nccl

    faulthandler.dump_traceback_later(stall, exit=True)
    cp.cuda.Device(rank).use()
    comm = nccl.NcclCommunicator(size, uid, rank)
    res = {"rank": rank}

    def say(step, **kw):
        res[step] = kw or True
        print(f"rank {rank}: {step} {kw}", flush=True)
        faulthandler.dump_traceback_later(stall, exit=True)

    st = cp.cuda.Stream(non_blocking=True)
    rt = cp.cuda.runtime
    mode = getattr(rt, "streamCaptureModeRelaxed", None)
    src = cp.full(4, rank + 1, cp.int64)
    dst = cp.zeros(4 * size, cp.int64)
    with st:
        st.begin_capture(mode)
        comm.allGather(src.data.ptr, dst.data.ptr, src.nbytes, nccl.NCCL_UINT8, st.ptr)
        g = st.end_capture()
    say("allgather captured")
    for _ in range(3):
        dst.fill(0)
        cp.cuda.Device().synchronize()
        g.launch(st)
        st.synchronize()
    say("allgather replayed", ok=bool((dst.get() == np.repeat(np.arange(1, size + 1), 4)).all()))

    peer = 1 - rank
    a = cp.full(1024, rank + 10, cp.int64)
    b = cp.zeros(1024, cp.int64)
    with st:
        st.begin_capture(mode)
        nccl.groupStart()
        comm.send(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, peer, st.ptr)
        comm.recv(b.data.ptr, b.nbytes, nccl.NCCL_UINT8, peer, st.ptr)
        nccl.groupEnd()
        g2 = st.end_capture()
    say("send/recv captured before any uncaptured send/recv")
    g2.launch(st)
    st.synchronize()
    say("send/recv replayed", ok=bool((b.get() == peer + 10).all()))

    one = cp.ones(1, cp.int64)
    for i in range(5):  # uncaptured all-reduce on the default stream between replays
        comm.allReduce(one.data.ptr, one.data.ptr, 1, nccl.NCCL_INT64, nccl.NCCL_SUM, cp.cuda.Stream.null.ptr)
        cp.cuda.Stream.null.synchronize()
        g2.launch(st)
        g.launch(st)
        st.synchronize()
    say("mixed with uncaptured all-reduces", allreduce=int(one.get()[0]))

    pin = cp.cuda.alloc_pinned_memory(dst.nbytes)
    with st:
        st.begin_capture(mode)
        comm.allGather(src.data.ptr, dst.data.ptr, src.nbytes, nccl.NCCL_UINT8, st.ptr)
        rt.memcpyAsync(pin.ptr, dst.data.ptr, dst.nbytes, rt.memcpyDeviceToHost, st.ptr)
        g3 = st.end_capture()
    ts = {}
    for label in ("graph", "queued"):
        times = []
        for i in range(300):
            t0 = time.perf_counter()
            if label == "graph":
                g3.launch(st)
            else:
                comm.allGather(src.data.ptr, dst.data.ptr, src.nbytes, nccl.NCCL_UINT8, st.ptr)
                rt.memcpyAsync(pin.ptr, dst.data.ptr, dst.nbytes, rt.memcpyDeviceToHost, st.ptr)
            st.synchronize()
            times.append(time.perf_counter() - t0)
        ts[label] = float(np.median(times[50:]) * 1e6)
    say("gather+copy+wait us", **ts)
    del g, g2, g3  # ncclCommDestroy waits while a graph holding NCCL operations exists
    cp.cuda.Device().synchronize()
    comm.destroy()
    say("communicator destroyed after the graphs")
    faulthandler.cancel_dump_traceback_later()
    q.put(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stall", type=float, default=20.0)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    from cupy.cuda import nccl

    uid = nccl.get_unique_id()
    run_ranks(mp.get_context("spawn"), _rank, [(r, 2, uid, args.stall) for r in range(2)], args.stall, args.json)


if __name__ == "__main__":
    main()
