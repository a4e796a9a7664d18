"""Preparation on a Dask cluster: edge chunks -> clean/symmetrize -> shuffle to owners -> CSR shards.

One path for every source and every size (:mod:`breadth.pipeline.shuffle.shuffle`):

* ``send``: every edge chunk is cut into one piece per owner (self-loops set aside, undirected tuples
  sent both ways, directed ones as out- and in-entries), kept in the storage tier that the workers'
  memory limit allows (their memory, row batches in host memory, or bucket files on disk);
* ``build``: owner ``r`` reads its pieces from every chunk on its own worker, one row batch at a time,
  and builds its shard (count, scatter, sort and deduplicate rows, 32-bit columns when ids fit);
* the shard futures stay on their workers; only small summaries come back to the client.
"""

from __future__ import annotations

import contextlib
import time
import uuid

from breadth.bfs.dask_workers import worker_addresses
from breadth.bfs.device_choice import resolve_device
from breadth.bfs.partitioned import partition_graph
from breadth.bfs.partitioning import Partitioning
from breadth.bfs.search_order import ORDER_DROPPED, add_bottom_up_order, warn_dropped_order
from breadth.bfs.shard import block_size
from breadth.bfs.sharded_graph import ShardedGraph
from breadth.bfs.worker_loss import watch_workers

from .build.build_owner import build_owner
from .build.direct_exchange import build_direct, use_direct
from .edges import EdgeList
from .prepare_config import PrepareConfig
from .shuffle.shuffle import batch_rows, choose_tier, consume, send, spill_space
from .shuffle.shuffle_tiers import ShuffleSpec
from .stages import summarize

#: keywords that prepare() refuses with ``TypeError`` and this message, which says how to get their effect
_REMOVED = {"host_batches": "the shuffle's storage tier (memory, host batches, disk) follows the workers' memory "
                            "limit; to force one, pass config=PrepareConfig(tier=...) or set breadth's setting "
                            "breadth.shuffle.tier (see breadth.pipeline.shuffle.shuffle)"}


@contextlib.contextmanager
def _task_stream(client, on: bool):
    """Dask's task stream (start and stop of every task) while ``on``; ``None`` otherwise."""
    if not on:
        yield None
        return
    from distributed import get_task_stream

    with get_task_stream(client) as ts:
        yield ts


def _source_seconds(records: list[dict], chunk_keys: list, ours: set) -> tuple[list[float], float]:
    """Compute seconds of the task that produced each edge chunk (generator or reader; its Dask key in
    ``chunk_keys``), in chunk order, and the sum over the source's other tasks, from Dask's task-stream
    ``records``; ``ours``: the keys of preparation's own tasks, which are not the source's."""
    index = {k: i for i, k in enumerate(chunk_keys)}
    per_chunk = [0.0] * len(chunk_keys)
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
    """A text progress bar until ``futures`` are done, drawn on stderr (stdout is where a command's report
    goes: ``breadth bench > report.txt``), in Dask's style.  Drawn from the futures' states in this client,
    not by Dask's own bar (:func:`distributed.progress`), which follows the tasks at the scheduler: a task
    pinned to a worker that was lost never ends there, and that bar waited for it forever, where the
    guard against lost workers (:mod:`breadth.bfs.worker_loss`) ends the wait here by cancelling the futures."""
    import sys

    from distributed import as_completed

    t0, total, done = time.perf_counter(), len(futures), 0
    for f in as_completed(futures):
        if f.status != "finished":  # failed or cancelled: the caller's wait says why
            break
        done += 1
        width = 40 * done // max(total, 1)
        sys.stderr.write(f"\r[{'#' * width}{' ' * (40 - width)}] | {100 * done // max(total, 1):3d}% Completed | "
                         f"{time.perf_counter() - t0:4.1f}s")
        sys.stderr.flush()
    sys.stderr.write("\n")


def _owner_stages(shard) -> dict:
    return shard.meta.get("prepare_stages", {})


def _summary(shard) -> tuple[int, int, int, int, str | None]:
    # a shard built to files brings its sums: reading its maps would make them resident in the worker
    sums = shard.meta.get("sums") or {"self_loops": int(shard.self_loops.sum()),
                                      "tuple_degree": int(shard.tuple_degree.sum())}
    return (shard.num_local_edges, sums["self_loops"], sums["tuple_degree"], shard.nbytes(),
            shard.meta.get(ORDER_DROPPED))


def _warn_dropped_order(summaries: list, stages: dict | None) -> None:
    """One warning naming the owners whose shards went without bottom-up's degree order, and why."""
    dropped = warn_dropped_order([s[4] for s in summaries], stacklevel=4)  # the caller of prepare()
    if stages is not None:
        stages["bottom_up_order_dropped"] = dropped


def prepare(edges: EdgeList, client=None, nparts: int | None = None, progress: bool = False,
            directed: bool | None = None, device: str = "cpu", spill_dir: str | None = None,
            batch_entries: int | None = None, stages: dict | None = None, jit: bool = True,
            shard_dir: str | None = None, partition: str = "1d", grid: tuple[int, int] | None = None,
            delegate_degree: int | None = None, search_order: bool | None = None, keep_edges: bool | None = None,
            protocol: str | None = None, config: PrepareConfig | None = None, **removed) -> ShardedGraph:
    """Turn an edge list into per-worker CSR shards held in the workers' memory: the graph a search runs on.

    ``nparts`` owners each get a contiguous block of vertex ids; owner ``r`` runs on the ``r``-th worker.
    Every edge chunk is cut into one piece per owner (self-loops set aside, undirected tuples sent both
    ways, directed ones as out- and in-entries) and each owner builds its shard from its pieces: rows in
    order, columns sorted and unique within a row, 32-bit columns where the ids fit.  The edge list never
    reaches the client; only a few numbers per owner do.

    Out of core needs no option: the pieces go to their owners through one shuffle
    (:mod:`breadth.pipeline.shuffle.shuffle`) whose storage tier follows the workers' ``memory_limit`` (read from
    the cluster; a worker without one counts as its host's memory shared among the workers there) and
    the graph's size, by the same rule as the CLI's ``--memory-limit``
    (:func:`breadth.pipeline.shuffle.memory_plan.choose_tier`):

    * **memory**: each owner's entries wait in the workers' memory (device memory on GPU workers) and
      the owner builds at once -- the fastest, for graphs whose entries fit;
    * **host**: entries wait in host memory as 32-bit pairs grouped by row batch (8 bytes per entry;
      Dask may move them to its local directory, dask-cuda device -> host -> disk) and the owner builds
      one batch of about ``batch_entries`` entries at a time (on its GPU for ``device="gpu"``, so device
      memory holds the shard plus one batch);
    * **disk**: entries are written to per-owner bucket files in ``spill_dir`` and built batch by batch,
      so a worker's peak memory is a chunk, a batch and its final shard, whatever the input size.  The
      files are removed as they are read, and the run's folder also when the run fails or is interrupted.

    The shards are the same, bit for bit, whatever the tier and batch size.  ``config``'s ``tier`` (the
    setting ``breadth.shuffle.tier``: ``"auto"``, ``"memory"``, ``"host"``, ``"disk"``) forces a tier, for
    benchmarks and tests.

    How the graph is prepared, never which graph, is ``config``
    (:class:`~breadth.pipeline.prepare_config.PrepareConfig`: the tier, the exchange, the batch size, the
    transport...); the keywords ``batch_entries``, ``search_order``, ``keep_edges`` and ``protocol``, where
    given, override its fields of the same names.

    Parameters
    ----------
    edges : EdgeList
        From a source (:func:`~breadth.pipeline.kronecker`, a file reader, :func:`~breadth.pipeline.from_dask_array`,
        :func:`~breadth.pipeline.from_dask_dataframe`); ids in ``[0, edges.num_vertices)``.
    client : distributed.Client, optional
        Default: the current client.
    nparts : int, optional
        Owners (shards), at least 1; default the number of workers.
    progress : bool, default False
        Draw Dask's progress bars on stderr.
    directed : bool, optional
        Default ``edges.directed``.  A directed graph's owners also build the in-edges (CSC).
    device : {"cpu", "gpu", "auto"}, default "cpu"
        ``"cpu"``: NumPy shards, Numba kernels.  ``"gpu"``: split and build on the workers' GPUs, CuPy
        shards in device memory, searched by the GPU backend (workers of a dask-cuda ``LocalCUDACluster``,
        :func:`~breadth.pipeline.cluster.cluster.local_cuda_cluster`; NumPy or CuPy edge chunks).  ``"auto"``: GPU
        where CuPy sees a device.
    spill_dir : str, optional
        The disk tier's folder, one every worker can reach; default a temporary directory.
    batch_entries : int, optional
        Adjacency entries per row batch of the host and disk tiers; default ``config``'s, whose default is the
        largest power of two up to 2**25 on the CPU, 2**28 on the GPU, whose build fits the memory limit.
    stages : dict, optional
        Filled with where the preparation's time went (:func:`breadth.pipeline.stages.summarize`): the tier
        (``stages["path"]``, details in ``stages["tier"]``), wall seconds of the chunk and build phases, each
        chunk task's and each owner's stage seconds (split, sort, write; read, build, assemble...), bytes
        spilled, each owner process's peak RSS in bytes, and the config that ran
        (``stages["prepare_config"]``).  Measuring costs a few floats per task.
    jit : bool, default True
        ``False`` (CPU): the workers split and build with NumPy alone (:mod:`breadth.pipeline.kernels.build_csr_numpy`;
        slower, the same shards) and never import Numba, whose import and first compiled call cost each
        worker ~110 MiB (for a source that does not load it either: ``kronecker(..., jit=False)``).
    shard_dir : str, optional
        CPU: a folder every worker can reach where each owner writes its shard's arrays as it builds them,
        batch by batch, and maps them back (:mod:`breadth.pipeline.build.shard_files`): the shards are never
        resident in the workers' memory, and :func:`~breadth.io.write_store` copies them from their files.
        The caller removes the folder once the graph is no longer used.  With ``jit=False`` and the disk
        tier, a worker holds a chunk or a row batch at a time, whatever the graph's size.
    partition : {"1d", "2d", "delegates"}, default "1d"
        Where the search's adjacency entries live (:mod:`breadth.bfs.partitioning`): at the owner of the
        row vertex; on an ``R x C`` grid of the ranks; or 1D with vertices of degree at least
        ``delegate_degree`` replicated on every rank.  Vertex ownership is 1D for all three; the 2D and
        delegate blocks are cut from the 1D shards on the workers
        (:func:`breadth.bfs.partitioned.partition_graph`).
    grid : tuple of int, optional
        ``(R, C)`` with ``R * C == nparts``, for ``"2d"``; default the squarest.
    delegate_degree : int, optional
        For ``"delegates"``: the degree from which a vertex is a delegate.
    search_order : bool, optional
        Default ``config``'s (True).  Build bottom-up's degree-ordered copy of the rows (4 bytes an entry, 2.1 s of each owner's time at
        2^26 web-crawl tuples; :mod:`breadth.bfs.search_order`).  ``False`` for a graph that is not
        searched where it was prepared: a shard store keeps the sorted rows only, and
        :func:`~breadth.io.load_store` builds the order where it loads them.
    keep_edges : bool, optional
        Default ``config``'s (True).  ``False`` hands the edge list's chunks over to the shuffle: each chunk is freed as soon as its
        entries are sent, so the workers do not hold the edge list and its pieces at once (a relabeled
        list's chunks are held data, 8 bytes a tuple), and ``edges`` is empty afterwards
        (:meth:`~breadth.pipeline.edges.EdgeList.release`).
    protocol : {"auto", "tcp", "ucx", "nccl"}, optional
        Default ``config``'s (``"auto"``).  The ranks' transport where the owners exchange their pieces
        themselves (:mod:`breadth.pipeline.build.direct_exchange`: GPU workers, one owner each, the memory tier);
        ``"auto"`` as a search would choose it: NCCL between GPUs, UCX between ranks that share one, TCP for
        CPUs.
    config : PrepareConfig, optional
        Preparation's tunables; default :meth:`PrepareConfig.from_config()
        <breadth.pipeline.prepare_config.PrepareConfig.from_config>`, breadth's settings
        ``breadth.prepare.*`` and ``breadth.shuffle.*``.

    Returns
    -------
    ShardedGraph
        Its shards (futures) stay on their workers.  ``num_vertices``; ``num_input_edges`` the tuples
        read; ``num_edges`` the edges left after removing self-loops and duplicates (undirected edges
        counted once); ``num_self_loops``; ``construction_time`` in seconds; ``id_map`` and ``source``
        from ``edges``.

    Raises
    ------
    TypeError
        An unknown keyword argument (``host_batches`` with how to choose a tier instead).
    ValueError
        ``nparts < 1``; a setting of breadth's that does not parse (naming it); a ``partition``, ``grid`` or ``delegate_degree`` that does not fit (e.g. a grid
        whose ``R * C`` is not ``nparts``); ``shard_dir`` or ``jit=False`` with ``device="gpu"``; an unknown
        ``device``; an id outside ``[0, num_vertices)`` (naming the chunk and row); an ``edges`` whose
        chunks were released; or no ``client`` and none current.
    WorkerLost
        A worker left the cluster while the graph was prepared (its process killed, crashed or ended for
        its memory limit), or one that the edge list's chunks depend on had left before: within about a
        second, naming the worker, how its process ended where known, and the stage
        (:mod:`breadth.bfs.worker_loss`).  Nothing of the run is kept; prepare again once the cluster is
        whole.

    Examples
    --------
    >>> from breadth.pipeline import kronecker, local_cluster, prepare
    >>> client = local_cluster(workers=2)                 # doctest: +SKIP
    >>> g = prepare(kronecker(16, seed=1), client)        # doctest: +SKIP
    >>> g.num_vertices, g.nparts                          # doctest: +SKIP
    (65536, 2)
    >>> stages = {}
    >>> g = prepare(kronecker(16, seed=1), client, stages=stages)   # doctest: +SKIP
    >>> stages["path"]                                    # doctest: +SKIP
    'memory'
    >>> from breadth.pipeline import PrepareConfig
    >>> g = prepare(kronecker(16, seed=1), client, config=PrepareConfig(tier="disk"))   # doctest: +SKIP
    """
    from distributed import default_client

    for name in removed:
        if name in _REMOVED:
            raise TypeError(f"prepare() no longer takes {name!r}: {_REMOVED[name]}")
        raise TypeError(f"prepare() got an unexpected keyword argument {name!r}")
    config = (config if config is not None else PrepareConfig.from_config()).replace(
        batch_entries=batch_entries, search_order=search_order, keep_edges=keep_edges, protocol=protocol)
    device = resolve_device(device)
    if device == "gpu" and (shard_dir is not None or not jit):
        raise ValueError("shard_dir and jit=False are for CPU workers (the GPU path never loads Numba)")
    client = client or default_client()
    directed = edges.directed if directed is None else directed
    workers = worker_addresses(client)
    nparts = nparts or len(workers)
    if nparts < 1:
        raise ValueError(f"nparts must be >= 1, got {nparts}")
    layout = Partitioning(partition, grid, delegate_degree).resolved(nparts)  # bad input fails before any work
    # Every worker is an owner's or a chunk's: one lost midway ends the preparation (WorkerLost) rather than
    # leaving its owner's pinned task waiting for it forever; so does one that the edge list's chunks wait
    # on (hash relabeling's owners), gone before it began.
    with watch_workers(client, "preparation", [*workers, *(edges.workers or ())]) as watch:
        return _prepare_watched(edges, client, watch, workers, nparts, layout, progress, directed, device,
                                spill_dir, stages, jit, shard_dir, config)


def _prepare_watched(edges: EdgeList, client, watch, workers: list[str], nparts: int, layout, progress: bool,
                     directed: bool, device: str, spill_dir: str | None, stages: dict | None, jit: bool,
                     shard_dir: str | None, config: PrepareConfig) -> ShardedGraph:
    """:func:`prepare` once its arguments are checked, inside its guard against lost workers (``watch``,
    whose stage it moves on)."""
    n, m = edges.num_vertices, edges.num_edges
    choice = choose_tier(client, n, m, nparts, directed, device, chunk_edges=max(edges.edges.chunks[0], default=1),
                         batch_entries=config.batch_entries, tier=config.tier)
    block = block_size(n, nparts)
    rows = block if choice.tier == "memory" else batch_rows(m, nparts, block, choice.batch_entries)
    # The spill tree is this run's alone (a fresh token); whatever stops the run -- an error in a task,
    # on the client, or Ctrl-C -- removes it, so a failed run leaves no bucket files behind.
    with spill_space(client, choice.tier, spill_dir) as space:
        spec = ShuffleSpec(choice.tier, device, n, nparts, directed, rows, space.root, jit, shard_dir,
                           on_device=choice.on_device and choice.tier == "host", search_order=config.search_order)
        graph = _prepare(edges, client, spec, workers, progress, stages, space.futures, choice, config, watch)
    if layout.kind == "1d":
        return graph
    watch.stage = f"{layout.kind} partitioning"
    t0 = time.perf_counter()
    graph = partition_graph(graph, layout)
    graph.construction_time += time.perf_counter() - t0
    return graph


def _stage_of_send(client, chunks: list, source: dict) -> str:
    """What the shuffle's chunk phase runs: the shuffle alone for chunks already computed (futures, or the
    chunks of a persisted array, whose keys the client holds), the generator's or reader's tasks too for
    lazy ones."""
    if all(c.key in client.futures for c in chunks):
        return "shuffle"
    return f"{'generation' if source.get('kind') == 'kronecker' else 'reading'} and shuffle"


def _prepare(edges: EdgeList, client, spec: ShuffleSpec, workers: list[str], progress: bool, stages: dict | None,
             futures: list, choice, config: PrepareConfig, watch=None) -> ShardedGraph:
    """:func:`prepare` through the shuffle of ``spec``; the futures go into ``futures`` so that a failed
    run can cancel them; ``watch``: the guard against lost workers, told each stage."""
    keep_edges = config.keep_edges
    t0 = time.perf_counter()
    chunks = edges.chunk_objects()
    if watch is not None:
        watch.stage = _stage_of_send(client, chunks, edges.source)
    chunk_keys = [c.key for c in chunks]
    num_input_edges = edges.num_edges
    if not keep_edges:
        edges.release()
    token = uuid.uuid4().hex[:8]
    with _task_stream(client, stages is not None) as stream:
        sent = send(client, chunks, spec, futures, _progress if progress else None, stages=stages is not None,
                    release=not keep_edges)
        t_chunks = time.perf_counter()
        if watch is not None:
            watch.stage = "build"
        if use_direct(spec, len(workers), config.exchange):  # owner to owner over the ranks' own transport
            shards, how = build_direct(client, sent, spec, workers, config.protocol)
        else:
            shards, how = consume(client, sent, spec, workers, build_owner, token, futures, name="shard"), "dask"
            if progress:
                _progress(shards)
            from distributed import wait

            wait(shards)
        t_build = time.perf_counter()
    ours = sent.keys | {f.key for f in shards}
    chunk_records = client.gather(sent.stages) if stages is not None else []
    del sent
    # CPU shards get theirs in the memory tier only (the order's copy of the columns would sit beside a
    # host or disk tier's build, which exists to bound that memory); a GPU owner alone built its own
    if spec.search_order and (spec.nparts > 1 if spec.device == "gpu" else spec.tier == "memory"):
        if watch is not None:
            watch.stage = "build (bottom-up order)"
        shards = add_bottom_up_order(client, shards, workers, token)
    summaries = client.gather([client.submit(_summary, s, workers=[workers[r % len(workers)]], pure=False)
                               for r, s in enumerate(shards)])
    construction = time.perf_counter() - t0
    nnz, loops, tdeg = (sum(int(s[i]) for s in summaries) for i in range(3))
    if stages is not None:
        owners = client.gather([client.submit(_owner_stages, s, workers=[workers[r % len(workers)]], pure=False)
                                for r, s in enumerate(shards)])
        source_s, other_s = _source_seconds(stream.data, chunk_keys, ours)
        wall = {"chunks": t_chunks - t0, "build": t_build - t_chunks, "finish": construction - (t_build - t0)}
        summarize(stages, spec.tier, wall, chunk_records, owners, source_s, other_s)
        stages["tier"] = {"tier": spec.tier, "batch_entries": choice.batch_entries, "batch_rows": spec.batch_rows,
                          "on_device": spec.on_device, "limit_bytes": choice.limit,
                          "estimates_bytes": choice.estimates}
        stages["exchange"] = how
        stages["prepare_config"] = config.as_dict()
    _warn_dropped_order(summaries, stages)
    directed = spec.directed
    return ShardedGraph(
        client=client, shards=shards, workers=[workers[r % len(workers)] for r in range(spec.nparts)],
        num_vertices=spec.num_vertices, num_input_edges=num_input_edges, num_edges=nnz if directed else nnz // 2,
        num_self_loops=loops, directed=directed, construction_time=construction, source=dict(edges.source),
        id_map=edges.id_map, backend=spec.device,
    )
