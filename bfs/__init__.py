"""Direction-optimizing BFS over sharded graphs: engine, kernels, validation and the Graph500 driver.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> from breadth.bfs import bfs, graph500
>>> client = local_cluster()                        # doctest: +SKIP
>>> g = prepare(kronecker(16, seed=1), client)      # doctest: +SKIP
>>> bfs(g, 3).level                                 # doctest: +SKIP
>>> print(graph500(g).report())                     # doctest: +SKIP

The names below load on first use (see :mod:`breadth.bfs.lazy_exports`): importing the package costs only
Dask's configuration, to which it adds breadth's settings and their defaults (:mod:`breadth.bfs.settings`).
"""

from typing import TYPE_CHECKING

from .lazy_exports import install
from .settings import load_defaults

load_defaults()

_EXPORTS = {
    "BatchEngine": ".engine.batch_engine", "bfs_batch": ".engine.batch_search",
    "Engine": ".engine.engine", "LevelRecord": ".engine.levels",
    "Graph500Result": ".graph500.driver", "graph500": ".graph500.driver",
    "choose_roots": ".graph500.roots",
    "BFSResult": ".engine.search", "bfs": ".engine.search",
    "RankError": ".engine.session", "run_session": ".engine.session",
    "SearchConfig": ".search_config",
    "Shard": ".shard",
    "ShardedGraph": ".sharded_graph",
    "RULES": ".graph500.validate", "validate": ".graph500.validate",
    "WorkerLost": ".worker_loss",
}
__all__ = sorted(_EXPORTS)
install(__name__, _EXPORTS)

if TYPE_CHECKING:  # what the names are, for type checkers and editors
    from .engine.batch_engine import BatchEngine
    from .engine.batch_search import bfs_batch
    from .engine.engine import Engine
    from .engine.levels import LevelRecord
    from .engine.search import BFSResult, bfs
    from .engine.session import RankError, run_session
    from .graph500.driver import Graph500Result, graph500
    from .graph500.roots import choose_roots
    from .graph500.validate import RULES, validate
    from .search_config import SearchConfig
    from .shard import Shard
    from .sharded_graph import ShardedGraph
    from .worker_loss import WorkerLost
