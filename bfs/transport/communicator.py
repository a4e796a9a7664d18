"""The exchange interface between BFS ranks, and the one-rank implementation.

Transports (TCP sockets, UCX) implement :class:`Communicator`; the engine only calls these methods, so
adding a transport never touches the search.  Arrays are NumPy on CPU ranks and CuPy on GPU ranks.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable

import numpy as np


class CommError(RuntimeError):
    """A peer rank failed, closed its connection or did not answer in time.

    ``peer`` is the rank this one lost (``None`` when unknown) and ``when`` the wall-clock time it was
    noticed (``time.time()``); both survive pickling, so the client can tell the rank that failed first
    (the peer of the earliest error) from the ranks that merely lost it.
    """

    def __init__(self, message: str, peer: int | None = None, when: float | None = None):
        super().__init__(message)
        self.peer = peer
        self.when = time.time() if when is None else when

    def __reduce__(self):
        return (type(self), (str(self), self.peer, self.when))


class Communicator(ABC):
    """Collective operations among the ``size`` ranks of one search session.

    Optional features are declared here and overridden by the transports that have them:
    ``device_counters`` -- device rounds (counters, pair exchanges and all-gathers of device buffers in
    the order of the GPU's stream, and ``device_buffer`` for their receive buffers), which the device
    engine needs (:mod:`breadth.bfs.transport.nccl`, :mod:`breadth.bfs.transport.ucx`,
    :mod:`breadth.bfs.transport.solo_gpu`);
    ``capturable_rounds`` -- those device rounds are queued on the CUDA stream, so the device engine may
    capture its levels in CUDA graphs (NCCL, one GPU alone; UCX's rounds run on the host);
    ``peer_memory`` -- those rounds write straight into the peers' memory, so a round moves only its rows
    (:mod:`breadth.bfs.transport.peer_memory`);
    ``capped_rounds`` -- :meth:`open_capped` / :meth:`capped_round`: host words into receives of a fixed
    capacity posted a round ahead, whose counts travel in the words themselves (UCX: the device engine's
    one-round top-down levels, :mod:`breadth.bfs.engine.one_round_levels`);
    :meth:`open_shared` -- device buffers the peers write into directly (UCX between GPU ranks of one host),
    None where a transport has none."""

    rank: int
    size: int
    device_counters: bool = False
    capturable_rounds: bool = False
    peer_memory: bool = False
    capped_rounds: bool = False

    def open_capped(self, words: int) -> dict[int, tuple[np.ndarray, ...]]:
        """Make :meth:`capped_round` ready for messages of at most ``words`` int64 (every rank the same);
        returns each peer's receive buffers, the arrays :meth:`capped_round` hands back in turn (so that a
        reader of them, a captured GPU step, can hold their addresses)."""
        raise NotImplementedError(f"{type(self).__name__} has no capped rounds")

    def capped_round(self, sends: dict[int, np.ndarray], device: tuple[dict, dict | Callable] | None = None
                     ) -> dict[int, np.ndarray]:
        """``sends[p]`` (1-D int64 host words, at most the opened ``words``) to every peer ``p``; returns each
        peer's receive buffer (``words`` int64 whose first words are the ones it sent: the words say how many
        of them count).  A returned buffer stays valid until the round after the next.  ``device``:
        ``(sends, recvs)`` of :meth:`exchange_device`, moved in the same round; the words are read after
        the round's wait for the stream.  ``recvs`` may be a function of the peers' words (the dict this
        returns) giving the receives, where the words say which device arrays follow."""
        raise NotImplementedError(f"{type(self).__name__} has no capped rounds")

    def open_shared(self, shape, dtype) -> tuple[Any, dict[int, int]] | None:
        """A zeroed device array that every peer maps into its own process, and this process's device
        address of each peer's (``{peer: address}``), for kernels and copies that write straight into a
        peer's array; None where the ranks cannot (collective: every rank calls it with the same shape and
        dtype, in the same order, and all get arrays or all get None).  The writer orders its writes
        against the owner's reads through its rounds: its stream waited for before its next message, the
        owner's reads done before the owner's message that lets the writer go on."""
        return None

    @abstractmethod
    def alltoallv(self, send: list[Any]) -> list[Any]:
        """Personalized all-to-all: ``send[r]`` goes to rank ``r``; returns what each rank sent here."""

    @abstractmethod
    def allgather(self, arr: Any) -> list[Any]:
        """Every rank's ``arr``, in rank order."""

    @abstractmethod
    def allreduce(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Element-wise reduction (``sum``, ``max`` or ``min``) of a small int64/float64 host vector."""

    def allgatherv(self, arr: Any, counts: list[int]) -> list[Any]:
        """Every rank's 1-D ``arr`` in rank order, where every rank already knows that rank ``r`` sends
        ``counts[r]`` elements of ``arr``'s dtype (transports may then skip the size header)."""
        return self.allgather(arr)

    def exchange_among(self, send: dict[int, Any]) -> dict[int, Any]:
        """One round within a group of ranks (a grid row or column of a 2D partition): the keys of ``send``
        are the group, this rank among them, and ``send[p]`` goes to ``p``; returns what each member sent
        here (this rank's own entry as given, never sent: it may be any object).  Every rank of the session
        calls it in the same round, each with its own group's keys.  This default sends empty arrays to the
        ranks outside the group (a header, no payload); transports that can skip them do."""
        others = {p: a for p, a in send.items() if p != self.rank}
        like = next(iter(others.values()), None)
        empty = like[:0] if like is not None else np.empty(0, np.int64)
        got = self.alltoallv([others.get(r, empty) for r in range(self.size)])
        out = {p: got[p] for p in others}
        out[self.rank] = send[self.rank]
        return out

    def barrier(self) -> None:
        self.allreduce(np.zeros(1, np.int64))

    def close(self) -> None:
        pass

    def bytes_sent(self) -> int:
        """Payload bytes this rank has sent so far (for per-level breakdowns)."""
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


REDUCE_OPS = {"sum": np.sum, "max": np.max, "min": np.min}


class PeerCommunicator(Communicator):
    """Collectives for transports that move one message to every peer per round (TCP sockets, UCX
    endpoints).  Subclasses implement :meth:`_exchange` and count payload bytes in ``_sent``."""

    _sent: int = 0

    @abstractmethod
    def _exchange(self, send: dict[int, Any]) -> dict[int, Any]:
        """One round: ``send[p]`` goes to every peer ``p``; returns what each peer sent here."""

    def alltoallv(self, send: list[Any]) -> list[Any]:
        """``send[r]`` (an array of any dtype and shape) goes to rank ``r``; returns what each rank sent."""
        if len(send) != self.size:
            raise ValueError(f"alltoallv needs {self.size} arrays, got {len(send)}")
        got = self._exchange({p: send[p] for p in range(self.size) if p != self.rank})
        got[self.rank] = send[self.rank]
        return [got[r] for r in range(self.size)]

    def exchange_among(self, send: dict[int, Any]) -> dict[int, Any]:
        """See :meth:`Communicator.exchange_among`; :meth:`_exchange_among` moves it."""
        got = self._exchange_among({p: a for p, a in send.items() if p != self.rank})
        got[self.rank] = send[self.rank]
        return {p: got[p] for p in send}

    def _exchange_among(self, send: dict[int, Any]) -> dict[int, Any]:
        """One round with the peers that are keys of ``send`` only.  This default (for transports whose round
        takes every peer) sends the others empty arrays of the same dtype."""
        like = next(iter(send.values()), np.empty(0, np.int64))[:0]
        got = self._exchange({p: send.get(p, like) for p in range(self.size) if p != self.rank})
        return {p: got[p] for p in send}

    def allgather(self, arr: Any) -> list[Any]:
        """Every rank's ``arr`` in rank order (the array is sent once to each peer)."""
        return self.alltoallv([arr] * self.size)

    def allreduce(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Element-wise ``sum``/``max``/``min`` of a small host vector over all ranks (same dtype back)."""
        if op not in REDUCE_OPS:
            raise ValueError(f"unknown op {op!r}: expected one of {sorted(REDUCE_OPS)}")
        v = np.asarray(values)
        return REDUCE_OPS[op](np.stack(self.allgather(v)), axis=0).astype(v.dtype, copy=False)

    def bytes_sent(self) -> int:
        """Payload bytes this rank has sent to its peers so far (headers not counted)."""
        return self._sent


class SelfCommunicator(Communicator):
    """The degenerate session of one rank: every collective is the identity."""

    def __init__(self):
        self.rank, self.size = 0, 1

    def alltoallv(self, send):
        return list(send)

    def allgather(self, arr):
        return [arr]

    def allreduce(self, values, op="sum"):
        return np.asarray(values)

    def exchange_among(self, send):
        return dict(send)


def task_cancelled_probe() -> Callable[[], bool] | None:
    """A callable telling whether the Dask task running this thread was cancelled (``None`` outside a
    task): the client cancels a session's rank tasks once a rank failed or its worker died, a signal that
    reaches the surviving ranks even when no socket of theirs closes."""
    try:
        from distributed import get_worker
        from distributed.worker import thread_state

        worker, key = get_worker(), thread_state.key
    except Exception:  # a plain process, or not on a task thread
        return None

    def cancelled() -> bool:
        try:
            ts = worker.state.tasks.get(key)
        except Exception:
            return False
        return ts is None or ts.state in ("cancelled", "released", "forgotten")

    return cancelled
