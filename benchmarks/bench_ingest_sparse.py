"""Sparse-id Parquet -> shards on the CPU: ``breadth ingest`` as users type it beside one process doing
pyarrow + ``pandas.factorize`` + a scipy CSR build of the same files, each in fresh processes.

    python benchmarks/make_webcrawl.py /tmp/wc24 --log2-tuples 24 --log2-ids 21       # the input, once
    python benchmarks/bench_ingest_sparse.py /tmp/wc24 --workers 2 --repeat 3 --json benchmarks/results/ingest_sparse_cpu.json

Each measurement is a new process tree, interleaved round by round (this machine has slow and fast phases):

* ``peer``: one process reads the files with pyarrow, numbers the ids with ``pandas.factorize`` of both
  columns together, and builds the symmetrized, deduplicated CSR with scipy (``coo -> csr``,
  ``sum_duplicates``): the one-process baseline the real-datasets issue names.  Its time is its own clock
  from the first read to the CSR (imports excluded); ``process_wall_s`` (summary ``peer_process_wall``) is
  its whole process, as ``cli`` is timed.  ``--peer-env NUMPY_MADVISE_HUGEPAGE=0`` gives it the setting
  breadth's workers start with (the peer then took 4.3-4.6 s instead of 8.4-8.6 s at 2^24);
* ``cli``: ``breadth ingest DIR --workers W --out STORE`` (plus ``--memory-limit``/``--spill-dir`` when
  given): wall time of the command, the time it reports (read, relabel, shards and the store's write), and
  the peak of the summed RSS of its whole process tree (client, nanny, workers), sampled every 50 ms, each
  process's peak, the read + relabel seconds (from the store's manifest) and the peak bytes under
  ``--spill-dir``; with ``--search-roots R``, then ``breadth bench STORE --roots R`` (validated) and ``breadth
  bfs STORE --root ... --out DIR`` (a results dataset, read back with pyarrow), sampled alike (``--store``
  keeps the store).  The 2^30 web-crawl run::

      python benchmarks/bench_ingest_sparse.py /tmp/wc30 --kinds cli --repeat 1 --workers 2 --memory-limit 6.3GB \
          --spill-dir /tmp/spill --search-roots 4 --json benchmarks/results/ingest_webcrawl_2e30_cpu.json

* ``api`` (with ``--kinds ...,api``): the same through the Python API on a local cluster with the stages
  (``read_parquet`` with the relabeling, then ``prepare``), each process's peak RSS, then ``--roots``
  validated Graph500 roots and a results dataset written by the workers.  The edge list is not used
  again, so ``prepare`` gets it with ``keep_edges=False``, as ``breadth ingest`` does (``--keep-edges``:
  the API's default, the list kept until the graph is built).
* ``kronecker``: the issue's per-tuple reference: ``prepare(kronecker(S))`` through the same API and
  cluster, with ``16 * 2**S`` the input's tuple count (rounded to a power of two; scale 22 for 2^26 tuples).
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


def tree_rss(pid: int, each: dict | None = None) -> int:
    """Summed resident bytes of ``pid`` and all its descendants (from /proc); ``each[pid]`` (when given)
    keeps every process's largest RSS seen."""
    kids, todo, total = _children(), [pid], 0
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            with open(f"/proc/{p}/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
        total += rss
        if each is not None:
            each[p] = max(each.get(p, 0), rss)
    return total


def dir_bytes(path: str) -> int:
    """Bytes of the files under ``path`` (0 when it does not exist)."""
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


class TreeSampler(threading.Thread):
    """Peak summed RSS of a process tree (and each process's peak), sampled every ``period`` seconds until
    :meth:`stop`; with ``spill_dir``, also the peak bytes under it (sampled every ``dir_period`` seconds)."""

    def __init__(self, pid: int, period: float = 0.05, spill_dir: str | None = None, dir_period: float = 1.0):
        super().__init__(daemon=True)
        self.pid, self.period, self.peak, self._done = pid, period, 0, threading.Event()
        self.each: dict[int, int] = {}
        self.spill_dir, self.dir_period, self.spill_peak = spill_dir, dir_period, 0

    def run(self) -> None:
        next_dir = 0.0
        while not self._done.is_set():
            self.peak = max(self.peak, tree_rss(self.pid, self.each))
            if self.spill_dir and time.monotonic() >= next_dir:
                self.spill_peak = max(self.spill_peak, dir_bytes(self.spill_dir))
                next_dir = time.monotonic() + self.dir_period
            self._done.wait(self.period)

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


# ---------------------------------------------------------------- the three measurements

def run_peer(inp: list[str]) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq
    import scipy.sparse as sp

    t0 = time.perf_counter()
    t = pq.read_table(inp[0] if len(inp) == 1 else inp, columns=["src", "dst"])  # a directory, or files
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


def run_sampled(cmd: list[str], spill_dir: str | None = None) -> tuple[dict, str]:
    """Run ``cmd`` with its process tree's RSS sampled (and the bytes under ``spill_dir``): its record
    (wall seconds, peak summed RSS, the largest processes' peaks, peak spill bytes) and its stdout."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid, spill_dir=spill_dir)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    peak = sampler.stop()
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd)}: {err[-2000:]}")
    return ({"command": " ".join(cmd), "wall_s": wall, "tree_rss_peak_bytes": peak,
             "process_rss_peak_bytes": sorted(sampler.each.values(), reverse=True)[:8],
             "spill_dir_peak_bytes": sampler.spill_peak if spill_dir else None,
             "stdout": out.strip()[-400:], "stderr": err.strip()[-1500:]}, out)


def run_cli(inp: list[str], workers: int, memory_limit: str | None, spill_dir: str | None,
            store: str | None = None, roots: int = 0) -> dict:
    """``breadth ingest`` of ``inp`` into ``store`` (default: a temporary one, removed), sampled; with
    ``roots``, then ``breadth bench STORE --roots`` (validated Graph500 roots) and ``breadth bfs STORE
    --root R --out DIR`` (a results dataset, its rows counted with pyarrow), each sampled alike."""
    from breadth.io.shard_store import read_manifest

    tmp = tempfile.mkdtemp(prefix="bench-store-")
    store = store or os.path.join(tmp, "s")
    cmd = [breadth_command(), "ingest", *inp, "--workers", str(workers), "--out", store]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    if spill_dir:
        cmd += ["--spill-dir", spill_dir]
    try:
        rec, out = run_sampled(cmd, spill_dir)
        rec["reported_s"] = float(out.rsplit("; ", 1)[-1].split(" s", 1)[0]) if " s (" in out else None
        m = read_manifest(store)
        rec["read_relabel_s"] = m.get("extra", {}).get("read_s")
        rec["vertices"], rec["tuples"] = m.get("num_vertices"), m.get("num_input_edges")
        if roots:
            import pyarrow as pa
            import pyarrow.dataset as ds
            import pyarrow.parquet as pq

            js = os.path.join(tmp, "bench.json")
            rec["graph500"], _ = run_sampled([breadth_command(), "bench", store, "--roots", str(roots), "--workers",
                                              str(workers), "--json", js])
            with open(js) as f:
                g5 = json.load(f)
            rec["graph500"]["result"] = {k: v for k, v in g5.items() if not isinstance(v, (list, dict))}
            rec["graph500"]["statistics"] = g5["statistics"]
            files = [inp[0]] if inp[0].endswith(".parquet") else sorted(os.path.join(inp[0], f)
                                                                        for f in os.listdir(inp[0]))
            root = pq.ParquetFile(files[0]).read_row_group(0, columns=["src"]).column(0)[0].as_py()  # int or str
            res = os.path.join(tmp, "results")
            rec["results"], _ = run_sampled([breadth_command(), "bfs", store, "--root", str(root), "--out", res,
                                             "--workers", str(workers)])
            t = ds.dataset(res, format="parquet")
            rec["results"].update(root=root, rows=t.count_rows(), schema=str(t.schema),
                                  roots_in_dataset=pa.compute.unique(t.to_table(columns=["root"])
                                                                     .column(0)).to_pylist())
        return rec
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_api(inp: list[str], workers: int, roots: int, keep_edges: bool = False) -> dict:
    from breadth.bfs import bfs, graph500
    from breadth.bfs.results import write_results_dataset
    from breadth.pipeline import read_parquet
    from breadth.pipeline import local_cluster, prepare

    client = local_cluster(workers, threads_per_worker=max(1, (os.cpu_count() or 1) // workers))
    out = tempfile.mkdtemp(prefix="bench-results-")
    try:
        t0 = time.perf_counter()
        el = read_parquet(inp, client=client)
        t1 = time.perf_counter()
        stages: dict = {}
        g = prepare(el, client, stages=stages, keep_edges=keep_edges)
        t2 = time.perf_counter()
        el.release()
        res = graph500(g, nroots=roots, seed=2, validate=True)
        t3 = time.perf_counter()
        dense = [int(r["root"]) for r in res.rows[:2]]  # two of the searched roots, in original ids
        rows = write_results_dataset(bfs(g, g.id_map.to_original(dense).tolist()), os.path.join(out, "results"))
        t4 = time.perf_counter()
        return {"tuples": g.num_input_edges, "vertices": g.num_vertices, "relabel": el.source.get("relabel"),
                "keep_edges": keep_edges,
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


def run_kronecker(inp: list[str], workers: int) -> dict:
    import math

    import pyarrow.dataset as ds

    from breadth.pipeline import kronecker, local_cluster, prepare

    n = ds.dataset(inp[0] if len(inp) == 1 else inp, format="parquet").count_rows()
    scale = max(1, round(math.log2(max(n, 32) / 16)))
    client = local_cluster(workers, threads_per_worker=max(1, (os.cpu_count() or 1) // workers))
    try:
        t0 = time.perf_counter()
        g = prepare(kronecker(scale, seed=1), client)
        t1 = time.perf_counter()
        return {"tuples": g.num_input_edges, "scale": scale, "input_tuples": n, "total_s": t1 - t0,
                "vertices": g.num_vertices, "workers_rss_peak_bytes": client.run(_peak_rss)}
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()


def _peer_env(pairs: list[str]) -> dict[str, str]:
    """``--peer-env KEY=VALUE`` pairs as a dict (one clear line for a malformed one)."""
    env = {}
    for kv in pairs:
        k, eq, v = kv.partition("=")
        if not eq or not k:
            raise SystemExit(f"bench_ingest_sparse.py: error: --peer-env {kv!r}: expected KEY=VALUE")
        env[k] = v
    return env


def _fresh(kind: str, a) -> dict:
    args = [sys.executable, __file__, *a.input, "--one", kind, "--workers", str(a.workers), "--roots", str(a.roots)]
    args += ["--memory-limit", a.memory_limit] if a.memory_limit else []
    args += ["--spill-dir", a.spill_dir] if a.spill_dir else []
    args += ["--store", a.store] if a.store else []
    args += ["--search-roots", str(a.search_roots)] + ["--keep-edges"] * a.keep_edges
    env = dict(os.environ, **_peer_env(a.peer_env)) if kind == "peer" else None
    t0 = time.perf_counter()
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode:  # kept as a record: the runs before it, minutes each at 2^30 tuples, are not lost
        return {"failed": True, "wall_s": wall, "stderr": r.stderr[-3000:]}
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    if kind == "peer":  # its process as a whole (interpreter start, imports of pyarrow, pandas, scipy)
        rec["process_wall_s"] = wall
        rec["env"] = _peer_env(a.peer_env)
    return rec


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="+", help="a Parquet dataset directory (benchmarks/make_webcrawl.py), or some "
                                         "of its files")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default=None)
    p.add_argument("--spill-dir", default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--roots", type=int, default=4)
    p.add_argument("--kinds", default="peer,cli")
    p.add_argument("--store", default=None, help="cli: ingest into this store and keep it")
    p.add_argument("--keep-edges", action="store_true",
                   help="api: prepare with keep_edges=True (the API's default) instead of handing the list over")
    p.add_argument("--search-roots", type=int, default=0,
                   help="cli: after ingesting, this many validated Graph500 roots and a results dataset")
    p.add_argument("--peer-env", action="append", default=[], metavar="KEY=VALUE",
                   help="peer: run its process with this environment variable too (repeatable), e.g. "
                        "NUMPY_MADVISE_HUGEPAGE=0, the setting breadth's workers start with")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if a.one:
        fn = {"peer": lambda: run_peer(a.input), "cli": lambda: run_cli(a.input, a.workers, a.memory_limit, a.spill_dir, a.store,
                                                                 a.search_roots),
              "api": lambda: run_api(a.input, a.workers, a.roots, a.keep_edges),
              "kronecker": lambda: run_kronecker(a.input, a.workers)}[a.one]
        print(json.dumps(fn()))
        return
    runs: dict = {k: [] for k in a.kinds.split(",")}
    for i in range(a.repeat):
        for k in runs:
            runs[k].append(_fresh(k, a))
            print(k, i, json.dumps(runs[k][-1])[:300], file=sys.stderr, flush=True)
    tuples = next((r["tuples"] for rs in runs.values() for r in rs if "tuples" in r), None)
    summary = {}
    failed = {k: sum(1 for r in rs if r.get("failed")) for k, rs in runs.items()}
    runs_ok = {k: [r for r in rs if not r.get("failed")] for k, rs in runs.items()}
    for k, rs in runs_ok.items():
        if not rs:
            summary[k] = {"failed": failed[k]}
            continue
        secs = [r["wall_s" if k == "cli" else "total_s"] for r in rs]
        med = statistics.median(secs)
        n = rs[0].get("tuples", tuples)  # kronecker: its own count (a power of two)
        summary[k] = {"seconds": {"median": med, "min": min(secs), "max": max(secs)},
                      "mtuples_per_s": n / med / 1e6 if n else None, "failed": failed[k]}
    if runs_ok.get("peer"):  # the peer's process as a whole, as `cli` is timed (its own clock excludes imports)
        secs = [r["process_wall_s"] for r in runs_ok["peer"]]
        summary["peer_process_wall"] = {"seconds": {"median": statistics.median(secs), "min": min(secs),
                                                    "max": max(secs)}}
    if runs_ok.get("api") and runs_ok.get("kronecker"):  # per tuple: above 1, the sparse ids cost more
        summary["api_over_kronecker_per_tuple"] = \
            summary["kronecker"]["mtuples_per_s"] / summary["api"]["mtuples_per_s"]
    if runs_ok.get("cli") and runs_ok.get("peer"):
        summary["cli_over_peer_time"] = summary["cli"]["seconds"]["median"] / summary["peer"]["seconds"]["median"]
    import breadth

    doc = {"benchmark": "ingest_sparse_cpu", "machine": platform.node(), "cpus": os.cpu_count(),
           "python": platform.python_version(), "breadth": getattr(breadth, "__version__", None),
           "input": a.input, "workers": a.workers, "memory_limit": a.memory_limit, "repeat": a.repeat,
           "keep_edges": a.keep_edges,
           "peer_env": _peer_env(a.peer_env), "environ": {k: os.environ.get(k) for k in (
               "NUMPY_MADVISE_HUGEPAGE", "MALLOC_MMAP_THRESHOLD_", "NUMBA_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")},
           "load_average_after": os.getloadavg(), "summary": summary, "runs": runs}
    print(json.dumps(summary, indent=1))
    if a.json:
        write_json(a.json, doc)
    if any(failed.values()):
        sys.exit(f"bench_ingest_sparse: {sum(failed.values())} run(s) failed; their stderr is in the runs"
                 + (f" ({a.json})" if a.json else ""))


if __name__ == "__main__":
    main()
