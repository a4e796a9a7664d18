"""Sources and preparation on Dask: edge lists in, per-worker CSR shards out.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> client = local_cluster(workers=1)                # doctest: +SKIP
>>> g = prepare(kronecker(20, seed=1), client)       # doctest: +SKIP

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
    from .sources.dataframe import from_dask_dataframe
    from .edges import EdgeList, from_dask_array
    from .sources.file_sources import read_csv, read_edges, read_mtx, read_parquet, read_snap
    from .sources.kronecker import kronecker
    from .prepare import prepare
    from .prepare_config import PrepareConfig
