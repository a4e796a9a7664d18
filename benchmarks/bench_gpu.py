"""GPU benchmark: Kronecker generate -> shards and Graph500 BFS on one GPU, with the card's ceilings.

    python -m benchmarks.bench_gpu --scales 22 24 26 --roots 64 --json bench_gpu.json

Per scale, in one process:
1. ceilings measured first in the same run: device-to-device copy bandwidth (bytes read + written) and the
   random 4-byte gather rate over a 4 GiB table;
2. the single-rank path (no Dask): GPU generation, GPU split + CSR build, each timed after a device
   synchronisation; a slice of the edges is compared with the CPU generator;
3. an alpha/beta sweep of the direction heuristic on a few roots (largest scale), then ``--roots`` searches
   from Graph500 roots (random, degree >= 1), each timed alone between two synchronisations and validated
   (the five rules, on the device).  TEPS follow Graph500: input edge tuples in the root's component
   (``sum(tuple_degree[reached]) / 2 + sum(self_loops[reached])``) over the search time; harmonic mean;
4. the same through Dask (``prepare(kronecker(..., device="gpu"), device="gpu")`` on a one-GPU cluster:
   generate -> shards time, then :func:`breadth.bfs.graph500` over the Dask session).

Before all that, the figure users get: ``breadth bench --scale S --device gpu`` at the largest scale, as typed,
``--cli-repeat`` times, each a fresh process (median and range of its harmonic-mean TEPS and construction).

Writes JSON (machine, GPU, versions, parameters, per-root times and per-level records) with ``--json`` and
prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import numpy as np

from benchmarks.harness import (JSON_PATH, add_json_argument, breadth_command, harmonic_mean, median_range,
                                new_record, print_table, run_fresh, write_json)


def _sync():
    import cupy as cp

    cp.cuda.Device().synchronize()


def _free():
    import cupy as cp

    _sync()
    cp.get_default_memory_pool().free_all_blocks()


def gpu_info() -> dict:
    """The GPU this process uses: name, SMs, L2, memory, CUDA runtime and driver versions."""
    import cupy as cp

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    return {"gpu": props["name"].decode(), "sms": props["multiProcessorCount"], "l2_bytes": props["l2CacheSize"],
            "memory_bytes": props["totalGlobalMem"], "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cp.cuda.runtime.driverGetVersion()}


def ceilings() -> dict:
    """Device copy bandwidth and random-gather rate, timed with CUDA events (median of 10)."""
    import cupy as cp

    def timed(fn, reps=10):
        fn()
        ts = []
        for _ in range(reps):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts.append(cp.cuda.get_elapsed_time(a, b) / 1e3)
        return float(np.median(ts))

    n = 1 << 30  # 4 GiB of int32
    src = cp.arange(n, dtype=cp.int32)
    dst = cp.empty_like(src)
    t_copy = timed(lambda: dst.__setitem__(slice(None), src))
    idx = cp.random.default_rng(1).integers(0, n, size=1 << 28, dtype=cp.int64).astype(cp.int32)
    out = cp.empty(idx.size, cp.int32)
    t_gather = timed(lambda: cp.take(src, idx, out=out))
    # the same gather from an 8 MB table (the frontier bitmap's size: L2-resident)
    small = src[: 1 << 21]
    idx_s = (idx & ((1 << 21) - 1)).astype(cp.int32)
    t_gather_l2 = timed(lambda: cp.take(small, idx_s, out=out))
    res = {"copy_GBps_read_plus_write": 2 * src.nbytes / t_copy / 1e9,
           "gather_4B_Gelem_per_s_4GiB_table": idx.size / t_gather / 1e9,
           "gather_4B_Gelem_per_s_8MB_table": idx.size / t_gather_l2 / 1e9}
    del src, dst, idx, out, small, idx_s
    _free()
    return res


def choose_roots(shard, nroots: int, seed: int) -> np.ndarray:
    """Graph500 roots as :func:`breadth.bfs.graph500.roots.choose_roots` draws them (same seed, same roots)."""
    deg = (shard.offsets[1:] - shard.offsets[:-1]).get()
    rng = np.random.default_rng(seed)
    chosen, seen = [], set()
    while len(chosen) < nroots:
        for v in rng.integers(0, deg.size, size=max(4 * nroots, 256)).tolist():
            if deg[v] > 0 and v not in seen:
                seen.add(v)
                chosen.append(v)
                if len(chosen) == nroots:
                    break
    return np.asarray(chosen, np.int64)


def run_searches(engine, roots, validate: bool, info: dict | None = None) -> list[dict]:
    import cupy as cp

    from breadth.bfs.graph500.validate import validate_rank

    s = engine.shard
    t0 = time.perf_counter()
    engine.search(int(roots[0]))  # warm-up: kernels compiled, bottom-up's degree-ordered rows built
    _sync()
    if info is not None:
        info["warmup_search_s"] = time.perf_counter() - t0
    rows = []
    for root in roots:
        _sync()
        t0 = time.perf_counter()
        recs = engine.search(int(root))
        _sync()
        t = time.perf_counter() - t0
        reached = engine.parent >= 0
        sums = cp.stack([s.tuple_degree[reached].sum(dtype=cp.int64), s.self_loops[reached].sum(dtype=cp.int64),
                         reached.sum(dtype=cp.int64)]).get()
        nedge = int(sums[0] // 2 + sums[1])
        viol = validate_rank(engine, int(root)) if validate else None
        rows.append({"root": int(root), "time": t, "nedge": nedge, "reached": int(sums[2]), "teps": nedge / t,
                     "violations": viol, "levels": [r.as_dict() for r in recs]})
    return rows


def single_rank(scale: int, args, results: dict) -> None:
    import cupy as cp

    from breadth.bfs.engine.engine import Engine
    from breadth.pipeline.kernels.build_csr_gpu import build_shard_gpu, split_by_owner_gpu
    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges
    from breadth.pipeline.sources.kronecker_gpu import generate_edges_gpu

    n, m = 1 << scale, 16 << scale
    p = KroneckerParams.make(scale, args.seed, 0.57, 0.19, 0.19)
    out = {"scale": scale, "num_vertices": n, "num_input_edges": m}
    # correctness: a slice of the GPU edges equals the CPU generator's
    a0 = m // 3
    out["edges_match_cpu_slice"] = bool(np.array_equal(generate_edges_gpu(p, a0, a0 + (1 << 20)).get(),
                                                       generate_edges(p, a0, a0 + (1 << 20))))
    _free()
    _sync()
    t0 = time.perf_counter()
    edges = generate_edges_gpu(p, 0, m)
    _sync()
    t1 = time.perf_counter()
    pieces = split_by_owner_gpu(edges, n, n, 1, False)
    del edges
    shard = build_shard_gpu(0, 1, n, [pc for pc in pieces])
    del pieces
    _sync()
    t2 = time.perf_counter()
    out.update(generate_s=t1 - t0, build_s=t2 - t1, generate_to_shard_s=t2 - t0, nnz=int(shard.offsets[-1].get()),
               shard_bytes=shard.nbytes(), peak_pool_bytes=cp.get_default_memory_pool().total_bytes())
    _free()
    roots = choose_roots(shard, args.roots, args.seed + 1)
    if scale == max(args.scales) and args.sweep:
        sweep = []
        for alpha in (15.0, 50.0, 150.0, 500.0):
            for beta in (18.0, 64.0):
                eng = Engine(shard, alpha=alpha, beta=beta, backend="gpu")
                rows = run_searches(eng, roots[:args.sweep], validate=False)
                sweep.append({"alpha": alpha, "beta": beta, "hmean_teps": harmonic_mean([r["teps"] for r in rows])})
                print(f"  sweep scale {scale} alpha {alpha:6.1f} beta {beta:5.1f}: "
                      f"{sweep[-1]['hmean_teps'] / 1e9:8.1f} GTEPS", flush=True)
                del eng
        out["sweep"] = sweep
        best = max(sweep, key=lambda r: r["hmean_teps"])
        results["best_alpha_beta"] = (best["alpha"], best["beta"])
    alpha, beta = results.get("best_alpha_beta", (args.alpha, args.beta))
    configs = {"default": (15.0, 18.0, True), "tuned": (alpha, beta, True), "natural_rows": (alpha, beta, False)}
    for label, (al, be, order) in configs.items():
        if label == "tuned" and (al, be) == (15.0, 18.0):
            continue
        eng = Engine(shard, alpha=al, beta=be, backend="gpu")
        eng.b.degree_order = order
        info = {}
        rows = run_searches(eng, roots, validate=not args.no_validate, info=info)
        teps = [r["teps"] for r in rows]
        valid = all(r["violations"] is None or not any(r["violations"].values()) for r in rows)
        out[label] = {"alpha": al, "beta": be, "degree_ordered_bottom_up": order, **info, "hmean_teps": harmonic_mean(teps), "median_time_s": float(np.median(
            [r["time"] for r in rows])), "valid": valid, "nroots": len(rows), "roots": rows}
        print(f"  scale {scale} {label:12s} alpha {al:6.1f} beta {be:5.1f}: {harmonic_mean(teps) / 1e9:8.1f} GTEPS "
              f"(harmonic mean, {len(rows)} roots), median {np.median([r['time'] for r in rows]) * 1e3:.2f} ms, "
              f"valid={valid}", flush=True)
        del eng
        _free()
    results["single_rank"].append(out)
    del shard
    _free()


def through_dask(args, results: dict) -> None:
    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    t0 = time.perf_counter()
    try:
        client = local_cuda_cluster(workers=1)
        kind = "dask_cuda.LocalCUDACluster"
    except ImportError as e:
        from distributed import Client

        print(f"  dask-cuda unavailable ({e}); one in-process worker instead", flush=True)
        client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)
        kind = "distributed.Client(processes=False)"
    results["dask"] = {"cluster": kind, "start_s": time.perf_counter() - t0, "prepare": []}
    try:
        g = prepare(kronecker(16, seed=args.seed, device="gpu"), client, device="gpu")  # warm-up: compile
        g.release()
        for scale in args.scales:
            t0 = time.perf_counter()
            g = prepare(kronecker(scale, seed=args.seed, device="gpu"), client, device="gpu")
            dt = time.perf_counter() - t0
            row = {"scale": scale, "generate_to_shards_s": dt, "construction_time_s": g.construction_time,
                   "num_edges": g.num_edges}
            print(f"  dask prepare scale {scale}: generate -> shards {dt:.2f} s", flush=True)
            if scale == max(args.scales):
                alpha, beta = results.get("best_alpha_beta", (args.alpha, args.beta))
                res = graph500(g, nroots=args.roots, seed=args.seed + 1, alpha=alpha, beta=beta,
                               validate=not args.no_validate)
                row["graph500"] = {"alpha": alpha, "beta": beta, "hmean_teps": res.harmonic_mean_teps,
                                   "valid": res.valid, "times": res.times.tolist()}
                print(f"  dask graph500 scale {scale}: {res.harmonic_mean_teps / 1e9:.1f} GTEPS, valid={res.valid}",
                      flush=True)
            results["dask"]["prepare"].append(row)
            g.release()
    finally:
        client.close()
        if getattr(client, "cluster", None) is not None:
            client.cluster.close()


def cli_runs(args, results: dict) -> None:
    """``breadth bench --scale S --device gpu`` at the largest scale, ``--cli-repeat`` fresh processes."""
    scale = max(args.scales)
    cmd = [breadth_command(), "bench", "--scale", scale, "--device", "gpu", "--roots", args.roots,
           "--seed", args.seed, "--json", JSON_PATH]
    runs = run_fresh({"cli": cmd}, args.cli_repeat, check=True)["cli"]
    rows = [{"wall_s": r["wall_s"], "valid": r["json"]["valid"],
             "harmonic_mean_teps": r["json"]["statistics"]["teps"]["harmonic_mean"],
             "median_time_s": r["json"]["statistics"]["time"]["median"],
             "construction_s": float(r["json"]["header"]["construction_time"])} for r in runs]
    results["cli"] = {"command": runs[0]["command"], "scale": scale, "runs": rows,
                      "harmonic_mean_teps": median_range(r["harmonic_mean_teps"] for r in rows),
                      "construction_s": median_range(r["construction_s"] for r in rows)}
    print(f"  breadth bench --scale {scale} --device gpu, {len(rows)} fresh processes: "
          + ", ".join(f"{r['harmonic_mean_teps'] / 1e9:.1f}" for r in rows) + " GTEPS", flush=True)


def dump(args, results: dict) -> None:
    if args.json:
        write_json(args.json, results)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[22, 24, 26])
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--alpha", type=float, default=15.0)
    ap.add_argument("--beta", type=float, default=18.0)
    ap.add_argument("--sweep", type=int, default=8, help="roots per alpha/beta sweep point (0: no sweep)")
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--cli-repeat", type=int, default=3,
                    help="fresh processes of breadth bench --device gpu at the largest scale (0: none)")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    results = new_record("bench_gpu", args)
    results.update(gpu=gpu_info(), single_rank=[])
    print(json.dumps(results["gpu"]), flush=True)
    if args.cli_repeat:
        try:
            cli_runs(args, results)
        except Exception:
            results.setdefault("errors", []).append(traceback.format_exc())
            traceback.print_exc()
    results["ceilings"] = ceilings()
    print(f"  ceilings: {json.dumps(results['ceilings'])}", flush=True)
    for scale in sorted(args.scales, reverse=True):  # the largest first: the sweep picks alpha/beta
        try:
            single_rank(scale, args, results)
        except Exception:
            results.setdefault("errors", []).append(traceback.format_exc())
            traceback.print_exc()
        dump(args, results)
    if not args.no_dask:
        try:
            through_dask(args, results)
        except Exception:
            results.setdefault("errors", []).append(traceback.format_exc())
            traceback.print_exc()
    dump(args, results)
    dask_prep = {r["scale"]: r["generate_to_shards_s"] for r in results.get("dask", {}).get("prepare", [])}
    rows = []
    for r in sorted(results["single_rank"], key=lambda r: r["scale"]):
        d, t = r.get("default", {}), r.get("tuned", r.get("default", {}))
        rows.append([r["scale"], r["generate_s"], r["build_s"], d.get("hmean_teps", 0) / 1e9,
                     t.get("hmean_teps", 0) / 1e9, t.get("median_time_s", 0) * 1e3,
                     f"{d.get('valid')} {t.get('valid')}",
                     dask_prep.get(r["scale"])])
    print_table(["scale", "generate s", "build s", "GTEPS default (hm)", "GTEPS tuned (hm)", "median ms", "valid",
                 "Dask generate -> shards s"], rows)
    if "cli" in results:
        c = results["cli"]
        print_table(["breadth bench, scale", "fresh processes", "GTEPS (hm) median", "min", "max",
                     "construction s median", "valid"],
                    [[c["scale"], len(c["runs"]), c["harmonic_mean_teps"]["median"] / 1e9,
                      c["harmonic_mean_teps"]["min"] / 1e9, c["harmonic_mean_teps"]["max"] / 1e9,
                      c["construction_s"]["median"], all(r["valid"] for r in c["runs"])]])
    return 1 if results.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
