"""Sources and preparation on Dask: edge lists in, per-worker CSR shards out.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> client = local_cluster(workers=1)                # doctest: +SKIP
>>> g = prepare(kronecker(20, seed=1), client)       # doctest: +SKIP

The stages are sub-packages, in the order the data flows: :mod:`~breadth.pipeline.cli` (the command) and
:mod:`~breadth.pipeline.cluster` start the work; :mod:`~breadth.pipeline.sources` make edge lists,
:mod:`~breadth.pipeline.relabel` gives original ids dense numbers, :mod:`~breadth.pipeline.shuffle` moves each
entry to its owner and :mod:`~breadth.pipeline.build` makes each owner's CSR shard, both over the array
kernels of :mod:`~breadth.pipeline.kernels`.  :func:`prepare` (``prepare.py``, with ``prepare_config.py``
and ``stages.py``) drives the shuffle and the build; ``edges.py`` holds the :class:`EdgeList` that every
source hands on.

The names below load on first use (see :mod:`breadth.bfs.lazy_exports`): importing the package -- which
every worker spawned under the ``breadth`` command does -- imports nothing heavy.
"""

from typing import TYPE_CHECKING

from breadth.bfs.lazy_exports import install

_EXPORTS = {
    "connect": ".cluster.cluster", "local_cluster": ".cluster.cluster",
    "from_dask_dataframe": ".sources.dataframe",
    "EdgeList": ".edges", "from_dask_array": ".edges",
    "read_csv": ".sources.file_sources", "read_edges": ".sources.file_sources", "read_mtx": ".sources.file_sources",
    "read_parquet": ".sources.file_sources", "read_snap": ".sources.file_sources",
    "kronecker": ".sources.kronecker",
    "prepare": ".prepare", "PrepareConfig": ".prepare_config",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .cluster.cluster import connect, local_cluster
    from .edges import EdgeList, from_dask_array
    from .prepare import prepare
    from .prepare_config import PrepareConfig
    from .sources.dataframe import from_dask_dataframe
    from .sources.file_sources import read_csv, read_edges, read_mtx, read_parquet, read_snap
    from .sources.kronecker import kronecker
