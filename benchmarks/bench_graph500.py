"""Graph500 BFS on this machine: harmonic-mean TEPS and construction time per scale, to JSON.

    python benchmarks/bench_graph500.py --scales 20 22 --roots 64 --json benchmarks/results/graph500_cpu.json

Runs the same path as ``breadth bench`` (local Dask cluster, generate -> prepare -> 64 validated
searches) once per scale, and records per-root times, the per-level breakdown of the median root,
construction time, peak RSS and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402


def run_scale(client, scale: int, roots: int, seed: int) -> dict:
    from distributed import wait

    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare

    edges = kronecker(scale, seed=seed)
    t0 = time.perf_counter()
    edges.edges = client.persist(edges.edges)
    wait(edges.edges)
    gen = time.perf_counter() - t0
    g = prepare(edges, client)
    edges.edges = None
    res = graph500(g, nroots=roots, seed=seed + 1)
    rss = client.run(lambda: __import__("psutil").Process().memory_info().rss)
    d = res.to_dict()
    order = np.argsort(res.times)
    median_root = res.rows[order[len(order) // 2]]
    g.release()
    return {
        "scale": scale, "roots": roots, "seed": seed, "valid": res.valid,
        "graph_generation_s": gen, "construction_s": g.construction_time,
        "num_edges_undirected": g.num_edges, "num_input_edges": g.num_input_edges,
        "harmonic_mean_teps": res.harmonic_mean_teps, "median_time_s": float(np.median(res.times)),
        "statistics": d["statistics"], "per_root_times_s": res.times.tolist(),
        "median_root_levels": median_root["levels"], "worker_rss_bytes": rss,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    from breadth.pipeline import local_cluster

    client = local_cluster(workers=args.workers)
    out = {"benchmark": "graph500_bfs_cpu", "teps_convention": "Graph500 (input tuples in component / time)",
           "machine": machine(), "versions": versions(), "workers": args.workers, "runs": []}
    for s in args.scales:
        r = run_scale(client, s, args.roots, args.seed)
        out["runs"].append(r)
        print(f"scale {s:2d}: harmonic-mean {r['harmonic_mean_teps'] / 1e9:.3f} GTEPS, median search "
              f"{r['median_time_s'] * 1e3:.1f} ms, construction {r['construction_s']:.2f} s, "
              f"generation {r['graph_generation_s']:.2f} s, valid={r['valid']}", flush=True)
    out["machine"]["loadavg_end"] = os.getloadavg()
    client.close()
    write_json(args.json, out)


if __name__ == "__main__":
    main()
