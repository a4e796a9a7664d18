"""Search an edge list that your own ETL produced, as a Dask array, on an existing Dask client."""

import dask.array as da
import numpy as np
from distributed import Client

from breadth.bfs import bfs
from breadth.pipeline import from_dask_array, prepare

if __name__ == "__main__":
    client = Client(n_workers=1, threads_per_worker=2, dashboard_address=None)
    rng = np.random.default_rng(0)
    edges = da.from_array(rng.integers(0, 10_000, size=(200_000, 2)), chunks=(50_000, 2))
    graph = prepare(from_dask_array(edges, num_vertices=10_000), client)
    res = bfs(graph, 42)
    print(graph, "| reached", res.reached, "| depth", res.level.max())
    client.close()
