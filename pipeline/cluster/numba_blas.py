"""Numba's first compiled call in a process without its BLAS probe (for the CLI's own local workers).

The first time a Numba function is dispatched in a process (compiled, or loaded from the ``cache=True``
cache), Numba imports ``numba.np.arraymath``, whose import probes for a BLAS by importing
``scipy.linalg.cython_blas`` (to type ``np.dot`` and ``np.linalg`` in jitted code).  Where SciPy is
installed that import loads all of ``scipy.linalg``: 0.23 s of each fresh worker's first chunk on 2
cores (two thirds of a fresh process's first ``factorize`` of a chunk), on the critical path of every
``breadth`` command.  breadth's kernels use no BLAS, so a worker that runs only
breadth's tasks needs no probe: with ``scipy.linalg.cython_blas`` marked absent the probe fails at once
(Numba then leaves ``np.dot`` and ``np.linalg`` untyped in jitted code).

:class:`SkipBlasProbe` does that in each worker it is registered with, before the worker's first task;
a worker that has already imported the module, or in which it was imported for another reason, is left
as it is.  Only the CLI registers it (its clusters run breadth's tasks only), never a cluster of a user's.
"""

from __future__ import annotations

import sys

from distributed import WorkerPlugin

PROBED = "scipy.linalg.cython_blas"


class SkipBlasProbe(WorkerPlugin):
    """A worker plugin: mark SciPy's BLAS module absent in the worker before Numba's first dispatch."""

    name = "breadth-skip-blas-probe"
    idempotent = True

    def setup(self, worker=None) -> None:
        """Called by Dask as the worker starts (or as the plugin is registered with a running worker)."""
        if "numba.np.arraymath" not in sys.modules:  # the probe has not run yet
            sys.modules.setdefault(PROBED, None)  # `import` of a None entry raises ImportError
