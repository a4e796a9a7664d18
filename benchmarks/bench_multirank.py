"""Graph500 BFS on 1, 2 and 4 ranks (worker processes) of this machine: TEPS and the exchange's share.

    python -m benchmarks.bench_multirank --scales 20 22 --workers 1 2 4 --roots 16 --json multirank_cpu.json
    python -m benchmarks.bench_multirank --scales 20 --workers 2 4 --protocols tcp ucx --repeats 3 \\
        --json multirank_cpu_tcp_ucx.json

For each (scale, workers): a fresh local cluster, the Kronecker graph generated and prepared into one
shard per worker, then for each repeat one session per protocol (alternating, on the same graph):
``roots`` searches timed as Graph500 does (between barriers, max over ranks), then ``--barriers``
barriers and as many one-element all-reduces timed back to back (the latency of a small round).
Every rank keeps its per-level records (direction, frontier, local time, exchange time, bytes sent), so
the JSON holds the breakdown of every rank for every root; the first ``--validate`` roots are checked
with the five Graph500 rules.  On a 2-core machine more ranks cannot be faster: the point is what the
exchange costs (its share of the search time, and the bytes per level).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.harness import add_json_argument, new_record, print_table, write_json


def bench_rank(engine, setup_s, roots, nvalidate, nbarriers, after_search=None):
    """Rank body: warm-up, then each root timed between barriers, then ``nbarriers`` barriers and one-element
    all-reduces; every rank returns its own records and its mean seconds per barrier / all-reduce.
    ``after_search``: called on every rank after each root's search is timed (collective); what it returns
    goes to the root's record as ``after``."""
    from breadth.bfs.graph500.driver import _search_edge_count
    from breadth.bfs.graph500.validate import validate_rank

    comm = engine.comm
    engine.search(int(roots[0]))  # warm-up: kernels compiled, pages touched
    rows = []
    for i, root in enumerate(roots):
        comm.barrier()
        t0 = time.perf_counter()
        recs = engine.search(int(root))
        t = time.perf_counter() - t0
        t_max = float(comm.allreduce(np.array([t]), "max")[0])
        after = after_search() if after_search is not None else None
        nedge, reached = _search_edge_count(engine)
        viol = validate_rank(engine, int(root)) if i < nvalidate else None
        rows.append({"root": int(root), "time": t_max, "rank_time": t, "nedge": nedge, "reached": reached,
                     "violations": viol, "levels": [r.as_dict() for r in recs], "after": after})
    comm.barrier()
    t0 = time.perf_counter()
    for _ in range(nbarriers):
        comm.barrier()
    t1 = time.perf_counter()
    one = np.ones(1, np.int64)
    for _ in range(nbarriers):
        comm.allreduce(one)
    t2 = time.perf_counter()
    n = max(nbarriers, 1)
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows, "barrier_s": (t1 - t0) / n,
            "allreduce_s": (t2 - t1) / n}


def run_one(scale: int, workers: int, roots: int, seed: int, protocols: list[str], repeats: int, nvalidate: int,
            nbarriers: int) -> list[dict]:
    """One cluster and graph; ``repeats`` x one session per protocol, alternating; one summary per session."""
    from distributed import wait

    from breadth.bfs import choose_roots, run_session
    from breadth.pipeline import kronecker, local_cluster, prepare

    client = local_cluster(workers=workers)
    try:
        threads = list(client.nthreads().values())
        edges = kronecker(scale, seed=seed)
        edges.edges = client.persist(edges.edges)
        wait(edges.edges)
        g = prepare(edges, client)
        edges.edges = None
        rts = choose_roots(g, roots, seed + 1)
        runs = []
        for rep in range(repeats):
            for protocol in protocols:
                t0 = time.perf_counter()
                out = run_session(g, bench_rank, rts, nvalidate, nbarriers, protocol=protocol, timeout=300.0)
                session_s = time.perf_counter() - t0
                r = _summary(out, g, scale, workers, threads, protocol, session_s)
                r["repeat"] = rep
                runs.append(r)
        g.release()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    return runs


def _summary(out: list[dict], g, scale: int, workers: int, threads: list, protocol: str, session_s: float) -> dict:
    from breadth.bfs.graph500.statistics import statistics

    rows0 = out[0]["rows"]
    times = np.array([r["time"] for r in rows0])
    nedge = np.array([r["nedge"] for r in rows0], np.float64)
    teps = nedge / times
    # per root: the slowest rank's local and exchange seconds summed over levels, bytes summed over ranks
    local = np.array([max(sum(lv["local_s"] for lv in o["rows"][i]["levels"]) for o in out)
                      for i in range(len(rows0))])
    exch = np.array([max(sum(lv["exchange_s"] for lv in o["rows"][i]["levels"]) for o in out)
                     for i in range(len(rows0))])
    nbytes = np.array([sum(sum(lv["bytes_sent"] for lv in o["rows"][i]["levels"]) for o in out)
                       for i in range(len(rows0))])
    med = int(np.argsort(times)[len(times) // 2])
    levels = []  # the median root's levels, with every rank's figures side by side
    for d, lv in enumerate(rows0[med]["levels"]):
        levels.append({"depth": lv["depth"], "direction": lv["direction"], "frontier": lv["frontier"],
                       "found": lv["found"],
                       "local_s": [o["rows"][med]["levels"][d]["local_s"] for o in out],
                       "exchange_s": [o["rows"][med]["levels"][d]["exchange_s"] for o in out],
                       "bytes_sent": [o["rows"][med]["levels"][d]["bytes_sent"] for o in out]})
    viol = [r["violations"] for r in rows0 if r["violations"] is not None]
    # every level of every root: the slowest rank's exchange seconds (the level's cost of talking)
    level_exch = [max(o["rows"][i]["levels"][d]["exchange_s"] for o in out)
                  for i in range(len(rows0)) for d in range(len(rows0[i]["levels"]))]
    return {
        "scale": scale, "workers": workers, "threads_per_worker": threads, "protocol": protocol,
        "roots": len(rows0), "validated_roots": len(viol), "valid": all(not any(v.values()) for v in viol),
        "construction_s": g.construction_time, "session_s": session_s,
        "setup_s": [o["setup_s"] for o in out],
        "harmonic_mean_teps": statistics(teps, rate=True)["harmonic_mean"],
        "median_time_s": float(np.median(times)),
        "median_local_s": float(np.median(local)), "median_exchange_s": float(np.median(exch)),
        "exchange_share": float(np.median(exch / times)),
        "median_bytes_sent_total": float(np.median(nbytes)),
        "median_level_exchange_s": float(np.median(level_exch)), "mean_level_exchange_s": float(np.mean(level_exch)),
        "barrier_s": max(o["barrier_s"] for o in out), "allreduce_s": max(o["allreduce_s"] for o in out),
        "per_root": [{"root": r["root"], "time_s": r["time"], "nedge": r["nedge"], "local_s": float(lo),
                      "exchange_s": float(ex), "bytes_sent_total": int(b),
                      "per_rank": [{"rank": o["rank"], "time_s": o["rows"][i]["rank_time"],
                                    "levels": o["rows"][i]["levels"]} for o in out]}
                     for i, (r, lo, ex, b) in enumerate(zip(rows0, local, exch, nbytes))],
        "median_root_levels": levels,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--roots", type=int, default=16)
    ap.add_argument("--validate", type=int, default=4, help="validate the first N roots (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocols", choices=("tcp", "ucx"), nargs="+", default=["tcp"],
                    help="the ranks' transports, one session each per repeat, alternating on the same graph")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--barriers", type=int, default=2000, help="barriers (and all-reduces) timed per session")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    out = new_record("bench_multirank", args)
    out.update(teps_convention="Graph500 (input tuples in component / time)", runs=[])
    for s in args.scales:
        for w in args.workers:
            protocols = args.protocols if w > 1 else args.protocols[:1]  # one rank talks to nobody
            for r in run_one(s, w, args.roots, args.seed, protocols, args.repeats, args.validate, args.barriers):
                r["loadavg"] = list(os.getloadavg())
                out["runs"].append(r)
                print(f"scale {s} ranks {w} {r['protocol']}: {r['harmonic_mean_teps'] / 1e9:.3f} GTEPS", flush=True)
            if args.json:
                write_json(args.json, out)
    print_table(["scale", "ranks", "protocol", "GTEPS (hm)", "median ms", "local ms", "exchange ms", "exchange %",
                 "level exchange us", "barrier us", "allreduce us", "MB sent", "valid", "load"],
                [[r["scale"], r["workers"], r["protocol"], r["harmonic_mean_teps"] / 1e9, r["median_time_s"] * 1e3,
                  r["median_local_s"] * 1e3, r["median_exchange_s"] * 1e3, 100 * r["exchange_share"],
                  round(r["median_level_exchange_s"] * 1e6), round(r["barrier_s"] * 1e6),
                  round(r["allreduce_s"] * 1e6), r["median_bytes_sent_total"] / 1e6, r["valid"],
                  f"{r['loadavg'][0]:.2f}"] for r in out["runs"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
