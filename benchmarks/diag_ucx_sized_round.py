"""What a sized round of device buffers adds to UCX itself, by size: two GPU ranks sharing one GPU over UCX.

    python benchmarks/diag_ucx_sized_round.py --json $OUT/sized_round.json

``bench_multigpu.py --commbench --raw-ucxx`` compares the communicator's sized round (``exchange_device`` then
``wait``, back to back) with raw ucxx's exchange on a context of its own (TAG only).  Here the steps in between
run alternating in one process, so that the machine's drift falls on all alike, per size (256 KB, a
scale-22 bottom-up level's bitmap on two ranks; 1 MB; 64 MB, the issue's target):

* ``raw_tag_ctx``: the bench's reference, ucxx on a context of its own with the TAG feature, arrays wrapped once;
* ``raw_wakeup_ctx``: the same on a TAG and WAKEUP context in blocking progress mode (the communicator's kind);
* ``raw_comm_eps``: on the communicator's own endpoints and worker;
* ``raw_comm_eps_wrap``: the arrays wrapped per call as the communicator does;
* ``raw_comm_eps_wrap_sync``: and a wait for the stream first;
* ``comm_posts``: the communicator's own posts (``_recv``, ``_send``) and ``_wait``, after a wait for the stream;
* ``sized_round``: ``UCXCommunicator._sized_round``; ``exchange_device``; ``exchange_device_wait``: then ``wait``,
  as the bench times it.

Each variant runs in blocks of ``--block`` back-to-back calls after one untimed call (as the bench times a round:
a call timed right after another variant would also wait out the peer's end of that one), the variants' blocks
alternating ``--reps`` times.  Median microseconds per variant, per rank.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_ucxx import raw_pair  # noqa: E402
from results_file import write_json  # noqa: E402
from shared_gpu_pair import shared_gpu_pair  # noqa: E402


def _rank(engine, setup_s, sizes, reps, block):
    import cupy as cp

    from breadth.bfs.transport import ucx

    comm = engine.comm
    r, peer = comm.rank, 1 - comm.rank
    st = cp.cuda.get_current_stream()
    tag_only = raw_pair(comm)
    wakeup = raw_pair(comm, wakeup=True)
    out: dict = {"rank": r}
    n = [0]

    def raw(worker, ep, api, a, b):
        n[0] += 1
        reqs = [ep.tag_recv(b, api.UCXXTag((3 << 60) + 2 * n[0] + peer)),
                ep.tag_send(a, api.UCXXTag((3 << 60) + 2 * n[0] + r))]
        while not all(q.completed for q in reqs):
            worker.progress()

    def raw_wrapping(send, into, sync):
        if sync:
            st.synchronize()
        raw(comm._worker, comm._eps[peer], comm._api, comm._array(comm._bytes(send)), comm._array(comm._bytes(into)))

    def comm_posts(send, into):
        st.synchronize()
        comm._dseq += 1
        seq = comm._dseq
        reqs = [(peer, comm._recv(peer, into, ucx._SIZED, seq, 1)), (peer, comm._send(peer, send, ucx._SIZED, seq, 1))]
        comm._wait(reqs, f"diag (round #{seq})", (2, seq), spin=ucx._DEVICE_SPIN_S)

    for nb in sizes:
        send, into = cp.ones(nb, cp.uint8), cp.zeros(nb, cp.uint8)
        ws, wi = comm._array(comm._bytes(send)), comm._array(comm._bytes(into))
        ts, ti = tag_only[3](send), tag_only[3](into)
        us, ui = wakeup[3](send), wakeup[3](into)
        variants = {
            "raw_tag_ctx": lambda: raw(*tag_only[:3], ts, ti),
            "raw_wakeup_ctx": lambda: raw(*wakeup[:3], us, ui),
            "raw_comm_eps": lambda: raw(comm._worker, comm._eps[peer], comm._api, ws, wi),
            "raw_comm_eps_wrap": lambda: raw_wrapping(send, into, False),
            "raw_comm_eps_wrap_sync": lambda: raw_wrapping(send, into, True),
            "comm_posts": lambda: comm_posts(send, into),
            "sized_round": lambda: comm._sized_round({peer: send}, {peer: into}, "diag"),
            "exchange_device": lambda: comm.exchange_device({peer: send}, {peer: into}),
            "exchange_device_wait": lambda: (comm.exchange_device({peer: send}, {peer: into}), comm.wait("diag")),
        }
        # blocks of back-to-back calls, as the bench times a round (a call timed right after another variant
        # would also wait out the peer's end of that one), the variants' blocks alternating
        times = {k: [] for k in variants}
        for _ in range(reps):
            for k, fn in variants.items():
                comm.barrier()
                for i in range(block + 1):
                    t0 = time.perf_counter()
                    fn()
                    if i:
                        times[k].append(time.perf_counter() - t0)
        out[f"{nb}B"] = {k: float(np.median(v) * 1e6) for k, v in times.items()}
        out[f"{nb}B"]["ok"] = bool((into == 1).all())
    comm.barrier()  # both ends done before the raw contexts close
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1 << 18, 1 << 20, 1 << 26], help="bytes")
    ap.add_argument("--reps", type=int, default=20, help="blocks of each variant")
    ap.add_argument("--block", type=int, default=10, help="back-to-back calls a block (after one not timed)")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    from breadth.bfs import run_session

    g, gpu = shared_gpu_pair(14)
    ranks = run_session(g, _rank, args.sizes, args.reps, args.block, protocol="ucx", timeout=120.0)
    doc = {"benchmark": "ucx_sized_round", "gpu": gpu,
           "unit": "median microseconds per call, per rank", "args": vars(args), "ranks": ranks}
    write_json(args.json, doc)
    for nb in args.sizes:
        print(f"{nb} B")
        for k in ranks[0][f"{nb}B"]:
            print(f"  {k:24s} " + "  ".join(f"{rk[f'{nb}B'][k]:8.1f}" for rk in ranks))


if __name__ == "__main__":
    main()
