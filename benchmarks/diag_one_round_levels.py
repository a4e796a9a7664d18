"""Where a one-round level's time goes, two GPU ranks sharing one GPU over UCX.

    python benchmarks/diag_one_round_levels.py --json $OUT/one_round_levels.json

Two dask-cuda workers on one GPU (``local_cuda_cluster(ranks_per_gpu=2)``), a Kronecker graph in two shards and a
UCX session; then, both ranks in step, median microseconds per call over ``--reps`` calls (after 20 warm-up calls
and a barrier): an 8-byte host exchange in raw ucxx on contexts of its own between the two ranks -- with the TAG
feature alone (as ``bench_multigpu.py --raw-ucxx``), and with TAG and WAKEUP and the worker in blocking progress
mode (as the communicator's context) -- the communicator's capped round of a level's header (5 words) from pageable
and from page-locked memory, right after a small kernel (waited for by the stream's synchronize, by polling an
event, not at all) or 20 us of the host's own work, with its usual busy poll and polling 2 ms, the same header
posted on the communicator's endpoints with its arrays wrapped once, and a bottom-up level's round (counters and a
256 KB bitmap: the counters on the device, in page-locked host memory as a sized round's message, or as a capped
round's words riding with the bitmap, as the levels sent them in session 32; the last also right after a small
kernel and after one of about a bottom-up level's time, each beside the kernel and its wait alone), the bitmap
alone, bitmap and counters as one device message (alone, and with the copies a level would then need), and the
bitmap followed by a capped round of the counters.

Then ``--roots`` searches: their small levels' medians (local, exchange, round) by direction and, for one-round
top-down levels, where the host's time went (to the graph's launch, the launch, the wait for the stream, the
round's preparation, the round, the rest; all levels, a run's first ones, the others), for bottom-up levels' rounds
(their kernels done), by shape -- bitmaps both ways, or every part listed -- how long each post took and when each
request completed (``bu_trace``: called, round done, its last wait started, then each request complete: device
sends, capped send and receive, device receives; one clock for the ranks of a host, so that their steps can be
lined up). Then the same searches untraced (``small_levels_untraced``), again for about a second with each of the
process's threads' CPU time and the host's (``/proc``: a busy thread beside the rank's, time a hypervisor took),
and profiled (cProfile, the functions that took the most time). ``--sessions`` names the sessions to run, in order,
repeats allowed (``_KINDS``; by default the first four: one-round levels with the rounds timed back to back first;
the same with the workers' Dask profiler running (a session stops it); two-round levels
(``SearchConfig(one_round_levels=False)``); one-round levels again). Each top-down level's clocks go to the JSON
(``trace``).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import threading
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


def _cpu() -> int:
    """The CPU this thread last ran on (field 39 of its /proc stat)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[36])


def _thread_ticks() -> dict:
    """This process's threads: native id -> (user and system CPU time in 10 ms ticks, the thread's name)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
            fields = rest.split()
            out[int(tid)] = (int(fields[11]) + int(fields[12]), head.split("(", 1)[1])
        except OSError:  # the thread ended
            pass
    return out


def _cpu_ticks() -> dict:
    """The host's CPU time since boot in 10 ms ticks, all CPUs together, by kind (``/proc/stat``)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return dict(zip(("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"), v))


def _rank(engine, setup_s, reps, roots, kind: dict):
    """One rank's part of a session of ``kind`` (see ``_KINDS``)."""
    import cupy as cp

    comm = engine.comm
    only_searches, profiler, pin = kind.get("only_searches", True), kind.get("profiler", False), kind.get("pin")
    if engine.one_round is not None and "list_cap" in kind:
        engine.one_round.list_cap = kind["list_cap"]
    if "spin" in kind:
        comm._spin = kind["spin"]
    allowed = sorted(os.sched_getaffinity(0))
    if pin is not None:  # this rank's thread on one CPU of its worker's: the pin-th from the end, a CPU per rank
        os.sched_setaffinity(0, {allowed[-1 - pin - comm.rank]})
    if profiler:
        _dask_profiler(True)
    out: dict = {"engine": type(engine).__name__, "one_round": engine.one_round is not None, "cpus": allowed,
                 "cpu_at_start": _cpu()}

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
        locked = np.frombuffer(cp.cuda.alloc_pinned_memory(40), np.int64, 5)  # as the levels send them
        timeit("capped_round_5_words_pinned_send", lambda: comm.capped_round({peer: locked}))
        # the same words right after a small kernel: waited for with the stream's synchronize (as the levels do),
        # by polling an event, not at all; and after 20 us of the host's own busy time instead of a kernel
        one, st0 = cp.zeros(1, cp.int64), cp.cuda.get_current_stream()
        ev = cp.cuda.Event(block=False, disable_timing=True)

        def polled():
            cp.add(one, 1, out=one)
            ev.record(st0)
            while not ev.done:
                pass
            comm.capped_round({peer: locked})

        def busy():
            t = time.perf_counter() + 2e-5
            while time.perf_counter() < t:
                pass
            comm.capped_round({peer: locked})

        timeit("small_kernel_synchronized_then_capped_round_5_words",
               lambda: (cp.add(one, 1, out=one), st0.synchronize(), comm.capped_round({peer: locked})))
        timeit("small_kernel_event_polled_then_capped_round_5_words", polled)
        timeit("small_kernel_not_waited_then_capped_round_5_words",
               lambda: (cp.add(one, 1, out=one), comm.capped_round({peer: locked})))
        timeit("host_busy_20us_then_capped_round_5_words", busy)
        spin = comm._spin
        comm._spin = 2e-3
        timeit("capped_round_5_words_polled_2ms", lambda: comm.capped_round({peer: head}))
        comm._spin = spin
        if engine.one_round is not None:  # page-locked words as large as the levels' (a list's worth, or less)
            big = np.frombuffer(cp.cuda.alloc_pinned_memory(8 * engine.one_round.words), np.int64)
            for kb in (32, 128):
                n = min(kb << 7, big.size)
                timeit(f"capped_round_{8 * n >> 10}KB_pinned", lambda: comm.capped_round({peer: big[:n]}))
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
        # a bottom-up level's round (as one_round_levels.close_bottom_up's were): device counters and a 256 KB
        # bitmap
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

        wait = comm._wait
        timeline: list = []  # the round's waits: each as it started, then its requests as each completed

        def timed_wait(reqs, what, round_of, limit=None, spin=None):
            # each request's completion time (the worker progressed in a busy loop); the round's last wait holds
            # every request: capped send and receive, device sends, device receives
            t, done = time.perf_counter(), [None] * len(reqs)
            while None in done:
                comm._worker.progress()
                now = time.perf_counter()
                for i, (_, q) in enumerate(reqs):
                    if done[i] is None and q.completed:
                        done[i] = now
                if now - t > 10:
                    break
            for p, q in reqs:
                comm._done(p, q, what)
            timeline.append([t] + done)

        posts: list = []  # each post's start and end

        def timed(fn):
            def call(*a, **k):
                t = time.perf_counter()
                r = fn(*a, **k)
                posts.append((t, time.perf_counter()))
                return r
            return call

        sized_post, capped_posts = comm._sized_post, comm._capped_posts
        post_steps: list = []  # per round: its call to the first post, each post

        def traced_close(own, g):  # a bottom-up level's round (its kernels done)
            ta = time.perf_counter()
            comm._wait, comm._sized_post, comm._capped_posts = timed_wait, timed(sized_post), timed(capped_posts)
            try:
                rows = close(own, g)
            finally:
                comm._wait, comm._sized_post, comm._capped_posts = wait, sized_post, capped_posts
            bu_trace.append((ta, time.perf_counter(), *timeline[-1]))
            timeline.clear()
            post_steps.append([round((posts[0][0] - ta) * 1e6, 1)] + [round((b - a) * 1e6, 1) for a, b in posts])
            posts.clear()
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
        # by shape: a round whose bitmap went device to device both ways (device send, capped send and receive,
        # device receive: 4 requests, 3 posts) and one whose parts all came listed (2 requests, 1 post)
        for name, n in (("bitmaps", 4), ("listed", 2)):
            bt = np.array([t for t in bu_trace if len(t) == 3 + n], np.float64).reshape(-1, 3 + n)
            if not len(bt):
                continue
            out[f"bottom_up_round_{name}"] = {"rounds": len(bt), "round_us": round(float(np.median(
                bt[:, 1] - bt[:, 0])) * 1e6, 1)}
            # from the round's call: its last wait started, then each request complete (one peer)
            names = ("wait", "capped_send", "capped_recv") + (("device_send", "device_recv") if n == 4 else ())
            out[f"bottom_up_round_{name}"]["requests_us"] = dict(zip(names, np.round(np.median(
                (bt[:, 2:] - bt[:, :1]) * 1e6, axis=0), 1).tolist()))
            steps = [x for x, t in zip(post_steps, bu_trace) if len(t) == 3 + n]
            if steps and all(len(x) == len(steps[0]) for x in steps):  # to the first post, then each post
                out[f"bottom_up_round_{name}"]["post_steps_us"] = np.median(np.array(steps), axis=0).round(1).tolist()
        out["bottom_up_round_post_steps_each"] = post_steps[:12]
        # (as its round is called, round done, its last wait started, then each request complete)
        out["bu_trace"] = [list(t) for t in bu_trace]
        engine.one_round.close_bottom_up = close
    comm.barrier()
    plain = [engine.search(int(root)) for root in roots]  # as the searches run (nothing traced or profiled)
    # which of this process's threads use the CPU while the searches run (ticks of 10 ms over about a second)
    names = {t.native_id: t.name for t in threading.enumerate()}
    ticks0, cpu0, t0 = _thread_ticks(), _cpu_ticks(), time.perf_counter()
    while time.perf_counter() - t0 < 1.0:
        for root in roots:
            engine.search(int(root))
    ticks = {tid: v - ticks0.get(tid, (0, ""))[0] for tid, (v, _) in _thread_ticks().items()}
    out["thread_cpu_ms_per_s"] = sorted(((round(10 * v / (time.perf_counter() - t0)), names.get(tid, comm_name), tid)
                                         for tid, (_, comm_name) in _thread_ticks().items()
                                         if (v := ticks.get(tid, 0)) > 0), reverse=True)
    out["rank_thread"] = threading.get_native_id()
    # the host's CPUs meanwhile (/proc/stat, ms per s of all CPUs): steal is time a hypervisor gave elsewhere
    cpu1, dt = _cpu_ticks(), time.perf_counter() - t0
    out["host_cpu_ms_per_s"] = {k: round(10 * (cpu1[k] - cpu0[k]) / dt) for k in cpu0}
    prof = cProfile.Profile()
    prof.enable()
    for root in roots:
        engine.search(int(root))
    prof.disable()
    out["small_levels"] = _small_levels(recs)
    out["cpu_at_end"] = _cpu()
    if pin is not None:
        os.sched_setaffinity(0, allowed)
    out["small_levels_untraced"] = _small_levels(plain)
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


#: the sessions: each times its searches; ``only_searches`` False: the rounds back to back first; ``profiler``:
#: the workers' Dask profiler running; ``pin``: each rank's thread on one CPU (the ``pin``-th from the end of its
#: worker's, a CPU per rank); ``list_cap``: :attr:`OneRoundLevels.list_cap` (0: every bottom-up level sends its
#: bitmap, none its list); ``spin``: how long the communicator's waits busy-poll (s) before sleeping
_KINDS = {"one_round": {"only_searches": False},
          "one_round_dask_profiler_on": {"profiler": True},
          "two_rounds": {"one_round_levels": False},
          "one_round_again": {},
          "one_round_bitmaps_only": {"list_cap": 0},
          "one_round_spin_0": {"spin": 0.0},
          "one_round_spin_10us": {"spin": 1e-5},
          "one_round_spin_20us": {"spin": 2e-5},
          "one_round_spin_100us": {"spin": 1e-4},
          "one_round_spin_2ms": {"spin": 2e-3},
          "one_round_pinned": {"pin": 0},
          "one_round_pinned_apart": {"pin": 2}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--roots", type=int, default=16)
    ap.add_argument("--json", required=True)
    ap.add_argument("--sessions", nargs="*", help="run these sessions, in this order, repeats allowed (default: the "
                    "first four: one_round, one_round_dask_profiler_on, two_rounds, one_round_again)")
    args = ap.parse_args()
    from breadth.bfs import SearchConfig, choose_roots, run_session

    g, gpu = shared_gpu_pair(args.scale)
    roots = [int(r) for r in choose_roots(g, args.roots + 4, 2)]
    doc = {"benchmark": "one_round_levels", "gpu": gpu,
           "unit": "median microseconds per call, per rank", "args": vars(args), "sessions": {}}
    bad = [n for n in args.sessions or () if n not in _KINDS]
    if bad:
        ap.error(f"--sessions: unknown {bad}; expected some of {list(_KINDS)}")
    # in the order given, repeats allowed (alternating A/B sessions on one pair of processes)
    for i, name in enumerate(args.sessions or list(_KINDS)[:4]):
        kind = _KINDS[name]
        key = name if name not in doc["sessions"] else f"{name}_{i}"
        doc["sessions"][key] = run_session(g, _rank, args.reps, roots, kind, protocol="ucx", timeout=60.0,
                                           config=SearchConfig(one_round_levels=kind.get("one_round_levels", True)))
        write_json(args.json, doc)
    for name, ranks in doc["sessions"].items():
        print(f"== {name}: searches {ranks[0]['searches_s']:.3f} s, small levels " +
              " | ".join(str(r["small_levels"]) for r in ranks) + "; untraced " +
              " | ".join(str(r["small_levels_untraced"]) for r in ranks))
        for k, v in ranks[0].items():
            if isinstance(v, float) and k != "searches_s":
                print(f"{k:44s} " + "  ".join(f"{r[k]:8.1f}" for r in ranks))
        print("top-down level steps:", [r.get("top_down_level_steps_us") for r in ranks])
        print("bottom-up rounds, bitmaps:", [r.get("bottom_up_round_bitmaps") for r in ranks])
        print("bottom-up rounds, listed:", [r.get("bottom_up_round_listed") for r in ranks])
        print("  posts each:", [r.get("bottom_up_round_post_steps_each") for r in ranks])
        print("  pairs inline:", [r.get("top_down_level_steps_inline_us") for r in ranks])
        print("levels (rank 0, first root):", ranks[0]["levels"][0])
        print("levels (rank 1, first root):", ranks[1]["levels"][0])
        print(f"rank 0 profile:\n{ranks[0]['profile']}")
        print("tally:", [r.get("tally") for r in ranks])


if __name__ == "__main__":
    main()
