"""A stored graph searched as users type it, beside the same graph in memory.

Three comparisons, each command a fresh process, alternated round by round (``--repeat``):

``--scale S`` (a Kronecker graph): ``breadth bench --scale S`` (generated and prepared in memory) against
``breadth bench STORE`` of the same graph, stored once by ``breadth generate --scale S --out STORE``
(``--store``; made when missing).  Reported: TEPS (median and range of the harmonic means), the in-memory
construction against the store's load, the store's bytes and the speed one thread reads them from disk
here, and the two targets: a stored graph's TEPS at least 0.9 of the in-memory one's, its load at most
twice the construction plus the time to read its bytes at that speed::

    python -m benchmarks.bench_store_search --scale 26 --device gpu --roots 16 --repeat 3 \
        --store /tmp/s26.store --json store_s26.json

``--input DIR`` (real data, e.g. ``make_webcrawl``'s Parquet): the workflow as typed -- ``breadth ingest DIR
--out STORE``, ``breadth bfs STORE --root ID --out R``, ``breadth bench STORE`` -- each step's wall time,
beside the Python API doing the same in one fresh process (:mod:`benchmarks.store_workflow_api`), whose
in-memory graph is the TEPS baseline; target: the CLI's ingest within 1.5x the API's fresh-process time::

    python -m benchmarks.make_webcrawl /tmp/wc28 --log2-tuples 28 --log2-ids 26
    python -m benchmarks.bench_store_search --input /tmp/wc28 --device gpu --roots 8 --repeat 3 \
        --store /tmp/wc28.store --json store_wc28.json

``STORE`` (memory): ``breadth bench STORE`` (validated Graph500 roots) and ``breadth bfs STORE --root R
--out DIR`` (a results dataset), each process tree's memory sampled every 50 ms from ``/proc/PID/status``
(``RssAnon``: arrays a worker allocated; ``RssFile``: mapped file pages), against the store's shard and
id-map bytes::

    python -m benchmarks.bench_store_search /tmp/s28 --workers 2 --roots 4 --repeat 3 --json store_search.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from benchmarks.harness import (JSON_PATH, add_json_argument, breadth_command, median_range, module_command,
                                new_record, print_table, run_command, run_fresh, write_json)

GiB = 1 << 30


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


def read_speed(store: str) -> dict:
    """Bytes of the store's files and the seconds one thread takes to read them here (from the page cache
    when they were just written or read, as on a machine with the memory to hold them)."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(store) for f in fs]
    t0, n = time.perf_counter(), 0
    for path in files:
        with open(path, "rb", buffering=0) as f:
            while b := f.read(16 << 20):
                n += len(b)
    dt = time.perf_counter() - t0
    return {"bytes": n, "read_s": dt, "bytes_per_s": n / dt if dt else None}


def _bench_figures(rec: dict) -> dict:
    g5 = rec.pop("json") or {}
    hdr = g5.get("header", {})
    return {"valid": g5.get("valid"), "harmonic_mean_teps": g5.get("statistics", {}).get("teps", {}).get("harmonic_mean"),
            "construction_s": float(hdr["construction_time"]) if "construction_time" in hdr else None,
            "load_s": float(hdr["load_time"]) if "load_time" in hdr else None, "engine": hdr.get("engine")}


def compare_scale(a, doc: dict) -> list[list]:
    """``--scale``: in memory against the store, alternating."""
    dev = ["--device", a.device]
    store = a.store or os.path.join(tempfile.gettempdir(), f"breadth-bench-s{a.scale}-{a.device}.store")
    if not os.path.exists(os.path.join(store, "manifest.json")):
        rec = run_command([breadth_command(), "generate", "--scale", a.scale, "--out", store, *dev, *a.extra],
                          check=True)
        doc["generate"] = {"wall_s": rec["wall_s"], "stdout_tail": rec["stdout_tail"]}
    doc["store"] = dict(store_sizes(store), path=store, disk=read_speed(store))
    bench = [breadth_command(), "bench", "--roots", a.roots, "--json", JSON_PATH, *dev, *a.extra]
    runs = run_fresh({"memory": bench[:2] + ["--scale", a.scale] + bench[2:], "store": bench[:2] + [store] + bench[2:]},
                     a.repeat, check=True)
    for rs in runs.values():
        for r in rs:
            r.update(_bench_figures(r))
    doc["runs"] = runs
    med = {k: median_range(r["harmonic_mean_teps"] for r in rs) for k, rs in runs.items()}
    construction = median_range(r["construction_s"] for r in runs["memory"])
    load = median_range(r["load_s"] for r in runs["store"])
    disk_s = doc["store"]["disk"]["read_s"]
    doc["summary"] = {
        "teps": med, "construction_s": construction, "load_s": load, "disk_read_s": disk_s,
        "teps_ratio": med["store"]["median"] / med["memory"]["median"],
        "load_bound_s": 2 * (construction["median"] + disk_s),
        "targets_met": {"teps_ratio >= 0.9": med["store"]["median"] >= 0.9 * med["memory"]["median"],
                        "load <= 2 (construction + disk read)": load["median"] <= 2 * (construction["median"] + disk_s)},
        "engines_equal": len({r["engine"] for rs in runs.values() for r in rs}) == 1}
    return [[k, r["round"], r["wall_s"], r["harmonic_mean_teps"] / 1e9, r["construction_s"] if k == "memory"
             else r["load_s"], r["valid"]] for k, rs in runs.items() for r in rs]


def compare_input(a, doc: dict) -> list[list]:
    """``--input``: the CLI's ingest / bfs / bench against the API doing the same in one process."""
    dev = ["--device", a.device]
    tmp = tempfile.mkdtemp(prefix="bench-store-workflow-")
    store = a.store or os.path.join(tmp, "cli.store")
    api_store, cli_out, api_out = (os.path.join(tmp, x) for x in ("api.store", "cli-bfs", "api-bfs"))
    b = breadth_command()
    rows = []
    try:
        runs: dict = {k: [] for k in ("ingest", "bfs", "bench", "api")}
        for i in range(a.repeat):
            shutil.rmtree(cli_out, ignore_errors=True)
            rec = run_command([b, "ingest", a.input, "--out", store, "--overwrite", *dev, *a.extra], check=True)
            runs["ingest"].append(dict(rec, round=i))
            root = a.root or first_root(store)
            rec = run_command([b, "bfs", store, "--root", root, "--out", cli_out, *dev, *a.extra], check=True)
            runs["bfs"].append(dict(rec, round=i, root=root))
            rec = run_command([b, "bench", store, "--roots", a.roots, "--json", JSON_PATH, *dev, *a.extra],
                              check=True)
            rec.update(_bench_figures(rec))
            runs["bench"].append(dict(rec, round=i))
            rec = run_command(module_command("benchmarks.store_workflow_api", "--input", a.input, "--device",
                                             a.device, "--store", api_store, "--root", root, "--out", api_out,
                                             "--roots", a.roots, "--json", JSON_PATH), check=True)
            rec.update(rec.pop("json"))
            runs["api"].append(dict(rec, round=i))
            rows += [[k, i, runs[k][-1]["wall_s"], runs[k][-1].get("harmonic_mean_teps")] for k in runs]
        doc["store"] = dict(store_sizes(store), disk=read_speed(store))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc["runs"] = runs
    api_ingest = median_range(r["times"]["process_to_ingest_end_s"] for r in runs["api"])
    cli_ingest = median_range(r["wall_s"] for r in runs["ingest"])
    teps = {"store": median_range(r["harmonic_mean_teps"] for r in runs["bench"]),
            "memory": median_range(r["harmonic_mean_teps"] for r in runs["api"])}
    doc["summary"] = {
        "cli_wall_s": {k: median_range(r["wall_s"] for r in runs[k]) for k in ("ingest", "bfs", "bench")},
        "api_step_s": {k: median_range(r["times"][k] for r in runs["api"])
                       for k in runs["api"][0]["times"]},
        "teps": teps, "teps_ratio": teps["store"]["median"] / teps["memory"]["median"],
        "load_s": median_range(r["load_s"] for r in runs["bench"]),
        "ingest_ratio": cli_ingest["median"] / api_ingest["median"],
        "targets_met": {"teps_ratio >= 0.9": teps["store"]["median"] >= 0.9 * teps["memory"]["median"],
                        "cli ingest <= 1.5 api": cli_ingest["median"] <= 1.5 * api_ingest["median"]}}
    return [[*r[:3], r[3] / 1e9 if r[3] else None] for r in rows]


def memory_of_store(a, doc: dict) -> None:
    """``STORE``: bench and bfs with their process trees' memory."""
    import pyarrow.dataset as ds

    kinds = a.kinds.split(",")
    doc["store"] = store_sizes(a.store)
    limit = ["--memory-limit", a.memory_limit] if a.memory_limit else []
    root = a.root or first_root(a.store)
    tmp = tempfile.mkdtemp(prefix="bench-store-search-")
    results = os.path.join(tmp, "results")
    commands = {
        "bench": [breadth_command(), "bench", a.store, "--roots", a.roots, "--workers", a.workers,
                  "--json", JSON_PATH, *limit, *a.extra],
        "bfs": [breadth_command(), "bfs", a.store, "--root", root, "--out", results, "--workers", a.workers,
                *limit, *a.extra],
    }
    try:
        runs: dict = {}
        for i in range(a.repeat):  # the dataset of bfs is read back after each of its runs, then removed
            for name in kinds:
                rec = run_command(commands[name], memory=True, check=True)
                rec["round"] = i
                if name == "bench":
                    rec.update(_bench_figures(rec))
                else:
                    rec.update(root=root, rows=ds.dataset(results, format="parquet").count_rows())
                    shutil.rmtree(results, ignore_errors=True)
                runs.setdefault(name, []).append(rec)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc["runs"] = runs
    doc["summary"] = {k: {"wall_s": median_range(r["wall_s"] for r in rs),
                          "tree_rss_peak_bytes": median_range(r["tree_rss_peak_bytes"] for r in rs)}
                      for k, rs in runs.items()}
    s = doc["store"]
    print(f"store: {s['num_vertices']:,} vertices, {s['num_edges']:,} edges, {s['nparts']} shards, "
          f"{s['shard_bytes'] / GiB:.2f} GiB of shard files, {s['id_map_bytes'] / GiB:.2f} GiB of id map")
    print_table(["command", "round", "wall s", "tree peak GiB", "largest process GiB", "GTEPS (hm)", "valid/rows"],
                [[k, r["round"], r["wall_s"], r["tree_rss_peak_bytes"] / GiB,
                  r["processes"][0]["rss_peak_bytes"] / GiB if r["processes"] else None,
                  r["harmonic_mean_teps"] / 1e9 if k == "bench" else None,
                  r["valid"] if k == "bench" else r["rows"]]
                 for k, rs in runs.items() for r in rs])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", nargs="?", help="memory mode: a shard store to search (breadth ingest / generate)")
    p.add_argument("--scale", type=int, default=None, help="compare a Kronecker graph in memory and stored")
    p.add_argument("--input", default=None, help="compare the ingest/bfs/bench workflow with the API")
    p.add_argument("--store", dest="store_path", default=None,
                   help="with --scale or --input: the store to write (default: a temporary one)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--workers", type=int, default=2, help="memory mode's --workers")
    p.add_argument("--roots", type=int, default=4, help="breadth bench --roots (validated)")
    p.add_argument("--memory-limit", default=None, help="memory mode: both commands' --memory-limit")
    p.add_argument("--root", default=None, help="breadth bfs --root (default: the id map's first id)")
    p.add_argument("--kinds", default="bench,bfs", help="memory mode: which commands, of bench and bfs")
    p.add_argument("--repeat", type=int, default=1, help="rounds of the commands, alternating")
    p.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                   help="further options for every breadth command (e.g. --workers 2), last on the line")
    add_json_argument(p)
    a = p.parse_args(argv)
    modes = [m for m in (a.store, a.scale, a.input) if m is not None]
    if len(modes) != 1:
        p.error("give one of STORE, --scale or --input")
    a.store, store_arg = a.store_path, a.store
    doc = new_record("bench_store_search", a)
    if a.scale is not None:
        rows = compare_scale(a, doc)
        print_table(["run", "round", "wall s", "GTEPS (hm)", "construction / load s", "valid"], rows)
    elif a.input is not None:
        rows = compare_input(a, doc)
        print_table(["step", "round", "wall s", "GTEPS (hm)"], rows)
    else:
        if a.kinds and not set(a.kinds.split(",")) <= {"bench", "bfs"}:
            p.error(f"--kinds {a.kinds}: expected bench and/or bfs")
        a.store = store_arg
        memory_of_store(a, doc)
    if "summary" in doc and (a.scale is not None or a.input is not None):
        print(json.dumps({k: v for k, v in doc["summary"].items() if k in ("teps_ratio", "ingest_ratio",
                                                                          "targets_met", "engines_equal")}))
    if a.json:
        write_json(a.json, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
