"""Sparse-id Parquet -> shards on the CPU: ``breadth ingest`` as users type it beside one process doing
pyarrow + ``pandas.factorize`` + a scipy CSR build of the same files, each in fresh processes.

    python benchmarks/make_webcrawl.py /tmp/wc24 --log2-tuples 24 --log2-ids 21       # the input, once
    python benchmarks/bench_ingest_sparse.py /tmp/wc24 --workers 2 --repeat 3 --json benchmarks/results/ingest_sparse_cpu.json

Each measurement is a new process tree, interleaved round by round (this machine has slow and fast phases):

* ``peer``: one process reads the files with pyarrow, numbers the ids with ``pandas.factorize`` of both
  columns together, and builds the symmetrized, deduplicated CSR with scipy (``coo -> csr``,
  ``sum_duplicates``): the one-process baseline the real-datasets issue names;
* ``cli``: ``breadth ingest DIR --workers W --out STORE`` (plus ``--memory-limit``/``--spill-dir`` when
  given): wall time of the command, the time it reports (read, relabel, shards and the store's write), and
  the peak of the summed RSS of its whole process tree (client, nanny, workers), sampled every 50 ms;
* ``api`` (with ``--api``): the same through the Python API on a local cluster with the stages
  (``read_parquet`` with the relabeling, then ``prepare``), each process's peak RSS, then ``--roots``
  validated Graph500 roots and a results dataset written by the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import write_json  # noqa: E402


# ---------------------------------------------------------------- memory of a process tree

def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def tree_rss(pid: int) -> int:
    """Summed resident bytes of ``pid`` and all its descendants (from /proc)."""
    kids, todo, total = _children(), [pid], 0
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


class TreeSampler(threading.Thread):
    """Peak summed RSS of a process tree, sampled every ``period`` seconds until :meth:`stop`."""

    def __init__(self, pid: int, period: float = 0.05):
        super().__init__(daemon=True)
        self.pid, self.period, self.peak, self._done = pid, period, 0, threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._done.wait(self.period)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


# ---------------------------------------------------------------- the three measurements

def run_peer(inp: str) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    t0 = time.perf_counter()
    t = pq.read_table(inp, columns=["src", "dst"])
    src, dst = (t.column(c).to_numpy() for c in ("src", "dst"))
    del t
    t1 = time.perf_counter()
    codes, uniq = pd.factorize(np.concatenate([src, dst]))
    m = src.size
    del src, dst
    t2 = time.perf_counter()
    u, v = codes[:m], codes[m:]
    keep = u != v  # self-loops dropped, as breadth's shards drop them
    u, v = u[keep], v[keep]
    n = uniq.size
    a = sp.coo_matrix((np.ones(2 * u.size, np.int8), (np.concatenate([u, v]), np.concatenate([v, u]))),
                      shape=(n, n)).tocsr()
    a.sum_duplicates()
    t3 = time.perf_counter()
    return {"tuples": int(m), "vertices": int(n), "nnz": int(a.nnz), "read_s": t1 - t0, "factorize_s": t2 - t1,
            "csr_s": t3 - t2, "total_s": t3 - t0,
            "rss_peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def breadth_command() -> str:
    """The ``breadth`` console script of this interpreter's environment (an unactivated venv's too)."""
    here = os.path.join(os.path.dirname(sys.executable), "breadth")
    return here if os.path.exists(here) else "breadth"


def run_cli(inp: str, workers: int, memory_limit: str | None, spill_dir: str | None) -> dict:
    store = tempfile.mkdtemp(prefix="bench-store-")
    cmd = [breadth_command(), "ingest", inp, "--workers", str(workers), "--out", os.path.join(store, "s")]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    if spill_dir:
        cmd += ["--spill-dir", spill_dir]
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
        peak = sampler.stop()
        if proc.returncode:
            raise RuntimeError(err[-2000:])
        reported = float(out.rsplit("; ", 1)[-1].split(" s", 1)[0]) if " s (" in out else None
        return {"command": " ".join(cmd), "wall_s": wall, "reported_s": reported, "tree_rss_peak_bytes": peak,
                "stdout": out.strip()[-400:]}
    finally:
        shutil.rmtree(store, ignore_errors=True)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_api(inp: str, workers: int, roots: int) -> dict:
    from breadth.bfs import bfs, graph500
    from breadth.bfs.results import write_results_dataset
    from breadth.io import read_parquet
    from breadth.pipeline import local_cluster, prepare

    client = local_cluster(workers, threads_per_worker=max(1, (os.cpu_count() or 1) // workers))
    out = tempfile.mkdtemp(prefix="bench-results-")
    try:
        t0 = time.perf_counter()
        el = read_parquet(inp, client=client)
        t1 = time.perf_counter()
        stages: dict = {}
        g = prepare(el, client, stages=stages)
        t2 = time.perf_counter()
        el.edges = None
        res = graph500(g, nroots=roots, seed=2, validate=True)
        t3 = time.perf_counter()
        dense = [int(r["root"]) for r in res.rows[:2]]  # two of the searched roots, in original ids
        rows = write_results_dataset(bfs(g, g.id_map.to_original(dense).tolist()), os.path.join(out, "results"))
        t4 = time.perf_counter()
        return {"tuples": g.num_input_edges, "vertices": g.num_vertices, "relabel": el.source.get("relabel"),
                "read_relabel_s": t1 - t0, "prepare_s": t2 - t1, "total_s": t2 - t0,
                "graph500_s": t3 - t2, "roots": roots, "harmonic_mean_teps": res.harmonic_mean_teps, "valid": res.valid,
                "results_rows": rows, "results_s": t4 - t3,
                "stages_wall_s": stages.get("wall_s"), "spilled_bytes": stages.get("spilled_bytes"),
                "workers_rss_peak_bytes": client.run(_peak_rss), "client_rss_peak_bytes": _peak_rss()}
    finally:
        shutil.rmtree(out, ignore_errors=True)
        cluster = client.cluster
        client.close()
        cluster.close()


def _fresh(kind: str, a) -> dict:
    args = [sys.executable, __file__, a.input, "--one", kind, "--workers", str(a.workers), "--roots", str(a.roots)]
    args += ["--memory-limit", a.memory_limit] if a.memory_limit else []
    args += ["--spill-dir", a.spill_dir] if a.spill_dir else []
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"{kind}: {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", help="a Parquet dataset directory (benchmarks/make_webcrawl.py)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default=None)
    p.add_argument("--spill-dir", default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--roots", type=int, default=4)
    p.add_argument("--kinds", default="peer,cli")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if a.one:
        fn = {"peer": lambda: run_peer(a.input), "cli": lambda: run_cli(a.input, a.workers, a.memory_limit, a.spill_dir),
              "api": lambda: run_api(a.input, a.workers, a.roots)}[a.one]
        print(json.dumps(fn()))
        return
    runs: dict = {k: [] for k in a.kinds.split(",")}
    for i in range(a.repeat):
        for k in runs:
            runs[k].append(_fresh(k, a))
            print(k, i, json.dumps(runs[k][-1])[:300], file=sys.stderr, flush=True)
    tuples = next((r["tuples"] for rs in runs.values() for r in rs if "tuples" in r), None)
    summary = {}
    for k, rs in runs.items():
        secs = [r["wall_s" if k == "cli" else "total_s"] for r in rs]
        med = statistics.median(secs)
        summary[k] = {"seconds": {"median": med, "min": min(secs), "max": max(secs)},
                      "mtuples_per_s": tuples / med / 1e6 if tuples else None}
    if "cli" in summary and "peer" in summary:
        summary["cli_over_peer_time"] = summary["cli"]["seconds"]["median"] / summary["peer"]["seconds"]["median"]
    import breadth

    doc = {"benchmark": "ingest_sparse_cpu", "machine": platform.node(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "breadth": getattr(breadth, "__version__", None),
           "input": a.input, "workers": a.workers, "memory_limit": a.memory_limit, "repeat": a.repeat,
           "load_average_after": os.getloadavg(), "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    if a.json:
        write_json(a.json, doc)


if __name__ == "__main__":
    main()
