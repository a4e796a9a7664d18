"""One GPU rank's searches in this process, for a profiler (issue #26): Nsight Systems sees every kernel
of the captured levels without Dask's worker processes in between.

    nsys profile -t cuda --cuda-graph-trace=node -o prof python benchmarks/diag_gpu_kernels.py --scale 26
    nsys stats -r cuda_gpu_kern_sum prof.nsys-rep
"""

from __future__ import annotations

import argparse
import time

import numpy as np


_HOST: dict = {}


def _time_host_parts() -> None:
    """Host seconds inside each step of a search, without synchronising (a step that waits for the
    device shows the device's time)."""
    import breadth.bfs.engine.device_engine as device_engine
    import breadth.bfs.engine.engine as engine
    import breadth.bfs.gpu.backend as gpu_backend
    import breadth.bfs.gpu.level_graphs as level_graphs
    import breadth.bfs.transport.solo_gpu as solo_gpu

    def timed(cls, name):
        fn = getattr(cls, name)

        def wrapper(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                _HOST[f"{cls.__name__}.{name}"] = _HOST.get(f"{cls.__name__}.{name}", 0.0) + time.perf_counter() - t0
        setattr(cls, name, wrapper)

    for cls, name in ((engine.Engine, "_start"), (engine.Engine, "_counters"), (gpu_backend.GpuBackend, "degree_sum"),
                      (gpu_backend.GpuBackend, "start_search"), (gpu_backend.GpuBackend, "queue_to_bits"),
                      (gpu_backend.GpuBackend, "bits_to_queue"), (level_graphs.LevelGraphs, "top_down"),
                      (level_graphs.LevelGraphs, "bottom_up"), (level_graphs.LevelGraphs, "_run"),
                      (solo_gpu.SoloGpuCommunicator, "wait"), (device_engine.DeviceEngine, "_search")):
        timed(cls, name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--host-parts", action="store_true", help="time each step of a search on the host")
    ap.add_argument("--cprofile", action="store_true", help="profile the timed searches' Python (top 30 lines)")
    ap.add_argument("--ab-first", action="store_true",
                    help="A/B: bottom-up with and without the packed first-neighbour table, per level")
    ap.add_argument("--bu-inline", type=int, nargs="*", default=[],
                    help="A/B: rebuild the kernels with each BU_INLINE value and time the same roots")
    a = ap.parse_args()
    import cupy as cp
    from distributed import Client

    from breadth.bfs.engine.device_engine import DeviceEngine
    from breadth.bfs.graph500.roots import choose_roots
    from breadth.bfs.transport.solo_gpu import SoloGpuCommunicator
    from breadth.pipeline import kronecker, prepare

    client = Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None)
    g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu")
    roots = choose_roots(g, a.roots, 2)
    shard = client.gather(g.shards)[0]
    engine = DeviceEngine(shard, SoloGpuCommunicator(), backend="gpu")
    engine.search(int(roots[0]))
    if a.host_parts:
        _time_host_parts()
    times = []
    prof = None
    if a.cprofile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    for r in roots:
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        engine.search(int(r))
        times.append(time.perf_counter() - t0)
    if prof is not None:
        import pstats

        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
    t = np.array(times) * 1e3
    print(f"search ms: median {np.median(t):.3f} min {t.min():.3f} max {t.max():.3f}")
    for k, v in sorted(_HOST.items(), key=lambda kv: -kv[1]):
        print(f"  {k:36s} {v / len(roots) * 1e3:7.3f} ms per search")
    engine.close()
    if a.ab_first:
        from collections import defaultdict

        for v in (False, True, False, True):
            e = DeviceEngine(shard, SoloGpuCommunicator(), backend="gpu")
            e.b.first_neighbours = v
            e.search(int(roots[0]))
            ts, per = [], defaultdict(list)
            for r in roots:
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                recs = e.search(int(r))
                ts.append(time.perf_counter() - t0)
                for j, x in enumerate(recs):
                    per[(j, x.direction)].append(x.local_s)
            lv = {f"{j}{d}": round(float(np.median(x)) * 1e3, 3) for (j, d), x in sorted(per.items()) if len(x) > 8}
            print(f"first_neighbours={v}: median {np.median(ts) * 1e3:.3f} ms; level local ms {lv}", flush=True)
            e.close()
    if a.bu_inline:
        import breadth.bfs.gpu.kernels as gk
        from breadth.bfs.graph500.validate import validate_rank

        source = gk._SOURCE
        for v in a.bu_inline:
            gk._SOURCE = source.replace("#define BU_INLINE 8", f"#define BU_INLINE {v}")
            gk._module.cache_clear()
            e = DeviceEngine(shard, SoloGpuCommunicator(), backend="gpu")
            e.search(int(roots[0]))
            ts, bad = [], 0
            for r in roots:
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                e.search(int(r))
                ts.append(time.perf_counter() - t0)
                bad += sum(validate_rank(e, int(r)).values()) if r in roots[:4] else 0
            t = np.array(ts) * 1e3
            print(f"BU_INLINE={v}: median {np.median(t):.3f} ms (min {t.min():.3f}, max {t.max():.3f}), "
                  f"violations in 4 validated roots: {bad}", flush=True)
            e.close()
        gk._SOURCE = source
    client.close()


if __name__ == "__main__":
    main()
