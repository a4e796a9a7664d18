"""The cluster a ``breadth`` command runs on, and the memory plan it runs under.

:func:`cluster_client` starts the local cluster (or connects to ``--scheduler``) for one command and closes
it whatever happens; :func:`memory_plan_for` turns ``--memory-limit`` into chunk and batch sizes (see
:mod:`breadth.pipeline.shuffle.memory_plan`; the shuffle's tier is chosen by the same rule, see
:func:`~breadth.pipeline.shuffle.memory_plan.choose_tier`); :func:`spill_dir_for` says where the disk tier writes; and
:func:`memory_errors` turns the memory failures and lost workers into the CLI's one-line errors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from .cli_errors import CommandError, UsageError, hold_signals


def threads_per_worker(args) -> int:
    """Threads per local worker, as :func:`~breadth.pipeline.cluster.cluster.local_cluster` chooses them."""
    return args.threads or max(1, (os.cpu_count() or 1) // args.workers)


@contextlib.contextmanager
def cluster_client(args, device: str = "cpu", managed_target: float | None = None):
    """A client for ``--scheduler``, or for a local cluster of ``--workers`` x ``--threads`` started for this
    command (TCP between Dask's processes; ``--protocol`` picks the search ranks' own transport), closed on
    the way out whatever happens.

    With ``--memory-limit``, each local worker gets that limit under the Dask thresholds of
    :func:`~breadth.pipeline.shuffle.memory_plan.dask_memory_config` (ended only past the limit, never paused, no
    retries), and ``--spill-dir`` is also the workers' local directory (where Dask spills task outputs past
    ``managed_target`` of the limit; the folder Dask makes there is removed afterwards)."""
    import dask
    import distributed  # noqa: F401  its config defaults load first: leaving the override must not drop them

    from breadth.bfs.worker_loss import watch_workers

    from ..cluster.cluster import connect, worker_addresses
    from ..shuffle.memory_plan import dask_memory_config, format_bytes

    limit = getattr(args, "memory_limit", None)
    kw = {}
    if args.scheduler is None:  # its CPU workers run breadth's tasks only (see local_cluster)
        kw["breadth_only"] = True
    if getattr(args, "device_memory_limit", None) and args.scheduler is None:
        kw["device_memory_limit"] = args.device_memory_limit
    scratch = None  # Dask's folder in --spill-dir, removed afterwards when this run created it
    if limit and args.scheduler is None:
        kw["memory_limit"] = limit
        if getattr(args, "spill_dir", None):
            os.makedirs(args.spill_dir, exist_ok=True)
            kw["local_directory"] = args.spill_dir
            scratch = os.path.join(args.spill_dir, "dask-scratch-space")
            scratch = None if os.path.exists(scratch) else scratch
    release = hold_signals()  # a cluster interrupted half-started cannot be closed cleanly
    try:
        with dask.config.set(dask_memory_config(managed_target) if limit else {}):  # read as the cluster starts
            client = connect(args.scheduler, workers=args.workers, threads_per_worker=args.threads, device=device,
                             silence_logs=getattr(args, "log_level", logging.WARNING), **kw)
    except BaseException:
        release()
        raise
    try:
        release()
        present = worker_addresses(client)
        if not present:  # e.g. every worker ended at start-up: say so, not "nparts ... 0"
            raise CommandError("the cluster has no running worker"
                               + (f" (do they fit in --memory-limit {format_bytes(limit)}?)" if limit else ""))
        if args.scheduler is None and device == "cpu" and len(present) < args.workers:
            try:  # one still registering
                client.wait_for_workers(args.workers, timeout=10)
            except TimeoutError:
                raise CommandError(f"only {len(worker_addresses(client))} of the {args.workers} local workers "
                                   "(--workers) started" + (f" (do they fit in --memory-limit "
                                                           f"{format_bytes(limit)}?)" if limit else "")) from None
        # every worker of the command's cluster holds a share of its graph: one lost at any point ends the
        # command in about a second (WorkerLost, see memory_errors) instead of a wait for it that never ends
        with watch_workers(client, f"{args.cmd} command"):
            yield client
    finally:
        client.close()
        if args.scheduler is None and client.cluster is not None:
            client.cluster.close()
        if scratch:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)


def memory_plan_for(args, num_vertices: int, num_tuples: int, directed: bool = False, *, search: bool = False,
                    store: bool = False, what: str = "", client=None, chunk_edges: int | None = None,
                    numpy_path: bool = False):
    """The :class:`~breadth.pipeline.shuffle.memory_plan.MemoryPlan` of ``--memory-limit`` for this graph, or
    ``None`` without a limit.  Workers and threads are ``--workers``/``--threads`` (a local cluster) or,
    given a ``client`` of an existing cluster, its smallest worker's.  Raises
    :class:`~breadth.pipeline.shuffle.memory_plan.MemoryLimitError` below the minimum.  ``chunk_edges``: the
    chunks of a source already read into the workers' memory (``ingest``), else ``--chunk-edges``.
    ``numpy_path``: the command can run without Numba in its workers (``generate``), which a limit below
    the Numba path's minimum then chooses (:func:`~breadth.pipeline.shuffle.memory_plan.plan_numpy_path`)."""
    if not getattr(args, "memory_limit", None):
        return None
    from ..shuffle.memory_plan import plan_memory

    workers, threads, resident = args.workers, threads_per_worker(args), None
    if client is not None:
        # what the workers hold already counts, as prepare() counts it when it picks the shuffle's tier;
        # memory they freed does not (an ingest's relabeling leaves hundreds of MB of it in their heaps)
        from ..shuffle.shuffle import cluster_memory

        mem = cluster_memory(client, trim=True)
        resident = mem.resident
        if args.scheduler is not None:
            workers, threads = max(1, mem.workers), mem.threads
    plan = plan_memory(args.memory_limit, num_vertices, num_tuples, workers, threads, directed,
                       chunk_edges=chunk_edges or getattr(args, "chunk_edges", None), search=search, store=store,
                       what=what, source_chunks_held=chunk_edges is not None, resident=resident,
                       numpy_path=numpy_path)
    print(f"breadth: {plan.describe()}", file=sys.stderr)
    return plan


def spill_dir_for(args) -> str | None:
    """Where the shuffle's disk tier writes: ``--spill-dir`` (created), else ``None`` -- a temporary
    directory that :func:`~breadth.pipeline.prepare` makes only when the workers' memory limit needs the
    disk tier, and removes afterwards (also after a failure).  Preparation writes its files in a folder
    of its own there and removes it, also when it fails or is interrupted."""
    if getattr(args, "spill_dir", None):
        os.makedirs(args.spill_dir, exist_ok=True)
        return args.spill_dir
    return None


@contextlib.contextmanager
def shard_files_for(args, plan):
    """Where the owners of the NumPy path (a ``plan`` with ``jit`` False) build their shards to files: a
    folder of this run in ``--spill-dir`` (or a temporary directory), removed on the way out whatever
    happens; ``None`` for the other plans (shards held in the workers' memory)."""
    if plan is None or plan.jit:
        yield None
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="breadth-shards-", dir=spill_dir_for(args))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def memory_errors(args):
    """The memory failures and lost workers as the CLI's errors: a ``--memory-limit`` below the minimum
    (:class:`~breadth.pipeline.shuffle.memory_plan.MemoryLimitError`) is a usage error (exit 2); a worker lost
    (:class:`~breadth.bfs.worker_loss.WorkerLost`) a failure naming it, how its process ended and the
    stage, blaming the memory limit only where its nanny ended it for passing the limit (exit 1)."""
    from breadth.bfs.worker_loss import WorkerLost, describe

    from ..shuffle.memory_plan import MemoryLimitError, format_bytes

    try:
        yield
    except MemoryLimitError as e:
        raise UsageError(str(e)) from None
    except WorkerLost as e:
        if e.memory is None:
            raise CommandError(f"{describe(e.worker, e.stage, e.how, before=e.before)}; run the command "
                               "again") from None
        rss, limit = e.memory
        limit = getattr(args, "memory_limit", None) or limit
        held = f" ({format_bytes(rss)})" if rss else ""
        if getattr(args, "memory_limit", None):
            why = f"its memory{held} passed --memory-limit {format_bytes(limit)} (raise the limit)"
        else:
            why = (f"its memory{held} passed its limit" + (f" ({format_bytes(limit)})" if limit else "")
                   + " (set --memory-limit to plan the run for the memory there is)")
        raise CommandError(f"worker {e.worker} was ended by its nanny during the {e.stage}: {why}") from None
    except Exception as e:
        from distributed import KilledWorker

        if not isinstance(e, KilledWorker):
            raise
        # a task whose worker died outside any guard: the scheduler knows no more than that
        raise CommandError("a worker died while running a task; rerun with --verbose to see Dask's logs") from None
