"""Which kernels a job still compiles after the once-per-machine warm-up (issue #26, item 2).

Simulates a new machine with an empty CuPy kernel cache (a temporary ``CUPY_CACHE_DIR``, sources saved),
starts a local GPU cluster (which runs the warm-up), then prepares a Kronecker graph and lists the kernels
compiled during that preparation -- each one a first job would still pay for inside its construction time.

    python benchmarks/diag_gpu_compile.py --scale 26
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=26)
    a = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="cupy-cache-")
    os.environ["CUPY_CACHE_DIR"] = cache  # before the workers start: they inherit it
    os.environ["CUPY_CACHE_SAVE_CUDA_SOURCE"] = "1"
    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    t0 = time.perf_counter()
    client = local_cuda_cluster(workers=1)
    print(f"cluster + warm-up {time.perf_counter() - t0:.1f} s; cache files {len(os.listdir(cache))}")
    before = set(os.listdir(cache))
    stages: dict = {}
    g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu", stages=stages)
    print(f"construction {g.construction_time:.2f} s; stages {stages}")
    res = graph500(g, nroots=4, seed=2)
    print(f"search {res.harmonic_mean_teps / 1e9:.1f} GTEPS")
    new = sorted(set(os.listdir(cache)) - before)
    print(f"{len(new)} cache files made after the warm-up:")
    for f in new:
        if f.endswith(".cu"):
            src = open(os.path.join(cache, f)).read()
            names = re.findall(r"__global__\s+void\s+(\w+)", src)
            print(f"  {f[:20]}: {names[:6]} {src[:0]}")
    client.close()


if __name__ == "__main__":
    main()
