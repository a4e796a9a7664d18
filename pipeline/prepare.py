"""Preparation on a Dask cluster: edge chunks -> clean/symmetrize -> shuffle to owners -> CSR shards.

The task graph has three layers:

* ``split``: every edge chunk is cut into one piece per owner (self-loops set aside, undirected tuples
  sent both ways) and split again into one task output per owner;
* ``build``: owner ``r`` receives its pieces from every chunk on its own worker and builds its shard
  (count, scatter, sort and deduplicate rows, 32-bit columns when ids fit);
* the shard futures stay on their workers; only small summaries come back to the client.
"""

from __future__ import annotations

import contextlib
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
from .host_batches import batch_chunk, build_shard_batched
from .partition import split_by_owner
from .spill import build_shard_spilled, spill_chunk
from .stages import summarize


def _batch_rows(num_tuples: int, nparts: int, block: int, batch_entries: int) -> int:
    """Rows per batch so that a batch holds about ``batch_entries`` adjacency entries (each tuple is two
    entries, spread over ``nparts`` owners), at least 64 rows and at most an owner's block."""
    entries_per_owner = max(1, 2 * num_tuples // nparts)
    return int(max(64, min(block, block * batch_entries // entries_per_owner)))


@contextlib.contextmanager
def _task_stream(client, on: bool):
    """Dask's task stream (start and stop of every task) while ``on``; ``None`` otherwise."""
    if not on:
        yield None
        return
    from distributed import get_task_stream

    with get_task_stream(client) as ts:
        yield ts


def _source_seconds(records: list[dict], chunks: list, ours: set) -> tuple[list[float], float]:
    """Compute seconds of the task that produced each edge chunk (generator or reader), in chunk order,
    and the sum over the source's other tasks, from Dask's task-stream ``records``; ``ours``: the keys
    of preparation's own tasks, which are not the source's."""
    index = {c.key: i for i, c in enumerate(chunks)}
    per_chunk = [0.0] * len(chunks)
    other = 0.0
    for rec in records:
        key = rec["key"]
        secs = sum(s["stop"] - s["start"] for s in rec["startstops"] if s["action"] == "compute")
        if key in index:
            per_chunk[index[key]] += secs
        elif key not in ours:
            other += secs
    return per_chunk, other


def _progress(futures) -> None:
    """Dask's text progress bar until ``futures`` finish, drawn on stderr: it writes to stdout, where a
    command's report goes (``breadth bench > report.txt``)."""
    import sys

    from distributed import progress as dask_progress

    with contextlib.redirect_stdout(sys.stderr):
        dask_progress(futures)


def _owner_stages(shard) -> dict:
    return shard.meta.get("prepare_stages", {})


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


def _remove_spill(client, futures: list, root: str, created: str | None) -> None:
    """After a failed spilled preparation: cancel its tasks and remove ``root`` (and ``created``, the
    spill directory itself when this run made it and it is empty again).

    A chunk task already running when the run failed cannot be stopped and may still write a bucket
    file; it never creates ``root`` again (see :func:`~breadth.pipeline.spill.spill_chunk`), so removing
    until ``root`` is gone leaves nothing behind."""
    with contextlib.suppress(Exception):
        client.cancel(futures, force=True)
    for _ in range(100):
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.lexists(root):
            break
        time.sleep(0.05)
    if created is not None:
        with contextlib.suppress(OSError):
            os.rmdir(created)


def prepare(edges: EdgeList, client=None, nparts: int | None = None, progress: bool = False,
            directed: bool | None = None, device: str = "cpu", spill_dir: str | None = None,
            host_batches: bool = False, batch_entries: int | None = None, stages: dict | None = None) -> ShardedGraph:
    """Turn an edge list into per-worker CSR shards held in the workers' memory.

    ``nparts`` (default: the number of workers) owners each get a contiguous block of vertex ids;
    owner ``r`` runs on the ``r``-th worker.  The edge list itself never reaches the client.

    ``device``: ``"cpu"`` (NumPy shards, Numba kernels), ``"gpu"`` (split and build on the workers' GPUs,
    CuPy shards in device memory, searched by the GPU backend; workers of a dask-cuda
    ``LocalCUDACluster``, see :func:`~breadth.pipeline.cluster.local_cuda_cluster`) or ``"auto"`` (GPU when
    CuPy and a device are present).  The GPU path takes NumPy or CuPy edge chunks.

    Out of core (the edge list larger than a worker's memory, or than its GPU's), two ways:

    * ``spill_dir`` (CPU only): chunks write per-owner bucket files there (a directory every worker can
      reach) and owners build their rows in batches of about ``batch_entries`` adjacency entries (default
      2**25), so a worker's peak memory is a chunk, a batch and its final shard, whatever the input size
      (see :mod:`breadth.pipeline.spill`).
    * ``host_batches=True`` (CPU or GPU): chunks are split by owner (on the GPU for ``device="gpu"``) and
      each owner's entries, grouped by row batch as 32-bit ``[row - lo, column]`` pairs, wait in the
      workers' host memory as Dask task outputs (8 bytes per adjacency entry; Dask's memory manager may
      spill them to its local disk, dask-cuda's device -> host -> disk tiers on GPU workers); each owner
      then builds batch by batch, copying a batch of about ``batch_entries`` entries (default 2**25 on
      the CPU, 2**28 on the GPU) to the device, so device memory holds the final shard plus one batch's
      working set (about 40 bytes per entry) instead of two to three times the edge list (see
      :mod:`breadth.pipeline.host_batches`).  The shards are the in-memory path's exactly.

    ``stages``: a dict that, when given, is filled with where the preparation's time went
    (:func:`breadth.pipeline.stages.summarize`): wall seconds of the chunk and build phases, each chunk
    task's and each owner's stage seconds (generate/read, split, sort, write; read, build, assemble...),
    bytes spilled, and each owner process's peak RSS.  Measuring costs a few floats per task.

    >>> from distributed import Client
    >>> from breadth.pipeline import kronecker, prepare
    >>> client = Client(processes=False)                  # doctest: +SKIP
    >>> g = prepare(kronecker(16, seed=1), client)        # doctest: +SKIP
    >>> g.num_vertices
    65536
    """
    from distributed import default_client

    client = client or default_client()
    if spill_dir is None:
        return _prepare(edges, client, nparts, progress, directed, device, None, host_batches, batch_entries,
                        stages, [])
    # The spill tree is this run's alone (a fresh token); whatever stops the run -- an error in a task,
    # on the client, or Ctrl-C -- removes it, so a failed run leaves no bucket files behind.
    created = None if os.path.isdir(spill_dir) else os.path.abspath(spill_dir)
    root = os.path.join(spill_dir, f"breadth-spill-{uuid.uuid4().hex[:8]}")
    os.makedirs(root)
    futures: list = []
    try:
        return _prepare(edges, client, nparts, progress, directed, device, root, host_batches, batch_entries,
                        stages, futures)
    except BaseException:
        _remove_spill(client, futures, root, created)
        raise


def _prepare(edges: EdgeList, client, nparts: int | None, progress: bool, directed: bool | None, device: str,
             root: str | None, host_batches: bool, batch_entries: int | None, stages: dict | None,
             futures: list) -> ShardedGraph:
    """:func:`prepare` on ``client``; ``root``: this run's spill tree (already created) or ``None``.
    The futures of the spilled path go into ``futures`` so that a failed run can cancel them."""
    import dask
    from distributed import wait

    spill_dir = None if root is None else os.path.dirname(root)
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
    if spill_dir is not None and host_batches:
        raise ValueError("spill_dir and host_batches are two out-of-core paths: choose one")
    batch_entries = batch_entries or (1 << (28 if device == "gpu" else 25))
    t0 = time.perf_counter()
    chunks = edges.edges.to_delayed().ravel().tolist()
    token = uuid.uuid4().hex[:8]
    where = [dict(workers=[workers[r % len(workers)]], allow_other_workers=False, pure=False) for r in range(nparts)]
    chunk_stage_futs = t_chunks = None
    with _task_stream(client, stages is not None) as stream:
        if spill_dir is not None:
            if device == "gpu":
                raise ValueError("spill_dir (out-of-core preparation) is implemented for device='cpu' only")
            batch_rows = _batch_rows(edges.num_edges, nparts, block, batch_entries)
            flat = client.compute([dask.delayed(spill_chunk, pure=False)(c, i, n, nparts, directed, batch_rows, root)
                                   for i, c in enumerate(chunks)])
            futures += flat
            if progress:
                _progress(flat)
            wait(flat)  # owners need every chunk's offsets anyway; waiting here times the chunk phase
            t_chunks = time.perf_counter()
            chunk_stage_futs = flat
            shards = [client.submit(build_shard_spilled, r, nparts, n, directed, batch_rows, root, flat,
                                    key=f"shard-{token}-{r}", **where[r]) for r in range(nparts)]
            futures += shards
            piece_futs = None
        elif host_batches:
            batch_rows = _batch_rows(edges.num_edges, nparts, block, batch_entries)
            split = [dask.delayed(batch_chunk, pure=False)(c, n, nparts, directed, batch_rows, device) for c in chunks]
            host_pieces = [dask.delayed(operator.getitem, pure=True)(s, 0) for s in split]
            # the chunk tasks' stage seconds come back apart from the pieces, which only their owner fetches
            futs = client.compute([dask.delayed(operator.getitem, pure=True)(s, 1) for s in split]
                                  + [dask.delayed(operator.getitem, pure=True)(h, r)
                                     for r in range(nparts) for h in host_pieces])
            chunk_stage_futs, flat = futs[:len(split)], futs[len(split):]
            del futs
            if progress:
                _progress(flat)
            wait(flat)  # owners need every chunk's piece anyway; waiting here times the chunk phase
            t_chunks = time.perf_counter()
            piece_futs = [flat[r * len(split):(r + 1) * len(split)] for r in range(nparts)]
            shards = [client.submit(build_shard_batched, r, nparts, n, directed, batch_rows, piece_futs[r], device,
                                    key=f"shard-{token}-{r}", **where[r]) for r in range(nparts)]
        else:
            split = [dask.delayed(split_fn, pure=True)(c, n, block, nparts, directed) for c in chunks]
            flat = client.compute([dask.delayed(operator.getitem, pure=True)(s, r)
                                   for r in range(nparts) for s in split])
            piece_futs = [flat[r * len(split):(r + 1) * len(split)] for r in range(nparts)]
            shards = [client.submit(build_fn, r, nparts, n, piece_futs[r], directed, key=f"shard-{token}-{r}",
                                    **where[r]) for r in range(nparts)]
        if progress:
            _progress(shards)
        wait(shards)
        t_build = time.perf_counter()
    ours = {f.key for f in flat} | {f.key for f in shards} | {f.key for f in chunk_stage_futs or []}
    if spill_dir is None:
        ours |= {d.key for d in split}
    if host_batches:
        ours |= {d.key for d in host_pieces}
    if chunk_stage_futs is None:
        chunk_records = []
    elif host_batches:
        chunk_records = client.gather(chunk_stage_futs)
    else:
        chunk_records = [c.stages for c in client.gather(chunk_stage_futs)]
    del piece_futs, flat, chunk_stage_futs
    if device == "gpu" and nparts > 1:
        shards = _add_bottom_up_order(client, shards, workers, token)
    if spill_dir is not None:
        shutil.rmtree(root, ignore_errors=True)  # owners removed their files; this drops the empty tree
    summaries = client.gather([client.submit(_summary, s, workers=[workers[r % len(workers)]], pure=False)
                               for r, s in enumerate(shards)])
    construction = time.perf_counter() - t0
    nnz, loops, tdeg, _ = (int(x) for x in np.sum(summaries, axis=0))
    if stages is not None:
        owners = client.gather([client.submit(_owner_stages, s, workers=[workers[r % len(workers)]], pure=False)
                                for r, s in enumerate(shards)])
        source_s, other_s = _source_seconds(stream.data, chunks, ours)
        wall = ({"chunks": t_chunks - t0, "build": t_build - t_chunks} if t_chunks is not None
                else {"chunks_and_build": t_build - t0})
        wall["finish"] = construction - (t_build - t0)
        path = "spill" if spill_dir is not None else f"host_batches_{device}" if host_batches else "in_memory"
        summarize(stages, path, wall, chunk_records, owners, source_s, other_s)
    return ShardedGraph(
        client=client, shards=shards, workers=[workers[r % len(workers)] for r in range(nparts)],
        num_vertices=n, num_input_edges=edges.num_edges, num_edges=nnz if directed else nnz // 2,
        num_self_loops=loops, directed=directed, construction_time=construction, source=dict(edges.source),
        id_map=edges.id_map, backend=device,
    )
