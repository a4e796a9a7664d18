"""64 roots in one batched pass (MS-BFS) against the same 64 roots searched one by one, side by side.

    python -m benchmarks.bench_batch --scale 20 --workers 1 2 --repeats 3 --json batch_cpu_s20.json
    python -m benchmarks.bench_batch --device gpu --scale 26 --workers 1 --json batch_gpu_s26.json

For each worker count: a fresh local cluster, the Kronecker graph generated and prepared into one shard
per worker, 64 Graph500 roots (degree >= 1, from the seed).  One search session then alternates, for
``repeats`` rounds, the two ways of searching them (the order flips every round: these machines have slow
and fast phases, so only interleaved runs compare):

* **single**: the single-root engine, each root timed between barriers (max over ranks), summed (each
  search leaves its parent and level arrays, as a search does);
* **batch**: :class:`~breadth.bfs.engine.batch_engine.BatchEngine`, the 64 roots in one pass, timed the same way
  (``batch_s``: the pass, which leaves every root's levels bit-sliced), then the 64 roots' parent and level
  arrays derived from it (``results_s``, :meth:`~breadth.bfs.engine.batch_engine.BatchEngine.results`): the
  speedups are given for the pass and for the pass with the results.

After the timed rounds every root's batched levels are compared with its single-root levels on every
rank (untimed), and the batch's parents checked with the five Graph500 rules for the first ``--validate``
roots.  TEPS use Graph500's edge count per root (input tuples in the root's component); the batch's
figure is the 64 roots' edges over the batch's time.  The JSON holds machine, versions, parameters, every
round's times and the batch's per-level records.

``--floor`` (one worker) then measures the least a pass of this algorithm costs on this machine for
the same shard and roots (:mod:`benchmarks.batch_floor`), beside the 8x budget (the single searches'
median / 8):

    python -m benchmarks.bench_batch --scale 20 --workers 1 --floor --json batch_cpu_s20_floor.json
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.harness import add_json_argument, new_record, print_table, write_json


def _rank(engine, setup_s, roots, repeats, nvalidate, with_floor=False):
    """Rank body: warm both engines, then ``repeats`` interleaved rounds of single and batched searches."""
    from breadth.bfs.engine.batch_engine import BatchEngine
    from breadth.bfs.graph500.driver import _search_edge_count, _search_view
    from breadth.bfs.graph500.validate import validate_rank

    comm = engine.comm
    t0 = time.perf_counter()
    batch = BatchEngine(engine.shard, comm, backend=engine.b.name)
    batch_setup = time.perf_counter() - t0

    def timed(fn):
        comm.barrier()
        t = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t
        return float(comm.allreduce(np.array([t]), "max")[0]), out

    engine.search(int(roots[0]))  # warm-up: kernels compiled, pages touched
    def all_results():
        """Every root's parent and level arrays, group by group (on GPUs at most result_bytes at once)."""
        for i in range(len(roots)):
            batch.device_result(i)
        batch.k.synchronize()

    batch.search(roots)
    all_results()
    nedge = []
    for r in roots:
        engine.search(int(r))
        nedge.append(_search_edge_count(engine)[0])
    rounds = []
    for k in range(repeats):
        order = ("single", "batch") if k % 2 == 0 else ("batch", "single")
        rec = {"round": k, "order": list(order)}
        for what in order:
            if what == "single":
                per_root = [timed(lambda r=r: engine.search(int(r)))[0] for r in roots]
                rec["single_s"], rec["single_per_root_s"] = float(sum(per_root)), per_root
            else:
                t, levels = timed(lambda: batch.search(roots))
                rec["batch_s"], rec["batch_levels"] = t, [lv.as_dict() for lv in levels]
                rec["results_s"] = timed(all_results)[0]
        rounds.append(rec)
    # untimed: batched levels equal single-root levels on this rank's vertices, and Graph500 rules
    mismatched = 0
    violations = []
    for i, r in enumerate(roots):
        engine.search(int(r))
        mismatched += int((batch.result(i)[1] != engine.b.to_host(engine.level)).sum())
        if i < nvalidate:
            violations.append(validate_rank(_search_view(batch, i), int(r)))
    mismatched = int(comm.allreduce(np.array([mismatched], np.int64))[0])
    out = {"rank": comm.rank, "setup_s": setup_s, "batch_setup_s": batch_setup, "nedge": nedge,
           "rounds": rounds, "mismatched_levels": mismatched, "violations": violations}
    if with_floor:  # one rank: the batch's levels, the shard's rows (bottom-up's order where it has one)
        xp = batch.xp
        if engine.b.name == "gpu":
            from benchmarks.batch_floor_gpu import floor
        else:
            from benchmarks.batch_floor import floor
        from breadth.bfs.search_order import bottom_up_rows

        s = engine.shard
        levels_vm = xp.empty((s.num_local, len(roots)), np.int8)
        for i in range(len(roots)):
            levels_vm[:, i] = batch.device_result(i)[1]
        bu_off, bu_cols = bottom_up_rows(s)
        bu_cols = s.meta.get("bu_columns", bu_cols)
        out["floor"] = floor(xp.asarray(s.offsets), xp.asarray(bu_off), xp.asarray(bu_cols), levels_vm)
    return out


def run_one(scale: int, workers: int, nroots: int, repeats: int, seed: int, nvalidate: int,
            device: str = "cpu", with_floor: bool = False) -> dict:
    from distributed import wait

    from breadth.bfs import choose_roots, run_session
    from breadth.pipeline import kronecker, local_cluster, prepare
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=workers) if device == "gpu" else local_cluster(workers=workers)
    try:
        threads = list(client.nthreads().values())
        edges = kronecker(scale, seed=seed, device=device)
        edges.edges = client.persist(edges.edges)
        wait(edges.edges)
        g = prepare(edges, client, device=device)
        edges.edges = None
        roots = choose_roots(g, nroots, seed + 1)
        t0 = time.perf_counter()
        out = run_session(g, _rank, roots, repeats, nvalidate, with_floor, timeout=600.0)
        session_s = time.perf_counter() - t0
        construction = g.construction_time
        g.release()
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    r0 = out[0]
    total_edges = float(sum(r0["nedge"]))
    single = np.array([r["single_s"] for r in r0["rounds"]])
    batch = np.array([r["batch_s"] for r in r0["rounds"]])
    results = np.array([r["results_s"] for r in r0["rounds"]])
    ratio = single / batch
    ratio_all = single / (batch + results)
    return {
        "scale": scale, "workers": workers, "device": device, "threads_per_worker": threads, "roots": len(roots),
        "repeats": repeats, "construction_s": construction, "session_s": session_s,
        "setup_s": [o["setup_s"] for o in out], "batch_setup_s": [o["batch_setup_s"] for o in out],
        "levels_equal": r0["mismatched_levels"] == 0, "mismatched_levels": r0["mismatched_levels"],
        "validated_roots": len(r0["violations"]),
        "valid": all(not any(v.values()) for v in r0["violations"]),
        "single_s": single.tolist(), "batch_s": batch.tolist(), "results_s": results.tolist(),
        "speedup_per_round": ratio.tolist(), "speedup_with_results_per_round": ratio_all.tolist(),
        "median_single_s": float(np.median(single)), "median_batch_s": float(np.median(batch)),
        "median_results_s": float(np.median(results)),
        "speedup_of_medians": float(np.median(single) / np.median(batch)),
        "median_speedup": float(np.median(ratio)),
        "speedup_with_results_of_medians": float(np.median(single) / np.median(batch + results)),
        "median_speedup_with_results": float(np.median(ratio_all)),
        "single_teps_aggregate": total_edges / float(np.median(single)),
        "batch_teps_aggregate": total_edges / float(np.median(batch)),
        "nedge_per_root": r0["nedge"], "roots_ids": [int(x) for x in roots],
        "rounds": r0["rounds"],
        **({"floor": _floor_summary(r0["floor"], float(np.median(single)))} if "floor" in r0 else {}),
    }


def _floor_summary(fl: dict, single_s: float) -> dict:
    """The floor beside the single searches' median and the 8x budget (see :mod:`benchmarks.batch_floor`)."""
    return {**fl, "median_single_s": single_s, "budget_8x_s": single_s / 8,
            "most_speedup": single_s / fl["floor_s"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=20)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3, help="interleaved rounds of both (default 3)")
    ap.add_argument("--validate", type=int, default=4, help="check the first N batched roots' parents")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                    help="gpu: one dask-cuda worker per GPU (--workers GPUs), CuPy kernels")
    ap.add_argument("--floor", action="store_true",
                    help="after the rounds, the least a pass of this algorithm costs here "
                         "(benchmarks.batch_floor, benchmarks.batch_floor_gpu; one worker)")
    add_json_argument(ap)
    a = ap.parse_args(argv)
    if not 1 <= a.roots <= 64:
        ap.error("--roots must be in 1..64 (one batch)")
    if a.floor and a.workers != [1]:
        ap.error("--floor needs --workers 1 (one rank holds every vertex)")
    doc = new_record("bench_batch", a)
    doc.update(edgefactor=16, protocol="tcp",
               teps_convention="Graph500 nedge per root (input tuples in its component); aggregate = sum of "
                               "the roots' nedge / time of all roots",
               runs=[])
    for w in a.workers:
        res = run_one(a.scale, w, a.roots, a.repeats, a.seed, a.validate, a.device, a.floor)
        doc["runs"].append(res)
        print(f"workers {w}: pass per round " + ", ".join(f"{x:.2f}x" for x in res["speedup_per_round"]),
              flush=True)
        if "floor" in res:
            fl = res["floor"]
            vs = fl["visit"]
            print(f"floor: visits {fl['visits_s']:.4f} s (a bit {vs['bit_s_per_visit'] * 1e9:.3f} ns, a word "
                  f"{vs['word_s_per_visit'] * 1e9:.3f} ns), results {fl['results_floor_s']:.4f} s: "
                  f"{fl['floor_s']:.4f} s against the 8x budget {fl['budget_8x_s']:.4f} s (at most "
                  f"{fl['most_speedup']:.1f}x)", flush=True)
        if a.json:
            doc["machine"]["loadavg_end"] = list(os.getloadavg())
            write_json(a.json, doc)
    print_table(["workers", "single searches s", "batch pass s", "speedup", "+results s", "speedup with results",
                 "levels equal", "valid"],
                [[r["workers"], r["median_single_s"], r["median_batch_s"], f"{r['speedup_of_medians']:.2f}x",
                  r["median_results_s"], f"{r['speedup_with_results_of_medians']:.2f}x", r["levels_equal"], r["valid"]]
                 for r in doc["runs"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
