"""Sources and preparation on Dask: edge lists in, per-worker CSR shards out.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> client = local_cluster(workers=1)                # doctest: +SKIP
>>> g = prepare(kronecker(20, seed=1), client)       # doctest: +SKIP
"""

from .cluster import connect, local_cluster
from .dataframe import from_dask_dataframe
from .edges import EdgeList, from_dask_array
from .kronecker import kronecker
from .prepare import prepare

__all__ = ["EdgeList", "connect", "from_dask_array", "from_dask_dataframe", "kronecker", "local_cluster", "prepare"]
