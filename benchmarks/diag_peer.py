"""Do peer-memory rounds (bfs/transport/peer_memory.py) move the right bytes, captured and not, and what do they
cost?

    python benchmarks/diag_peer.py --json $OUT/diag_peer.json

Two processes (one GPU each), no Dask and no NCCL: the ranks' host mesh is a pair of pipes.  Each step is
printed as it finishes (a stalled step dumps the Python stacks after ``--stall`` seconds, and the kernel's
own time limit is ``--stall`` / 2, so a lost signal shows as a timed-out round, not a hang): connect, an
all-gather and an exchange queued from Python, the same captured in a CUDA graph and replayed with new
data, then the median time of one replayed round + copy to the host + wait for 16 bytes and for 8 MB per
rank (the bottom-up frontier of 2**29 vertices on two GPUs).
"""

from __future__ import annotations

import argparse
import faulthandler
import multiprocessing as mp
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rank_processes import run_ranks  # noqa: E402


class PipeMesh:
    """The few host collectives PeerMemory needs, over multiprocessing pipes (``conns[p]`` to rank p)."""

    def __init__(self, rank: int, size: int, conns: dict):
        self.rank, self.size, self.conns = rank, size, conns

    def alltoallv(self, send: list):
        for p, c in self.conns.items():
            c.send(np.asarray(send[p]))
        got = {p: c.recv() for p, c in self.conns.items()}
        got[self.rank] = send[self.rank]
        return [got[r] for r in range(self.size)]

    def allgather(self, arr):
        return self.alltoallv([arr] * self.size)

    def allreduce(self, v, op="sum"):
        return np.sum(np.stack(self.allgather(np.asarray(v))), axis=0)


def _rank(rank: int, size: int, conns: dict, stall: float, q) -> None:
    import cupy as cp

    from breadth.bfs.transport.peer_memory import PeerMemory

    faulthandler.dump_traceback_later(stall, exit=True)
    cp.cuda.Device(rank).use()
    res = {"rank": rank}
    pm = None

    def say(step, **kw):
        res[step] = kw or True
        status = pm.host.tolist() if pm is not None else None
        print(f"rank {rank}: {step} {kw} host={status}", flush=True)
        faulthandler.dump_traceback_later(stall, exit=True)

    mesh = PipeMesh(rank, size, conns)
    pm = PeerMemory.connect(mesh, timeout=stall / 2)
    say("connected", peer_memory=pm is not None)
    if pm is None:
        q.put(res)
        return
    st = cp.cuda.Stream(non_blocking=True)
    k = 4
    send = cp.full(k, rank + 1, cp.int64)
    recv = pm.alloc((size * k,), cp.int64)
    with st:
        pm.allgather_into(send, recv)
    st.synchronize()
    pm.check("all-gather")
    say("all-gather queued", ok=bool((recv.get() == np.repeat(np.arange(1, size + 1), k)).all()))

    peers = [p for p in range(size) if p != rank]
    a = cp.full(8, 10 * rank, cp.int64)
    b = pm.alloc(((size - 1) * 8,), cp.int64)
    with st:
        pm.exchange({p: [a] for p in peers}, {p: [b[i * 8:(i + 1) * 8]] for i, p in enumerate(peers)})
    st.synchronize()
    pm.check("exchange")
    say("exchange queued", got=b.get().tolist())

    mode = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", None)
    with st:
        st.begin_capture(mode)
        pm.allgather_into(send, recv)
        pm.exchange({p: [a] for p in peers}, {p: [b[i * 8:(i + 1) * 8]] for i, p in enumerate(peers)})
        g = st.end_capture()
    say("captured")
    ok = True
    for i in range(5):
        send.fill(100 * i + rank)
        a.fill(1000 * i + rank)
        cp.cuda.Device().synchronize()
        mesh.allgather(np.zeros(1))  # both ranks' new data is in place before either replays
        g.launch(st)
        st.synchronize()
        pm.check("replay")
        ok &= bool((recv.get() == np.repeat(100 * i + np.arange(size), k)).all())
        ok &= bool((b.get() == np.repeat([1000 * i + p for p in peers], 8)).all())
    say("replayed", ok=ok)

    # a level's shape: a kernel changes the counters, they are all-gathered through peer memory, and the
    # copy engine brings the gathered matrix to pinned host memory; both ranks must read the same matrix
    ctr = cp.zeros(4, cp.int64)
    out = pm.alloc((size * 4,), cp.int64)
    pin = cp.cuda.alloc_pinned_memory(out.nbytes)
    host = np.frombuffer(pin, np.int64, out.size)
    bump = cp.ElementwiseKernel("int64 r", "int64 c", "c = c * 3 + r + 1", "diag_bump")
    with st:
        st.begin_capture(mode)
        bump(cp.int64(rank), ctr)
        pm.allgather_into(ctr, out)
        cp.cuda.runtime.memcpyAsync(pin.ptr, out.data.ptr, out.nbytes, cp.cuda.runtime.memcpyDeviceToHost, st.ptr)
        g4 = st.end_capture()
    views, bad = [], 0
    for i in range(200):
        g4.launch(st)
        st.synchronize()
        pm.check("level-shaped replay")
        views.append(host.copy())
    theirs = mesh.allgather(np.stack(views))
    bad = int(sum((theirs[0][i] != theirs[1][i]).any() for i in range(len(views))))
    say("level-shaped replays", replays=len(views), differing_views=bad, last=views[-1].tolist())

    times = {}
    for label, words in (("16B", 2), ("8MB", 1 << 20)):
        s = cp.arange(words, dtype=cp.int64) + rank
        r = pm.alloc((size * words,), cp.int64)
        pin = cp.cuda.alloc_pinned_memory(16)
        with st:
            st.begin_capture(mode)
            pm.allgather_into(s, r)
            cp.cuda.runtime.memcpyAsync(pin.ptr, r.data.ptr, 16, cp.cuda.runtime.memcpyDeviceToHost, st.ptr)
            g2 = st.end_capture()
        t = []
        for i in range(300):
            t0 = time.perf_counter()
            g2.launch(st)
            st.synchronize()
            t.append(time.perf_counter() - t0)
        pm.check("timing")
        good = bool((r[words:2 * words].get() if rank == 0 else r[:words].get()).sum() ==
                    (np.arange(words) + (1 - rank)).sum()) if size == 2 else True
        times[label] = {"median_us": float(np.median(t[50:]) * 1e6), "ok": good}
    say("round + copy + wait", **times)
    pm.close(failed=False)
    say("closed")
    faulthandler.cancel_dump_traceback_later()
    q.put(res)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stall", type=float, default=30.0)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    a, b = ctx.Pipe()
    run_ranks(ctx, _rank, [(0, 2, {1: a}, args.stall), (1, 2, {0: b}, args.stall)], args.stall, args.json)


if __name__ == "__main__":
    main()
