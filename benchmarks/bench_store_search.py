"""Searching a stored graph as users type it: ``breadth bench STORE`` (validated Graph500 roots) and ``breadth
bfs STORE --root R --out DIR`` (a results dataset), each a fresh process tree whose memory is sampled.

    breadth ingest /tmp/wc30/part-00{00..15}.parquet --workers 2 --memory-limit 5GB --out /tmp/s28   # once
    python benchmarks/bench_store_search.py /tmp/s28 --workers 2 --roots 4 \\
        --json benchmarks/results/store_search_webcrawl_2e28_cpu.json

Every 50 ms the RSS of each process of the command's tree (client, nannies, workers) is read from
``/proc/PID/status``, split into anonymous memory (``RssAnon``: the arrays a worker allocated) and mapped file
pages (``RssFile``: a memory-mapped shard file's pages once read, which count in RSS like anonymous pages
until they are unmapped).  Recorded per command: the peak of the tree's summed RSS (the 12 GiB target of
the real-datasets issue), each process's peak RSS and its peaks of anonymous and file pages, the wall time,
and from the store's manifest the bytes of its shard files (``shard_bytes``) and of its id map, so that a
worker's peak reads against the shard it holds.  ``bench`` adds its Graph500 figures (harmonic-mean TEPS,
validated or not, load time); ``bfs`` the dataset's row count read back with pyarrow.  The root of ``bfs``
is the first id of the store's id map (dense id 0 without one).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _rss(pid: int) -> tuple[int, int, int] | None:
    """``(VmRSS, RssAnon, RssFile)`` bytes of ``pid``, or None once it has gone."""
    vals = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "RssAnon", "RssFile"):
                    vals[k] = int(v.split()[0]) * 1024
    except OSError:
        return None
    return (vals["VmRSS"], vals["RssAnon"], vals["RssFile"]) if len(vals) == 3 else None


class Sampler(threading.Thread):
    """Peak summed RSS of a process tree, each process's peaks (total, anonymous, file pages) and a coarse
    timeline of the sum (one point a second), until :meth:`stop`."""

    def __init__(self, pid: int, period: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.period, self.peak = pid, period, 0
        self.each: dict[int, list[int]] = {}
        self.timeline: list[tuple[float, int]] = []
        self._done = threading.Event()

    def run(self) -> None:
        t0 = time.monotonic()
        next_point = 0.0
        while not self._done.is_set():
            total = 0
            for p in _descendants(self.pid):
                r = _rss(p)
                if r is None:
                    continue
                total += r[0]
                old = self.each.setdefault(p, [0, 0, 0])
                self.each[p] = [max(a, b) for a, b in zip(old, r)]
            self.peak = max(self.peak, total)
            now = time.monotonic() - t0
            if now >= next_point:
                self.timeline.append((round(now, 1), total))
                next_point = now + 1.0
            self._done.wait(self.period)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def run_sampled(cmd: list[str]) -> dict:
    """Run ``cmd`` with its process tree sampled; its record (raises with its stderr when it fails)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s = Sampler(proc.pid)
    s.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    peak = s.stop()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {err[-2000:]}")
    procs = sorted(s.each.values(), reverse=True)[:6]
    return {"command": " ".join(cmd), "wall_s": wall, "tree_rss_peak_bytes": peak,
            "process_rss_peak_bytes": [p[0] for p in procs],
            "process_anon_peak_bytes": [p[1] for p in procs], "process_file_peak_bytes": [p[2] for p in procs],
            "timeline_s_bytes": s.timeline, "stdout": out.strip()[-600:], "stderr": err.strip()[-1500:]}


def store_sizes(store: str) -> dict:
    """Bytes of the store's shard files (all and per shard) and of its id map, from its manifest."""
    from breadth.io.id_map_store import id_map_files
    from breadth.io.shard_store import read_manifest

    m = read_manifest(store)
    per = [sum(f["bytes"] for f in s["files"].values()) for s in m["shards"]]
    return {"num_vertices": m["num_vertices"], "num_edges": m["num_edges"], "nparts": m["nparts"],
            "shard_bytes": sum(per), "shard_bytes_each": per,
            "columns_bytes_each": [s["files"]["columns"]["bytes"] for s in m["shards"]],
            "id_map_bytes": sum(r["bytes"] for _, r in id_map_files(m.get("id_map")))}


def first_root(store: str) -> str:
    """An original id of the store's graph: the first of its id map, else dense id 0."""
    import numpy as np

    from breadth.io.id_map_store import id_map_files
    from breadth.io.shard_store import read_manifest

    files = id_map_files(read_manifest(store).get("id_map"))
    if not files:
        return "0"
    f = os.path.join(store, files[0][0])
    if f.endswith(".npy"):
        return str(np.load(f, mmap_mode="r")[0].item())
    import pyarrow.parquet as pq

    return str(pq.ParquetFile(f).read_row_group(0, columns=["id"]).column(0)[0].as_py())


def breadth_command() -> str:
    """The ``breadth`` console script of this interpreter's environment (an unactivated venv's too)."""
    here = os.path.join(os.path.dirname(sys.executable), "breadth")
    return here if os.path.exists(here) else "breadth"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("store")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--roots", type=int, default=4, help="breadth bench --roots (validated)")
    p.add_argument("--memory-limit", default=None, help="passed to breadth bench --memory-limit")
    p.add_argument("--root", default=None, help="breadth bfs --root (default: the id map's first id)")
    p.add_argument("--kinds", default="bench,bfs")
    p.add_argument("--label", default=None, help="a note recorded with the run (e.g. the commit measured)")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    import pyarrow.dataset as ds

    doc = {"benchmark": "store_search_cpu", "machine": machine(), "hostname": platform.node(),
           "versions": versions("pyarrow"), "label": a.label,
           "parameters": {"store": os.path.abspath(a.store), "workers": a.workers, "roots": a.roots,
                          "memory_limit": a.memory_limit},
           "store": store_sizes(a.store), "runs": {}}
    tmp = tempfile.mkdtemp(prefix="bench-store-search-")
    try:
        if "bench" in a.kinds.split(","):
            js = os.path.join(tmp, "bench.json")
            cmd = [breadth_command(), "bench", a.store, "--roots", str(a.roots), "--workers", str(a.workers),
                   "--json", js] + (["--memory-limit", a.memory_limit] if a.memory_limit else [])
            rec = run_sampled(cmd)
            with open(js) as f:
                g5 = json.load(f)
            teps = g5["statistics"]["teps"]
            rec.update(valid=g5["valid"], harmonic_mean_gteps=teps["harmonic_mean"] / 1e9,
                       median_time_s=g5["statistics"]["time"]["median"],
                       validate_s=[r["validate_time"] for r in g5["roots"]])
            doc["runs"]["bench"] = rec
            print("bench", json.dumps({k: v for k, v in rec.items() if k != "timeline_s_bytes"})[:700],
                  file=sys.stderr, flush=True)
        if "bfs" in a.kinds.split(","):
            root = a.root or first_root(a.store)
            out = os.path.join(tmp, "results")
            rec = run_sampled([breadth_command(), "bfs", a.store, "--root", root, "--out", out,
                               "--workers", str(a.workers)])
            t = ds.dataset(out, format="parquet")
            rec.update(root=root, rows=t.count_rows(), schema=str(t.schema).splitlines()[:4])
            doc["runs"]["bfs"] = rec
            print("bfs", json.dumps({k: v for k, v in rec.items() if k != "timeline_s_bytes"})[:700],
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc["machine"]["loadavg_end"] = os.getloadavg()
    if a.json:
        write_json(a.json, doc)


if __name__ == "__main__":
    main()
