"""Out-of-core preparation, then validated BFS, with a stage breakdown: where the time went, peak memory.

The tier of the shuffle to owners (:mod:`breadth.pipeline.shuffle.shuffle`) follows the workers' memory limit;
``--tier`` forces one (Dask's ``breadth.shuffle.tier``).  CPU (this 2-core, 24 GiB machine; the disk tier's
bucket files under ``--spill-dir``)::

    python -m benchmarks.bench_out_of_core --scale 26 --spill-dir /tmp/breadth-spill --json out_of_core_cpu_s26.json

GPU (dask-cuda workers, one per GPU; the host tier, :mod:`breadth.pipeline.shuffle.shuffle_tiers`, when the edges do
not fit the GPU: chunks are split on the GPU and wait in host memory, owners build batch by batch on their GPU)::

    python -m benchmarks.bench_out_of_core --device gpu --gpus 1 --scale 28 \\
        --local-directory /tmp/breadth-dask --json out_of_core_gpu_s28.json
    python -m benchmarks.bench_out_of_core --device gpu --gpus 2 --scale 29 --memory-limit 120GB \\
        --local-directory /tmp/breadth-dask --json out_of_core_gpu_s29.json
    python -m benchmarks.bench_out_of_core --device gpu --gpus 4 --scale 30 --memory-limit 120GB \\
        --local-directory /tmp/breadth-dask --json out_of_core_gpu_s30.json

(``--memory-limit`` / ``--device-memory-limit`` / ``--rmm-pool-size`` go to dask-cuda's
``LocalCUDACluster``: host bytes per worker before Dask spills host data to ``--local-directory``, device
bytes before it moves device data to host, and an RMM pool for CuPy; the defaults are dask-cuda's: host
memory divided among the workers, 80% of the GPU, CuPy's own caching pool.  Give ``--memory-limit``
explicitly on the several-GPU machines: their memory grows as it is used, so at start-up the host
reports a fraction of it (31 GiB of 256), and dask-cuda's default would let each worker hold only that
fraction, then pause or end it.  Each owner keeps 8 bytes per adjacency entry in host memory: 64 GiB per
GPU at scale 28 per GPU.)

A sampler thread in this process records, every 0.2 s, the resident memory of this process and all its
children (their sum and each one's peak) and the bytes under the spill directories; each worker reports its
own peak RSS (the kernel's high-water mark) and, on GPU workers, a thread samples every 50 ms the device
memory in use (``cudaMemGetInfo``: total - free, CuPy's pool included), the live bytes of CuPy's pool, and
the bytes Dask holds on the device, in host memory and on its disk.  The JSON has those peaks, the wall
time of each phase (chunks: generate, split, sort by row batch, write bucket files or copy to host;
build: per owner read or copy to the device, deduplicate/build per batch, assemble; finish), every task's
stage seconds (``prepare(..., stages=...)``, :mod:`breadth.pipeline.stages`), the bytes spilled, and the
Graph500 figures of a few validated roots (``--roots``, warm-up search first, each validated).  The summary
printed last says where the time went.
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import numpy as np
import psutil

from benchmarks.harness import TreeSampler, add_json_argument, dir_bytes, new_record, print_table, write_json

GiB = 1 << 30


def _worker_peak_rss() -> dict:
    """On a worker: its process id and peak RSS so far (bytes, the kernel's high-water mark)."""
    from breadth.pipeline.stages import process_peak_rss

    return {"pid": os.getpid(), "peak_rss_bytes": process_peak_rss()}


def per_process(sampler: TreeSampler, workers: dict) -> list[dict]:
    """Each sampled process's peak RSS with its role (main: client + scheduler + nannies; worker; other)."""
    wpid = {v["pid"]: addr for addr, v in workers.items()}
    rows = []
    for pid, peak in sorted((p["pid"], p["rss_peak_bytes"]) for p in sampler.processes()):
        role = "main (client, scheduler, nanny)" if pid == os.getpid() else (
            f"worker {wpid[pid]}" if pid in wpid else "other")
        rows.append({"pid": pid, "role": role, "peak_rss_sampled_bytes": peak})
    return rows


def _start_worker_sampler(dask_worker, period: float = 0.05) -> int:
    """On a worker: start a thread that keeps the peaks of device memory in use (``cudaMemGetInfo``),
    CuPy's pool (live and held bytes), the process's RSS, and what Dask holds on the device, in host
    memory and on its disk (``local_directory``, sampled every 20 periods)."""
    import threading

    import cupy as cp

    peaks = {"device_used_bytes": 0, "cupy_pool_used_bytes": 0, "cupy_pool_held_bytes": 0, "rss_bytes": 0,
             "dask_device_bytes": 0, "dask_host_bytes": 0, "dask_disk_bytes": 0}
    stop = threading.Event()
    proc = psutil.Process()
    pool = cp.get_default_memory_pool()

    def weight(buf) -> int:  # a zict LRU's total weight (bytes by Dask's sizeof), 0 where there is none
        return int(getattr(getattr(buf, "fast", buf), "total_weight", 0) or 0)

    def run() -> None:
        i = 0
        while not stop.is_set():
            free, total = cp.cuda.runtime.memGetInfo()
            data = dask_worker.data
            now = {"device_used_bytes": total - free, "cupy_pool_used_bytes": pool.used_bytes(),
                   "cupy_pool_held_bytes": pool.total_bytes(), "rss_bytes": proc.memory_info().rss,
                   "dask_device_bytes": weight(getattr(data, "device_buffer", None)),
                   "dask_host_bytes": weight(getattr(data, "host_buffer", None))}
            if i % 20 == 0:
                now["dask_disk_bytes"] = dir_bytes(dask_worker.local_directory)
            for k, v in now.items():
                peaks[k] = max(peaks[k], int(v))
            i += 1
            stop.wait(period)

    threading.Thread(target=run, daemon=True, name="breadth-memory-sampler").start()
    dask_worker._breadth_sampler = (peaks, stop)
    return os.getpid()


def _worker_sampler_peaks(dask_worker, stop: bool = False) -> dict:
    """On a worker: the sampler's peaks so far (and stop it when ``stop``) plus the process's peak RSS."""
    from breadth.pipeline.stages import process_peak_rss

    peaks, ev = dask_worker._breadth_sampler
    if stop:
        ev.set()
    return {**peaks, "pid": os.getpid(), "peak_rss_bytes": process_peak_rss()}


def stage_lines(st: dict) -> list[str]:
    """Where the preparation's time went, as printed lines (task seconds are summed over tasks; with
    several threads they exceed the phase's wall time)."""
    w, c = st["wall_s"], st["chunk_task_s_total"]
    lines = [f"preparation {w['total']:.1f} s wall ({st['path']}):"]
    if "chunks" in w:
        lines.append(f"  chunk phase  {w['chunks']:7.1f} s wall, {st['chunk_tasks']} chunk tasks; task seconds summed:")
    for key, label in (("source_s", "generate (source tasks)"), ("split_s", "split by owner"),
                       ("sort_s", "sort by row batch"), ("d2h_s", "copy to host"),
                       ("write_s", "write bucket files")):
        if key in c:
            lines.append(f"    {label:26s} {c[key]:7.1f} s")
    if "bytes_written" in c:
        lines.append(f"    bytes written              {c['bytes_written'] / 1e9:7.2f} GB")
    if "host_bytes" in c:
        lines.append(f"    entries kept in host memory {c['host_bytes'] / 1e9:6.2f} GB")
    if "build" in w:
        lines.append(f"  build phase  {w['build']:7.1f} s wall, {len(st['owners'])} owner(s):")
    for r, ow in enumerate(st["owners"]):
        parts = [f"{k[:-2]} {ow[k]:.1f} s" for k in ("read_s", "h2d_s", "allocate_s", "build_s", "write_s",
                                                      "assemble_s", "loops_s", "cleanup_s", "bottom_up_order_s")
                 if k in ow]
        nb = len(ow.get("batches", []))
        lines.append(f"    owner {r}: {', '.join(parts)}; {nb} batches")
        if "bytes_read" in ow:
            lines.append(f"             read {ow['bytes_read'] / 1e9:.2f} GB, "
                         f"wrote {ow.get('bytes_written', 0) / 1e9:.2f} GB")
        if "device_live_after_allocate_or_batch_peak_bytes" in ow:
            live = ow["device_live_after_allocate_or_batch_peak_bytes"]
            lines.append(f"             live device bytes: {live / GiB:.2f} GiB at most after a batch, "
                         f"{ow['device_live_end_bytes'] / GiB:.2f} GiB at the end; "
                         f"column slack {ow.get('column_slack_entries', 0):,} entries")
    lines.append(f"  finish       {w['finish']:7.1f} s wall (summaries, bottom-up order)")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--roots", type=int, default=4, help="validated Graph500 searches after preparation")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tier", choices=("auto", "memory", "host", "disk"), default="auto",
                    help="the shuffle's storage tier (default auto: from the workers' memory limit)")
    ap.add_argument("--spill-dir", default="/tmp/breadth-spill", help="bucket files of the disk tier")
    ap.add_argument("--batch-entries", type=int, default=None,
                    help="adjacency entries per row batch (default: prepare's, from the memory limit, at most "
                         "2**25 CPU, 2**28 GPU)")
    ap.add_argument("--chunk-edges", type=int, default=None,
                    help="edge tuples per generated chunk (default: kronecker's, 2**22 CPU, 2**26 GPU)")
    ap.add_argument("--gpus", type=int, default=1, help="GPU workers (= owners) for --device gpu")
    ap.add_argument("--protocol", default=None,
                    help="search communicator (default: nccl for several GPUs, tcp otherwise)")
    ap.add_argument("--memory-limit", default=None,
                    help="host memory per worker before Dask spills to disk (CPU default 0 = never; GPU "
                         "default dask-cuda's 'auto')")
    ap.add_argument("--device-memory-limit", default=None, help="dask-cuda's device_memory_limit (default 0.8)")
    ap.add_argument("--rmm-pool-size", default=None, help="dask-cuda's rmm_pool_size, RMM as CuPy's allocator")
    ap.add_argument("--local-directory", default=None, help="Dask workers' local directory (their spill disk)")
    ap.add_argument("--no-warmup", action="store_true", help="GPU: skip the scale-16 warm-up preparation")
    add_json_argument(ap)
    args = ap.parse_args(argv)

    import dask

    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster.cluster import worker_addresses

    dask.config.set({"breadth.shuffle.tier": args.tier})
    spill_dir = args.spill_dir
    os.makedirs(spill_dir, exist_ok=True)
    sampler = TreeSampler(os.getpid(), period=0.2, spill_dir=spill_dir, dir_period=0.2)
    sampler.start()
    out = new_record("bench_out_of_core", args)
    t0 = time.perf_counter()
    if args.device == "gpu":
        import cupy as cp

        from breadth.pipeline.cluster.cluster import local_cuda_cluster

        kw = {}
        for name in ("memory_limit", "device_memory_limit", "rmm_pool_size"):
            v = getattr(args, name)
            if v is not None:
                kw[name] = float(v) if v.replace(".", "", 1).isdigit() and "." in v else v
        if args.rmm_pool_size:
            kw["rmm_allocator_external_lib_list"] = ["cupy"]
        client = local_cuda_cluster(workers=args.gpus, local_directory=args.local_directory, **kw)
        props = cp.cuda.runtime.getDeviceProperties(0)
        out["gpu"] = {"name": props["name"].decode(), "memory_bytes": props["totalGlobalMem"]}
        out["cluster_kwargs"] = {k: str(v) for k, v in kw.items()}
        client.run(_start_worker_sampler)
    else:
        from distributed import Client, LocalCluster

        # memory_limit=0: Dask must not try to spill the finished shard itself; the bound comes from the design
        client = Client(LocalCluster(n_workers=1, threads_per_worker=os.cpu_count(), dashboard_address=None,
                                     memory_limit=args.memory_limit or 0, local_directory=args.local_directory,
                                     env={"NUMBA_NUM_THREADS": str(os.cpu_count())}))
    out["cluster_start_s"] = time.perf_counter() - t0
    nworkers = len(worker_addresses(client))
    print(f"{nworkers} {args.device.upper()} worker(s) up in {out['cluster_start_s']:.1f} s", flush=True)
    opts = dict(spill_dir=spill_dir, batch_entries=args.batch_entries, device=args.device)
    if args.device == "gpu" and not args.no_warmup:  # NVRTC/Numba compilation outside the timed run
        t = time.perf_counter()
        prepare(kronecker(16, seed=args.seed, device="gpu"), client, **opts).release()
        out["warmup_s"] = time.perf_counter() - t
    t0 = time.perf_counter()
    el = kronecker(args.scale, seed=args.seed, device=args.device, chunk_edges=args.chunk_edges)
    stages: dict = {}
    g = prepare(el, client, stages=stages, **opts)
    prep_s = time.perf_counter() - t0
    print(f"prepared scale {args.scale} in {prep_s:.1f} s", flush=True)
    rss_after_prep = sampler.peak
    peaks = _worker_sampler_peaks if args.device == "gpu" else (lambda dask_worker, stop=False: _worker_peak_rss())
    workers_after_prep = client.run(peaks)
    protocol = args.protocol or ("nccl" if args.device == "gpu" and g.nparts > 1 else "tcp")
    t1 = time.perf_counter()
    res = graph500(g, nroots=args.roots, seed=args.seed + 1, timeout=3600.0, protocol=protocol)
    search_s = time.perf_counter() - t1
    workers_end = client.run(peaks, stop=True)
    sampler.stop()
    out["machine"]["loadavg_end"] = list(os.getloadavg())
    out.update({
        "path": stages["path"], "input_tuples": el.num_edges, "input_bytes_int64_pairs": el.num_edges * 16,
        "symmetrized_bytes_int64_pairs": el.num_edges * 32, "num_edges_undirected": g.num_edges,
        "nparts": g.nparts, "batch_entries": stages["tier"]["batch_entries"], "tier": stages["tier"],
        "preparation_s": prep_s,
        "construction_time_s": g.construction_time, "graph500_session_s": search_s, "protocol": protocol,
        "peak_rss_all_processes_bytes": sampler.peak, "peak_rss_during_preparation_bytes": rss_after_prep,
        "peak_rss_per_worker_after_preparation_bytes": {a: v["peak_rss_bytes"] for a, v in workers_after_prep.items()},
        "peak_rss_per_worker_bytes": {a: v["peak_rss_bytes"] for a, v in workers_end.items()},
        "peak_rss_per_process_sampled": per_process(sampler, workers_end),
        "peak_spill_bytes": sampler.spill_peak,
        "bytes_spilled": stages["chunk_task_s_total"].get("bytes_written", 0)
        + stages["owner_task_s_total"].get("bytes_written", 0),
        "stages": stages, "valid": res.valid, "roots": len(res.rows),
        "harmonic_mean_teps": res.harmonic_mean_teps, "median_time_s": float(np.median(res.times)),
        "per_root": [{k: r[k] for k in ("root", "time", "nedge", "reached", "depth", "violations")} for r in res.rows],
    })
    if args.device == "gpu":
        out["worker_memory_after_preparation"] = workers_after_prep
        out["worker_memory"] = workers_end
    client.close()
    if getattr(client, "cluster", None) is not None:
        client.cluster.close()
    if spill_dir:
        shutil.rmtree(spill_dir, ignore_errors=True)
    if args.json:
        write_json(args.json, out, default=float)
    print("\n".join(stage_lines(stages)))
    print(f"graph500 session {search_s:.1f} s: {len(res.rows)} roots, valid={res.valid}, "
          f"{res.harmonic_mean_teps / 1e9:.2f} GTEPS (harmonic mean), median search {np.median(res.times):.3f} s")
    if stages["path"] == "disk":
        print(f"bytes spilled {out['bytes_spilled'] / 1e9:.2f} GB (bucket files + batch columns), peak on disk "
              f"{sampler.spill_peak / 1e9:.2f} GB")
    print(f"peak RSS: all processes {sampler.peak / GiB:.2f} GiB (sampled every 0.2 s); "
          + ", ".join(f"{r['role']} {r['peak_rss_sampled_bytes'] / GiB:.2f} GiB"
                      for r in out["peak_rss_per_process_sampled"] if r["role"] != "other")
          + "; worker high-water marks "
          + ", ".join(f"{v / GiB:.2f} GiB" for v in out["peak_rss_per_worker_bytes"].values()))
    if args.device == "gpu":
        for addr, w in workers_end.items():
            print(f"worker {addr}: device in use at most {w['device_used_bytes'] / GiB:.1f} GiB (CuPy pool live "
                  f"{w['cupy_pool_used_bytes'] / GiB:.1f}, held {w['cupy_pool_held_bytes'] / GiB:.1f}); "
                  "Dask held at most "
                  f"{w['dask_device_bytes'] / GiB:.1f} GiB on the device, {w['dask_host_bytes'] / GiB:.1f} GiB in host "
                  f"memory, {w['dask_disk_bytes'] / GiB:.1f} GiB on disk", flush=True)
    print_table(["device", "scale", "path", "preparation s", "peak RSS all processes GiB", "peak spill GB",
                 "GTEPS (hm)", "valid"],
                [[args.device, args.scale, stages["path"], prep_s, sampler.peak / GiB, sampler.spill_peak / 1e9,
                  res.harmonic_mean_teps / 1e9, res.valid]])
    return 0 if res.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
