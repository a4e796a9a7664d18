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
    "connect": ".cluster", "local_cluster": ".cluster",
    "from_dask_dataframe": ".dataframe",
    "EdgeList": ".edges", "from_dask_array": ".edges",
    "read_csv": ".file_sources", "read_edges": ".file_sources", "read_mtx": ".file_sources",
    "read_parquet": ".file_sources", "read_snap": ".file_sources",
    "kronecker": ".kronecker",
    "prepare": ".prepare", "PrepareConfig": ".prepare_config",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .cluster import connect, local_cluster
    from .dataframe import from_dask_dataframe
    from .edges import EdgeList, from_dask_array
    from .file_sources import read_csv, read_edges, read_mtx, read_parquet, read_snap
    from .kronecker import kronecker
    from .prepare import prepare
    from .prepare_config import PrepareConfig
