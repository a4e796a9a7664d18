"""Out-of-core preparation on this machine: Kronecker scale S through spilled buckets, then validated BFS.

    python benchmarks/bench_out_of_core.py --scale 26 --spill-dir /tmp/breadth-spill \
        --json benchmarks/results/out_of_core_cpu_s26_stages.json

One local worker (all cores).  A sampler thread records, every 0.2 s, the resident memory of this process
and all its children (scheduler, nanny, worker; their sum and each one's peak) and the bytes under the
spill directory; each worker also reports its own peak RSS (the kernel's high-water mark).  The JSON has
those peaks, the wall time of each phase (chunks: generate + split + sort + write bucket files; build:
per owner read, deduplicate/build per batch, write and assemble the columns; finish), every task's stage
seconds (``prepare(..., stages=...)``, :mod:`breadth.pipeline.stages`), the bytes spilled, and the
Graph500 figures of a few validated roots.  The summary printed last says where the time went.  Not a test.
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

GiB = 1 << 30


class Sampler(threading.Thread):
    """Peak RSS of this process tree (the sum, and each process's own peak) and peak size of a directory,
    sampled in the background."""

    def __init__(self, spill_dir: str | None, period: float = 0.2):
        super().__init__(daemon=True)
        self.spill_dir, self.period = spill_dir, period
        self.peak_rss = self.peak_spill = 0
        self.peak_by_pid: dict[int, int] = {}
        self.stop = threading.Event()

    def _rss(self) -> int:
        me = psutil.Process()
        total = 0
        for p in [me, *me.children(recursive=True)]:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            total += rss
            self.peak_by_pid[p.pid] = max(self.peak_by_pid.get(p.pid, 0), rss)
        return total

    def _du(self) -> int:
        total = 0
        for root, _, files in os.walk(self.spill_dir or "/nonexistent"):
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


def _worker_peak_rss() -> dict:
    """On a worker: its process id and peak RSS so far (bytes, the kernel's high-water mark)."""
    from breadth.pipeline.stages import process_peak_rss

    return {"pid": os.getpid(), "peak_rss_bytes": process_peak_rss()}


def per_process(sampler: Sampler, workers: dict) -> list[dict]:
    """Each sampled process's peak RSS with its role (main: client + scheduler + nannies; worker; other)."""
    wpid = {v["pid"]: addr for addr, v in workers.items()}
    rows = []
    for pid, peak in sorted(sampler.peak_by_pid.items()):
        role = "main (client, scheduler, nanny)" if pid == os.getpid() else (
            f"worker {wpid[pid]}" if pid in wpid else "other")
        rows.append({"pid": pid, "role": role, "peak_rss_sampled_bytes": peak})
    return rows


def stage_lines(st: dict) -> list[str]:
    """Where the preparation's time went, as printed lines (task seconds are summed over tasks; with
    several threads they exceed the phase's wall time)."""
    w, c = st["wall_s"], st["chunk_task_s_total"]
    lines = [f"preparation {w['total']:.1f} s wall ({st['path']}):"]
    if "chunks" in w:
        lines.append(f"  chunk phase  {w['chunks']:7.1f} s wall, {st['chunk_tasks']} chunk tasks; task seconds summed:")
    for key, label in (("source_s", "generate (source tasks)"), ("split_s", "split by owner"),
                       ("sort_s", "sort by row batch"), ("write_s", "write bucket files")):
        if key in c:
            lines.append(f"    {label:26s} {c[key]:7.1f} s")
    if "bytes_written" in c:
        lines.append(f"    bytes written              {c['bytes_written'] / 1e9:7.2f} GB")
    if "build" in w:
        lines.append(f"  build phase  {w['build']:7.1f} s wall, {len(st['owners'])} owner(s):")
    for r, ow in enumerate(st["owners"]):
        parts = [f"{k[:-2]} {ow[k]:.1f} s" for k in ("read_s", "build_s", "write_s", "assemble_s", "loops_s",
                                                      "cleanup_s") if k in ow]
        nb = len(ow.get("batches", []))
        lines.append(f"    owner {r}: {', '.join(parts)}; {nb} batches")
        if "bytes_read" in ow:
            lines.append(f"             read {ow['bytes_read'] / 1e9:.2f} GB, "
                         f"wrote {ow.get('bytes_written', 0) / 1e9:.2f} GB")
    lines.append(f"  finish       {w['finish']:7.1f} s wall (summaries, bottom-up order)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    stages: dict = {}
    g = prepare(el, client, spill_dir=args.spill_dir, batch_entries=args.batch_entries, progress=False,
                stages=stages)
    prep_s = time.perf_counter() - t0
    rss_after_prep = sampler.peak_rss
    workers_after_prep = client.run(_worker_peak_rss)
    t1 = time.perf_counter()
    res = graph500(g, nroots=args.roots, seed=args.seed + 1, timeout=3600.0)
    search_s = time.perf_counter() - t1
    workers_end = client.run(_worker_peak_rss)
    sampler.stop.set()
    sampler.join()
    out = {
        "benchmark": "out_of_core_preparation_cpu", "args": vars(args), "scale": args.scale, "seed": args.seed,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "memory_bytes": psutil.virtual_memory().total, "loadavg_end": os.getloadavg()},
        "input_tuples": el.num_edges, "input_bytes_int64_pairs": el.num_edges * 16,
        "symmetrized_bytes_int64_pairs": el.num_edges * 32, "num_edges_undirected": g.num_edges,
        "batch_entries": args.batch_entries, "preparation_s": prep_s, "construction_time_s": g.construction_time,
        "graph500_session_s": search_s,
        "peak_rss_all_processes_bytes": sampler.peak_rss, "peak_rss_during_preparation_bytes": rss_after_prep,
        "peak_rss_per_worker_after_preparation_bytes": {a: v["peak_rss_bytes"] for a, v in workers_after_prep.items()},
        "peak_rss_per_worker_bytes": {a: v["peak_rss_bytes"] for a, v in workers_end.items()},
        "peak_rss_per_process_sampled": per_process(sampler, workers_end),
        "peak_spill_bytes": sampler.peak_spill,
        "bytes_spilled": stages["chunk_task_s_total"].get("bytes_written", 0)
        + stages["owner_task_s_total"].get("bytes_written", 0),
        "stages": stages, "valid": res.valid, "roots": len(res.rows),
        "harmonic_mean_teps": res.harmonic_mean_teps, "median_time_s": float(np.median(res.times)),
    }
    client.close()
    cluster.close()
    shutil.rmtree(args.spill_dir, ignore_errors=True)
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(args.json + ".tmp", args.json)
    print("\n".join(stage_lines(stages)))
    print(f"graph500 session {search_s:.1f} s: {len(res.rows)} roots, valid={res.valid}, "
          f"{res.harmonic_mean_teps / 1e9:.2f} GTEPS (harmonic mean), median search {np.median(res.times):.2f} s")
    print(f"bytes spilled {out['bytes_spilled'] / 1e9:.2f} GB (bucket files + batch columns), peak on disk "
          f"{sampler.peak_spill / 1e9:.2f} GB")
    print(f"peak RSS: all processes {sampler.peak_rss / GiB:.2f} GiB (sampled every 0.2 s); "
          + ", ".join(f"{r['role']} {r['peak_rss_sampled_bytes'] / GiB:.2f} GiB"
                      for r in out["peak_rss_per_process_sampled"] if r["role"] != "other")
          + "; worker high-water marks "
          + ", ".join(f"{v / GiB:.2f} GiB" for v in out["peak_rss_per_worker_bytes"].values()))


if __name__ == "__main__":
    main()
