"""Search sessions: one long-running task per rank, on the worker that holds the rank's shard.

The client submits ``P`` rank tasks together; each builds its communicator (peers find each other through
Dask once, at start), runs the whole batch of roots, and returns its part of the results.  The scheduler
sees the session start and end, never a level.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

from .communicator import SelfCommunicator
from .engine import Engine


def make_communicator(rank: int, size: int, session: str, protocol: str, timeout: float):
    """The communicator of ``rank`` in ``session`` (self for one rank; TCP or UCX peers otherwise)."""
    if size == 1:
        return SelfCommunicator()
    if protocol == "tcp":
        from .tcp_comm import TCPCommunicator

        return TCPCommunicator.connect(rank, size, session, timeout=timeout)
    if protocol == "ucx":
        from .ucx_comm import UCXCommunicator

        return UCXCommunicator.connect(rank, size, session, timeout=timeout)
    raise ValueError(f"unknown protocol {protocol!r}: expected 'tcp' or 'ucx'")


def _rank_main(shard, rank: int, size: int, session: str, protocol: str, timeout: float, backend: str,
               engine_kw: dict, body: Callable, args: tuple) -> Any:
    t0 = time.perf_counter()
    comm = make_communicator(rank, size, session, protocol, timeout)
    try:
        engine = Engine(shard, comm, backend=backend, **engine_kw)
        setup = time.perf_counter() - t0
        return body(engine, setup, *args)
    finally:
        comm.close()


def run_session(graph, body: Callable, *args, protocol: str = "tcp", timeout: float = 60.0,
                engine_kw: dict | None = None) -> list[Any]:
    """Run ``body(engine, setup_seconds, *args)`` on every rank of ``graph``; return the ranks' results.

    ``body`` must make the same collective calls on every rank.  If a rank fails, its peers fail within
    ``timeout`` seconds and the first error is raised here, naming the rank.
    """
    from distributed import as_completed, wait

    client, size = graph.client, graph.nparts
    session = f"breadth-{uuid.uuid4().hex[:12]}"
    futs = [client.submit(_rank_main, graph.shards[r], r, size, session, protocol, timeout, graph.backend,
                          engine_kw or {}, body, args, key=f"{session}-rank-{r}", workers=[graph.workers[r]],
                          allow_other_workers=False, pure=False)
            for r in range(size)]
    rank_of = {f.key: r for r, f in enumerate(futs)}
    for f in as_completed(futs):
        if f.status != "finished":
            r = rank_of[f.key]
            exc = f.exception() if f.status == "error" else RuntimeError(f"rank task {f.status}")
            try:  # the peers fail within `timeout` once this rank's connections drop
                wait(futs, timeout=2 * timeout)
            except Exception:
                pass
            raise RankError(r, graph.workers[r], exc) from exc
    return client.gather(futs)


class RankError(RuntimeError):
    """A search session failed on one rank."""

    def __init__(self, rank: int, worker: str, cause: BaseException):
        super().__init__(f"BFS rank {rank} on worker {worker} failed: {type(cause).__name__}: {cause}")
        self.rank, self.worker, self.cause = rank, worker, cause
