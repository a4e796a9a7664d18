"""Graph500 BFS through the Python API on this machine: harmonic-mean TEPS and construction time per scale.

    python -m benchmarks.bench_graph500 --scales 20 22 --roots 64 --json graph500_cpu.json

Runs the same path as ``breadth bench`` (local Dask cluster, generate -> prepare -> 64 validated
searches) once per scale, and records per-root times, the per-level breakdown of the median root,
construction time, peak RSS and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.harness import add_json_argument, new_record, print_table, write_json


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[20, 22])
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    add_json_argument(ap)
    args = ap.parse_args(argv)
    from breadth.pipeline import local_cluster

    out = new_record("bench_graph500", args)
    out.update(teps_convention="Graph500 (input tuples in component / time)", runs=[])
    client = local_cluster(workers=args.workers)
    try:
        for s in args.scales:
            r = run_scale(client, s, args.roots, args.seed)
            r["loadavg_after"] = list(os.getloadavg())
            out["runs"].append(r)
            if args.json:
                write_json(args.json, out)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    print_table(["scale", "GTEPS (hm)", "median ms", "construction s", "generation s", "valid"],
                [[r["scale"], r["harmonic_mean_teps"] / 1e9, r["median_time_s"] * 1e3, r["construction_s"],
                  r["graph_generation_s"], r["valid"]] for r in out["runs"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
