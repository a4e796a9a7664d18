"""Where one GPU search's time goes outside its levels (issue #26): the engine's start-of-search steps
timed on the worker, each between two device synchronisations, over a Graph500 run of 64 roots.

    python benchmarks/diag_gpu_search_parts.py --scale 26 --json $OUT/parts.json
"""

from __future__ import annotations

import argparse
import sys
import time

from results_file import machine, versions, write_json

def _patch() -> None:
    import cupy as cp

    import breadth.bfs.device_engine as device_engine
    import breadth.bfs.engine as engine
    import breadth.bfs.gpu_kernels as gpu_kernels
    import breadth.bfs.level_graphs as level_graphs

    # lives in the worker's process: a global of this __main__ would travel by value with each function
    parts = engine.__dict__.setdefault("_diag_parts", {})

    def timed(cls, name):
        fn = getattr(cls, name)

        def wrapper(*a, **kw):
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            out = fn(*a, **kw)
            cp.cuda.Device().synchronize()
            parts.setdefault(f"{cls.__name__}.{name}", []).append(time.perf_counter() - t0)
            return out
        setattr(cls, name, wrapper)

    timed(engine.Engine, "_start")
    timed(engine.Engine, "_counters")
    timed(gpu_kernels.GpuBackend, "degree_sum")
    timed(gpu_kernels.GpuBackend, "start_search")
    timed(gpu_kernels.GpuBackend, "queue_to_bits")
    timed(gpu_kernels.GpuBackend, "bits_to_queue")
    timed(gpu_kernels.GpuBackend, "note_bits")
    timed(device_engine.DeviceEngine, "search")
    timed(level_graphs.LevelGraphs, "prepare")


def _parts() -> dict:
    import breadth.bfs.engine as engine

    return {k: [sum(v) / len(v), min(v), max(v), len(v)] for k, v in engine._diag_parts.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=1)
    g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu")
    base = graph500(g, nroots=64, seed=2)
    client.run(_patch)
    res = graph500(g, nroots=64, seed=2)
    parts = list(client.run(_parts).values())[0]
    print(f"unpatched {base.harmonic_mean_teps / 1e9:.1f} GTEPS, patched {res.harmonic_mean_teps / 1e9:.1f}")
    for k, (mean, lo, hi, n) in sorted(parts.items(), key=lambda kv: -kv[1][0] * kv[1][3]):
        print(f"  {k:32s} mean {mean * 1e3:7.3f} ms  min {lo * 1e3:7.3f}  max {hi * 1e3:7.3f}  calls {n}")
    write_json(a.json, {"machine": machine(), "versions": versions("cupy"), "scale": a.scale,
                        "unpatched_teps": base.harmonic_mean_teps, "patched_teps": res.harmonic_mean_teps,
                        "parts_mean_min_max_calls": parts})


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
