"""A worker lost while breadth waits on it: noticed within a second, reported as one error naming the worker,
how its process ended and the stage.

Every owner, shard and rank task of breadth is pinned to its worker (``workers=[address],
allow_other_workers=False``): a shard lives where it was built, and an owner reads its parcels there.  Dask
does not fail such a task when its worker leaves the cluster: the task waits for a worker of that address,
which a restarted worker (a new port) never is, and whoever waits on it waits forever (a worker SIGKILLed
during ``breadth bench --scale 20 --workers 2`` hung the command for as long as it was left to run).
Unpinned tasks are recomputed elsewhere, but a graph prepared without one of its workers would have fewer
shards than planned.  So breadth does not recover: a worker lost while it matters ends the work with
:class:`WorkerLost`, in bounded time.

:func:`watch_workers` is the guard: a thread of this process asks the scheduler every :data:`POLL_S` seconds
which workers are in the cluster (as a search's loop does, :func:`~breadth.bfs.engine.session.run_session`).
When one of those it watches has gone, the futures made inside the guard are cancelled -- a wait, gather or
result on them returns at once -- and the guard raises :class:`WorkerLost` in their place.  Guards nest
(``breadth ingest`` watches its whole run, :func:`~breadth.pipeline.prepare` and
:func:`~breadth.io.shard_store.write_store` their own parts; one thread serves them all), and each names the
stage it is in.

How the process ended (:func:`how_it_ended`): where the nannies run in this process (the ``breadth`` command's
local cluster) their lines (:mod:`breadth.bfs.worker_deaths`) say the signal or exit status, and whether the
nanny itself ended the worker for passing its memory limit; for any cluster the scheduler keeps its nannies'
``worker-restart-memory`` events.  A worker that no memory event accounts for was not ended by its memory
limit, and the error says what is known: the signal, or the memory it last reported against its limit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator

POLL_S = 0.5  #: how often the guard's thread asks the scheduler for its workers (one small message)
GRACE_S = 2.0  #: how long a loss's report waits for the nanny's line of how the process ended


class WorkerLost(RuntimeError):
    """A worker that the work depends on left the cluster (its process killed, crashed, ended by its nanny
    for its memory limit, or its host lost) during ``stage``: what ``prepare``, ``read_edges``,
    ``write_store``, ``load_store`` and the ``breadth`` commands raise within about a second of the loss.

    Parameters
    ----------
    worker : str
        The worker's address (kept as the attribute ``worker``, as are the others).
    stage : str
        What was running: "generation", "reading", "relabeling", "shuffle", "build", "store write", ...
    how : str
        How its process ended, where known (``"process 4121 killed by signal 9 (SIGKILL)"``), else ``""``.
    memory : tuple of (int or None, int or None), optional
        ``(rss, limit)`` in bytes when its nanny ended it for passing its memory limit, else ``None``.
    before : bool
        It had gone before the stage began.

    Examples
    --------
    >>> from breadth.bfs import WorkerLost
    >>> e = WorkerLost("tcp://10.0.0.2:4001", "build", "process 4121 killed by signal 9 (SIGKILL)")
    >>> e.stage, str(e).split(";")[0]
    ('build', 'worker tcp://10.0.0.2:4001 left the cluster during the build (process 4121 killed by signal 9 (SIGKILL))')
    """

    def __init__(self, worker: str, stage: str, how: str = "",
                 memory: tuple[int | None, int | None] | None = None, before: bool = False):
        self.worker, self.stage, self.how, self.memory, self.before = worker, stage, how, memory, before
        super().__init__(f"{describe(worker, stage, how, memory, before)}; the work that depended on it "
                         "cannot finish")


def describe(worker: str, stage: str, how: str = "", memory: tuple[int | None, int | None] | None = None,
             before: bool = False) -> str:
    """What happened to ``worker``, in words (see :class:`WorkerLost`).

    >>> describe("tcp://10.0.0.2:4001", "build", "process 4121 killed by signal 9 (SIGKILL)")
    'worker tcp://10.0.0.2:4001 left the cluster during the build (process 4121 killed by signal 9 (SIGKILL))'
    >>> describe("tcp://10.0.0.2:4001", "shuffle", memory=(440 << 20, 400 << 20))
    'worker tcp://10.0.0.2:4001 was ended by its nanny during the shuffle: its memory (440 MiB) passed its limit (400 MiB)'
    """
    if before:
        return f"worker {worker} had left the cluster before the {stage}"
    if memory is not None:
        rss, limit = memory
        return (f"worker {worker} was ended by its nanny during the {stage}: its memory"
                + (f" ({_mib(rss)})" if rss else "") + " passed its limit" + (f" ({_mib(limit)})" if limit else ""))
    return f"worker {worker} left the cluster during the {stage}" + (f" ({how})" if how else "")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


class Watch:
    """What a :func:`watch_workers` guard knows: the workers watched, the stages, the loss once seen."""

    def __init__(self, client, workers: Iterable[str]):
        self.client = client
        self.workers = set(workers)
        self.stages: list[list] = []  # [name, cancel] of each nested guard, innermost last
        self.started = time.monotonic()
        self.lost: tuple[str, str] | None = None  # (address, stage) of the first loss seen
        self.last: dict[str, tuple[int, int]] = {}  # (RSS, memory limit) each watched worker last reported
        self.before = set(client.futures)  # keys held before the guard: never cancelled by it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="breadth-worker-watch", daemon=True)

    @property
    def stage(self) -> str:
        """The innermost guard's stage; set it to move that guard on to its next stage."""
        return self.stages[-1][0] if self.stages else "run"

    @stage.setter
    def stage(self, name: str) -> None:
        self.stages[-1][0] = name

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.check()
                if self.lost is not None and self.stages and self.stages[-1][1]:
                    self._cancel()
            except Exception:  # noqa: BLE001 - the client closing, a scheduler slow to answer: the next poll
                continue

    def check(self) -> None:
        """Ask the scheduler now; record the first watched worker that has gone."""
        from .dask_workers import workers_info

        info = workers_info(self.client)
        for a, w in info.items():
            if a in self.workers:
                self.last[a] = (int((w.get("metrics") or {}).get("memory") or 0), int(w.get("memory_limit") or 0))
        gone = sorted(self.workers - set(info))
        if gone and self.lost is None:
            self.lost = (gone[0], self.stage)

    def _cancel(self) -> None:
        """Mark the futures made since the guard began, and not done, cancelled here in the client: every wait
        on them returns, and the tasks go from the scheduler as their futures are dropped.  Not
        ``client.cancel``: the scheduler's cancel walks each key's dependents and fails (an assertion that ends
        its handling of this client's messages) on one that no client holds, as a delayed graph's inner
        tasks are."""
        try:
            keys = [k for k in list(self.client.futures) if k not in self.before]
        except RuntimeError:  # the dict changed while copied: the next poll
            return
        if keys:
            self.before.update(keys)
            worker, stage = self.lost
            self.client.loop.add_callback(_cancel_here, self.client, keys,
                                          f"worker {worker} left the cluster during the {stage}")

    def error(self) -> WorkerLost:
        """The :class:`WorkerLost` of the loss seen (:func:`how_it_ended` says how)."""
        worker, stage = self.lost
        how, memory = how_it_ended(self.client, worker, self.started, self.last.get(worker))
        return WorkerLost(worker, stage, how, memory)


def _cancel_here(client, keys: list, msg: str) -> None:
    """On the client's event loop (its futures' states belong to it): cancel the pending ``keys``."""
    for k in keys:
        state = client.futures.get(k)
        if state is not None and state.status == "pending":
            state.cancel(reason="worker-lost", msg=msg)


_watches: dict[tuple[int, int], Watch] = {}
_lock = threading.Lock()


def current(client) -> Watch | None:
    """The watch of the guard that this thread runs inside for ``client``, or ``None``."""
    with _lock:
        return _watches.get((id(client), threading.get_ident()))


@contextlib.contextmanager
def watch_workers(client, stage: str, workers: Iterable[str] | None = None, *,
                  cancel: bool = True) -> Iterator[Watch]:
    """Run the body while watching ``workers`` (default: every worker in the cluster now); a loss of one
    raises :class:`WorkerLost` naming it, how its process ended and the stage (``watch.stage = "build"``
    moves on), within about a second, whatever the body was waiting on.

    Nested in another guard of the same client and thread, it shares that guard's watch: its ``workers`` are
    watched too (one already gone raises at once: the work depends on it) and ``stage`` names what runs
    until it ends.  On a loss the futures made inside the outermost guard are cancelled, unless the
    innermost guard's ``cancel`` is False (a search: its own loop notices its ranks' workers, and its
    :class:`~breadth.bfs.engine.session.RankError` names the rank).  Once a loss is known, a body that raises
    (a cancelled future's error, Dask's ``KilledWorker``, a closed connection) or returns raises
    :class:`WorkerLost` instead, unless its error names the lost worker already (``.worker``); an exception
    with no loss behind it passes unchanged.

    >>> with watch_workers(client, "build") as watch:          # doctest: +SKIP
    ...     shards = [client.submit(build, r, workers=[w], allow_other_workers=False) for r, w in ...]
    ...     wait(shards)
    """
    from . import worker_deaths
    from .dask_workers import workers_info

    worker_deaths.watch()
    key = (id(client), threading.get_ident())
    watch = current(client)
    own = watch is None
    if own:
        present = set(workers_info(client))
        watch = Watch(client, present if workers is None else workers)
        missing = sorted(watch.workers - present)
    else:
        extra = set(workers or ()) - watch.workers
        missing = sorted(extra - set(workers_info(client))) if extra else []
        watch.workers |= extra
    if missing:  # a worker the work depends on was gone before it began
        raise WorkerLost(missing[0], stage, before=True)
    watch.stages.append([stage, cancel])
    if own:
        with _lock:
            _watches[key] = watch
        watch._thread.start()
    try:
        yield watch
        if watch.lost is None and own:
            watch.check()  # a loss in the last half second: the result may lack its worker's part
    except BaseException as e:
        if isinstance(e, (KeyboardInterrupt, SystemExit, GeneratorExit)) or \
                getattr(e, "worker", None) == (watch.lost or ("",))[0]:
            raise
        if watch.lost is None:
            with contextlib.suppress(Exception):
                watch.check()  # the body may have failed of a loss that the thread has not seen yet
        if watch.lost is None or getattr(e, "worker", None) == watch.lost[0]:
            raise
        raise watch.error() from e
    finally:
        watch.stages.pop()
        if own:
            watch._stop.set()
            with _lock:
                _watches.pop(key, None)
    if watch.lost is not None:
        raise watch.error()


def stage(client, name: str, cancel: bool = True):
    """A stage of the guard this thread runs inside for ``client`` (:func:`watch_workers` nested), or
    nothing where there is none: for work that notices lost workers itself (``cancel=False``: a search)."""
    return watch_workers(client, name, cancel=cancel) if current(client) is not None else contextlib.nullcontext()


def check_all_there(client) -> None:
    """Raise the :class:`WorkerLost` of this thread's guard of ``client`` if it has seen a loss, asking the
    scheduler once more first: before a step that makes the work's result permanent (a store's manifest)."""
    watch = current(client)
    if watch is None:
        return
    if watch.lost is None:
        watch.check()
    if watch.lost is not None:
        raise watch.error()


def how_it_ended(client, worker: str, since: float, last: tuple[int, int] | None = None,
                 deadline: float | None = None) -> tuple[str, tuple[int | None, int | None] | None]:
    """``(how, memory)`` of ``worker``'s end: ``memory`` is ``(rss, limit)`` when its nanny ended it for
    passing its memory limit (the nanny's line in this process, or its ``worker-restart-memory`` event at the
    scheduler), else ``None``; ``how`` the nannies' lines of this process since ``since`` (``"process 4121
    killed by signal 9 (SIGKILL)"``, waiting for one until ``deadline`` -- by default :data:`GRACE_S` from now
    -- where nannies run in this process, as a nanny may log after the scheduler noticed), else what the
    worker last reported (``last``: ``(rss, limit)`` as the guard's last poll read them: a heartbeat and
    half a second old at most)."""
    from . import worker_deaths

    if not _nannies_here(client):
        deadline = 0.0
    elif deadline is None:
        deadline = time.monotonic() + GRACE_S
    limit = last[1] if last and last[1] else None
    while True:
        ended = worker_deaths.since(since)
        nanny = worker in worker_deaths.ended_for_memory(since)
        rss = _memory_event(client, worker)
        if ended or nanny or rss is not None or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if nanny or rss is not None:
        return "; ".join(ended), (rss, limit)
    if ended:
        return "; ".join(ended), None
    if limit:
        return (f"how its process ended is not known here; it held {_mib(last[0])} of its {_mib(limit)} memory "
                f"limit when last seen"), None
    return "", None


def _nannies_here(client) -> bool:
    """Whether nannies run in this process (a cluster object of ``client``'s, or a ``LocalCluster`` the caller
    made and connected to by address), whose lines :mod:`breadth.bfs.worker_deaths` sees."""
    if getattr(client, "cluster", None) is not None:
        return True
    from distributed import Nanny

    return bool(len(getattr(Nanny, "_instances", ())))


def _memory_event(client, worker: str) -> int | None:
    """The RSS of the scheduler's ``worker-restart-memory`` event for ``worker`` (its nanny ended it for its
    memory limit), or None."""
    try:
        events = client.get_events("worker-restart-memory")
    except Exception:  # noqa: BLE001 - a scheduler that does not answer: nothing known
        return None
    rss = [e.get("rss") for _, e in events if isinstance(e, dict) and e.get("worker") == worker]
    return int(rss[-1]) if rss and rss[-1] is not None else None
