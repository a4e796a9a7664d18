"""Numba's first dispatch in a CPU worker, done as the worker starts instead of in its first task.

The first Numba function a process dispatches (compiled, or loaded from the ``cache=True`` cache) brings
up LLVM and imports Numba's typing of NumPy, which probes for a BLAS (:mod:`breadth.pipeline.cluster.numba_blas`).
Every later cached kernel loads in a few milliseconds.  That first dispatch takes about 0.3 s of a fresh
process on 2 cores (0.23 s of it SciPy's BLAS probe where it runs), which a fresh worker would otherwise
pay inside its first chunk of every job: a relabeling's first split, a generator's first chunk, a
search's first kernel.

:class:`WarmNumba` runs that dispatch on a thread of its own as the worker starts, while the caller is
still setting up (reading Parquet footers, planning memory), the way :func:`~breadth.pipeline.cluster.cluster.
local_cuda_cluster`'s workers bring CuPy up.  Only workers without a memory limit of the caller's do
(:func:`~breadth.pipeline.cluster.cluster.local_cluster`): Numba costs a process ~110 MiB, and under the smallest
limits the CLI's jobs run NumPy kernels alone.  It dispatches one trivial cached function only: the kernels
themselves load when a task needs them, so a cold Numba cache compiles only what the job runs.  A task
that dispatches a kernel meanwhile waits on Numba's compiler lock for the rest of the warm-up, never
longer than it would have taken itself.
"""

from __future__ import annotations

import threading

from distributed import WorkerPlugin


def _one(x):
    return x + 1


def first_dispatch() -> None:
    """Bring up Numba in this process: one cached trivial kernel, dispatched once (Numba is imported here,
    not where the plugin is registered: the client need not load it)."""
    import numba

    numba.njit(cache=True, nogil=True)(_one)(1)


class WarmNumba(WorkerPlugin):
    """A worker plugin (:func:`~breadth.pipeline.cluster.cluster.local_cluster` gives it to its workers as they
    start; ``client.register_plugin`` reaches running ones): Numba's first dispatch on a daemon thread of
    the worker.  It comes after :class:`~breadth.pipeline.cluster.numba_blas.SkipBlasProbe`, whose mark must be
    made first."""

    name = "breadth-warm-numba"
    idempotent = True

    def setup(self, worker=None) -> None:
        """Called by Dask as the worker starts; returns at once."""
        threading.Thread(target=first_dispatch, name="breadth-warm-numba", daemon=True).start()
