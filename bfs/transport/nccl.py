"""NCCL transport between GPU ranks: device buffers rank to rank through ``cupy.cuda.nccl``.

The collectives run as NCCL kernels on the calling thread's current CUDA stream, so they are ordered
with the engine's own kernels and never stage payloads through the host.  A TCP mesh
(:class:`~breadth.bfs.transport.tcp.TCPCommunicator`, addresses exchanged once through Dask) comes first: it
carries NCCL's unique id from rank 0 to the others (so the id, too, goes through Dask's rendezvous once),
and afterwards serves only as a liveness channel.

Rounds: ``allreduce`` of a small host vector is one ``ncclAllReduce`` (11 µs on two NVLink H200s) plus
the two tiny copies; ``allgatherv`` with sizes the caller knows is one grouped send/recv; ``alltoallv``
of arrays whose shapes the receiver does not know is two (a fixed-size header alltoall, then the
payloads).

Small host vectors (all-reduce operands, alltoallv shape headers) go through pinned host buffers with
asynchronous copies, so an all-reduce or a header round costs one wait, not three synchronisations.

Failure model: NCCL itself would wait forever for a dead peer.  Every collective therefore ends by
polling a CUDA event (never a blocking synchronize).  The poll first spins on the event (``_SPIN_S``):
``time.sleep(0)`` costs ~55 µs on Linux (the default 50 µs timer slack), which would be most of a small
collective's latency.  Past the spin it yields the CPU between queries and peeks at the peers' TCP
sockets every ``_PEEK_EVERY_S``.  A peer whose process died closes them (EOF): once its collective has
not completed within a short grace the communicator aborts NCCL (``ncclCommAbort``, on a helper thread
joined for at most ``_ABORT_WAIT_S``) and raises :class:`CommError` naming the peer.  Inside a Dask task
it also stops once the client cancelled the session (``run_session`` does when a rank's worker died),
whatever the sockets say.  A peer that stays alive but silent is given up after ``timeout`` seconds.
"""

from __future__ import annotations

import select
import socket
import sys
import threading
import time
from typing import Any

import numpy as np

from ..search_config import SearchConfig
from .communicator import CommError, Communicator, task_cancelled_probe

_MAXDIM = 8
_HDR = 3 + _MAXDIM  # dtype code, device flag, ndim, shape[8]
_EOF_GRACE_S = 1.0  # a peer that closed its sockets may have finished the collective we are waiting on
_PEEK_EVERY_S = 0.005
_SPIN_S = 0.002  # busy-poll the event this long before yielding the CPU between queries
_CANCEL_EVERY_S = 0.2  # how often a long wait asks the Dask worker whether the session was cancelled
_ABORT_WAIT_S = 5.0  # ncclCommAbort runs on a helper thread; the failing rank waits at most this long
_STAGE = 1 << 16  # bytes of pinned host / device staging for small host vectors (grows on demand)


def _dtype_code(dt: np.dtype) -> int:
    s = dt.str.encode()
    if len(s) > 8:
        raise TypeError(f"dtype {dt} cannot be sent")
    return int.from_bytes(s.ljust(8, b"\0"), "little", signed=True)


def _code_dtype(code: int) -> np.dtype:
    return np.dtype(int(code).to_bytes(8, "little", signed=True).rstrip(b"\0").decode())


class NCCLCommunicator(Communicator):
    """Collectives among ``size`` GPU ranks (one GPU per process, CuPy's current device); build it with
    :meth:`connect` inside a session's rank task."""

    def __init__(self, tcp, nccl_comm, timeout: float, poll: str = "spin"):
        import cupy as cp
        from cupy.cuda import nccl

        self._cp, self._nccl = cp, nccl
        self.rank, self.size, self.timeout = tcp.rank, tcp.size, float(timeout)
        self._tcp, self._comm = tcp, nccl_comm
        self._socks = {p: peer.sock for p, peer in tcp._peers.items()}
        self._eof: dict[int, float] = {}
        self._event = cp.cuda.Event(block=False, disable_timing=True)
        self._sent = 0
        self._closed = False
        self._failed: CommError | None = None
        self._hdr_send = cp.zeros((self.size, _HDR), cp.int64)
        self._hdr_recv = cp.zeros((self.size, _HDR), cp.int64)
        self._pin = self._pin_recv = self._dstage = None
        self._stage(_STAGE)
        # poll="sleep": time.sleep(0) between queries from the start, no spin (to measure what the spin saves)
        self._spin_s = 0.0 if poll == "sleep" else _SPIN_S
        self._cancelled = task_cancelled_probe()
        #: peer-mapped receive buffers for captured rounds (:mod:`breadth.bfs.transport.peer_memory`), set by
        #: connect
        self._peer = None

    @classmethod
    def connect(cls, rank: int, size: int, session: str, timeout: float = 60.0,
                config: SearchConfig | None = None) -> "NCCLCommunicator":
        """Join ``session`` as ``rank`` of ``size``: TCP mesh through Dask, then NCCL's id over it; peer
        memory for the captured rounds where the GPUs allow and ``config.peer_memory``."""
        try:
            from cupy.cuda import nccl
        except Exception as e:  # CuPy without NCCL
            raise ImportError(f"protocol='nccl' needs CuPy with NCCL ({type(e).__name__}: {e})") from e
        from .tcp import TCPCommunicator

        tcp = TCPCommunicator.connect(rank, size, session, timeout=timeout)
        try:
            # rank 0's id (bytes in recent CuPy, a tuple of 128 small ints in older ones) to every rank
            msg = np.zeros(129, np.uint8)
            if rank == 0:
                uid = nccl.get_unique_id()
                msg[0] = isinstance(uid, (bytes, bytearray))
                msg[1:] = np.frombuffer(bytes(uid), np.uint8) if msg[0] else np.array(uid, np.int64) & 0xFF
            msg = tcp.allgather(msg)[0]
            uid = msg[1:].tobytes() if msg[0] else tuple(int(x) for x in msg[1:].astype(np.int8))
            comm = nccl.NcclCommunicator(size, uid, rank)
        except BaseException:
            tcp.close()
            raise
        config = config or SearchConfig()
        self = cls(tcp, comm, timeout, config.nccl_poll)
        self.barrier()
        from .peer_memory import PeerMemory

        try:
            self._peer = PeerMemory.connect(tcp, timeout, enabled=config.peer_memory)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def peer_memory(self) -> bool:
        """Whether captured rounds into :meth:`device_buffer` arrays go through peer memory, not NCCL."""
        return self._peer is not None

    # -- waiting with a bounded time ---------------------------------------------------------------
    def _fail(self, err: CommError):
        self._failed = err
        if self._peer is not None:
            self._peer.abort()  # a peer-memory round spinning for the lost peer gives up
        t0 = time.monotonic()
        # ncclCommAbort ends the NCCL kernels still waiting for the lost peer; it has been seen to take
        # long, so it runs on a helper thread and this rank reports the failure after a bounded wait.
        th = threading.Thread(target=self._abort, name=f"breadth-nccl-abort-{self.rank}", daemon=True)
        th.start()
        th.join(_ABORT_WAIT_S)
        state = "still running" if th.is_alive() else "done"
        print(f"breadth nccl rank {self.rank}: {err}; NCCL abort {state} after {time.monotonic() - t0:.3f} s",
              file=sys.stderr, flush=True)
        raise err

    def _abort(self):
        try:
            self._comm.abort()
        except Exception as e:
            print(f"breadth nccl rank {self.rank}: ncclCommAbort failed: {e!r}", file=sys.stderr, flush=True)

    def _check(self):
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._failed is not None:
            raise self._failed

    def _closed_peers(self) -> list[int]:
        """Peers whose TCP connection reached EOF (their process exited or closed the communicator)."""
        socks = [s for p, s in self._socks.items() if p not in self._eof]
        if not socks:
            return []
        try:
            readable, _, _ = select.select(socks, [], [], 0)
        except (OSError, ValueError):
            readable = socks
        now = time.perf_counter()
        for s in readable:
            p = next(q for q, t in self._socks.items() if t is s)
            try:
                data = s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                self._eof[p] = now
        return sorted(self._eof)

    def _wait(self, what: str) -> None:
        """Wait for the work queued so far on the current stream, within the failure bounds; a peer-memory
        round that gave up (its peer failed or timed out) raises like a lost NCCL round."""
        self._wait_event(what)
        if self._peer is not None:
            try:
                self._peer.check(what)
            except CommError as err:
                self._fail(err)

    def _wait_event(self, what: str) -> None:
        ev = self._event
        ev.record()
        if ev.done:
            return
        t0 = time.perf_counter()
        spin_until = t0 + self._spin_s
        while time.perf_counter() < spin_until:  # the common case: a few µs to a few hundred
            if ev.done:
                return
        next_peek = next_cancel = t0
        while not ev.done:
            now = time.perf_counter()
            if now >= next_peek:
                next_peek = now + _PEEK_EVERY_S
                for p in self._closed_peers():
                    if now - self._eof[p] > _EOF_GRACE_S and not ev.done:
                        self._fail(CommError(f"rank {self.rank}: rank {p} closed its connection during {what}",
                                             peer=p))
                if now - t0 > self.timeout and not ev.done:
                    self._fail(CommError(f"rank {self.rank}: {what} did not complete within {self.timeout:g} s",
                                         peer=None))
            if self._cancelled is not None and now >= next_cancel:
                next_cancel = now + _CANCEL_EVERY_S
                if self._cancelled() and not ev.done:
                    self._fail(CommError(f"rank {self.rank}: the session was cancelled during {what} (a peer "
                                         "failed or its worker died)", peer=None))
            time.sleep(0)

    # -- NCCL primitives ---------------------------------------------------------------------------
    def _stream(self) -> int:
        return self._cp.cuda.get_current_stream().ptr

    def _exchange(self, sends: dict[int, Any], recvs: dict[int, Any], payload: bool = True) -> None:
        """One grouped round of point-to-point byte transfers (``sends[p]``/``recvs[p]`` a contiguous device
        array or a list of them, matched in order; empty ones skipped, as both sides know the sizes)."""
        nccl, st = self._nccl, self._stream()
        nccl.groupStart()
        try:
            for p in sorted(set(sends) | set(recvs)):
                for a in _arrays(sends.get(p)):
                    self._comm.send(a.data.ptr, a.nbytes, nccl.NCCL_UINT8, p, st)
                for b in _arrays(recvs.get(p)):
                    self._comm.recv(b.data.ptr, b.nbytes, nccl.NCCL_UINT8, p, st)
        finally:
            nccl.groupEnd()
        if payload:
            self._sent += sum(a.nbytes for p, x in sends.items() if p != self.rank for a in _arrays(x))

    # -- device-resident rounds (breadth.bfs.engine.device_engine): no host staging, at most one wait ---------
    #: the engine may keep its counters on the device and use the two methods below
    device_counters = True
    #: the rounds are NCCL kernels on the stream: the device engine captures its levels in CUDA graphs
    capturable_rounds = True

    def gather_device(self, vec) -> np.ndarray:
        """Every rank's int64 device vector ``vec`` (``(k,)``, the same ``k`` everywhere) as a host
        ``(size, k)`` matrix: one ``ncclAllGather`` queued behind whatever produced ``vec`` on the stream,
        one copy to pinned memory, and one wait, the round's only synchronisation."""
        self._check()
        cp, nccl = self._cp, self._nccl
        k = int(vec.size)
        nbytes = 8 * k * self.size
        self._stage(nbytes)
        st = self._stream()
        self._comm.allGather(cp.ascontiguousarray(vec, cp.int64).data.ptr, self._dstage.data.ptr, k,
                             nccl.NCCL_INT64, st)
        self._d2h(self._dstage.data.ptr, nbytes, st)
        self._wait("counters")
        return np.frombuffer(self._pin_recv, np.int64, k * self.size).reshape(self.size, k).copy()

    def exchange_device(self, sends: dict[int, Any], recvs: dict[int, Any], counts: dict[int, list] | None = None
                        ) -> None:
        """Device arrays ``sends[p]`` to peer ``p`` and ``recvs[p]`` from it, sizes known to both sides:
        one grouped round queued on the stream and not waited for (kernels queued after it see the data;
        a lost peer shows at the next wait, within the same bounds).  ``counts[p]`` (parallel to the list
        ``sends[p]``; entries None or ``(count, unit)``, ``count`` a one-element int64 device array) lets a
        peer-memory round move only the first ``count`` units of an array; NCCL moves it whole."""
        self._check()
        # peer memory when every receive array (empty ones too: a slice of nothing still points into its
        # buffer) lies in a device_buffer, so that every rank makes the same choice for the same call
        raw = [a for x in recvs.values() for a in (x if isinstance(x, (list, tuple)) else [x]) if a is not None]
        if self._peer is not None and raw and self._peer.registered(raw):
            rl = {p: _arrays(x) for p, x in recvs.items()}
            sl, cl = {}, {}
            for p, x in sends.items():  # the non-empty arrays and their count bounds, kept parallel
                xs = list(x) if isinstance(x, (list, tuple)) else [x]
                cs = list((counts or {}).get(p) or [None] * len(xs))
                keep = [j for j, a in enumerate(xs) if a is not None and a.nbytes]
                sl[p], cl[p] = [xs[j] for j in keep], [cs[j] for j in keep]
            self._peer.exchange(sl, rl, cl)
            self._sent += sum(a.nbytes for p, x in sl.items() if p != self.rank for a in x)
            return
        self._exchange(sends, recvs)

    def device_buffer(self, shape, dtype):
        """A zeroed device array for a captured round to receive into (collective: every rank allocates
        the same shapes in the same order): mapped into every peer when peer memory is on, so that rounds
        into it are one :func:`~breadth.bfs.transport.peer_memory.peer_push` kernel instead of NCCL calls."""
        if self._peer is None:
            return self._cp.zeros(shape, dtype)
        return self._peer.alloc(shape, dtype)

    def allgather_into(self, send, recv, payload: bool = False) -> None:
        """``recv`` (``(size * k,)``) = every rank's ``send`` (``(k,)``, the same ``k`` and dtype everywhere)
        in rank order: one ``ncclAllGather`` (one peer-memory round when ``recv`` is a
        :meth:`device_buffer`) queued on the stream, not waited for (it may be captured in a CUDA graph).
        ``payload`` counts ``send`` as sent to every peer in :meth:`bytes_sent`."""
        self._check()
        if self._peer is not None and self._peer.find(recv) is not None:
            self._peer.allgather_into(send, recv)
        else:
            nccl = self._nccl
            self._comm.allGather(send.data.ptr, recv.data.ptr, send.nbytes, nccl.NCCL_UINT8, self._stream())
        if payload:
            self._sent += send.nbytes * (self.size - 1)

    def wait(self, what: str) -> None:
        """Wait for the work queued on the current stream (a replayed CUDA graph), with the failure bounds
        of every other round: a lost peer or a cancelled session raises :class:`CommError`."""
        self._check()
        self._wait(what)

    def note_sent(self, nbytes: int) -> None:
        """Count ``nbytes`` more payload in :meth:`bytes_sent` (a replayed graph's rounds run no Python)."""
        self._sent += int(nbytes)

    def _stage(self, nbytes: int) -> None:
        """Pinned host buffers (send side, receive side) and a device buffer of at least ``nbytes``."""
        if self._dstage is not None and self._dstage.nbytes >= nbytes:
            return
        cp = self._cp
        n = max(_STAGE, 1 << (int(nbytes) - 1).bit_length())
        self._pin, self._pin_recv = cp.cuda.alloc_pinned_memory(n), cp.cuda.alloc_pinned_memory(n)
        self._dstage = cp.empty(n, cp.uint8)

    def _h2d(self, host: np.ndarray, dev_ptr: int, st: int) -> None:
        """Queue the copy of small host array ``host`` to ``dev_ptr`` through the pinned send buffer."""
        n = host.nbytes
        np.frombuffer(self._pin, np.uint8, n)[:] = host.reshape(-1).view(np.uint8)
        self._cp.cuda.runtime.memcpyAsync(dev_ptr, self._pin.ptr, n, self._cp.cuda.runtime.memcpyHostToDevice, st)

    def _d2h(self, dev_ptr: int, nbytes: int, st: int) -> None:
        """Queue the copy of ``nbytes`` at ``dev_ptr`` into the pinned receive buffer (read after a wait)."""
        self._cp.cuda.runtime.memcpyAsync(self._pin_recv.ptr, dev_ptr, nbytes,
                                          self._cp.cuda.runtime.memcpyDeviceToHost, st)

    def _device(self, arr: Any) -> tuple[Any, bool]:
        cp = self._cp
        if isinstance(arr, cp.ndarray):
            return cp.ascontiguousarray(arr), True
        a = np.asarray(arr)
        if a.dtype.hasobject:
            raise TypeError("object arrays cannot be sent between ranks; send numeric arrays")
        return cp.asarray(np.ascontiguousarray(a) if a.ndim else a.reshape(())), False

    # -- collectives -------------------------------------------------------------------------------
    def alltoallv(self, send: list[Any]) -> list[Any]:
        """``send[r]`` (CuPy or NumPy, any shape) goes to rank ``r``; what a rank sent as NumPy arrives as
        NumPy, CuPy as CuPy (device to device).  Two rounds: shapes, then payloads."""
        self._check()
        if len(send) != self.size:
            raise ValueError(f"alltoallv needs {self.size} arrays, got {len(send)}")
        cp = self._cp
        bufs, dev = zip(*(self._device(a) for a in send))
        hdr = np.zeros((self.size, _HDR), np.int64)
        for p, (b, d) in enumerate(zip(bufs, dev)):
            if b.ndim > _MAXDIM:
                raise ValueError(f"arrays of at most {_MAXDIM} dimensions can be sent, got {b.ndim}")
            hdr[p, :3] = (_dtype_code(b.dtype), int(d), b.ndim)
            hdr[p, 3:3 + b.ndim] = b.shape
        st = self._stream()
        self._stage(hdr.nbytes)
        self._h2d(hdr, self._hdr_send.data.ptr, st)
        peers = [p for p in range(self.size) if p != self.rank]
        self._exchange({p: self._hdr_send[p] for p in peers}, {p: self._hdr_recv[p] for p in peers}, payload=False)
        self._d2h(self._hdr_recv.data.ptr, hdr.nbytes, st)
        self._wait("alltoallv (shapes)")  # one wait: header copy in, exchange, copy out
        rh = np.frombuffer(self._pin_recv, np.int64, hdr.size).reshape(hdr.shape).copy()
        out: list[Any] = [None] * self.size
        for p in peers:
            dt, d, nd = _code_dtype(rh[p, 0]), int(rh[p, 1]), int(rh[p, 2])
            out[p] = cp.empty(tuple(int(x) for x in rh[p, 3:3 + nd]), dt)
        self._exchange({p: bufs[p] for p in peers}, {p: out[p] for p in peers})
        self._wait("alltoallv")
        for p in peers:
            if not rh[p, 1]:
                out[p] = out[p].get()
        out[self.rank] = send[self.rank]
        return out

    def allgather(self, arr: Any) -> list[Any]:
        """Every rank's ``arr`` in rank order (shapes may differ between ranks)."""
        return self.alltoallv([arr] * self.size)

    def allgatherv(self, arr: Any, counts: list[int], wait: bool = True) -> list[Any]:
        """Every rank's 1-D CuPy ``arr`` of ``counts[r]`` elements, all of ``arr``'s dtype: one round, no
        header (the caller knows the sizes, e.g. from the last counters).  ``wait=False`` leaves the round
        queued on the stream (see :meth:`exchange_device`)."""
        self._check()
        cp = self._cp
        a, _ = self._device(arr)
        if int(a.size) != int(counts[self.rank]):
            raise ValueError(f"rank {self.rank}: allgatherv given {a.size} elements, counts say {counts[self.rank]}")
        peers = [p for p in range(self.size) if p != self.rank]
        out: list[Any] = [None] * self.size
        for p in peers:
            out[p] = cp.empty(int(counts[p]), a.dtype)
        self._exchange({p: a for p in peers}, {p: out[p] for p in peers})
        if wait:
            self._wait("allgatherv")
        out[self.rank] = arr
        return out

    _OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}
    _TYPES = {np.dtype(np.int64): "NCCL_INT64", np.dtype(np.float64): "NCCL_FLOAT64",
              np.dtype(np.int32): "NCCL_INT32", np.dtype(np.float32): "NCCL_FLOAT32",
              np.dtype(np.uint64): "NCCL_UINT64", np.dtype(np.uint8): "NCCL_UINT8"}

    def allreduce(self, values: np.ndarray, op: str = "sum") -> np.ndarray:
        """Element-wise ``sum``/``max``/``min`` of a small host vector: one ``ncclAllReduce``."""
        self._check()
        if op not in self._OPS:
            raise ValueError(f"unknown op {op!r}: expected one of {sorted(self._OPS)}")
        v = np.asarray(values)
        if v.dtype not in self._TYPES:
            raise TypeError(f"allreduce of {v.dtype} is not supported")
        nccl = self._nccl
        v = np.ascontiguousarray(v)
        if not v.size:
            return v.copy()
        self._stage(v.nbytes)
        st, ptr = self._stream(), self._dstage.data.ptr
        self._h2d(v, ptr, st)  # pinned copies queued on the stream: the whole all-reduce is one wait
        self._comm.allReduce(ptr, ptr, v.size, getattr(nccl, self._TYPES[v.dtype]), getattr(nccl, self._OPS[op]), st)
        self._d2h(ptr, v.nbytes, st)
        self._wait("allreduce")
        return np.frombuffer(self._pin_recv, v.dtype, v.size).reshape(v.shape).copy()

    def bytes_sent(self) -> int:
        """Payload bytes this rank has sent to its peers so far (headers not counted)."""
        return self._sent

    def close(self) -> None:
        """Release NCCL (abort if a collective failed) and close the TCP mesh (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._peer is not None:
                self._peer.close(failed=self._failed is not None)
            if self._failed is None:
                self._comm.destroy()
        except Exception:
            pass
        finally:
            self._tcp.close()


def _arrays(x) -> list:
    """The non-empty arrays of one peer's entry in a round (``None``, an array, or a list of arrays)."""
    if x is None:
        return []
    return [a for a in (x if isinstance(x, (list, tuple)) else [x]) if a.nbytes]


def connect(rank: int, size: int, session: str, *, timeout: float, backend: str = "gpu",
            config: SearchConfig | None = None) -> NCCLCommunicator:
    """The NCCL transport's entry in :mod:`breadth.bfs.transport.registry` (GPU ranks only):
    :meth:`NCCLCommunicator.connect` with the session's polling and peer-memory settings (``config``)."""
    return NCCLCommunicator.connect(rank, size, session, timeout=timeout, config=config)
