"""Search sessions: one long-running task per rank, on the worker that holds the rank's shard.

The client submits ``P`` rank tasks together; each builds its communicator (peers find each other through
Dask once, at start), runs the whole batch of roots, and returns its part of the results.  The scheduler
sees the session start and end, never a level.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from ..lazy_exports import resolve
from ..search_config import SearchConfig
from ..transport.communicator import SelfCommunicator
from ..transport.registry import TRANSPORTS, Transport, auto_transport, get_transport, protocol_choices
from .engine import Engine


def resolve_protocol(protocol: str, backend: str, size: int, shared_gpu: bool = False) -> str:
    """The transport a session of ``size`` ranks on ``backend`` ("cpu" or "gpu") runs: ``"self"`` for one
    rank (no peer), else ``protocol`` itself, or for ``"auto"`` the one the transport registry
    (:mod:`breadth.bfs.transport.registry`) prefers for the ranks' placement among those available: NCCL for
    GPU ranks on distinct GPUs, UCX for GPU ranks of which two share a GPU (``shared_gpu``: NCCL refuses two
    ranks on one device), TCP for CPU ranks and where the others are missing.

    >>> resolve_protocol("auto", "cpu", 2)
    'tcp'
    >>> resolve_protocol("auto", "gpu", 1)
    'self'
    """
    t = get_transport(protocol) if protocol != "auto" else None
    if t is not None and t.gpu_only and backend != "gpu":
        others = [repr(n) for n in protocol_choices() if n == "auto" or not TRANSPORTS[n].gpu_only]
        raise ValueError(f"protocol {protocol!r} moves device buffers between GPU ranks; this graph's ranks are on "
                         f"the CPU: use {', '.join(others[:-1])} or {others[-1]}")
    if size == 1:
        return "self"
    if t is not None:
        return t.name
    return auto_transport(_placement(backend, shared_gpu)).name


def _placement(backend: str, shared_gpu: bool) -> str:
    """The ranks' placement, as the transport registry names it (:data:`~breadth.bfs.transport.registry.
    PLACEMENTS`): "cpu", "gpu" (GPU ranks on distinct GPUs) or "shared_gpu"."""
    return "cpu" if backend != "gpu" else "shared_gpu" if shared_gpu else "gpu"


def session_protocol(graph, protocol: str = "auto") -> str:
    """The transport a session on ``graph``'s ranks runs (:func:`resolve_protocol`; for ``"auto"`` on GPU
    ranks the cluster is asked whether two of them share a GPU); :func:`protocol_choice` says why."""
    return protocol_choice(graph, protocol)[0]


def protocol_choice(graph, protocol: str = "auto") -> tuple[str, str]:
    """The transport a session on ``graph``'s ranks runs and why, for the report's ``protocol`` line.

    Parameters
    ----------
    graph : ShardedGraph or Placement
        The ranks: their count, backend and workers.
    protocol : str
        As asked (``--protocol``): ``"auto"`` or a registered transport's name.

    Returns
    -------
    name : str
        As :func:`session_protocol`.
    why : str
        One phrase: ``"one rank"``, ``"as asked"``, or what ``"auto"`` saw (the ranks' placement, and the
        transports it passed over as unavailable here).

    Examples
    --------
    >>> from breadth.bfs.engine.session import Placement
    >>> protocol_choice(Placement(None, ["w0", "w1"], "cpu"))
    ('tcp', 'auto: CPU ranks')
    """
    if graph.nparts == 1 or protocol != "auto":
        why = "one rank" if graph.nparts == 1 else "as asked"
        return resolve_protocol(protocol, graph.backend, graph.nparts), why
    shared = graph.backend == "gpu" and ranks_share_a_gpu(graph.client, graph.workers)
    name = resolve_protocol(protocol, graph.backend, graph.nparts, shared)
    placement = _placement(graph.backend, shared)
    seen = {"cpu": "CPU ranks", "gpu": "GPU ranks on distinct GPUs",
            "shared_gpu": "GPU ranks of which two share a GPU"}[placement]
    preferred = sorted((t for t in TRANSPORTS.values() if placement in t.auto), key=lambda t: t.preference)
    skipped = [f"{t.name} ({t.missing()})" for t in preferred if t.name != name and not t.available()
               and t.preference < TRANSPORTS[name].preference]
    return name, f"auto: {seen}" + (f"; not available here: {', '.join(skipped)}" if skipped else "")


def ranks_share_a_gpu(client, workers: list[str]) -> bool:
    """Whether two of the ranks placed on ``workers`` (one address per rank) run on one GPU: two ranks on
    one worker, or two workers whose current device is the same GPU of the same host."""
    if len(set(workers)) < len(workers):
        return True
    gpus = client.run(_worker_gpu, workers=sorted(set(workers)))
    return len(set(gpus.values())) < len(gpus)


def _worker_gpu() -> tuple[str, str]:
    """(host name, PCI bus id) of the calling worker's current GPU."""
    import socket

    import cupy

    return socket.gethostname(), cupy.cuda.Device().pci_bus_id


def make_communicator(rank: int, size: int, session: str, protocol: str | Transport, timeout: float,
                      backend: str = "cpu", config: SearchConfig | None = None):
    """The communicator of ``rank`` in ``session`` (self for one rank, with device rounds on a GPU rank;
    otherwise the transport ``protocol``'s: a :class:`~breadth.bfs.transport.registry.Transport`, or the name
    of a registered one, which ``"auto"`` must have been resolved to, :func:`resolve_protocol`)."""
    if size == 1:
        if backend == "gpu":
            from ..transport.solo_gpu import SoloGpuCommunicator

            return SoloGpuCommunicator()
        return SelfCommunicator()
    if protocol == "auto":
        raise ValueError("protocol 'auto' names no transport: resolve it first (resolve_protocol)")
    connect = resolve((get_transport(protocol) if isinstance(protocol, str) else protocol).connect)
    return connect(rank, size, session, timeout=timeout, backend=backend, config=config)


def _engine_class(backend: str, comm, config: SearchConfig | None = None, partition: str = "1d") -> type:
    """The engine of a 2D or delegates partition (host counters, on CPU and GPU ranks alike); for 1D, the
    device-counter engine for GPU ranks whose communicator has device rounds (NCCL, UCX, or one GPU alone),
    unless ``config.device_counters`` is off (to measure the host-counter engine there), and the host-counter
    engine otherwise."""
    if partition == "2d":
        from .grid_engine import GridEngine

        return GridEngine
    if partition == "delegates":
        from .delegate_engine import DelegateEngine

        return DelegateEngine
    if backend == "gpu" and comm.device_counters and (config or SearchConfig()).device_counters:
        from .device_engine import DeviceEngine

        return DeviceEngine
    return Engine


@dataclass
class Placement:
    """Where the ranks of a session run: rank ``r`` on ``workers[r]``, their arrays on ``backend`` ("cpu" or
    "gpu").  A :class:`~breadth.bfs.sharded_graph.ShardedGraph` is one (its shards' placement)."""

    client: Any
    workers: list[str]
    backend: str = "cpu"

    @property
    def nparts(self) -> int:
        return len(self.workers)


@dataclass
class RankContext:
    """What a rank's function gets beside its communicator: the session's tunables, its backend, and when
    the rank's task started (``time.perf_counter()``, so that it can tell its set-up time)."""

    config: SearchConfig
    backend: str
    started: float


class SessionRerun(RuntimeError):
    """A rank's task was asked to run a second time: Dask recomputes what a lost worker held from the tasks
    that made it, and a session's ranks cannot run again without their peers (which ran once, or whose
    worker is gone), so the task stops at once rather than wait for them until the connection timeout."""


#: keys of the rank tasks this worker process has started, the latest ones (a rerun comes while the data
#: it would rebuild is still wanted, soon after the worker's loss)
_STARTED: dict[str, None] = {}
_STARTED_KEEP = 4096
_STARTED_LOCK = threading.Lock()


def _first_run(session: str, rank: int) -> None:
    """Note that rank ``rank`` of ``session`` runs here; :class:`SessionRerun` when it ran here before."""
    key = f"{session}-rank-{rank}"
    with _STARTED_LOCK:
        if key in _STARTED:
            raise SessionRerun(f"rank {rank} of session {session} was asked to run again: Dask is rebuilding "
                               "results that a lost worker held, and a session cannot run without its peers; "
                               "prepare the graph (or rerun the work) again")
        _STARTED[key] = None
        while len(_STARTED) > _STARTED_KEEP:
            del _STARTED[next(iter(_STARTED))]


def _rank_main(fn: Callable, rank_args: tuple, rank: int, size: int, session: str, protocol: str | Transport,
               timeout: float, backend: str, config: SearchConfig | None = None) -> Any:
    """One rank's task: connect to the peers, run ``fn(comm, context, *rank_args)``, close; once (a rerun
    raises :class:`SessionRerun`)."""
    _first_run(session, rank)
    config = config or SearchConfig()
    t0 = time.perf_counter()
    # A rank thread waits on its peers many times a level, releasing the GIL each time; another busy
    # thread of the worker (UCX progress, the event loop) then keeps it for up to the switch interval
    # (5 ms by default), which measured as milliseconds per level on two GPUs.  Hand it back sooner.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, _SWITCH_S))
    affinity = _widen_affinity() if config.rank_affinity == "all" else None
    resume = _pause_profiler()
    try:
        comm = make_communicator(rank, size, session, protocol, timeout, backend, config)
        try:
            return fn(comm, RankContext(config, backend, t0), *rank_args)
        finally:
            comm.close()
    finally:
        resume()
        sys.setswitchinterval(interval)
        if affinity is not None:
            os.sched_setaffinity(0, affinity)


def _engine_rank(comm, ctx: RankContext, shard, body: Callable, args: tuple, engine_kw: dict,
                 engine_class: type | None) -> Any:
    """A search session's rank: its engine over ``shard``, then ``body(engine, setup_seconds, *args)``."""
    engine = None
    try:
        cls = engine_class or _engine_class(ctx.backend, comm, ctx.config, shard.partitioning.kind)
        engine = cls(shard, comm, backend=ctx.backend, config=ctx.config, **engine_kw)
        return body(engine, time.perf_counter() - ctx.started, *args)
    finally:
        if engine is not None:
            engine.close()  # before the communicator: its captured graphs hold NCCL resources


_SWITCH_S = 2e-5

_paused = {"ranks": 0, "callbacks": []}  # this worker's ranks now running, the profiler callbacks they stopped
_paused_lock = threading.Lock()


def _pause_profiler() -> Callable[[], None]:
    """Stop the Dask worker's statistical profiler while this worker runs ranks; returns the call that
    starts it again once its last rank ends.  Every 10 ms the profiler walks the stack of each thread that
    runs a task, on the event loop, holding the GIL that the rank thread takes back after every wait; a
    rank held up so holds up every peer, and the samples of a rank's loop serve no one.  Outside a worker (a
    rank on the client's thread) nothing changes."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except ValueError:  # not on a worker
        return lambda: None
    with _paused_lock:
        _paused["ranks"] += 1
        if _paused["ranks"] == 1:
            pcs = [worker.periodic_callbacks.get(k) for k in ("profile", "profile-cycle")]
            _paused["callbacks"] = [pc for pc in pcs if pc is not None and pc.is_running()]
            for pc in _paused["callbacks"]:  # tornado's callbacks belong to the event loop's thread
                worker.loop.add_callback(pc.stop)

    def resume() -> None:
        with _paused_lock:
            _paused["ranks"] -= 1
            if _paused["ranks"] == 0:
                for pc in _paused["callbacks"]:
                    worker.loop.add_callback(pc.start)
                _paused["callbacks"] = []

    return resume


def _widen_affinity():
    """Let the rank thread (and the threads it starts, e.g. NCCL's) run on every CPU the process may use
    (dask-cuda pins a worker to the CPUs near its GPU); returns the previous set, or None if unchanged."""
    try:
        old = os.sched_getaffinity(0)
        os.sched_setaffinity(0, range(os.cpu_count() or 1))  # the kernel keeps the cgroup's CPUs of these
        return old
    except (AttributeError, OSError):
        return None


def run_session(graph, body: Callable, *args, protocol: str = "auto", timeout: float = 60.0,
                engine_kw: dict | None = None, gather: bool = True, engine_class: type | None = None,
                config: SearchConfig | None = None) -> list[Any]:
    """Run ``body`` on every rank of ``graph`` at once: one search session.

    Each rank's task, on the worker that holds its shard, connects to its peers, builds its engine over the
    shard and calls ``body(engine, setup_seconds, *args)``; the scheduler sees the session start and end,
    never a level.  ``body`` must make the same collective calls on every rank.

    If a rank raises, or its worker dies, the other ranks lose their connections to it and stop (at once
    for a closed connection, within ``timeout`` seconds for a silent peer); the session's tasks are then
    cancelled and :class:`RankError` names the rank that failed first and why.  The cluster can run the
    next session (a graph whose worker died must be prepared again).

    Parameters
    ----------
    graph : ShardedGraph
        The prepared graph; rank ``r`` runs on ``graph.workers[r]``.
    body : callable
        ``body(engine, setup_seconds, *args)``: what each rank runs; ``setup_seconds`` is the time its
        connection and engine took.  Its return value must pickle (it comes back to the client).
    *args
        Passed to ``body`` on every rank.
    protocol : str
        The ranks' transport: ``"auto"``, ``"tcp"``, ``"ucx"`` or ``"nccl"`` (one rank needs none).
        ``"auto"``: NCCL between GPU ranks on distinct GPUs, UCX for GPU ranks sharing one, TCP otherwise.
    timeout : float
        Seconds a rank waits for a silent peer (at connection and in every round) before it fails.
    engine_kw : dict, optional
        Keyword arguments of the engine's constructor.
    gather : bool
        Whether to bring the ranks' results to the client; False returns their futures instead.
    engine_class : type, optional
        The engine each rank builds (default: the single-search engine for the backend and partitioning;
        :class:`~breadth.bfs.engine.batch_engine.BatchEngine` for batched searches).
    config : SearchConfig, optional
        The search's tunables, the same on every rank (default: :meth:`SearchConfig.from_config` here, on the
        client).

    Returns
    -------
    list
        ``body``'s result of each rank, in rank order; with ``gather=False`` the finished futures of those
        results, left on the ranks' workers.

    Raises
    ------
    RankError
        When a rank failed: its exception, or its worker's death, is the ``cause``.
    ValueError
        For an unknown ``protocol``, ``"nccl"`` on CPU ranks, or a worker hosting more ranks than it has
        threads (the ranks could never all run).

    Examples
    --------
    >>> from breadth.bfs import run_session
    >>> def reached(engine, setup_s, root):
    ...     engine.search(root)                  # collective: every rank searches
    ...     return int((engine.level >= 0).sum())  # this rank's reached vertices
    >>> sum(run_session(g, reached, 0))           # doctest: +SKIP
    """
    args_of = [(graph.shards[r], body, args, engine_kw or {}, engine_class) for r in range(graph.nparts)]
    return run_ranks(graph, _engine_rank, args_of, protocol=protocol, timeout=timeout, gather=gather,
                     config=config)


def run_ranks(placement, fn: Callable, rank_args: list[tuple], *, protocol: str = "auto", timeout: float = 60.0,
              gather: bool = True, config: SearchConfig | None = None, stage: str = "search") -> list[Any]:
    """Run ``fn(comm, context, *rank_args[r])`` on every rank of ``placement`` at once, each over a
    communicator connected to the others: the machinery of a search session, for any collective work.

    Parameters
    ----------
    placement : Placement or ShardedGraph
        Rank ``r`` runs on ``placement.workers[r]``, its arrays on ``placement.backend``.
    fn : callable
        ``fn(comm, context, *rank_args[r])``, ``context`` a :class:`RankContext`; it must make the same
        collective calls on every rank.  Its return value is the rank's result.
    rank_args : list of tuple
        Each rank's arguments (futures in them are resolved on the rank's worker, as a task's are).
    protocol, timeout, gather, config
        As :func:`run_session`'s.
    stage : str
        What the ranks do, for the error that names a lost worker's stage.

    Returns
    -------
    list
        Each rank's result in rank order; with ``gather=False`` their finished futures, left on the ranks'
        workers.

    Raises
    ------
    RankError
        When a rank failed: its exception, or its worker's death, is the ``cause``.
    """
    from .. import worker_deaths, worker_loss

    worker_deaths.watch()
    # inside a guard against lost workers (the breadth command's, graph500's), this loop reports the loss
    # itself, naming the rank: the guard only names the stage
    with worker_loss.stage(placement.client, stage, cancel=False):
        return _run_ranks(placement, fn, rank_args, protocol, timeout, gather, config, stage)


def _run_ranks(placement, fn: Callable, rank_args: list[tuple], protocol: str, timeout: float, gather: bool,
               config: SearchConfig | None, stage: str) -> list[Any]:
    from distributed import wait

    client, size = placement.client, placement.nparts
    started = time.monotonic()
    protocol = session_protocol(placement, protocol)
    # the ranks get the transport's record, not its name: a transport registered in this process only (a
    # user's, before the search) connects on workers that never imported its registration
    transport = TRANSPORTS.get(protocol, protocol)
    workers = _workers_info(client)  # their threads, and their pids, whose end a nanny's line would name
    _check_threads(workers, placement)
    session = f"breadth-{uuid.uuid4().hex[:12]}"
    config = config if config is not None else SearchConfig.from_config()
    pids = {w: info.get("pid") for w, info in workers.items()}
    futs = [client.submit(_rank_main, fn, rank_args[r], r, size, session, transport, timeout, placement.backend,
                          config, key=f"{session}-rank-{r}", workers=[placement.workers[r]],
                          allow_other_workers=False, pure=False)
            for r in range(size)]
    while True:
        if any(f.status in ("error", "cancelled", "lost") for f in futs):
            break
        pending = [f for f in futs if f.status != "finished"]
        if not pending:
            return client.gather(futs) if gather else futs
        try:
            wait(pending, timeout=_POLL_S, return_when="FIRST_COMPLETED")
        except TimeoutError:
            pass
        # A rank whose worker died never finishes (its task is pinned to that worker): look for it,
        # for the case where no peer notices (one rank, or peers inside a long local step).
        if _dead_ranks(client, placement):
            break
    rank, cause = _first_failure(client, placement, futs, started, stage, pids)
    if all(f.status == "finished" for f in futs):  # every rank came through: nothing failed after all
        return client.gather(futs) if gather else futs
    client.cancel(futs, force=True)
    raise RankError(rank, placement.workers[rank], cause) from cause


_POLL_S = 0.5
_GRACE_S = 2.0  # how long the other ranks may take to report their own errors once one rank has failed


def _check_threads(workers: dict, graph) -> None:
    """Refuse at once a placement whose ranks cannot all run together (they would wait for each other
    until the connection timeout): a worker (``workers``: the scheduler's records by address) needs one
    thread per rank it hosts."""
    from collections import Counter

    nthreads = {w: info.get("nthreads", 0) for w, info in workers.items()}
    for w, k in Counter(graph.workers).items():
        if w in nthreads and nthreads[w] < k:
            raise ValueError(f"{k} ranks of this graph are placed on worker {w}, which has {nthreads[w]} "
                             "thread(s); the ranks of a session run at once, each on its own thread: prepare "
                             "the graph with nparts <= the number of workers, or give the workers more threads")


class WorkerDied(RuntimeError):
    """The worker running a rank left the cluster (process killed, crashed or lost) during the search."""


def _workers_info(client) -> dict:
    from ..dask_workers import workers_info

    return workers_info(client)


def _dead_ranks(client, graph) -> list[int]:
    alive = set(_workers_info(client))
    return [r for r, w in enumerate(graph.workers) if w not in alive]


def _first_failure(client, graph, futs, started: float, stage: str = "search",
                   pids: dict | None = None) -> tuple[int, BaseException]:
    """The rank that failed first, and its cause, once every live rank has settled.

    A rank's own exception (anything but ``CommError`` or :class:`SessionRerun`, which follow a peer's or a
    worker's loss) comes first, then a rank whose worker died -- the one whose process ended first where the
    nannies' lines tell (``pids``: each worker's process id at the session's start), since a rank whose peer
    is killed may be ended by its transport after it -- then the peer named by the earliest ``CommError`` (a
    rank that hangs), then the lowest failed rank.
    """
    from ..transport.communicator import CommError

    # By now some rank has failed.  The others settle at once (they see its closed connections) unless
    # one is stalled -- and then its peers have already waited `timeout` for it (that is how the failure
    # came), so waiting another `timeout` for it would only delay the report (to twice the timeout); a
    # stalled rank does not settle anyway.  A short grace lets the cascade land.
    deadline = time.monotonic() + _GRACE_S
    while True:
        dead = _dead_ranks(client, graph)
        unsettled = [r for r, f in enumerate(futs) if f.status == "pending" and r not in dead]
        if not unsettled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    errors: dict[int, BaseException] = {}
    for r, f in enumerate(futs):
        if f.status == "error":
            errors[r] = f.exception()
        elif f.status in ("cancelled", "lost"):
            errors[r] = RuntimeError(f"rank task {f.status}")
    own = [r for r, e in errors.items() if not isinstance(e, (CommError, SessionRerun))]
    if own:
        return own[0], errors[own[0]]
    if dead:
        from .. import worker_deaths

        ended = worker_deaths.by_pid(started)
        own = [ended.get((pids or {}).get(graph.workers[r])) for r in dead]
        first_dead = min(range(len(dead)), key=lambda i: (own[i] is None, own[i][0] if own[i] else 0, dead[i]))
        rank, worker = dead[first_dead], graph.workers[dead[first_dead]]
        first = errors.get(min(errors)) if errors else None
        seen = f"; rank {min(errors)} saw: {first}" if first is not None else ""
        if own[first_dead] is not None and len(dead) > 1 and worker not in worker_deaths.ended_for_memory(started):
            # its own line, not every death's
            from ..worker_loss import describe

            how = describe(worker, stage, own[first_dead][1], None)
        else:
            how = _how_worker_died(client, worker, started, deadline, stage)
        return rank, WorkerDied(how + seen)
    # A silent or vanished rank: the first rank to notice names it (later errors are the cascade of
    # ranks closing their connections after their own failure).
    noticed = sorted((e for e in errors.values() if getattr(e, "peer", None) is not None), key=lambda e: e.when)
    if noticed:
        return noticed[0].peer, noticed[0]
    if errors:
        return min(errors), errors[min(errors)]
    return 0, RuntimeError("session failed without an error from any rank")


def _how_worker_died(client, worker: str, started: float, deadline: float, stage: str = "search") -> str:
    """``worker ... left the cluster during the search (process 4121 killed by signal 9 (SIGKILL))``, or ``was
    ended by its nanny during the search: its memory ... passed its limit``: how its process ended where
    known (:func:`~breadth.bfs.worker_loss.how_it_ended`: its nanny's line where the nannies run in this
    process, waited for until ``deadline`` as the nanny may notice the exit after the scheduler has; its
    nanny's memory event at the scheduler)."""
    from ..worker_loss import describe, how_it_ended

    how, memory = how_it_ended(client, worker, started, deadline=deadline)
    return describe(worker, stage, how, memory)


class RankError(RuntimeError):
    """A search session failed on one rank: :func:`run_session` (and so every search) raises it.

    Parameters
    ----------
    rank : int
        The rank that failed first.
    worker : str
        The address of its Dask worker.
    cause : BaseException
        Why: the rank's own exception, ``CommError`` for a peer it lost, or ``WorkerDied`` when its worker
        left the cluster.

    Attributes
    ----------
    rank, worker, cause
        As given.

    Examples
    --------
    >>> from breadth.bfs import RankError
    >>> err = RankError(1, "tcp://10.0.0.2:40001", MemoryError("shard of 12 GB"))
    >>> str(err)
    'BFS rank 1 on worker tcp://10.0.0.2:40001 failed: MemoryError: shard of 12 GB'
    >>> err.rank, type(err.cause).__name__
    (1, 'MemoryError')
    """

    def __init__(self, rank: int, worker: str, cause: BaseException):
        super().__init__(f"BFS rank {rank} on worker {worker} failed: {type(cause).__name__}: {cause}")
        self.rank, self.worker, self.cause = rank, worker, cause
