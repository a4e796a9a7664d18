"""The cluster: connecting to a Dask scheduler, or starting the embedded local cluster (``cluster``; one
worker per GPU with ``local_cuda_cluster``), and what its workers get as they start: Numba warmed up in the
background (``numba_warm_up``) without its BLAS probe (``numba_blas``), a process that ends without the
interpreter's teardown once closed (``worker_exit``; ``quick_exit`` is the same for the ``breadth``
command), a private MPS daemon for workers that share a GPU (``gpu_sharing``) and the GPU kernels compiled
once per machine (``gpu_kernel_cache``).  It hands a ``distributed.Client`` to the sources and to
:func:`~breadth.pipeline.prepare`.
"""

from typing import TYPE_CHECKING

from breadth.bfs.lazy_exports import install

# the room's entry points, loaded on first use: the workers' plugins import this package and need none of them
_EXPORTS = {"connect": ".cluster", "local_cluster": ".cluster", "local_cuda_cluster": ".cluster"}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .cluster import connect, local_cluster, local_cuda_cluster
