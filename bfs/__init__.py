"""Direction-optimizing BFS over sharded graphs: engine, kernels, validation and the Graph500 driver.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> from breadth.bfs import bfs, graph500
>>> client = local_cluster()                        # doctest: +SKIP
>>> g = prepare(kronecker(16, seed=1), client)      # doctest: +SKIP
>>> bfs(g, 3).level                                 # doctest: +SKIP
>>> print(graph500(g).report())                     # doctest: +SKIP

The names below load on first use (see :mod:`breadth.bfs.lazy_exports`): importing the package is free.
"""

from typing import TYPE_CHECKING

from .lazy_exports import install

_EXPORTS = {
    "BatchEngine": ".batch_engine", "bfs_batch": ".batch_search",
    "Engine": ".engine", "LevelRecord": ".engine",
    "Graph500Result": ".graph500", "graph500": ".graph500",
    "choose_roots": ".roots",
    "BFSResult": ".search", "bfs": ".search",
    "RankError": ".session", "run_session": ".session",
    "SearchConfig": ".search_config",
    "Shard": ".shard",
    "ShardedGraph": ".sharded_graph",
    "RULES": ".validate", "validate": ".validate",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from .batch_engine import BatchEngine
    from .batch_search import bfs_batch
    from .engine import Engine, LevelRecord
    from .graph500 import Graph500Result, graph500
    from .roots import choose_roots
    from .search import BFSResult, bfs
    from .search_config import SearchConfig
    from .session import RankError, run_session
    from .shard import Shard
    from .sharded_graph import ShardedGraph
    from .validate import RULES, validate
