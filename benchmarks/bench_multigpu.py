"""Multi-GPU Graph500 BFS on one node: weak and strong scaling, and the communicators' own speed.

    python -m benchmarks.bench_multigpu --gpus 4 --configs 26:1 26:2 26:4 28:4 --protocols nccl ucx \\
        --roots 64 --json multigpu.json

One dask-cuda cluster (one worker per GPU, ``--cluster-protocol``, tcp by default) serves every configuration: ``SCALE:P``
prepares the Kronecker graph of that scale on the GPUs into ``P`` shards (on the first ``P`` workers) and
runs ``--roots`` Graph500 searches (warm-up first, each timed between barriers, max over ranks), every
one validated on the device (the five rules).  TEPS follow Graph500 (input tuples in the root's component
over the search time), harmonic mean; each run's is divided by the 1-GPU run's of the same variant in this
run, at its scale per GPU (weak scaling: ``26:1`` for ``27:2`` and ``28:4``) and at its scale (strong
scaling), where the configurations include them.  Every rank's per-level records (direction, frontier, local, exchange,
reduction seconds, bytes) go to the JSON.  ``--commbench`` first times each protocol's communicator
inside a session: 1-64 MB alltoallv between ranks 0 and 1 (GB/s per direction; sizes unknown to the
receiver, so a header first), the same as the device engine's sized rounds (``exchange_device``, sizes known
to both sides) where the communicator has them (each after a barrier, and back to back as raw ucxx's are),
the one-element all-reduce and the engine's counters round; with it, ``--raw-ucxx`` times ucxx itself
between the same two rank processes (its low-level API, progressed in the rank's thread: 8-byte round trips
of host and device buffers, and device transfers of the commbench sizes), the floor the UCX communicator is
measured against -- and, in UCX search sessions, its 8-byte device round trip right after every search, so that
the small levels' exchange is set against a round trip timed in the same seconds
(``small_level_exchange_over_raw_round_trip_beside``).  Raw ucxx runs twice: on ucxx's default endpoints (peer
error handling, with which UCX moves host bytes and CUDA IPC's control messages between two processes of one
host over TCP) and on endpoints without it (``raw-ucxx-no-error-handling``, ``..._beside_no_error_handling``:
shared memory, as the UCX communicator's rounds with a peer of its host).

``--ranks-per-gpu 2`` puts two workers on each GPU, so that one GPU runs two ranks (NCCL refuses that;
UCX moves the device buffers between the processes through CUDA IPC); the workers are then clients of a
private MPS daemon unless ``--mps off`` (``local_cuda_cluster``'s ``mps``; the JSON's ``mps`` says which ran):

    python -m benchmarks.bench_multigpu --ranks-per-gpu 2 --configs 24:2 --protocols ucx tcp \\
        --commbench --raw-ucxx --roots 16 --json ucx_one_gpu.json
"""

from __future__ import annotations

import argparse
import time
import traceback

import numpy as np

from benchmarks.bench_multirank import bench_rank
from benchmarks.harness import add_json_argument, harmonic_mean, new_record, print_table, write_json
from benchmarks.raw_ucxx import ping_pong, raw_pair, release

#: transfers timed per size (medians) in the communicators' and raw ucxx's benchmarks, after 10 untimed ones: 10
#: timed after 3 untimed put a 64 MB sized round back to back at 177 us, 200 timed at 139-144 us on the same H200
_REPS = 50
#: raw ucxx round trips timed after each search with --raw-ucxx (their median is the root's)
_BESIDE_REPS = 20


def _commbench(engine, setup_s, sizes, reps):
    import cupy as cp

    comm = engine.comm
    r, p = comm.rank, comm.size
    res = {"rank": r}
    one = np.zeros(1, np.int64)
    for _ in range(50):
        comm.allreduce(one)
    t0 = time.perf_counter()
    for _ in range(500):
        comm.allreduce(one)
    res["allreduce1_us"] = (time.perf_counter() - t0) / 500 * 1e6
    cnt = np.zeros(2 * p, np.int64)
    t0 = time.perf_counter()
    for _ in range(500):
        comm.allreduce(cnt)
    res["counters_us"] = (time.perf_counter() - t0) / 500 * 1e6
    small = cp.zeros(16, cp.uint64)
    for _ in range(20):
        comm.allgatherv(small, [16] * p)
    t0 = time.perf_counter()
    for _ in range(200):
        comm.allgatherv(small, [16] * p)
    res["allgatherv_small_us"] = (time.perf_counter() - t0) / 200 * 1e6
    empty = cp.empty(0, cp.uint8)
    res["pair"] = []
    for nb in sizes:
        buf = cp.ones(nb, cp.uint8)
        send = [buf if {r, q} == {0, 1} else empty for q in range(p)]
        for _ in range(3):
            comm.alltoallv(send)
        cp.cuda.Device().synchronize()
        ts = []
        for _ in range(reps):
            comm.barrier()
            t0 = time.perf_counter()
            got = comm.alltoallv(send)
            cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t0)
        ok = bool((got[1 - r] == 1).all()) if r < 2 else True
        med = float(np.median(ts))
        res["pair"].append({"bytes": nb, "median_s": med, "GBps_per_direction": nb / med / 1e9, "ok": ok})
    if comm.device_counters:
        # the rounds the device engine runs (sizes known to both sides: no header round), ranks 0 and 1
        res["sized_pair"] = []
        for nb in sizes:
            buf, into = cp.ones(nb, cp.uint8), cp.zeros(nb, cp.uint8)
            peer = {1 - r: buf} if r < 2 else {}
            back = {1 - r: into} if r < 2 else {}
            for _ in range(10):
                comm.exchange_device(peer, back)
            ts = []
            for _ in range(reps):
                comm.barrier()
                t0 = time.perf_counter()
                comm.exchange_device(peer, back)
                comm.wait("sized pair")
                ts.append(time.perf_counter() - t0)
            med = float(np.median(ts))
            # back to back, each round timed alone, as raw ucxx's exchange is (_rawbench): after a barrier
            # the rank that leaves it first also waits for the other to leave it
            comm.barrier()
            bb = []
            for _ in range(reps):
                t0 = time.perf_counter()
                comm.exchange_device(peer, back)
                comm.wait("sized pair")
                bb.append(time.perf_counter() - t0)
            bmed = float(np.median(bb))
            res["sized_pair"].append({"bytes": nb, "median_s": med, "GBps_per_direction": nb / med / 1e9,
                                      "back_to_back_median_s": bmed,
                                      "back_to_back_GBps_per_direction": nb / bmed / 1e9,
                                      "ok": bool((into == 1).all()) if r < 2 else True})
    return res


def _bench_rank_beside_raw(engine, setup_s, roots, nvalidate, nbarriers, reps):
    """:func:`benchmarks.bench_multirank.bench_rank` with raw ucxx's 8-byte device round trip between ranks 0 and 1 timed
    right after each root's search (``reps`` after 3 untimed; the root's record's ``after``: their median, µs),
    so that a level and the round trip it is measured against are timed within a second of each other (two
    processes sharing one H200 drifted between runs from 52 to 77 µs in that round trip).  Two pairs: ucxx's
    default endpoints (with peer error handling: TCP carries their control messages) and endpoints without it
    (shared memory, as the UCX communicator's rounds with a peer of its host); ``after`` is ``[with, without]``."""
    import cupy as cp

    r = engine.comm.rank
    # keep: their contexts and listeners, alive to the end
    pairs = [raw_pair(engine.comm, error_handling=eh) for eh in (True, False)]
    Array = pairs[0][3]
    a, b = Array(cp.ones(8, np.uint8)), Array(cp.zeros(8, np.uint8))

    def raw_rt():
        if r >= 2:
            return None
        return [float(np.median(ping_pong((worker, ep, api), a, b, r, reps + 3)[3:]) * 1e6)
                for worker, ep, api, _, _ in pairs]

    out = bench_rank(engine, setup_s, roots, nvalidate, nbarriers, after_search=raw_rt)
    engine.comm.barrier()  # both ends done before either closes
    for pair in pairs:
        release(pair)
    return out


def _rawbench(engine, setup_s, sizes, reps, error_handling=True):
    """Ranks 0 and 1 ping-pong with ucxx's low-level API (their own UCX context; the listener's port goes
    through the session's communicator; ``error_handling``: ucxx's default endpoints, else without peer error
    handling, see :func:`benchmarks.raw_ucxx.raw_pair`), progressing the worker in this thread: per size, the median
    round trip and the one-way rate (two transfers per round trip)."""
    import cupy as cp

    comm = engine.comm
    r = comm.rank
    # keep: its context and listener, alive to the end
    worker, ep, ucx_api, Array, keep = raw_pair(comm, error_handling=error_handling)
    res = {"rank": r}

    def wait(reqs):
        while not all(q.completed for q in reqs):
            worker.progress()
        for q in reqs:
            q.check_error()

    if r < 2:
        for name, xp, nbytes in [("host_8B", np, 8), ("device_8B", cp, 8)] + [(f"device_{n}B", cp, n) for n in sizes]:
            a, b = Array(xp.ones(nbytes, np.uint8)), Array(xp.zeros(nbytes, np.uint8))
            med = float(np.median(ping_pong((worker, ep, ucx_api), a, b, r, reps + 3)[3:]))
            res[name] = {"bytes": nbytes, "round_trip_us": med * 1e6, "GBps_one_way": 2 * nbytes / med / 1e9}
            ts = []
            for i in range(reps + 3):  # both directions at once, as a pair round of the communicators
                t0 = time.perf_counter()
                wait([ep.tag_recv(b, tag=ucx_api.UCXXTag(3 + r)), ep.tag_send(a, tag=ucx_api.UCXXTag(4 - r))])
                if i >= 3:
                    ts.append(time.perf_counter() - t0)
            med = float(np.median(ts))
            res[name].update(exchange_us=med * 1e6, exchange_GBps_per_direction=nbytes / med / 1e9)
    comm.barrier()  # both ends done before either closes
    release((worker, ep))
    return res


def summarize(out, rts, g, scale, protocol, session_s) -> dict:
    rows0 = out[0]["rows"]
    times = np.array([r["time"] for r in rows0])
    nedge = np.array([r["nedge"] for r in rows0], np.float64)
    teps = nedge / times
    nroot = len(rows0)

    def per_root(key):
        return np.array([max(sum(lv.get(key, 0.0) for lv in o["rows"][i]["levels"]) for o in out) for i in range(nroot)])

    local, exch, red = per_root("local_s"), per_root("exchange_s"), per_root("reduce_s")
    nlev = np.array([len(r["levels"]) for r in rows0])
    nbytes = np.array([sum(sum(lv["bytes_sent"] for lv in o["rows"][i]["levels"]) for o in out) for i in range(nroot)])
    med = int(np.argsort(times)[len(times) // 2])
    levels = [{"depth": lv["depth"], "direction": lv["direction"], "frontier": lv["frontier"], "found": lv["found"],
               **{k: [o["rows"][med]["levels"][d][k] for o in out] for k in ("local_s", "exchange_s", "reduce_s",
                                                                             "bytes_sent")}}
              for d, lv in enumerate(rows0[med]["levels"])]
    viol = [r["violations"] for r in rows0 if r["violations"] is not None]
    # per-level exchange overhead: exchange seconds of levels that moved little data (latency-bound)
    small = [(max(o["rows"][i]["levels"][d]["exchange_s"] for o in out), rows0[i]["levels"][d]["direction"])
             for i in range(nroot) for d in range(len(rows0[i]["levels"]))
             if sum(o["rows"][i]["levels"][d]["bytes_sent"] for o in out) < (1 << 20)]
    by_dir = {d: [s for s, sd in small if sd == d] for d in ("td", "bu")}
    small = [s for s, _ in small]
    # raw ucxx's device round trip timed right after each search (_bench_rank_beside_raw), where it was: ucxx's
    # default endpoints, and endpoints without peer error handling
    after = [r["after"] if isinstance(r.get("after"), list) else [r.get("after"), None] for r in rows0]
    beside = {}
    for i, suffix in enumerate(("", "_no_error_handling")):
        raw = [a[i] for a in after if a[i] is not None]
        if raw and small:
            beside.update({f"raw_device_8B_round_trip_us_beside_searches{suffix}": float(np.median(raw)),
                           f"raw_device_8B_round_trip_us_beside_searches{suffix}_range": [float(min(raw)),
                                                                                          float(max(raw))],
                           f"small_level_exchange_over_raw_round_trip_beside{suffix}":
                               float(np.median(small) * 1e6 / np.median(raw))})
    return {"scale": scale, "gpus": g.nparts, "protocol": protocol,
            "roots": nroot, "validated_roots": len(viol), "valid": bool(viol) and all(not any(v.values()) for v in viol),
            "construction_s": g.construction_time, "session_s": session_s,
            "harmonic_mean_teps": harmonic_mean(teps),
            "median_teps": float(np.median(teps)), "median_time_s": float(np.median(times)),
            "median_local_s": float(np.median(local)), "median_exchange_s": float(np.median(exch)),
            "median_reduce_s": float(np.median(red)), "median_levels": float(np.median(nlev)),
            "median_exchange_per_level_us": float(np.median(exch / nlev) * 1e6),
            "median_small_level_exchange_us": float(np.median(small) * 1e6) if small else None,
            "median_small_level_exchange_us_by_direction": {d: float(np.median(v) * 1e6) if v else None
                                                            for d, v in by_dir.items()},
            **beside,
            "exchange_share": float(np.median(exch / times)), "median_bytes_sent_total": float(np.median(nbytes)),
            "per_root": [{"root": r["root"], "time_s": r["time"], "nedge": r["nedge"], "violations": r["violations"],
                          "per_rank_levels": [o["rows"][i]["levels"] for o in out]} for i, r in enumerate(rows0)],
            "median_root_levels": levels}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=None, help="cluster workers (default: every GPU)")
    ap.add_argument("--configs", nargs="+", default=["26:1", "26:2"], help="SCALE:GPUS")
    ap.add_argument("--protocols", nargs="+", default=["nccl"])
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--validate", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--commbench", action="store_true")
    ap.add_argument("--raw-ucxx", action="store_true", help="with --commbench: time ucxx itself between ranks 0 and 1")
    ap.add_argument("--ranks-per-gpu", type=int, default=1, help="workers (ranks) on each GPU")
    ap.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                    help="with --ranks-per-gpu > 1: the workers as clients of a private MPS daemon (local_cuda_cluster)")
    ap.add_argument("--cluster-protocol", default="tcp", choices=("tcp", "ucx"),
                    help="Dask's own protocol (graph preparation); local_cuda_cluster gives a UCX cluster "
                         "UCX's progress thread (see breadth.pipeline.cluster.cluster.ucx_progress_environ), without "
                         "which each worker's event loop spun and made every synchronisation of a rank 2-4x slower")
    ap.add_argument("--variants", nargs="+", default=[""],
                    help="every configuration runs once per variant: 'FIELD=VALUE,FIELD=VALUE', breadth.search "
                         "settings over the defaults (e.g. 'level_graphs=False,beta=24', values as Python literals; "
                         "the environment's DASK_BREADTH__SEARCH__* are not applied); '' is the defaults")
    ap.add_argument("--stall", type=float, default=0.0,
                    help="after this many seconds dump every worker thread's stack and end the worker (0: never): "
                         "where a hung run waits")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds a session's round may wait for a peer before it fails")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    import cupy as cp

    from breadth.bfs import choose_roots, run_session
    from breadth.bfs.search_config import SearchConfig
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster.cluster import local_cuda_cluster, worker_addresses

    out = new_record("bench_multigpu", args)
    out.update(teps_convention="Graph500 (input tuples in component / time), harmonic mean",
               ngpus_visible=cp.cuda.runtime.getDeviceCount(),
               nccl=__import__("cupy.cuda.nccl").cuda.nccl.get_version(), comm=[], runs=[], errors=[])

    def dump():
        if args.json:
            write_json(args.json, out, default=float)

    t0 = time.perf_counter()
    client = local_cuda_cluster(workers=args.gpus, protocol=args.cluster_protocol, ranks_per_gpu=args.ranks_per_gpu,
                                mps={"auto": "auto", "on": True, "off": False}[args.mps])
    out["cluster_start_s"] = time.perf_counter() - t0
    out["mps"] = client.cluster.mps is not None  # ranks sharing a GPU as clients of a private MPS daemon
    if args.stall:
        import faulthandler

        client.run(faulthandler.dump_traceback_later, args.stall, exit=True)
    print(f"cluster of {len(worker_addresses(client))} GPU workers ({args.cluster_protocol}"
          f"{', MPS' if out['mps'] else ''}) in "
          f"{out['cluster_start_s']:.1f} s",
          flush=True)
    print(f"{'scale':>5} {'gpus':>4} {'proto':>5} {'GTEPS(hm)':>9} {'med ms':>7} {'local':>6} {'exch':>6} {'red':>5} "
          f"{'lev':>3} {'us/lev':>6} {'small':>6} {'prep s':>6} valid", flush=True)
    cache = {}
    for cfg in args.configs:
        scale, p = (int(x) for x in cfg.split(":"))
        try:
            for k in list(cache):
                if k != (scale, p):
                    cache.pop(k).release()
            if (scale, p) not in cache:
                el = kronecker(scale, seed=args.seed, device="gpu")
                g = prepare(el, client, nparts=p, device="gpu")
                cache[(scale, p)] = g
            g = cache[(scale, p)]
            if args.commbench and p > 1 and not any(c["gpus"] == p for c in out["comm"]):
                for eh, name in ((True, "raw-ucxx"), (False, "raw-ucxx-no-error-handling")) if args.raw_ucxx else ():
                    try:
                        res = run_session(g, _rawbench, [1 << 20, 1 << 24, 1 << 26], _REPS, eh, protocol="tcp",
                                          timeout=120.0)
                        out["comm"].append({"gpus": p, "protocol": name, "ranks": res})
                        print(f"{name}: " + ", ".join(f"{k} {v['round_trip_us']:.0f} us {v['GBps_one_way']:.1f} GB/s "
                                                       f"(exchange {v['exchange_us']:.0f} us "
                                                       f"{v['exchange_GBps_per_direction']:.1f} GB/s)"
                                                       for k, v in res[0].items() if k != "rank"), flush=True)
                    except Exception as e:
                        out["errors"].append({"comm": name, "gpus": p, "error": traceback.format_exc()})
                        print(f"{name} x{p} FAILED: {e!r}", flush=True)
                for proto in args.protocols:
                    try:
                        res = run_session(g, _commbench, [1 << 20, 1 << 24, 1 << 26], _REPS, protocol=proto,
                                          timeout=120.0)
                        out["comm"].append({"gpus": p, "protocol": proto, "ranks": res})
                        r0 = res[0]
                        print(f"comm {proto} x{p}: allreduce {r0['allreduce1_us']:.1f} us, counters {r0['counters_us']:.1f} us, "
                              f"allgatherv(small) {r0['allgatherv_small_us']:.1f} us, "
                              + ", ".join(f"{q['bytes'] >> 20} MB {q['GBps_per_direction']:.0f} GB/s ok={q['ok']}"
                                          for q in r0["pair"])
                              + "; sized rounds: "
                              + ", ".join(f"{q['bytes'] >> 20} MB {q['GBps_per_direction']:.0f} GB/s "
                                          f"(back to back {q['back_to_back_GBps_per_direction']:.0f}) ok={q['ok']}"
                                          for q in r0.get("sized_pair", [])),
                              flush=True)
                    except Exception as e:
                        out["errors"].append({"comm": proto, "gpus": p, "error": traceback.format_exc()})
                        print(f"comm {proto} x{p} FAILED: {e!r}", flush=True)
                    dump()
            rts = choose_roots(g, args.roots, args.seed + 1)
            for proto, variant in [(q, v) for q in (args.protocols if p > 1 else ["self"])
                                   for v in args.variants]:
                try:
                    from dask.config import interpret_value

                    given = {k: interpret_value(v) for k, v in (kv.split("=", 1) for kv in variant.split(",") if kv)}
                    config = SearchConfig(**given)  # the variant's settings alone
                    ts = time.perf_counter()
                    body, extra = bench_rank, ()
                    if args.raw_ucxx and proto == "ucx" and p > 1:  # raw ucxx's round trip beside every search
                        body, extra = _bench_rank_beside_raw, (_BESIDE_REPS,)
                    res = run_session(g, body, rts, args.validate, 200, *extra, protocol=proto if p > 1 else "tcp",
                                      timeout=args.timeout, config=config)
                    r = summarize(res, rts, g, scale, proto, time.perf_counter() - ts)
                    r["variant"] = variant
                    out["runs"].append(r)
                    print(f"{scale:5d} {p:4d} {proto:>5} {r['harmonic_mean_teps'] / 1e9:9.1f} {r['median_time_s'] * 1e3:7.2f} "
                          f"{r['median_local_s'] * 1e3:6.2f} {r['median_exchange_s'] * 1e3:6.2f} {r['median_reduce_s'] * 1e3:5.2f} "
                          f"{r['median_levels']:3.0f} {r['median_exchange_per_level_us']:6.0f} "
                          f"{(r['median_small_level_exchange_us'] or 0):6.0f} {g.construction_time:6.1f} {r['valid']} {variant}", flush=True)
                    if "small_level_exchange_over_raw_round_trip_beside" in r:
                        print(f"  raw ucxx device round trip beside the searches "
                              f"{r['raw_device_8B_round_trip_us_beside_searches']:.0f} us: small levels "
                              f"{r['small_level_exchange_over_raw_round_trip_beside']:.2f}x", flush=True)
                    if "small_level_exchange_over_raw_round_trip_beside_no_error_handling" in r:
                        print(f"  (without peer error handling "
                              f"{r['raw_device_8B_round_trip_us_beside_searches_no_error_handling']:.0f} us: "
                              f"{r['small_level_exchange_over_raw_round_trip_beside_no_error_handling']:.2f}x)",
                              flush=True)
                except Exception as e:
                    out["errors"].append({"config": cfg, "protocol": proto, "error": traceback.format_exc()})
                    print(f"{cfg} {proto} FAILED: {e!r}", flush=True)
                dump()
        except Exception as e:
            out["errors"].append({"config": cfg, "error": traceback.format_exc()})
            print(f"{cfg} FAILED: {e!r}", flush=True)
            dump()
    out["total_s"] = time.perf_counter() - t0
    dump()
    # each run against the 1-GPU run of the same variant: at the scale per GPU (weak scaling: scale - log2(P)) and
    # at the same scale (strong scaling), where the run has them
    for r in out["runs"]:
        one = {o["scale"]: o for o in out["runs"] if o["gpus"] == 1 and o.get("variant") == r.get("variant")}
        p = r["gpus"]
        weak = one.get(r["scale"] - (p.bit_length() - 1)) if p & (p - 1) == 0 else None
        r["over_one_gpu_weak"] = r["harmonic_mean_teps"] / weak["harmonic_mean_teps"] if weak else None
        strong = one.get(r["scale"])
        r["over_one_gpu_strong"] = r["harmonic_mean_teps"] / strong["harmonic_mean_teps"] if strong else None
    dump()
    print_table(["scale", "GPUs", "protocol", "variant", "GTEPS (hm)", "median ms", "x 1 GPU (weak)",
                 "x 1 GPU (strong)", "construction s", "valid"],
                [[r["scale"], r["gpus"], r["protocol"], r.get("variant", ""), r["harmonic_mean_teps"] / 1e9,
                  r["median_time_s"] * 1e3, r["over_one_gpu_weak"], r["over_one_gpu_strong"], r["construction_s"],
                  r["valid"]] for r in out["runs"]])
    for k in list(cache):
        cache.pop(k).release()
    cluster = client.cluster
    client.close()
    cluster.close()
    return 1 if out["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
