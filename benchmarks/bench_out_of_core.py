"""Out-of-core preparation on this machine: Kronecker scale S through spilled buckets, then validated BFS.

    python benchmarks/bench_out_of_core.py --scale 26 --spill-dir /tmp/breadth-spill \
        --json benchmarks/results/out_of_core_cpu_s26.json

One local worker (all cores).  A sampler thread records, every 0.2 s, the resident memory of this process
and all its children (scheduler, nanny, worker) and the bytes under the spill directory; the JSON has the
peaks, the wall time of each stage (generate+spill, build, searches), and the Graph500 figures of a few
validated roots.  Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import threading
import time

import numpy as np
import psutil


class Sampler(threading.Thread):
    """Peak RSS of this process tree and peak size of a directory, sampled in the background."""

    def __init__(self, spill_dir: str, period: float = 0.2):
        super().__init__(daemon=True)
        self.spill_dir, self.period = spill_dir, period
        self.peak_rss = self.peak_spill = 0
        self.stop = threading.Event()

    def _rss(self) -> int:
        me = psutil.Process()
        total = 0
        for p in [me, *me.children(recursive=True)]:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total

    def _du(self) -> int:
        total = 0
        for root, _, files in os.walk(self.spill_dir):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak_rss = max(self.peak_rss, self._rss())
            self.peak_spill = max(self.peak_spill, self._du())
            time.sleep(self.period)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--roots", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spill-dir", default="/tmp/breadth-spill")
    ap.add_argument("--batch-entries", type=int, default=1 << 25)
    ap.add_argument("--json", default="benchmarks/results/out_of_core_cpu.json")
    args = ap.parse_args()

    from distributed import Client, LocalCluster

    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare

    os.makedirs(args.spill_dir, exist_ok=True)
    sampler = Sampler(args.spill_dir)
    sampler.start()
    # memory_limit=0: Dask must not try to spill the finished shard itself; the bound comes from the design
    cluster = LocalCluster(n_workers=1, threads_per_worker=os.cpu_count(), memory_limit=0, dashboard_address=None,
                           env={"NUMBA_NUM_THREADS": str(os.cpu_count())})
    client = Client(cluster)
    t0 = time.perf_counter()
    el = kronecker(args.scale, seed=args.seed)
    g = prepare(el, client, spill_dir=args.spill_dir, batch_entries=args.batch_entries, progress=False)
    prep_s = time.perf_counter() - t0
    rss_after_prep = sampler.peak_rss
    t1 = time.perf_counter()
    res = graph500(g, nroots=args.roots, seed=args.seed + 1, timeout=3600.0)
    search_s = time.perf_counter() - t1
    sampler.stop.set()
    sampler.join()
    out = {
        "benchmark": "out_of_core_preparation_cpu", "scale": args.scale, "seed": args.seed,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "memory_bytes": psutil.virtual_memory().total, "loadavg_end": os.getloadavg()},
        "input_tuples": el.num_edges, "input_bytes_int64_pairs": el.num_edges * 16,
        "symmetrized_bytes_int64_pairs": el.num_edges * 32, "num_edges_undirected": g.num_edges,
        "batch_entries": args.batch_entries, "preparation_s": prep_s, "graph500_session_s": search_s,
        "peak_rss_all_processes_bytes": sampler.peak_rss, "peak_rss_during_preparation_bytes": rss_after_prep,
        "peak_spill_bytes": sampler.peak_spill, "valid": res.valid, "roots": len(res.rows),
        "harmonic_mean_teps": res.harmonic_mean_teps, "median_time_s": float(np.median(res.times)),
    }
    print(json.dumps({k: v for k, v in out.items() if k != "machine"}, indent=1))
    client.close()
    cluster.close()
    shutil.rmtree(args.spill_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
