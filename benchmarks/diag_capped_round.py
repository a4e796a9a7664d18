"""A capped round's host time with the ranks arriving apart, as in a search, beside raw ucxx on the same endpoint.

    python benchmarks/diag_capped_round.py --json benchmarks/results/capped_round_cpu.json

Two CPU ranks over UCX (a local Dask cluster of two workers, ``run_session``).  Each call is preceded by a
barrier and a busy wait of 0-``--apart`` µs drawn for each rank (the same draws for every mode), so that one rank
starts its round while the other is still busy, as a search's ranks finish their level's kernels apart.  Modes,
interleaved call by call in one session:

* ``raw``: ucxx on the communicator's own rounds endpoint and worker -- the receive posted a round ahead, the
  send's buffer wrapped once, a plain progress loop: the floor for one message each way;
* ``capped``: ``UCXCommunicator.capped_round`` of the same 6 words (one array object, as the device engine's
  one-round levels send from a few page-locked buffers);
* ``fresh``: the same words as a new view each call, which the round wraps for ucxx each time.

Figures per mode (median µs over ``--reps`` calls): when the later rank's call ends after the later start, and
when the earlier rank's does.  The machine's speed varies between runs (2 cores): compare modes within one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402

MODES = ("raw", "capped", "fresh")


def _busy(us: float) -> None:
    until = time.perf_counter() + us * 1e-6
    while time.perf_counter() < until:
        pass


def _rank(engine, setup_s, reps: int, apart_us: float, seed: int, spin_us: float | None) -> dict:
    """One rank's calls: ``{mode: (reps, 2) array of (start, end) on the host's clock}``; ``spin_us``: the
    communicator's busy poll before it sleeps on the worker's wakeup (None: its own)."""
    comm = engine.comm
    if spin_us is not None:
        comm._spin = spin_us * 1e-6
    peer = 1 - comm.rank
    delays = np.random.default_rng(seed).uniform(0, apart_us, size=(reps, 2))
    api, wrap, ep, worker = comm._api, comm._array, comm._eps[peer], comm._worker
    words = np.arange(6, dtype=np.int64)
    comm.open_capped(64)
    send, into = wrap(words), wrap(np.zeros(64, np.int64))
    n, posted = [0], []

    def raw() -> None:
        n[0] += 1
        if not posted:
            posted.append(ep.tag_recv(into, api.UCXXTag((n[0] << 8) + peer)))
        reqs = [posted.pop(), ep.tag_send(send, api.UCXXTag((n[0] << 8) + comm.rank))]
        while not all(q.completed for q in reqs):
            worker.progress()
        posted.append(ep.tag_recv(into, api.UCXXTag(((n[0] + 1) << 8) + peer)))

    calls = {"raw": raw, "capped": lambda: comm.capped_round({peer: words}),
             "fresh": lambda: comm.capped_round({peer: words[:]})}
    for _ in range(50):  # warm-up
        for fn in calls.values():
            fn()
    out = {m: np.zeros((reps, 2)) for m in MODES}
    for i in range(reps):
        for m in MODES:
            comm.barrier()
            _busy(delays[i, comm.rank])
            t0 = time.perf_counter()
            calls[m]()
            out[m][i] = (t0, time.perf_counter())
    return out


def _figures(a: np.ndarray, b: np.ndarray) -> dict:
    later = np.maximum(a[:, 0], b[:, 0])
    a_late = a[:, 0] > b[:, 0]
    end_late = np.where(a_late, a[:, 1], b[:, 1]) - later
    end_early = np.where(a_late, b[:, 1], a[:, 1]) - later
    return {"later_rank_end_after_later_start_us": float(np.median(end_late) * 1e6),
            "earlier_rank_end_after_later_start_us": float(np.median(end_early) * 1e6),
            "later_rank_p90_us": float(np.percentile(end_late, 90) * 1e6),
            "apart_us_median": float(np.median(np.abs(a[:, 0] - b[:, 0])) * 1e6)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=1500)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--apart", type=float, default=40.0, help="largest busy wait before a call, µs")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--spin", type=float, default=None,
                    help="the rounds' busy poll, µs, before sleeping on UCX's wakeup (default: the communicator's; "
                         "GPU ranks poll 50)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    from breadth.bfs import run_session
    from breadth.pipeline import kronecker, local_cluster, prepare

    doc = {"benchmark": "capped_round_apart", "unit": "median microseconds", "args": vars(args),
           "machine": machine(), "versions": versions("ucxx"), "sessions": []}
    with local_cluster(workers=2) as client:
        graph = prepare(kronecker(12, 16), client)
        for s in range(args.sessions):
            a, b = run_session(graph, _rank, args.reps, args.apart, args.seed, args.spin, protocol="ucx")
            figs = {m: _figures(a[m], b[m]) for m in MODES}
            doc["sessions"].append(figs)
            print(f"session {s}: " + "; ".join(
                f"{m} later {f['later_rank_end_after_later_start_us']:.1f} us, earlier "
                f"{f['earlier_rank_end_after_later_start_us']:.1f}" for m, f in figs.items()))
    if args.json:
        write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
