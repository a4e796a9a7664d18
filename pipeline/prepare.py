"""Preparation on a Dask cluster: edge chunks -> clean/symmetrize -> shuffle to owners -> CSR shards.

The task graph has three layers:

* ``split``: every edge chunk is cut into one piece per owner (self-loops set aside, undirected tuples
  sent both ways) and split again into one task output per owner;
* ``build``: owner ``r`` receives its pieces from every chunk on its own worker and builds its shard
  (count, scatter, sort and deduplicate rows, 32-bit columns when ids fit);
* the shard futures stay on their workers; only small summaries come back to the client.
"""

from __future__ import annotations

import operator
import os
import shutil
import time
import uuid

import numpy as np

from breadth.bfs.shard import block_size
from breadth.bfs.sharded_graph import ShardedGraph

from .build_csr import build_shard
from .cluster import resolve_device, worker_addresses
from .edges import EdgeList
from .partition import split_by_owner
from .spill import build_shard_spilled, spill_chunk


def _summary(shard) -> tuple[int, int, int, int]:
    return (shard.num_local_edges, int(shard.self_loops.sum()), int(shard.tuple_degree.sum()), shard.nbytes())


def _add_bottom_up_order(client, shards, workers, token):
    """GPU shards of a several-rank graph: every owner gathers all owners' degree buckets (a byte per
    vertex) and builds bottom-up's degree-ordered rows, which one rank builds alone."""
    from distributed import wait

    from .build_csr_gpu import shard_degree_buckets, with_bottom_up_order

    where = [dict(workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False)
             for r in range(len(shards))]
    buckets = [client.submit(shard_degree_buckets, s, key=f"buckets-{token}-{r}", **where[r])
               for r, s in enumerate(shards)]
    ordered = [client.submit(with_bottom_up_order, s, buckets, key=f"bu-shard-{token}-{r}", **where[r])
               for r, s in enumerate(shards)]
    wait(ordered)
    return ordered


def prepare(edges: EdgeList, client=None, nparts: int | None = None, progress: bool = False,
            directed: bool | None = None, device: str = "cpu", spill_dir: str | None = None,
            batch_entries: int = 1 << 25) -> ShardedGraph:
    """Turn an edge list into per-worker CSR shards held in the workers' memory.

    ``nparts`` (default: the number of workers) owners each get a contiguous block of vertex ids;
    owner ``r`` runs on the ``r``-th worker.  The edge list itself never reaches the client.

    ``device``: ``"cpu"`` (NumPy shards, Numba kernels), ``"gpu"`` (split and build on the workers' GPUs,
    CuPy shards in device memory, searched by the GPU backend; workers of a dask-cuda
    ``LocalCUDACluster``, see :func:`~breadth.pipeline.cluster.local_cuda_cluster`) or ``"auto"`` (GPU when
    CuPy and a device are present).  The GPU path takes NumPy or CuPy edge chunks.

    ``spill_dir``: prepare out of core (CPU): chunks write per-owner bucket files there (a directory every
    worker can reach) and owners build their rows in batches of about ``batch_entries`` adjacency
    entries, so a worker's peak memory is a chunk, a batch and its final shard, whatever the input size
    (see :mod:`breadth.pipeline.spill`).

    >>> from distributed import Client
    >>> from breadth.pipeline import kronecker, prepare
    >>> client = Client(processes=False)                  # doctest: +SKIP
    >>> g = prepare(kronecker(16, seed=1), client)        # doctest: +SKIP
    >>> g.num_vertices
    65536
    """
    import dask
    from distributed import default_client, wait

    client = client or default_client()
    device = resolve_device(device)
    if device == "gpu":  # imported lazily: CPU installs never need CuPy
        from .build_csr_gpu import build_shard_gpu as build_fn
        from .build_csr_gpu import split_by_owner_gpu as split_fn
    else:
        build_fn, split_fn = build_shard, split_by_owner
    directed = edges.directed if directed is None else directed
    workers = worker_addresses(client)
    nparts = nparts or len(workers)
    if nparts < 1:
        raise ValueError(f"nparts must be >= 1, got {nparts}")
    n = edges.num_vertices
    block = block_size(n, nparts)
    t0 = time.perf_counter()
    chunks = edges.edges.to_delayed().ravel().tolist()
    token = uuid.uuid4().hex[:8]
    if spill_dir is not None:
        if device == "gpu":
            raise ValueError("spill_dir (out-of-core preparation) is implemented for device='cpu' only")
        root = os.path.join(spill_dir, f"breadth-spill-{token}")
        entries_per_owner = max(1, 2 * edges.num_edges // nparts)
        batch_rows = int(max(64, min(block, block * batch_entries // entries_per_owner)))
        flat = client.compute([dask.delayed(spill_chunk, pure=False)(c, i, n, nparts, directed, batch_rows, root)
                               for i, c in enumerate(chunks)])
        shards = [client.submit(build_shard_spilled, r, nparts, n, directed, batch_rows, root, flat,
                                key=f"shard-{token}-{r}", workers=[workers[r % len(workers)]],
                                allow_other_workers=False, pure=False)
                  for r in range(nparts)]
        piece_futs = None
    else:
        split = [dask.delayed(split_fn, pure=True)(c, n, block, nparts, directed) for c in chunks]
        flat = client.compute([dask.delayed(operator.getitem, pure=True)(s, r)
                               for r in range(nparts) for s in split])
        piece_futs = [flat[r * len(split):(r + 1) * len(split)] for r in range(nparts)]
        shards = [client.submit(build_fn, r, nparts, n, piece_futs[r], directed, key=f"shard-{token}-{r}",
                                workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False)
                  for r in range(nparts)]
    if progress:
        from distributed import progress as dask_progress

        dask_progress(shards)
    wait(shards)
    del piece_futs, flat
    if device == "gpu" and nparts > 1:
        shards = _add_bottom_up_order(client, shards, workers, token)
    if spill_dir is not None:
        shutil.rmtree(root, ignore_errors=True)  # owners removed their files; this drops the empty tree
    summaries = client.gather([client.submit(_summary, s, workers=[workers[r % len(workers)]], pure=False)
                               for r, s in enumerate(shards)])
    construction = time.perf_counter() - t0
    nnz, loops, tdeg, _ = (int(x) for x in np.sum(summaries, axis=0))
    return ShardedGraph(
        client=client, shards=shards, workers=[workers[r % len(workers)] for r in range(nparts)],
        num_vertices=n, num_input_edges=edges.num_edges, num_edges=nnz if directed else nnz // 2,
        num_self_loops=loops, directed=directed, construction_time=construction, source=dict(edges.source),
        id_map=edges.id_map, backend=device,
    )
