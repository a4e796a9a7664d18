"""Sparse-id Parquet -> shards on the CPU: ``breadth ingest`` as users type it beside one process doing
pyarrow + ``pandas.factorize`` + a scipy CSR build of the same files, each in fresh processes.

    python -m benchmarks.make_webcrawl /tmp/wc24 --log2-tuples 24 --log2-ids 21       # the input, once
    python -m benchmarks.bench_ingest_sparse /tmp/wc24 --workers 2 --repeat 3 --json ingest_sparse_cpu.json

Each measurement is a new process tree whose memory is sampled every 50 ms (the peak of the tree's summed RSS
and each process's peak), interleaved round by round (these machines have slow and fast phases):

* ``peer``: one process reads the files with pyarrow, numbers the ids with ``pandas.factorize`` of both
  columns together, and builds the symmetrized, deduplicated CSR with scipy (``coo -> csr``,
  ``sum_duplicates``): the one-process baseline.  Its time is its own clock from the first read to the CSR
  (imports excluded); ``process_wall_s`` (summary ``peer_process_wall``) is its whole process, as ``cli``
  is timed.  ``--peer-env NUMPY_MADVISE_HUGEPAGE=0`` gives it the setting breadth's workers start with (at
  2^24 tuples the peer then takes about half the time);
* ``cli``: ``breadth ingest DIR --workers W --out STORE`` (plus ``--memory-limit``/``--spill-dir`` when
  given): wall time of the command, the time it reports (read, relabel, shards and the store's write), the
  read + relabel seconds (from the store's manifest) and the peak bytes under ``--spill-dir``.  ``--store``
  keeps the store (one round), to be searched by :mod:`benchmarks.bench_store_search`; the out-of-core
  web-crawl run::

      python -m benchmarks.make_webcrawl /tmp/wc30 --log2-tuples 30 --log2-ids 26
      python -m benchmarks.bench_ingest_sparse /tmp/wc30 --kinds cli --repeat 1 --workers 2 --memory-limit 6.3GB \\
          --spill-dir /tmp/spill --store /tmp/s30 --json ingest_webcrawl_2e30_cpu.json
      python -m benchmarks.bench_store_search /tmp/s30 --workers 2 --roots 4 --json store_search_2e30_cpu.json

* ``api`` (with ``--kinds ...,api``): the same through the Python API on a local cluster with the stages
  (``read_parquet`` with the relabeling, then ``prepare``), each process's peak RSS, then ``--roots``
  validated Graph500 roots and a results dataset written by the workers.  The edge list is not used
  again, so ``prepare`` gets it with ``keep_edges=False``, as ``breadth ingest`` does (``--keep-edges``:
  the API's default, the list kept until the graph is built).
* ``kronecker``: the per-tuple reference: ``prepare(kronecker(S))`` through the same API and cluster, with
  ``16 * 2**S`` the input's tuple count (rounded to a power of two; scale 22 for 2^26 tuples).
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

GiB = 1 << 30


# ---------------------------------------------------------------- the measurements

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


def run_cli(inp: list[str], workers: int, memory_limit: str | None, spill_dir: str | None,
            store: str | None = None) -> dict:
    """``breadth ingest`` of ``inp`` into ``store`` (default: a temporary one, removed) in a fresh process
    tree, sampled; the read + relabel seconds, vertices and tuples from the store's manifest."""
    from breadth.io.shard_store import read_manifest

    tmp = tempfile.mkdtemp(prefix="bench-store-")
    store = store or os.path.join(tmp, "s")
    cmd = [breadth_command(), "ingest", *inp, "--workers", str(workers), "--out", store]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    if spill_dir:
        cmd += ["--spill-dir", spill_dir]
    try:
        rec = run_command(cmd, memory=True, spill_dir=spill_dir)
        if rec["failed"]:
            return rec
        out = rec["stdout_tail"]
        rec["reported_s"] = float(out.rsplit("; ", 1)[-1].split(" s", 1)[0]) if " s (" in out else None
        m = read_manifest(store)
        rec["read_relabel_s"] = m.get("extra", {}).get("read_s")
        rec["vertices"], rec["tuples"] = m.get("num_vertices"), m.get("num_input_edges")
        return rec
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _peak_rss() -> int:
    """This process's peak RSS (bytes), from the kernel's high-water mark."""
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
            raise SystemExit(f"bench_ingest_sparse: error: --peer-env {kv!r}: expected KEY=VALUE")
        env[k] = v
    return env


def _fresh(kind: str, a) -> dict:
    """One measurement of ``kind`` in a fresh process tree, sampled (``cli``: ``breadth ingest`` itself; the
    others: this module with ``--one KIND``, which writes its figures to the JSON file it is given)."""
    if kind == "cli":
        return run_cli(a.input, a.workers, a.memory_limit, a.spill_dir, a.store)
    cmd = module_command("benchmarks.bench_ingest_sparse", *a.input, "--one", kind, "--workers", a.workers,
                         "--roots", a.roots, "--json", JSON_PATH, *(["--keep-edges"] if a.keep_edges else []))
    env = _peer_env(a.peer_env) if kind == "peer" else None
    rec = run_command(cmd, env=env, memory=True)
    if rec["failed"]:  # kept as a record: the runs before it, minutes each at 2^30 tuples, are not lost
        return rec
    out = rec.pop("json")
    out.update(process_wall_s=rec["wall_s"], tree_rss_peak_bytes=rec["tree_rss_peak_bytes"],
               processes=rec["processes"], command=rec["command"])
    if kind == "peer":
        out["env"] = env
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("input", nargs="+", help="a Parquet dataset directory (benchmarks.make_webcrawl), or some "
                                         "of its files")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-limit", default=None, help="cli: breadth ingest --memory-limit")
    p.add_argument("--spill-dir", default=None, help="cli: breadth ingest --spill-dir (its peak size is sampled)")
    p.add_argument("--repeat", type=int, default=3, help="rounds of the kinds, interleaved")
    p.add_argument("--roots", type=int, default=4, help="api: validated Graph500 roots after the ingest")
    p.add_argument("--kinds", default="peer,cli", help="which of peer, cli, api, kronecker (comma-separated)")
    p.add_argument("--store", default=None, help="cli: ingest into this store and keep it (needs --repeat 1)")
    p.add_argument("--keep-edges", action="store_true",
                   help="api: prepare with keep_edges=True (the API's default) instead of handing the list over")
    p.add_argument("--peer-env", action="append", default=[], metavar="KEY=VALUE",
                   help="peer: run its process with this environment variable too (repeatable), e.g. "
                        "NUMPY_MADVISE_HUGEPAGE=0, the setting breadth's workers start with")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    add_json_argument(p)
    a = p.parse_args(argv)
    if a.one:  # one measurement, in the fresh process _fresh started
        fn = {"peer": lambda: run_peer(a.input), "api": lambda: run_api(a.input, a.workers, a.roots, a.keep_edges),
              "kronecker": lambda: run_kronecker(a.input, a.workers)}[a.one]
        write_json(a.json, fn())
        return 0
    kinds = a.kinds.split(",")
    if not set(kinds) <= {"peer", "cli", "api", "kronecker"}:
        p.error(f"--kinds {a.kinds}: expected some of peer, cli, api, kronecker")
    if a.store and a.repeat != 1:
        p.error("--store keeps one store: give --repeat 1")
    _peer_env(a.peer_env)
    doc = new_record("bench_ingest_sparse", a)
    doc["environ"] = {k: os.environ.get(k) for k in ("NUMPY_MADVISE_HUGEPAGE", "MALLOC_MMAP_THRESHOLD_",
                                                      "NUMBA_CACHE_DIR")}
    runs: dict = {k: [] for k in kinds}
    for i in range(a.repeat):
        for k in kinds:
            rec = _fresh(k, a)
            rec["round"] = i
            runs[k].append(rec)
            print(f"  round {i} {k}: " + ("FAILED " + rec["stderr_tail"][-300:] if rec.get("failed")
                                           else f"{rec.get('total_s', rec.get('wall_s')):.2f} s"),
                  file=sys.stderr, flush=True)
    tuples = next((r["tuples"] for rs in runs.values() for r in rs if "tuples" in r), None)
    summary = {}
    failed = {k: sum(1 for r in rs if r.get("failed")) for k, rs in runs.items()}
    runs_ok = {k: [r for r in rs if not r.get("failed")] for k, rs in runs.items()}
    for k, rs in runs_ok.items():
        if not rs:
            summary[k] = {"failed": failed[k]}
            continue
        sec = median_range(r["wall_s" if k == "cli" else "total_s"] for r in rs)
        n = rs[0].get("tuples", tuples)  # kronecker: its own count (a power of two)
        summary[k] = {"seconds": sec, "mtuples_per_s": n / sec["median"] / 1e6 if n else None,
                      "tree_rss_peak_bytes": median_range(r["tree_rss_peak_bytes"] for r in rs), "failed": failed[k]}
    if runs_ok.get("peer"):  # the peer's process as a whole, as `cli` is timed (its own clock excludes imports)
        summary["peer_process_wall"] = {"seconds": median_range(r["process_wall_s"] for r in runs_ok["peer"])}
    if runs_ok.get("api") and runs_ok.get("kronecker"):  # per tuple: above 1, the sparse ids cost more
        summary["api_over_kronecker_per_tuple"] = \
            summary["kronecker"]["mtuples_per_s"] / summary["api"]["mtuples_per_s"]
    if runs_ok.get("cli") and runs_ok.get("peer"):
        summary["cli_over_peer_time"] = summary["cli"]["seconds"]["median"] / summary["peer"]["seconds"]["median"]
    doc.update(summary=summary, runs=runs)
    if a.json:
        write_json(a.json, doc)
    print_table(["kind", "runs", "median s", "min s", "max s", "M tuples/s", "tree peak GiB (median)", "failed"],
                [[k, v["seconds"]["n"], v["seconds"]["median"], v["seconds"]["min"], v["seconds"]["max"],
                  v["mtuples_per_s"], v["tree_rss_peak_bytes"]["median"] / GiB, v["failed"]]
                 for k, v in summary.items() if isinstance(v, dict) and "tree_rss_peak_bytes" in v])
    if "cli_over_peer_time" in summary:
        print(f"cli / peer time: {summary['cli_over_peer_time']:.2f}")
    if any(failed.values()):
        print(f"bench_ingest_sparse: {sum(failed.values())} run(s) failed; their stderr is in the runs"
              + (f" ({a.json})" if a.json else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
