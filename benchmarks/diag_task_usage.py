"""Where a sparse-id Parquet ingest's CPU and fresh memory go, per kind of task: each worker's tasks are
wrapped so that they record their thread's user and system seconds and minor page faults (fresh memory
touched: 4 KiB a fault), summed per task function, on a fresh local cluster and then once more warm.

    python benchmarks/diag_task_usage.py /tmp/wc26 --workers 2 [--runs 2] [--json out.json]

A diagnostic, not a benchmark: the wrappers cost a few microseconds a task.  The event-loop threads'
usage (transfers, serialisation) is the worker's whole-process usage less its tasks'.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

#: (module, function) pairs wrapped on the workers; Dask's tasks name them by module and name, so a
#: worker that unpickles a task after the wrapping runs the wrapper
WRAPPED = [
    ("breadth.io.parquet_edges", "read_row_group"),
    ("breadth.pipeline.shuffle", "_exchange_chunk"),
    ("breadth.pipeline.hash_relabel", "owner_part"),
    ("breadth.pipeline.hash_relabel", "part_index"),
    ("breadth.pipeline.hash_relabel", "lookup_piece"),
    ("breadth.pipeline.hash_relabel", "chunk_dense"),
    ("breadth.pipeline.hash_relabel", "part_ids"),
    ("breadth.pipeline.shuffle_tiers", "send_chunk"),
    ("breadth.pipeline.build_owner", "build_owner"),
    ("breadth.pipeline.bottom_up_order", "shard_degree_buckets"),
    ("breadth.pipeline.bottom_up_order", "with_bottom_up_order"),
]


def _store() -> dict:
    """The worker's sums, kept on the ``sys`` module: this script's functions reach the workers by value
    (``client.run`` of ``__main__``), each call with globals of its own."""
    if not hasattr(sys, "_breadth_task_usage"):
        sys._breadth_task_usage = {}
    return sys._breadth_task_usage


def _install(wrapped) -> int:
    """On a worker: wrap each function so that it adds its thread's usage to :func:`_store`."""
    import functools
    import importlib
    import resource
    import threading

    usage = _store()
    lock = threading.Lock()
    n = 0
    for m, f in wrapped:
        module = importlib.import_module(m)
        fn = getattr(module, f, None)
        if fn is None:  # a function of another version of breadth
            continue
        if getattr(fn, "_usage_wrapped", False):
            continue

        def wrapper(*a, __fn=fn, __name=f, **k):
            r0 = resource.getrusage(resource.RUSAGE_THREAD)
            t0 = time.perf_counter()
            try:
                return __fn(*a, **k)
            finally:
                r1 = resource.getrusage(resource.RUSAGE_THREAD)
                with lock:
                    u = usage.setdefault(__name, [0, 0.0, 0.0, 0.0, 0])
                    u[0] += 1
                    u[1] += time.perf_counter() - t0
                    u[2] += r1.ru_utime - r0.ru_utime
                    u[3] += r1.ru_stime - r0.ru_stime
                    u[4] += r1.ru_minflt - r0.ru_minflt

        functools.update_wrapper(wrapper, fn)
        wrapper._usage_wrapped = True
        setattr(module, f, wrapper)
        n += 1
    return n


def _take() -> dict:
    import resource

    usage = _store()
    out = {k: list(v) for k, v in usage.items()}
    usage.clear()
    r = resource.getrusage(resource.RUSAGE_SELF)
    out["<process>"] = [0, 0.0, r.ru_utime, r.ru_stime, r.ru_minflt]
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("input", nargs="+")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from results_file import machine, versions, write_json

    from breadth.pipeline import local_cluster, prepare, read_parquet

    client = local_cluster(a.workers)
    client.run(_install, WRAPPED)
    before = client.run(_take)
    runs = []
    for i in range(a.runs):
        t0 = time.perf_counter()
        el = read_parquet(a.input, client=client)
        t1 = time.perf_counter()
        g = prepare(el, client)
        t2 = time.perf_counter()
        del g, el
        after = client.run(_take)
        per = {}
        for w, us in after.items():
            for name, u in us.items():
                if name == "<process>":
                    b = before[w]["<process>"]
                    u = [0, 0.0, u[2] - b[2], u[3] - b[3], u[4] - b[4]]
                acc = per.setdefault(name, [0, 0.0, 0.0, 0.0, 0])
                for j in range(5):
                    acc[j] += u[j]
        before = after
        runs.append({"read_relabel_s": t1 - t0, "prepare_s": t2 - t1, "per_function": per})
        print(f"run {i}: read+relabel {t1 - t0:.2f} s, prepare {t2 - t1:.2f} s (summed over workers: "
              f"wall-in-task, user, system, fresh GiB)", file=sys.stderr)
        tasks = [0.0] * 3 + [0]
        for name, (n, wall, user, system, flt) in sorted(per.items(), key=lambda kv: -kv[1][2] - kv[1][3]):
            print(f"  {name:24s} n={n:4d} {wall:6.2f} {user:6.2f} {system:6.2f} {flt * 4096 / 2**30:6.2f}",
                  file=sys.stderr)
            if name != "<process>":
                tasks = [tasks[0] + wall, tasks[1] + user, tasks[2] + system, tasks[3] + flt]
        proc = per["<process>"]
        print(f"  {'<outside the tasks>':24s}        {proc[2] - tasks[1]:6.2f} {proc[3] - tasks[2]:6.2f} "
              f"{(proc[4] - tasks[3]) * 4096 / 2**30:6.2f}", file=sys.stderr)
    if a.json:
        write_json(a.json, {"benchmark": "diag_task_usage", "machine": machine(), "versions": versions("pyarrow"),
                            "input": a.input, "workers": a.workers, "runs": runs})
    client.close()


if __name__ == "__main__":
    main()
