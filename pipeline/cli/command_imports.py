"""What the ``breadth`` command's own process (the client, with the local cluster's scheduler) need not
import: SciPy's sparse matrices and FFT packs, which ``dask.array`` loads where SciPy is installed to
register them as chunk types and FFT backends.

breadth's client never holds a SciPy object (its arrays are NumPy's, its graphs the workers'), and an
ingest's client imports ``dask.array`` while the workers read their first chunks (see
:func:`breadth.pipeline.relabel.relabel._import_meanwhile`), on the same two cores, in the process whose event
loop schedules their tasks: ``scipy.sparse`` and ``scipy.fftpack`` are about 0.19 s of that import's
0.46 s in a fresh process on 2 cores, and leaving them out takes about 5 % (0.25 s) off a 2^24 sparse-id
``breadth ingest``.

Only :func:`breadth.pipeline.cli.cli.console_main` calls :func:`skip_unused`; a program that imports breadth
keeps SciPy as it is, and a module already imported is left as it is.
"""

from __future__ import annotations

import sys

#: modules ``dask.array`` imports when present and works without (each import is in a ``try``)
UNUSED = ("scipy.sparse", "scipy.fftpack")


def skip_unused() -> None:
    """Mark :data:`UNUSED` absent in this process (an ``import`` of them raises ImportError), unless loaded."""
    for name in UNUSED:
        sys.modules.setdefault(name, None)
