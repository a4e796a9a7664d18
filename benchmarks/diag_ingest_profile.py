"""Where a sparse-id Parquet ingest's seconds go: Dask's task stream of ``read_parquet`` + ``prepare`` on a
fresh local cluster, summed per task name (compute, transfer and wait seconds), with the client's phases.

    python benchmarks/diag_ingest_profile.py /tmp/wc24 --workers 2 [--runs 2] [--json out.json]

The second run (``--runs 2``) is the same ingest in the warm cluster: what the first run pays for fresh
processes (imports, Numba's first dispatch, the files' first read) is the difference.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict


def _prefix(key) -> str:
    from dask.utils import key_split

    return key_split(key)


def summarize(records: list[dict], t0: float) -> dict:
    """Per task name: count, compute / transfer seconds summed, first start and last stop after ``t0``."""
    out: dict = defaultdict(lambda: {"n": 0, "compute_s": 0.0, "transfer_s": 0.0, "first_s": 1e9, "last_s": 0.0})
    busy: dict = defaultdict(float)
    for r in records:
        p = out[_prefix(r["key"])]
        p["n"] += 1
        for s in r["startstops"]:
            d = s["stop"] - s["start"]
            if s["action"] == "compute":
                p["compute_s"] += d
                busy[r["worker"]] += d
                p["first_s"] = min(p["first_s"], s["start"] - t0)
                p["last_s"] = max(p["last_s"], s["stop"] - t0)
            elif s["action"] == "transfer":
                p["transfer_s"] += d
    return {"tasks": dict(sorted(out.items(), key=lambda kv: kv[1]["first_s"])), "worker_busy_s": dict(busy)}


def _usage() -> dict:
    """This process's CPU seconds (user, system) and page faults so far (minor: fresh memory touched)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": r.ru_utime, "system_s": r.ru_stime, "minor_faults": r.ru_minflt}


def _usage_delta(before: dict, after: dict) -> dict:
    return {w: {k: round(after[w][k] - before[w].get(k, 0), 3) for k in after[w]} for w in after}


def one(client, inp: list[str], batch_entries: int | None = None) -> dict:
    from distributed import get_task_stream

    from breadth.pipeline import prepare, read_parquet

    stages: dict = {}
    u0 = {"client": _usage(), **client.run(_usage)}
    with get_task_stream(client) as ts:
        t0 = time.time()
        p0 = time.perf_counter()
        el = read_parquet(inp, client=client)
        p1 = time.perf_counter()
        g = prepare(el, client, stages=stages, batch_entries=batch_entries)
        p2 = time.perf_counter()
    u1 = {"client": _usage(), **client.run(_usage)}
    s = summarize(ts.data, t0)
    del g, el
    owners = [{k: round(v, 3) for k, v in o.items() if k.endswith("_s")} for o in stages.get("owners", [])]
    return {"read_relabel_s": p1 - p0, "prepare_s": p2 - p1, "total_s": p2 - p0,
            "prepare_wall": stages.get("wall_s"), "tier": stages.get("tier"), "owners": owners,
            "usage": _usage_delta(u0, u1), **s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="+")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--json", default=None)
    p.add_argument("--tier", default="auto", help="the shuffle's tier (Dask config breadth.shuffle.tier)")
    p.add_argument("--batch-entries", type=int, default=None)
    a = p.parse_args()
    from results_file import machine, versions, write_json

    start = machine()
    t = time.perf_counter()
    from breadth.pipeline import local_cluster

    t_import = time.perf_counter() - t
    client = local_cluster(a.workers)
    t_cluster = time.perf_counter() - t - t_import
    import dask

    with dask.config.set({"breadth.shuffle.tier": a.tier}):
        runs = [one(client, a.input, a.batch_entries) for _ in range(a.runs)]
    doc = {"benchmark": "diag_ingest_profile", "machine": start, "versions": versions("pyarrow"),
           "input": a.input, "workers": a.workers, "tier": a.tier, "batch_entries": a.batch_entries,
           "import_s": t_import, "cluster_s": t_cluster, "runs": runs}
    for i, r in enumerate(runs):
        print(f"run {i}: read+relabel {r['read_relabel_s']:.2f} s, prepare {r['prepare_s']:.2f} s, "
              f"total {r['total_s']:.2f} s; busy {({k[-5:]: round(v, 2) for k, v in r['worker_busy_s'].items()})}",
              file=sys.stderr)
        print(f"  tier {r['tier']}; owners {r['owners']}", file=sys.stderr)
        for w, u in r["usage"].items():
            print(f"  {w[-5:]:>6s} user {u['user_s']:5.2f} s system {u['system_s']:5.2f} s "
                  f"faults {u['minor_faults'] * 4096 / 2**30:5.2f} GiB", file=sys.stderr)
        for name, t in r["tasks"].items():
            print(f"  {name:32s} n={t['n']:4d} compute {t['compute_s']:6.2f} s transfer {t['transfer_s']:5.2f} s "
                  f"[{t['first_s']:5.2f} .. {t['last_s']:5.2f}]", file=sys.stderr)
    print(f"import {t_import:.2f} s, cluster {t_cluster:.2f} s", file=sys.stderr)
    if a.json:
        write_json(a.json, doc)
    client.close()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
