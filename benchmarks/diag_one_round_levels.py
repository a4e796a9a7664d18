"""Where a one-round level's time goes, two GPU ranks sharing one GPU over UCX.

    python benchmarks/diag_one_round_levels.py --json $OUT/one_round_levels.json

Two dask-cuda workers on one GPU (``local_cuda_cluster(ranks_per_gpu=2)``), a Kronecker graph in two shards and a
UCX session; then, both ranks in step, median microseconds per call over ``--reps`` calls (after 20 warm-up
calls and a barrier): an 8-byte host exchange in raw ucxx on contexts of its own between the two ranks --
with the TAG feature alone (as ``bench_multigpu.py --raw-ucxx``), and with TAG and WAKEUP and the worker in
blocking progress mode (as the communicator's context) -- the communicator's capped round of a level's
header (5 words) from pageable and from page-locked memory, with its usual busy poll and polling 2 ms, the
same header posted on the communicator's endpoints with its arrays wrapped once, and a bottom-up level's
round (counters and a 256 KB bitmap: the counters on the device, in page-locked host memory as a sized
round's message, or as a capped round's words riding with the bitmap, as the levels send them; the last also
right after a small kernel and after one of about a bottom-up level's time, each beside the kernel and its wait
alone), the bitmap alone, bitmap and counters as one device message (alone, and with the copies a level would
then need), and the bitmap followed by a capped round of the counters.

Then ``--roots`` searches: their small levels' medians (local, exchange, round) by direction and, for
one-round top-down levels, where the host's time went (to the graph's launch, the launch, the wait for the
stream, the round's preparation, the round, the rest; all levels, a run's first ones, the others), for bottom-up
levels the wait for their kernels and their round; then the
same searches profiled (cProfile, the functions that took the most time).  Four sessions: one-round levels;
the same with the workers' Dask profiler running (a session stops it); two-round levels
(``SearchConfig(one_round_levels=False)``); one-round levels again (``--sessions`` runs only those named:
``one_round``, ``one_round_dask_profiler_on``, ``two_rounds``, ``one_round_again``).  Each top-down level's
clocks go to the JSON (``trace``), and each bottom-up round's (``bu_trace``: called, kernels done, round done),
so that the ranks' steps can be lined up.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from raw_ucxx import raw_pair  # noqa: E402
from results_file import write_json  # noqa: E402
from shared_gpu_pair import in_step_us, shared_gpu_pair  # noqa: E402


def _small_levels(recs_by_root) -> dict:
    keys = ("local_s", "exchange_s", "reduce_s")
    out = {}
    for d in ("td", "bu"):
        small = [r for recs in recs_by_root for r in recs if r.direction == d and r.bytes_sent < (1 << 20)]
        out[d] = {**{k.replace("_s", "_us"): round(float(np.median([getattr(r, k) for r in small]) * 1e6), 1)
                     if small else None for k in keys}, "levels": len(small)}
    return out


def _dask_profiler(on: bool) -> None:
    """Start or stop this worker's statistical profiler (a session stops it: ``session._pause_profiler``)."""
    from distributed import get_worker

    w = get_worker()
    for k in ("profile", "profile-cycle"):
        w.loop.add_callback(w.periodic_callbacks[k].start if on else w.periodic_callbacks[k].stop)
    time.sleep(0.1)  # the event loop runs it


def _rank(engine, setup_s, reps, roots, only_searches, spin, profiler=False):
    import cupy as cp

    comm = engine.comm
    if spin is not None:
        comm._spin = spin  # how long a round busy-polls before it sleeps on the worker's wakeup
    if profiler:
        _dask_profiler(True)
    out: dict = {"engine": type(engine).__name__, "one_round": engine.one_round is not None}

    def timeit(name, fn):
        out[name] = in_step_us(comm, fn, reps)

    if not only_searches:
        peer = 1 - comm.rank
        for wakeup in (False, True):
            worker, ep, api, Array, keep = raw_pair(comm, wakeup)
            a, b = Array(np.ones(8, np.uint8)), Array(np.zeros(8, np.uint8))
            n = [0]

            def raw():
                n[0] += 1
                reqs = [ep.tag_recv(b, api.UCXXTag(2 * n[0] + peer)), ep.tag_send(a, api.UCXXTag(2 * n[0] + comm.rank))]
                while not all(q.completed for q in reqs):
                    worker.progress()

            timeit("raw_host_8B_exchange" + ("_wakeup_blocking_mode" if wakeup else "_tag_only"), raw)
            comm.barrier()
            del keep
        head = np.arange(5, dtype=np.int64)
        if engine.one_round is None:
            comm.open_capped(5)
        timeit("capped_round_5_words", lambda: comm.capped_round({peer: head}))
        pin = np.frombuffer(cp.cuda.alloc_pinned_memory(40), np.int64, 5)  # as the levels send them
        timeit("capped_round_5_words_pinned_send", lambda: comm.capped_round({peer: pin}))
        spin = comm._spin
        comm._spin = 2e-3
        timeit("capped_round_5_words_polled_2ms", lambda: comm.capped_round({peer: head}))
        comm._spin = spin
        from breadth.bfs.transport import ucx

        ep, worker, api = comm._eps[peer], comm._worker, comm._api
        hb, rb = comm._array(head.view(np.uint8)), comm._array(np.zeros(5, np.int64).view(np.uint8))
        n = [0]

        def on_comm_endpoints():
            n[0] += 1
            reqs = [ep.tag_recv(rb, api.UCXXTag(ucx._tag(ucx._CONTROL, n[0], peer, 7))),
                    ep.tag_send(hb, api.UCXXTag(ucx._tag(ucx._CONTROL, n[0], comm.rank, 7)))]
            while not all(q.completed for q in reqs):
                worker.progress()

        timeit("header_on_comm_endpoints_prewrapped", on_comm_endpoints)
        # a bottom-up level's round (one_round_levels.close_bottom_up): device counters and a 256 KB bitmap
        ctr, own, g = cp.arange(3, dtype=cp.int64), cp.ones(1 << 15, cp.uint64), cp.zeros(1 << 16, cp.uint64)
        rows = np.zeros((2, 3), np.int64)
        timeit("bottom_up_round_256KB", lambda: comm.exchange_device(
            {peer: [ctr, own]}, {peer: [rows[peer], g[peer << 15:(peer + 1) << 15]]}))
        hc = np.frombuffer(cp.cuda.alloc_pinned_memory(24), np.int64, 3)
        timeit("bottom_up_round_256KB_host_counters", lambda: comm.exchange_device(
            {peer: [hc, own]}, {peer: [rows[peer], g[peer << 15:(peer + 1) << 15]]}))
        timeit("bottom_up_round_256KB_capped_counters", lambda: comm.capped_round(
            {peer: hc}, device=({peer: own}, {peer: g[peer << 15:(peer + 1) << 15]})))
        # the same round right after kernels (both ranks' on the shared GPU): a small one, and one of about a
        # bottom-up level's time (a 128 MB add); each also alone with the wait for it, to take off
        heavy, capped_bu = cp.zeros(1 << 25, cp.float32), (lambda: comm.capped_round(
            {peer: hc}, device=({peer: own}, {peer: g[peer << 15:(peer + 1) << 15]})))
        st0 = cp.cuda.get_current_stream()
        for name, kern in (("small", lambda: cp.add(own, 1, out=own)), ("heavy", lambda: cp.add(heavy, 1, out=heavy))):
            timeit(f"{name}_kernel_and_wait", lambda: (kern(), st0.synchronize()))
            timeit(f"{name}_kernel_then_bottom_up_round_capped_counters", lambda: (kern(), capped_bu()))
        timeit("bitmap_256KB_alone", lambda: comm.exchange_device({peer: own}, {peer: g[peer << 15:(peer + 1) << 15]}))
        # the same round as one device message a peer: [bitmap | counters], received whole, then its parts
        # copied where a level reads them (the bitmap into the global one, the counters to the host)
        rt, st = cp.cuda.runtime, cp.cuda.get_current_stream()
        nw = 1 << 15
        snd, rcv = cp.ones(nw + 3, cp.uint64), cp.zeros(nw + 3, cp.uint64)
        timeit("one_message_256KB_round_only", lambda: comm.exchange_device({peer: snd}, {peer: rcv}))

        def one_message():
            rt.memcpyAsync(snd.data.ptr + 8 * nw, ctr.data.ptr, 24, rt.memcpyDeviceToDevice, st.ptr)
            comm.exchange_device({peer: snd}, {peer: rcv})
            rt.memcpyAsync(g.data.ptr + 8 * nw * comm.rank, snd.data.ptr, 8 * nw, rt.memcpyDeviceToDevice, st.ptr)
            rt.memcpyAsync(g.data.ptr + 8 * nw * peer, rcv.data.ptr, 8 * nw, rt.memcpyDeviceToDevice, st.ptr)
            rt.memcpyAsync(hc.ctypes.data, rcv.data.ptr + 8 * nw, 24, rt.memcpyDeviceToHost, st.ptr)
            st.synchronize()

        timeit("one_message_256KB_with_copies", one_message)

        def bitmap_then_counters():
            comm.exchange_device({peer: own}, {peer: g[peer << 15:(peer + 1) << 15]})
            comm.capped_round({peer: head})

        timeit("bitmap_256KB_then_capped_counters", bitmap_then_counters)
    for root in roots[:4]:  # warm-up: kernels compiled, buffers allocated
        engine.search(int(root))
    comm.barrier()
    recs, trace, bu_trace = [], [], []
    if engine.one_round is not None:
        engine.one_round.trace = trace
        close = engine.one_round.close_bottom_up

        def traced_close(ctr, own, g):  # a bottom-up level's round: the wait for its kernels, then the round
            ta = time.perf_counter()
            cp.cuda.get_current_stream().synchronize()
            tb = time.perf_counter()
            rows = close(ctr, own, g)
            bu_trace.append((ta, tb, time.perf_counter()))
            return rows

        engine.one_round.close_bottom_up = traced_close
    t0 = time.perf_counter()
    for root in roots:
        recs.append(engine.search(int(root)))
    out["searches_s"] = time.perf_counter() - t0
    if trace:  # a top-down level's host time: to its graph's launch, the launch, the wait, the round, the rest
        d = np.diff(np.array(trace)[:, :7], axis=1) * 1e6
        steps = ("setup", "launch", "wait", "prepare", "round", "after")
        out["top_down_level_steps_us"] = dict(zip(steps, np.round(np.median(d, axis=0), 1).tolist()))
        for name, pick in (("inline", [t[7] == 0 for t in trace]), ("first", [t[8] == 1 for t in trace]),
                           ("later", [t[8] == 0 for t in trace])):
            # the levels whose pairs all rode in the capped round; a run's first levels (the setup includes
            # the engine's dispatch and the run's own), the others
            pick = np.array(pick)
            if pick.any():
                out[f"top_down_level_steps_{name}_us"] = dict(zip(steps, np.round(np.median(d[pick], axis=0),
                                                                                  1).tolist()))
        # every level's clocks (time.perf_counter: one clock for the ranks of a host), to align the ranks
        out["trace"] = [list(t) for t in trace]
        engine.one_round.trace = None
    if bu_trace:
        d = np.diff(np.array(bu_trace), axis=1) * 1e6
        out["bottom_up_round_steps_us"] = dict(zip(("wait", "round"), np.round(np.median(d, axis=0), 1).tolist()))
        out["bu_trace"] = [list(t) for t in bu_trace]  # (as its round is called, its kernels done, round done)
        engine.one_round.close_bottom_up = close
    prof = cProfile.Profile()
    prof.enable()
    for root in roots:
        engine.search(int(root))
    prof.disable()
    out["small_levels"] = _small_levels(recs)
    out["levels"] = [[(r.depth, r.direction, r.frontier, r.found, round(r.local_s * 1e6), round(r.exchange_s * 1e6),
                       round(r.reduce_s * 1e6), r.bytes_sent) for r in rs] for rs in recs[:2]]
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(28)
    out["profile"] = buf.getvalue()
    if engine.one_round is not None:
        out["tally"] = dict(engine.one_round.tally)
    if profiler:
        _dask_profiler(False)  # as the session left it: its end starts it again
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--roots", type=int, default=16)
    ap.add_argument("--json", required=True)
    ap.add_argument("--sessions", nargs="*", help="run only these sessions (default: all four)")
    args = ap.parse_args()
    from breadth.bfs import SearchConfig, choose_roots, run_session

    g, gpu = shared_gpu_pair(args.scale)
    roots = [int(r) for r in choose_roots(g, args.roots + 4, 2)]
    doc = {"benchmark": "one_round_levels", "gpu": gpu,
           "unit": "median microseconds per call, per rank", "args": vars(args), "sessions": {}}
    for name, cfg, only, spin, prof in (("one_round", SearchConfig(), False, None, False),
                                        ("one_round_dask_profiler_on", SearchConfig(), True, None, True),
                                        ("two_rounds", SearchConfig(one_round_levels=False), True, None, False),
                                        ("one_round_again", SearchConfig(), True, None, False)):
        if args.sessions and name not in args.sessions:
            continue
        doc["sessions"][name] = run_session(g, _rank, args.reps, roots, only, spin, prof, protocol="ucx",
                                            timeout=60.0, config=cfg)
        write_json(args.json, doc)
    for name, ranks in doc["sessions"].items():
        print(f"== {name}: searches {ranks[0]['searches_s']:.3f} s, small levels " +
              " | ".join(str(r["small_levels"]) for r in ranks))
        for k, v in ranks[0].items():
            if isinstance(v, float) and k != "searches_s":
                print(f"{k:44s} " + "  ".join(f"{r[k]:8.1f}" for r in ranks))
        print("top-down level steps:", [r.get("top_down_level_steps_us") for r in ranks])
        print("bottom-up round steps:", [r.get("bottom_up_round_steps_us") for r in ranks])
        print("  pairs inline:", [r.get("top_down_level_steps_inline_us") for r in ranks])
        print("levels (rank 0, first root):", ranks[0]["levels"][0])
        print("levels (rank 1, first root):", ranks[1]["levels"][0])
        print(f"rank 0 profile:\n{ranks[0]['profile']}")
        print("tally:", [r.get("tally") for r in ranks])


if __name__ == "__main__":
    main()
