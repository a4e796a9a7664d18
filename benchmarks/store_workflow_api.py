"""The Python API doing in one fresh process what ``breadth ingest``, ``breadth bfs`` and ``breadth bench`` do
as three commands, each step timed: run by :mod:`benchmarks.bench_store_search` beside the commands.

    python -m benchmarks.store_workflow_api --input /tmp/wc28 --device gpu --store /tmp/api.store --roots 8 \\
        --root 123 --out /tmp/api-bfs --json api.json

Steps, as the README shows the API: start a local cluster (``local_cluster`` or ``local_cuda_cluster``);
**ingest**: ``read_edges`` + ``prepare(search_order=False, keep_edges=False)`` + ``write_store``, what
``breadth ingest`` runs; then the same input read and prepared again and kept in memory, ready to search
(``prepare`` with its defaults), **bfs** from ``--root`` written with ``to_parquet``, and **bench**:
``graph500`` on the in-memory graph -- the in-memory figures a stored graph is compared with.
``process_to_ingest_end_s`` counts from the process's start (imports and the cluster included), as a
command's wall time does.
"""

from __future__ import annotations

import time

T_PROCESS = time.perf_counter()  # noqa: E402  (before the imports below: a fresh process's time counts them)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="edge files or a directory, as breadth ingest takes them")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--workers", type=int, default=None, help="local workers (default: as the CLI's)")
    p.add_argument("--store", required=True, help="where to write the store (replaced)")
    p.add_argument("--root", required=True, help="the bfs step's root (an original id)")
    p.add_argument("--out", required=True, help="the bfs step's Parquet dataset (replaced)")
    p.add_argument("--roots", type=int, default=8, help="graph500 roots")
    p.add_argument("--json", required=True)
    a = p.parse_args(argv)
    from breadth.bfs import bfs, graph500
    from breadth.io import write_store
    from breadth.pipeline import prepare, read_edges

    t: dict = {"imports_s": time.perf_counter() - T_PROCESS}
    t0 = time.perf_counter()
    if a.device == "gpu":
        from breadth.pipeline.cluster.cluster import local_cuda_cluster

        client = local_cuda_cluster(**({"workers": a.workers} if a.workers else {}))
    else:
        from breadth.pipeline import local_cluster

        client = local_cluster(**({"workers": a.workers} if a.workers else {}))
    t["cluster_s"] = time.perf_counter() - t0
    for path in (a.store, a.out):
        shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    el = read_edges([a.input], client=client, device=a.device)
    g = prepare(el, client, device=a.device, search_order=False, keep_edges=False)
    write_store(g, a.store)
    t["ingest_s"] = time.perf_counter() - t0
    t["process_to_ingest_end_s"] = time.perf_counter() - T_PROCESS
    g.release()
    t0 = time.perf_counter()
    g = prepare(read_edges([a.input], client=client, device=a.device), client, device=a.device)
    t["prepare_in_memory_s"] = time.perf_counter() - t0
    root = int(a.root) if a.root.lstrip("-").isdigit() else a.root  # the id type the CLI's --root parses
    t0 = time.perf_counter()
    bfs(g, root).to_parquet(a.out)
    t["bfs_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = graph500(g, nroots=a.roots)
    t["bench_s"] = time.perf_counter() - t0
    out = {"times": t, "valid": res.valid, "harmonic_mean_teps": res.harmonic_mean_teps,
           "engine": res.header.get("engine"), "num_vertices": g.num_vertices, "num_edges": g.num_edges,
           "construction_time": g.construction_time}
    with open(a.json, "w") as f:
        json.dump(out, f)
    g.release()
    client.close()
    if client.cluster is not None:
        client.cluster.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
