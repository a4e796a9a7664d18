"""Graph500 BFS on 1, 2 and 4 ranks (worker processes) of this machine: TEPS and the exchange's share.

    python benchmarks/bench_multirank.py --scales 20 22 --workers 1 2 4 --roots 16 \\
        --json benchmarks/results/multirank_cpu.json

For each (scale, workers): a fresh local cluster, the Kronecker graph generated and prepared into one
shard per worker, then ``roots`` searches timed as Graph500 does (between barriers, max over ranks).
Every rank keeps its per-level records (direction, frontier, local time, exchange time, bytes sent), so
the JSON holds the breakdown of every rank for every root; the first ``--validate`` roots are checked
with the five Graph500 rules.  On a 2-core machine more ranks cannot be faster: the point is what the
exchange costs (its share of the search time, and the bytes per level).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402


def _bench_rank(engine, setup_s, roots, nvalidate):
    """Rank body: warm-up, then each root timed between barriers; every rank returns its own records."""
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
        nedge, reached = _search_edge_count(engine)
        viol = validate_rank(engine, int(root)) if i < nvalidate else None
        rows.append({"root": int(root), "time": t_max, "rank_time": t, "nedge": nedge, "reached": reached,
                     "violations": viol, "levels": [r.as_dict() for r in recs]})
    return {"rank": comm.rank, "setup_s": setup_s, "rows": rows}


def run_one(scale: int, workers: int, roots: int, seed: int, protocol: str, nvalidate: int) -> dict:
    from distributed import wait

    from breadth.bfs import choose_roots, run_session
    from breadth.bfs.graph500.statistics import statistics
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
        t0 = time.perf_counter()
        out = run_session(g, _bench_rank, rts, nvalidate, protocol=protocol, timeout=300.0)
        session_s = time.perf_counter() - t0
        g.release()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
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
    return {
        "scale": scale, "workers": workers, "threads_per_worker": threads, "protocol": protocol,
        "roots": len(rts), "validated_roots": len(viol), "valid": all(not any(v.values()) for v in viol),
        "construction_s": g.construction_time, "session_s": session_s,
        "setup_s": [o["setup_s"] for o in out],
        "harmonic_mean_teps": statistics(teps, rate=True)["harmonic_mean"],
        "median_time_s": float(np.median(times)),
        "median_local_s": float(np.median(local)), "median_exchange_s": float(np.median(exch)),
        "exchange_share": float(np.median(exch / times)),
        "median_bytes_sent_total": float(np.median(nbytes)),
        "per_root": [{"root": r["root"], "time_s": r["time"], "nedge": r["nedge"], "local_s": float(lo),
                      "exchange_s": float(ex), "bytes_sent_total": int(b),
                      "per_rank": [{"rank": o["rank"], "time_s": o["rows"][i]["rank_time"],
                                    "levels": o["rows"][i]["levels"]} for o in out]}
                     for i, (r, lo, ex, b) in enumerate(zip(rows0, local, exch, nbytes))],
        "median_root_levels": levels,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--roots", type=int, default=16)
    ap.add_argument("--validate", type=int, default=4, help="validate the first N roots (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocol", choices=("tcp", "ucx"), default="tcp")
    ap.add_argument("--json", default="benchmarks/results/multirank_cpu.json")
    args = ap.parse_args()
    out = {"benchmark": "multirank_bfs_cpu", "teps_convention": "Graph500 (input tuples in component / time)",
           "machine": machine(), "versions": versions("ucxx"), "args": vars(args), "runs": []}
    print(f"{'scale':>5} {'ranks':>5} {'GTEPS(hm)':>10} {'median ms':>10} {'local ms':>9} {'exch ms':>8} "
          f"{'exch %':>6} {'MB sent':>8} {'valid':>5}  load", flush=True)
    for s in args.scales:
        for w in args.workers:
            r = run_one(s, w, args.roots, args.seed, args.protocol, args.validate)
            r["loadavg"] = os.getloadavg()
            out["runs"].append(r)
            print(f"{s:5d} {w:5d} {r['harmonic_mean_teps'] / 1e9:10.3f} {r['median_time_s'] * 1e3:10.1f} "
                  f"{r['median_local_s'] * 1e3:9.1f} {r['median_exchange_s'] * 1e3:8.1f} "
                  f"{100 * r['exchange_share']:6.1f} {r['median_bytes_sent_total'] / 1e6:8.2f} "
                  f"{str(r['valid']):>5}  {r['loadavg'][0]:.2f}", flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    write_json(args.json, out)


if __name__ == "__main__":
    main()
