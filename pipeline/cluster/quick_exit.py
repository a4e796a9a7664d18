"""Ending a process without the interpreter's teardown, once its work is done and closed.

A worker process of the local cluster that has loaded Numba, llvmlite and SciPy spends about 0.2 s in
Python's own finalization after its worker has closed (module teardown, garbage collection of the
modules' objects), ten times what leaving by ``os._exit`` at that point takes.  A ``breadth ingest`` would
wait for that in its cluster's close (0.3 s of its wall time), and for its own interpreter's teardown
(another 0.14-0.2 s) after the store is written.  Nothing is left to do then: the worker has closed (its
local directory removed, the scheduler told), and the command has written its output and closed its
cluster.

:class:`~breadth.pipeline.cluster.worker_exit.QuickExit` is the worker side (a Dask worker plugin: only a worker
that closes gracefully is ended early, and its exit status is 0 as it would be); :func:`exit_process` the
command's.  This module imports nothing heavy: ``breadth info`` ends through it without loading Dask.
"""

from __future__ import annotations

import os
import sys


def exit_process(status: int = 0) -> None:
    """End this process with ``status`` now, its output flushed, skipping the interpreter's teardown: for
    the ``breadth`` command once it has finished (cluster closed, output written), and a closed worker."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):  # a closed or broken stream: nothing more can reach it
            pass
    os._exit(status)

