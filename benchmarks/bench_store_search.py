"""A stored graph searched as users type it: ``breadth bench STORE`` (validated Graph500 roots) and ``breadth bfs
STORE --root R --out DIR`` (a results dataset), each a fresh process tree whose memory is sampled.

    breadth ingest /tmp/wc28 --workers 2 --memory-limit 5GB --out /tmp/s28          # the store, once
    python -m benchmarks.bench_store_search /tmp/s28 --workers 2 --roots 4 --json store_search.json

Every 50 ms the RSS of each process of the command's tree (client, nannies, workers) is read from
``/proc/PID/status``, split into anonymous memory (``RssAnon``: the arrays a worker allocated) and mapped
file pages (``RssFile``: a memory-mapped shard file's pages once read, which count in RSS like anonymous
pages until they are unmapped).  Recorded per command and round: the peak of the tree's summed RSS, each
process's peaks, the wall time, and from the store's manifest the bytes of its shard files and of its id
map, so that a worker's peak reads against the shard it holds.  ``bench`` adds its Graph500 figures
(harmonic-mean TEPS, validated or not); ``bfs`` the dataset's row count read back with pyarrow.  The root
of ``bfs`` is the first id of the store's id map (dense id 0 without one).  With ``--repeat N`` the
commands alternate for N rounds.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from benchmarks.harness import (JSON_PATH, add_json_argument, breadth_command, median_range, new_record,
                                print_table, run_command, write_json)

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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", help="a shard store (breadth ingest / breadth generate --out)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--roots", type=int, default=4, help="breadth bench --roots (validated)")
    p.add_argument("--memory-limit", default=None, help="passed to both commands' --memory-limit")
    p.add_argument("--root", default=None, help="breadth bfs --root (default: the id map's first id)")
    p.add_argument("--kinds", default="bench,bfs", help="which commands, of bench and bfs")
    p.add_argument("--repeat", type=int, default=1, help="rounds of the commands, alternating")
    add_json_argument(p)
    a = p.parse_args(argv)
    import pyarrow.dataset as ds

    kinds = a.kinds.split(",")
    if not set(kinds) <= {"bench", "bfs"}:
        p.error(f"--kinds {a.kinds}: expected bench and/or bfs")
    doc = new_record("bench_store_search", a)
    doc["store"] = store_sizes(a.store)
    limit = ["--memory-limit", a.memory_limit] if a.memory_limit else []
    root = a.root or first_root(a.store)
    tmp = tempfile.mkdtemp(prefix="bench-store-search-")
    results = os.path.join(tmp, "results")
    commands = {
        "bench": [breadth_command(), "bench", a.store, "--roots", a.roots, "--workers", a.workers,
                  "--json", JSON_PATH, *limit],
        "bfs": [breadth_command(), "bfs", a.store, "--root", root, "--out", results, "--workers", a.workers, *limit],
    }
    try:
        runs: dict = {}
        for i in range(a.repeat):  # the dataset of bfs is read back after each of its runs, then removed
            for name in kinds:
                rec = run_command(commands[name], memory=True, check=True)
                rec["round"] = i
                if name == "bench":
                    g5 = rec.pop("json")
                    rec.update(valid=g5["valid"], harmonic_mean_teps=g5["statistics"]["teps"]["harmonic_mean"],
                               median_time_s=g5["statistics"]["time"]["median"],
                               validate_s=[r["validate_time"] for r in g5["roots"]])
                else:
                    t = ds.dataset(results, format="parquet")
                    rec.update(root=root, rows=t.count_rows())
                    shutil.rmtree(results, ignore_errors=True)
                runs.setdefault(name, []).append(rec)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    doc["runs"] = runs
    doc["summary"] = {k: {"wall_s": median_range(r["wall_s"] for r in rs),
                          "tree_rss_peak_bytes": median_range(r["tree_rss_peak_bytes"] for r in rs)}
                      for k, rs in runs.items()}
    if "bench" in runs:
        doc["summary"]["bench"]["harmonic_mean_teps"] = median_range(r["harmonic_mean_teps"] for r in runs["bench"])
    if a.json:
        write_json(a.json, doc)
    s = doc["store"]
    print(f"store: {s['num_vertices']:,} vertices, {s['num_edges']:,} edges, {s['nparts']} shards, "
          f"{s['shard_bytes'] / GiB:.2f} GiB of shard files, {s['id_map_bytes'] / GiB:.2f} GiB of id map")
    print_table(["command", "round", "wall s", "tree peak GiB", "largest process GiB", "GTEPS (hm)", "valid/rows"],
                [[k, r["round"], r["wall_s"], r["tree_rss_peak_bytes"] / GiB,
                  r["processes"][0]["rss_peak_bytes"] / GiB if r["processes"] else None,
                  r["harmonic_mean_teps"] / 1e9 if k == "bench" else None,
                  r["valid"] if k == "bench" else r["rows"]]
                 for k, rs in runs.items() for r in rs])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
