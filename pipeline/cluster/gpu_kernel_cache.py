"""GPU kernels compiled once per machine, before anything is timed.

breadth's CUDA kernels (and CuPy's own element-wise kernels that preparation uses) are compiled by NVRTC on
first use and cached on disk by CuPy (``CUPY_CACHE_DIR``, by default ``~/.cupy/kernel_cache``), so every
later process loads them in milliseconds.  Without care, that first use falls inside the first job on a
new machine: the first ``breadth bench --scale 26 --device gpu`` would report about ten times its
construction time (some 12 s of it compiling).  A local GPU cluster therefore checks a marker in CuPy's
cache for this version of the kernels and this GPU; when it is missing it says so on stderr, compiles
everything by preparing and searching a tiny graph through the same code, and writes the marker.

CuPy compiles a second variant of an element-wise kernel for arrays of 2^31 elements or more (64-bit
indexing): a scale-26 preparation compiles 19 of them that the tiny graph does not reach (7.3 s of
construction on an H200).  So on a GPU with room for it (:data:`LARGE_WARM_UP_BYTES`) the warm-up also prepares a
scale-26 graph, once, and drops it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import time
from importlib import resources

#: free device memory (bytes, on every worker) above which the warm-up also prepares a scale-26 graph,
#: whose arrays pass 2^31 elements (it holds ~36 GB at its peak)
LARGE_WARM_UP_BYTES = 64 << 30
LARGE_WARM_UP_SCALE = 26

#: files whose CUDA sources (and the CuPy kernels they call) the warm-up compiles
KERNEL_SOURCES = ("bfs/gpu/kernels.cu", "bfs/gpu/kernels.py", "bfs/gpu/backend.py", "bfs/gpu/batch_kernels.cu",
                  "bfs/gpu/batch_kernels.py", "bfs/gpu/level_graphs.py", "bfs/gpu/peer_push.cu",
                  "bfs/transport/peer_memory.py", "pipeline/sources/kronecker_gpu.py",
                  "pipeline/kernels/build_csr_gpu.py", "pipeline/kernels/array_backend.py",
                  "pipeline/relabel/hash_relabel_gpu.py")


def cache_dir() -> str:
    """CuPy's kernel cache directory (its documented ``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``)."""
    return os.environ.get("CUPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache")


def kernels_digest(sources: dict[str, bytes], toolchain: str) -> str:
    """A short digest naming one version of the kernels (``sources``: file name -> contents) built by one
    ``toolchain`` (CuPy and CUDA versions, the GPU's architecture)."""
    h = hashlib.sha256(toolchain.encode())
    for name in sorted(sources):
        h.update(name.encode() + b"\0" + sources[name] + b"\0")
    return h.hexdigest()[:16]


def kernel_sources() -> dict[str, bytes]:
    """The contents of :data:`KERNEL_SOURCES` (file name -> bytes), read from the installed packages
    (package-dir maps the folders; the ``.cu`` files are package data)."""
    sources = {}
    for rel in KERNEL_SOURCES:
        folder, name = rel.rsplit("/", 1)
        sources[rel] = resources.files("breadth." + folder.replace("/", ".")).joinpath(name).read_bytes()
    return sources


def marker_path() -> str:
    """The marker that says this machine's cache holds the kernels of this breadth for this GPU."""
    import cupy

    sources = kernel_sources()
    dev = cupy.cuda.Device()
    toolchain = (f"cupy {cupy.__version__}; cuda {cupy.cuda.runtime.runtimeGetVersion()}; "
                 f"sm_{dev.compute_capability}")
    return os.path.join(cache_dir(), f"breadth-{kernels_digest(sources, toolchain)}.ready")


def ensure_compiled(client, stream=sys.stderr) -> bool:
    """Compile the kernels on ``client``'s GPU workers if this machine has not yet (see the module
    docstring), telling ``stream`` what it does and how long it took; True when it compiled.
    :func:`~breadth.pipeline.cluster.cluster.local_cuda_cluster` calls it as it starts.

    >>> ensure_compiled(client)                      # doctest: +SKIP
    breadth: compiling the GPU kernels for this machine, once (cached in ~/.cupy/kernel_cache) ...
    breadth: GPU kernels compiled in 40.1 s
    True
    """
    marker = marker_path()
    if os.path.exists(marker):
        return False
    print(f"breadth: compiling the GPU kernels for this machine, once (cached in {cache_dir()}) ...",
          file=stream, flush=True)
    t0 = time.perf_counter()
    warm_up(client)
    tmp = f"{marker}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        with open(tmp, "w") as f:
            f.write(f"compiled in {time.perf_counter() - t0:.1f} s\n")
        os.replace(tmp, marker)
    except OSError:  # a read-only cache: CuPy could not keep the kernels either, so the next start compiles again
        with contextlib.suppress(OSError):
            os.remove(tmp)
    print(f"breadth: GPU kernels compiled in {time.perf_counter() - t0:.1f} s", file=stream, flush=True)
    return True


def warm_up(client) -> None:
    """Relabel a few sparse ids as an ingest does, and prepare and search a tiny Kronecker graph on the GPU
    workers through the public path (generator, preparation with its degree-ordered rows, one- and
    many-root searches, validation), which compiles what a real job runs, then prepare a scale-26 graph
    where the GPUs have room (the 64-bit-indexed variants); the graphs' shards are dropped at the end."""
    from breadth.bfs import bfs_batch, graph500
    from breadth.bfs.graph500.roots import choose_roots
    from breadth.pipeline.sources.kronecker import kronecker
    from breadth.pipeline.prepare import prepare

    client.run(_relabel_sparse_ids)
    g = prepare(kronecker(10, seed=1, device="gpu"), client, device="gpu")
    try:
        graph500(g, nroots=2, seed=1)
        bfs_batch(g, choose_roots(g, 3, 1).tolist())
    finally:
        g.release()
    if _room_per_worker(client) >= LARGE_WARM_UP_BYTES:
        prepare(kronecker(LARGE_WARM_UP_SCALE, seed=1, device="gpu"), client, device="gpu").release()
    client.run(_free_pool)  # the job after sees its GPU's memory as free as before


def _relabel_sparse_ids() -> None:
    """The ingest's relabeling steps (:mod:`~breadth.pipeline.relabel.hash_relabel_gpu`) on a few sparse 64-bit
    ids, with one and two owners."""
    import cupy
    import numpy as np

    from ..relabel import hash_relabel_gpu as steps

    ids = cupy.asarray(np.random.default_rng(1).integers(1, 1 << 62, size=(4096, 2), dtype=np.int64))
    for owners in (1, 2):
        split = steps.chunk_split(ids, owners, np.dtype(np.int64))
        parts = [steps.owner_part(np.dtype(np.int64), p, p[: p.size // 2]) for p in split[2]]
        looked = [steps.lookup_piece(part, 0, p) for part, p in zip(parts, split[2])]
        steps.chunk_dense(split, *looked, dtype=np.int32)


def _room_per_worker(client) -> int:
    """The free device memory each GPU worker may count on (bytes): a GPU's free memory split among the
    workers that share it (``local_cuda_cluster(ranks_per_gpu=...)``)."""
    from collections import Counter

    free = client.run(_free_device_bytes)
    sharing = Counter(gpu for _, gpu in free.values())
    return min(nbytes // sharing[gpu] for nbytes, gpu in free.values())


def _free_device_bytes() -> tuple[int, str]:
    """This worker's GPU: its free bytes and its PCI bus id."""
    import cupy

    return int(cupy.cuda.runtime.memGetInfo()[0]), cupy.cuda.Device().pci_bus_id


def _free_pool() -> None:
    import gc

    import cupy

    gc.collect()
    cupy.get_default_memory_pool().free_all_blocks()
