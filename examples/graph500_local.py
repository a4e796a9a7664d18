"""Prepare a Kronecker graph on a local Dask cluster, search it, and run the Graph500 benchmark.

    python examples/graph500_local.py [SCALE]
"""

import sys

from breadth.bfs import bfs, graph500
from breadth.pipeline import kronecker, local_cluster, prepare

if __name__ == "__main__":
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    client = local_cluster(workers=1)                 # or distributed.Client("tcp://scheduler:8786")
    graph = prepare(kronecker(scale, seed=1), client)  # shards stay in the workers' memory
    print(graph)

    res = bfs(graph, 0)                                # one search: parent and level per vertex
    print(f"root 0 reaches {res.reached:,} vertices in {res.level.max()} levels")
    print(res.to_pandas().head())

    result = graph500(graph, nroots=16)                # timed, validated searches
    print(result.report())
    client.close()
