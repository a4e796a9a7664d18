"""Sparse-id Parquet -> shards on one GPU: breadth (cuDF read, relabel and build on a dask-cuda worker)
beside cuDF's own ``read_parquet`` + ``factorize`` of the same files, each in fresh processes.

    python -m benchmarks.make_webcrawl /tmp/wc28 --log2-tuples 28 --log2-ids 26 --device gpu   # the input, once
    python -m benchmarks.bench_ingest_gpu --input /tmp/wc28 --repeat 3 --json ingest_gpu.json

The input (:mod:`benchmarks.make_webcrawl`, never in the repository) is web-crawl-like: Kronecker (R-MAT)
tuples, so degrees follow a power law, over ``2^log2-ids`` vertices whose ids are replaced by a keyed 64-bit
hash (63-bit non-negative int64), in Parquet files.  Then, each in a fresh process, interleaved round by
round (``--repeat`` rounds, median and range reported):

* ``peer``: ``cudf.read_parquet`` of every file + ``factorize`` of the concatenated endpoints, one process:
  what a cuDF user gets before any graph exists;
* ``breadth``: a one-GPU ``LocalCUDACluster`` (start-up and imports not timed, as the peer's are not; the
  start-up's seconds, which include CuPy's once-per-process kernel set-up, are recorded), then
  ``read_parquet(device="gpu")`` + ``prepare(device="gpu")`` (read, relabel, shards: timed end to end, with
  each task's seconds and a timeline), then a few validated roots; then the same ingest again in that
  process (``breadth_second``: a long-lived cluster's next input); device memory in use and peak RSS of
  the worker and the client;
* ``cli``: ``breadth ingest DIR --device gpu --out STORE`` as a user types it (wall time, cluster start and
  the store's write included; a digest of the shards' sha256s, to compare runs).

Each run records the GPU's peak memory in use (``nvidia-smi``, every process on it).
``--device-memory-limit 8GB`` gives breadth's worker that limit (``breadth`` and ``cli``): an input larger
than it streams through host memory, and the shards' digest must equal an unlimited run's.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time

from benchmarks.harness import (JSON_PATH, add_json_argument, breadth_command, median_range, module_command,
                                new_record, print_table, run_command, write_json)


def _files(d: str) -> list[str]:
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".parquet"))


def run_peer(inp: str) -> dict:
    import cudf
    import cupy as cp

    files = _files(inp)
    cp.zeros(1).sum()  # CUDA context before the clock, as breadth's worker has one
    t0 = time.perf_counter()
    df = cudf.read_parquet(files)
    cp.cuda.Device().synchronize()
    t1 = time.perf_counter()
    codes, uniq = cudf.concat([df["src"], df["dst"]], ignore_index=True).factorize()
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    return {"tuples": len(df), "vertices": len(uniq), "read_s": t1 - t0, "factorize_s": t2 - t1,
            "total_s": t2 - t0}


def _worker_peaks() -> dict:
    import cupy as cp

    free, total = cp.cuda.runtime.memGetInfo()
    return {"device_used_bytes_at_end": int(total - free),
            "cupy_pool_bytes": int(cp.get_default_memory_pool().total_bytes()),
            "rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


class _PoolPeak:
    """Samples CuPy's pool on a worker every 5 ms in a thread: the peak bytes in use by arrays and held
    by the pool (the difference is freed memory the pool keeps for reuse), and the peak in use of every
    half second (``series``: ``[seconds since the epoch, bytes, bytes of task outputs dask-cuda counts on
    the device]``) to set beside the task timeline."""

    def __init__(self, data=None):
        import threading

        import cupy as cp

        from breadth.bfs.device_memory import device_memory_limit

        self.pool, self.used, self.held = cp.get_default_memory_pool(), 0, 0
        self.series: list = []
        # dask-cuda's device store under a limit (a zict Buffer, whose fast side holds the device's outputs)
        self.stored = data.device_buffer.fast if device_memory_limit(data) else None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        window, peak = time.time(), 0
        while not self.stop.wait(0.005):
            used = self.pool.used_bytes()
            self.used = max(self.used, used)
            self.held = max(self.held, self.pool.total_bytes())
            peak = max(peak, used)
            if time.time() - window >= 0.5:
                self.series.append([round(window, 3), peak, int(self.stored.total_weight) if self.stored else None])
                window, peak = time.time(), 0

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join()
        return {"cupy_pool_peak_used_bytes": self.used, "cupy_pool_peak_held_bytes": self.held,
                "series": self.series}


def _start_pool_peak(dask_worker) -> None:
    dask_worker._breadth_pool_peak = _PoolPeak(dask_worker.data)


def _finish_pool_peak(dask_worker) -> dict:
    return dask_worker._breadth_pool_peak.finish()


def _import_cudf() -> None:
    import cudf  # noqa: F401


def _ingest(client, inp: str):
    """read_parquet + prepare on the GPU -> ``(graph, edge list, read+relabel s, prepare s)``."""
    from breadth.pipeline import read_parquet
    from breadth.pipeline import prepare

    t0 = time.perf_counter()
    el = read_parquet(inp, client=client, device="gpu")
    t1 = time.perf_counter()
    g = prepare(el, client, device="gpu")
    t2 = time.perf_counter()
    el.edges = None
    return g, el, t1 - t0, t2 - t1


def _shards_digest(store: str) -> str:
    """One sha256 over every shard file's sha256 in the store's manifest: equal digests, equal shards."""
    import hashlib

    from breadth.io.shard_store import read_manifest

    m = read_manifest(store)
    return hashlib.sha256("".join(rec["files"][k]["sha256"] for rec in m["shards"]
                                  for k in sorted(rec["files"])).encode()).hexdigest()


def _tier(client, g) -> str:
    """Where the edge shuffle kept its pieces (the decision prepare made, asked again untimed)."""
    from breadth.pipeline.shuffle.shuffle import choose_tier

    return choose_tier(client, g.num_vertices, g.num_input_edges, len(g.shards), device="gpu").tier


def run_breadth(inp: str, roots: int, device_memory_limit: str | None = None) -> dict:
    import dask.array  # noqa: F401  the client's imports are not timed, as the peer's are not
    import pyarrow.parquet  # noqa: F401
    from distributed import get_task_stream

    from breadth.bfs import graph500
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    t_start = time.perf_counter()
    client = local_cuda_cluster(workers=1, **({"device_memory_limit": device_memory_limit}
                                               if device_memory_limit else {}))
    cluster_start_s = time.perf_counter() - t_start  # not in the ingest's time: reported beside it
    try:
        # not timed, as the peer's own imports are not: the worker imports cuDF (about a second), as a
        # dask_cudf user's workers already have
        client.run(_import_cudf)
        client.run(_start_pool_peak)
        with get_task_stream(client) as ts:
            wall0 = time.time()
            g, el, t_read, t_prep = _ingest(client, inp)
        pool_peak = client.run(_finish_pool_peak)
        res = graph500(g, nroots=roots, seed=2, validate=True)
        out = {"tuples": g.num_input_edges, "vertices": g.num_vertices, "relabel": el.source.get("relabel"),
               "tier": _tier(client, g), "cluster_start_s": cluster_start_s, "ingest_pool_peak": pool_peak,
               "read_relabel_s": t_read, "prepare_s": t_prep, "total_s": t_read + t_prep,
               "roots": roots, "harmonic_mean_teps": res.harmonic_mean_teps, "validated": res.valid,
               "task_seconds": _by_prefix(ts.data), "tasks": len(ts.data), "timeline": _timeline(ts.data, wall0),
               "timeline_epoch_s": wall0}
        g.release()
        del g, el
        # the same ingest again in this process: what a long-lived cluster's second input costs
        g, el, t_read, t_prep = _ingest(client, inp)
        out.update({"second_read_relabel_s": t_read, "second_prepare_s": t_prep, "second_total_s": t_read + t_prep})
        g.release()
        out.update({"workers": client.run(_worker_peaks),
                    "client_rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
        return out
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()


def _by_prefix(records: list[dict]) -> dict:
    """Compute seconds summed by task name (Dask's key prefix): where the worker's time went."""
    from dask.utils import key_split

    out: dict = {}
    for r in records:
        secs = sum(s["stop"] - s["start"] for s in r["startstops"] if s["action"] == "compute")
        k = key_split(r["key"])
        out[k] = round(out.get(k, 0.0) + secs, 4)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _timeline(records: list[dict], wall0: float) -> list:
    """``[name, action, start, stop]`` of every task action, in seconds after ``wall0``, by start."""
    from dask.utils import key_split

    rows = [[key_split(r["key"]), s["action"], round(s["start"] - wall0, 4), round(s["stop"] - wall0, 4)]
            for r in records for s in r["startstops"]]
    return sorted(rows, key=lambda x: x[2])


def run_cli(inp: str, device_memory_limit: str | None = None) -> dict:
    """``breadth ingest DIR --device gpu`` as typed, a fresh process: wall time, the GPU's peak memory in use
    and one digest of the shards' sha256s."""
    store = tempfile.mkdtemp(prefix="bench-store-")
    cmd = [breadth_command(), "ingest", inp, "--device", "gpu", "--out", os.path.join(store, "s")]
    cmd += ["--device-memory-limit", device_memory_limit] if device_memory_limit else []
    try:
        rec = run_command(cmd, gpu_memory=True, check=True)
        return {"wall_s": rec["wall_s"], "stdout": rec["stdout_tail"].strip()[-500:], "command": rec["command"],
                "gpu_memory_peak_bytes": rec["gpu_memory_peak_bytes"],
                "shards_sha256": _shards_digest(os.path.join(store, "s"))}
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _fresh(kind: str, a) -> dict:
    """One measurement of ``kind`` in a new Python process (what a user's job gets: nothing warm but the disk
    cache), with the GPU's peak memory in use meanwhile."""
    if kind == "cli":
        return run_cli(a.input, a.device_memory_limit)
    cmd = module_command("benchmarks.bench_ingest_gpu", "--one", kind, "--input", a.input, "--roots", a.roots,
                         "--json", JSON_PATH)
    cmd += ["--device-memory-limit", a.device_memory_limit] if a.device_memory_limit else []
    rec = run_command(cmd, gpu_memory=True, check=True)
    out = rec["json"]
    out.update(process_wall_s=rec["wall_s"], gpu_memory_peak_bytes=rec["gpu_memory_peak_bytes"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="a Parquet dataset directory (benchmarks.make_webcrawl)")
    p.add_argument("--repeat", type=int, default=3, help="rounds of the kinds, interleaved")
    p.add_argument("--roots", type=int, default=8, help="breadth: validated Graph500 roots after the ingest")
    p.add_argument("--kinds", default="peer,breadth,cli", help="which of peer, breadth, cli (comma-separated)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--device-memory-limit", default=None,
                   help="breadth's GPU worker limit (dask-cuda device_memory_limit), e.g. 8GB, for breadth and cli")
    add_json_argument(p)
    a = p.parse_args(argv)
    if a.one:  # one measurement, in the fresh process _fresh started
        fn = {"peer": lambda: run_peer(a.input),
              "breadth": lambda: run_breadth(a.input, a.roots, a.device_memory_limit)}[a.one]
        write_json(a.json, fn())
        return 0
    kinds = a.kinds.split(",")
    if not set(kinds) <= {"peer", "breadth", "cli"}:
        p.error(f"--kinds {a.kinds}: expected some of peer, breadth, cli")
    doc = new_record("bench_ingest_gpu", a)
    runs: dict = {k: [] for k in kinds}
    for i in range(a.repeat):  # interleaved: the peer and breadth see the same machine phases
        for k in kinds:
            runs[k].append(dict(_fresh(k, a), round=i))
            print(f"  round {i} {k}: {runs[k][-1].get('total_s', runs[k][-1].get('wall_s')):.2f} s",
                  file=sys.stderr, flush=True)
    if "breadth" in runs:  # the second ingest of each process, as a kind of its own
        runs["breadth_second"] = [{"total_s": r["second_total_s"], "tuples": r["tuples"]} for r in runs["breadth"]]
    summary = {}
    tuples = next((r["tuples"] for rs in runs.values() for r in rs if "tuples" in r), None)
    for k, rs in runs.items():
        sec = median_range(r["wall_s" if k == "cli" else "total_s"] for r in rs)
        summary[k] = {"seconds": sec, "mtuples_per_s": tuples / sec["median"] / 1e6 if tuples else None,
                      "gpu_memory_peak_bytes": median_range(r["gpu_memory_peak_bytes"] for r in rs
                                                            if r.get("gpu_memory_peak_bytes") is not None)}
    if "breadth" in summary and "peer" in summary:
        summary["breadth_over_peer_time"] = (summary["breadth"]["seconds"]["median"]
                                             / summary["peer"]["seconds"]["median"])
    doc.update(summary=summary, runs=runs)
    if a.json:
        write_json(a.json, doc)
    print_table(["kind", "runs", "median s", "min s", "max s", "M tuples/s"],
                [[k, v["seconds"]["n"], v["seconds"]["median"], v["seconds"]["min"], v["seconds"]["max"],
                  v["mtuples_per_s"]] for k, v in summary.items() if isinstance(v, dict)])
    if "breadth_over_peer_time" in summary:
        print(f"breadth / peer time: {summary['breadth_over_peer_time']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
