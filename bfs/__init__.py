"""Direction-optimizing BFS over sharded graphs: engine, kernels, validation and the Graph500 driver.

>>> from breadth.pipeline import kronecker, prepare, local_cluster
>>> from breadth.bfs import bfs, graph500
>>> client = local_cluster()                        # doctest: +SKIP
>>> g = prepare(kronecker(16, seed=1), client)      # doctest: +SKIP
>>> bfs(g, 3).level                                 # doctest: +SKIP
>>> print(graph500(g).report())                     # doctest: +SKIP
"""

from .engine import Engine, LevelRecord
from .graph500 import Graph500Result, graph500
from .roots import choose_roots
from .search import BFSResult, bfs
from .session import RankError, run_session
from .shard import Shard
from .sharded_graph import ShardedGraph
from .validate import RULES, validate

__all__ = ["BFSResult", "Engine", "Graph500Result", "LevelRecord", "RULES", "RankError", "Shard", "ShardedGraph",
           "bfs", "choose_roots", "graph500", "run_session", "validate"]
