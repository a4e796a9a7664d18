"""Bytes exchanged per search and per level by the 1D, 2D and delegates partitionings: a machine-independent
measure (payload bytes that every rank sent, summed over ranks; headers not counted).

    python -m benchmarks.bench_partition_bytes --scale 20 --workers 4 8 --roots 8 --json partition_bytes.json

For each worker count: one local cluster (one rank per worker process), the Kronecker graph prepared 1D once,
then each partitioning cut from those shards (:func:`breadth.bfs.partitioned.partition_graph`) and the same
roots searched and validated.  Every grid of the worker count (with 2D's own bottom-up over the row block, and
with 1D's bottom-up at the owners) and each ``--delegate-degrees`` threshold is measured.  The JSON holds, per
variant, the bytes of every search and of every level (with its direction and frontier), and the ratio of the
median search's bytes to 1D's.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.harness import add_json_argument, new_record, print_table, write_json


def _bytes_rank(engine, setup_s, roots):
    """Rank body: each root searched and validated; every level's bytes summed over the ranks."""
    from breadth.bfs.graph500.validate import validate_rank

    comm = engine.comm
    rows = []
    for root in roots:
        t0 = time.perf_counter()
        recs = engine.search(int(root))
        t = time.perf_counter() - t0
        level_bytes = comm.allreduce(np.array([r.bytes_sent for r in recs], np.int64))
        viol = validate_rank(engine, int(root))
        rows.append({"root": int(root), "time_s": t, "valid": not any(viol.values()),
                     "levels": [{"depth": r.depth, "direction": r.direction, "frontier": r.frontier,
                                 "found": r.found, "bytes": int(b)} for r, b in zip(recs, level_bytes)]})
    return rows


def _grids(p: int) -> list[tuple[int, int]]:
    return [(r, p // r) for r in range(1, p + 1) if p % r == 0]


def run_workers(scale: int, workers: int, roots: int, seed: int, degrees: list[int]) -> list[dict]:
    from distributed import wait

    from breadth.bfs import choose_roots, run_session
    from breadth.bfs.partitioned import partition_graph
    from breadth.bfs.partitioning import Partitioning, default_grid
    from breadth.pipeline import kronecker, local_cluster, prepare

    client = local_cluster(workers=workers)
    out = []
    try:
        edges = kronecker(scale, seed=seed)
        edges.edges = client.persist(edges.edges)
        wait(edges.edges)
        base = prepare(edges, client)
        edges.edges = None
        rts = choose_roots(base, roots, seed + 1)
        variants = [(Partitioning(), {})] + [(Partitioning("2d", g), {}) for g in _grids(workers)]
        # 2D's top-down with 1D's bottom-up (GridEngine(bottom_up="owner")): no parents folded in bottom-up
        variants += [(Partitioning("2d", g), {"bottom_up": "owner"}) for g in _grids(workers) if g[1] > 1]
        variants += [(Partitioning("delegates", delegate_degree=d), {}) for d in degrees]
        for p, engine_kw in variants:
            t0 = time.perf_counter()
            g = partition_graph(base, p)
            cut_s = time.perf_counter() - t0
            nd = None
            if p.kind == "delegates":
                nd = int(client.submit(lambda s: int(s.blocks.delegates.size), g.shards[0],
                                       workers=[g.workers[0]], pure=False).result())
            rows = run_session(g, _bytes_rank, rts, protocol="tcp", timeout=300.0, engine_kw=engine_kw)[0]
            per_search = np.array([sum(lv["bytes"] for lv in r["levels"]) for r in rows], np.float64)
            label = str(p) + (", bottom-up at owners" if engine_kw else "")
            out.append({"workers": workers, "partition": p.as_dict(), "engine_kw": engine_kw, "label": label,
                        "default_grid": list(default_grid(workers)) if p.kind == "2d" else None,
                        "delegates": nd, "cut_s": cut_s, "all_valid": all(r["valid"] for r in rows),
                        "median_bytes_per_search": float(np.median(per_search)),
                        "mean_bytes_per_search": float(per_search.mean()), "searches": rows})
            if g.shards is not base.shards:
                for f in g.shards:
                    f.release()
        base.release()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    one_d = out[0]["median_bytes_per_search"]
    for r in out:
        r["ratio_to_1d"] = r["median_bytes_per_search"] / one_d
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--workers", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--roots", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--delegate-degrees", type=int, nargs="+", default=[16, 64, 256, 1024])
    add_json_argument(ap)
    args = ap.parse_args(argv)
    doc = new_record("bench_partition_bytes", args)
    doc.update(measure="payload bytes sent by all ranks (headers not counted)", runs=[])
    for w in args.workers:
        doc["runs"] += run_workers(args.scale, w, args.roots, args.seed, args.delegate_degrees)
        if args.json:
            doc["machine"]["loadavg_end"] = list(os.getloadavg())
            write_json(args.json, doc)
    print_table(["ranks", "partition", "delegates", "MB/search", "vs 1D", "valid"],
                [[r["workers"], r["label"], r["delegates"], r["median_bytes_per_search"] / 1e6,
                  f"{r['ratio_to_1d']:.2f}", r["all_valid"]] for r in doc["runs"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
