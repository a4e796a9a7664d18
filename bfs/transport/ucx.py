"""UCX transport between BFS ranks, over ``ucxx`` (``pip install "breadth[ucx]"``).

The same protocol as :mod:`.tcp` (one header + one raw payload per peer and round, addresses
exchanged once through Dask), with UCX endpoints instead of sockets: UCX picks shared memory, TCP,
InfiniBand or NVLink by itself.  Payloads go to ``Endpoint.send``/``recv`` as buffers, never pickled:
NumPy arrays now, CuPy arrays later (the header's device flag tells the receiver to allocate the receive
buffer with CuPy, so a device array travels GPU to GPU with no host copy when UCX is built with CUDA).

ucxx is asyncio-based; each communicator runs its own event loop in a daemon thread, and the synchronous
collectives submit a coroutine to it and wait.  ``ucxx`` is imported only when a communicator is built,
so ``import breadth.bfs.transport.ucx`` works on machines without UCX and :meth:`UCXCommunicator.connect`
raises ``ImportError`` with the install command.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np

from .communicator import CommError, PeerCommunicator
from .wire_format import HEADER, MAGIC, MAXDIM, as_host_array, session_digest, worker_host


def _import_ucxx():
    try:
        import ucxx
    except Exception as e:  # ImportError, or a UCX library that fails to load
        raise ImportError(f"the UCX transport needs ucxx ({type(e).__name__}: {e}); install it with "
                          "`pip install \"breadth[ucx]\"` (ucxx-cu12) or use protocol='tcp'") from e
    return ucxx


# Every message starts with one fixed-size slot: the header, then the payload itself when it is a small
# host array (the counters and barriers of every level), so those take one UCX message instead of two.
_INLINE = 512
_SLOT = HEADER.size + _INLINE


def _slot(seq: int, dtype: np.dtype, device: bool, shape: tuple, nbytes: int, inline: Any = None) -> np.ndarray:
    buf = np.zeros(_SLOT, np.uint8)
    dims = list(shape) + [0] * (MAXDIM - len(shape))
    HEADER.pack_into(buf, 0, MAGIC, seq, dtype.str.encode(), int(device), len(shape), nbytes, *dims)
    if inline is not None and nbytes:
        buf[HEADER.size:HEADER.size + nbytes] = inline.reshape(-1).view(np.uint8)
    return buf


def _goodbye() -> np.ndarray:
    return _slot(0, np.dtype(np.uint8), False, (), 0)


def _payload(arr: Any) -> tuple[Any, bool]:
    """The buffer to send for ``arr``: CuPy arrays stay on the device, anything else becomes NumPy."""
    if hasattr(arr, "__cuda_array_interface__"):
        import cupy

        return cupy.ascontiguousarray(arr), True
    return as_host_array(arr)


_LOOP: tuple[asyncio.AbstractEventLoop, threading.Thread] | None = None
_LOOP_LOCK = threading.Lock()


def _event_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """The process's one UCX event loop (a daemon thread), shared by every communicator of the process.

    ucxx keeps process-wide state (context, worker, progress thread) bound to the loop that first used
    it, so sessions that follow one another in a worker must reuse that loop, not start a new one.
    """
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None or not _LOOP[1].is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="breadth-ucx", daemon=True)
            thread.start()
            _LOOP = (loop, thread)
        return _LOOP


class UCXCommunicator(PeerCommunicator):
    """Collectives over UCX endpoints among ``size`` ranks; build it with :meth:`connect`.

    ``timeout`` (seconds) bounds each collective: a round not complete by then raises ``CommError``.
    """

    def __init__(self, rank: int, size: int, loop: asyncio.AbstractEventLoop, thread: threading.Thread,
                 eps: dict, listener: Any, timeout: float):
        self.rank, self.size, self.timeout = rank, size, float(timeout)
        self._loop, self._thread, self._eps, self._listener = loop, thread, eps, listener
        self._seq = 0
        self._sent = 0
        self._closed = False
        self._failed: CommError | None = None

    # -- set-up ----------------------------------------------------------------------------------
    @classmethod
    def connect(cls, rank: int, size: int, session: str, timeout: float = 60.0) -> "UCXCommunicator":
        """Join ``session`` as ``rank`` of ``size`` (collective over the session's rank tasks)."""
        ucxx = _import_ucxx()
        from distributed import Variable, get_client

        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} outside [0, {size})")
        loop, thread = _event_loop()
        deadline = time.monotonic() + timeout
        left = lambda: max(0.01, deadline - time.monotonic())  # noqa: E731
        digest = int.from_bytes(session_digest(session), "little") >> 1  # fits int64
        eps: dict[int, Any] = {}
        all_in = asyncio.Event()

        async def on_connect(ep):  # a higher rank introduces itself
            hello = np.empty(2, np.int64)
            try:
                await asyncio.wait_for(ep.recv(hello), left())
            except Exception:
                return
            j = int(hello[1])
            if hello[0] != digest or not rank < j < size or j in eps:
                await ep.close()
                return
            eps[j] = ep
            if sum(k > rank for k in eps) == size - 1 - rank:
                all_in.set()

        async def start():
            return ucxx.create_listener(on_connect)

        def run(coro, t):
            return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, t), loop).result()

        listener = None
        client = get_client()
        mine = Variable(f"{session}-ucx-{rank}", client=client)
        try:
            listener = run(start(), left())
            mine.set([worker_host(), int(listener.port)], timeout=left())
            for j in range(rank):
                try:
                    host, port = Variable(f"{session}-ucx-{j}", client=client).get(timeout=left())
                except Exception as e:
                    raise CommError(f"rank {rank}: rank {j} did not publish its address within {timeout} s",
                                    peer=j) from e

                async def dial(host=host, port=port):
                    ep = await ucxx.create_endpoint(host, port)
                    await ep.send(np.array([digest, rank], np.int64))
                    return ep

                try:
                    eps[j] = run(dial(), left())
                except Exception as e:
                    raise CommError(f"rank {rank}: cannot reach rank {j} at {host}:{port}: {e!r}", peer=j) from e
            if rank < size - 1:
                try:
                    run(all_in.wait(), left())
                except Exception as e:
                    missing = sorted(set(range(rank + 1, size)) - set(eps))
                    raise CommError(f"rank {rank}: ranks {missing} did not connect within {timeout} s",
                                    peer=missing[0] if missing else None) from e
        except BaseException:
            comm = cls(rank, size, loop, thread, eps, listener, timeout)
            comm.close()
            raise
        finally:
            try:
                mine.delete()
            except Exception:
                pass
        comm = cls(rank, size, loop, thread, eps, listener, timeout)
        comm.barrier()
        return comm

    # -- rounds ------------------------------------------------------------------------------------
    async def _send_one(self, p: int, arr: Any, seq: int) -> None:
        buf, device = _payload(arr)
        if buf.ndim > MAXDIM:
            raise ValueError(f"arrays of at most {MAXDIM} dimensions can be sent, got {buf.ndim}")
        inline = not device and buf.nbytes <= _INLINE
        slot = _slot(seq, buf.dtype, device, buf.shape, buf.nbytes, buf if inline else None)
        ep = self._eps[p]
        try:
            await ep.send(slot)
            if buf.nbytes and not inline:
                await ep.send(buf.reshape(-1).view(np.uint8))
        except Exception as e:
            raise CommError(f"rank {self.rank}: sending to rank {p} failed: {e!r}", peer=p) from e
        self._sent += buf.nbytes

    async def _recv_one(self, p: int, seq: int) -> Any:
        ep = self._eps[p]
        slot = np.empty(_SLOT, np.uint8)
        try:
            await ep.recv(slot)
            magic, rseq, dt, device, ndim, nbytes, *shape = HEADER.unpack_from(slot)
            if magic == MAGIC and rseq == 0:
                raise CommError(f"rank {self.rank}: rank {p} closed its communicator", peer=p)
            if magic != MAGIC or rseq != seq:
                raise CommError(f"rank {self.rank}: rank {p} is out of step (message #{rseq}, expected #{seq})",
                                peer=p)
            dtype, shape = np.dtype(dt.rstrip(b"\0").decode()), tuple(shape[:ndim])
            if device:
                import cupy

                arr = cupy.empty(shape, dtype)
            else:
                arr = np.empty(shape, dtype)
            if nbytes and not device and nbytes <= _INLINE:
                arr.reshape(-1).view(np.uint8)[:] = slot[HEADER.size:HEADER.size + nbytes]
            elif nbytes:
                await ep.recv(arr.reshape(-1).view(np.uint8))
            return arr
        except CommError:
            raise
        except Exception as e:
            raise CommError(f"rank {self.rank}: receiving from rank {p} failed: {e!r}", peer=p) from e

    async def _round_async(self, send: dict[int, Any], seq: int) -> dict[int, Any]:
        peers = sorted(self._eps)
        sends = [asyncio.ensure_future(self._send_one(p, send[p], seq)) for p in peers]
        recvs = [asyncio.ensure_future(self._recv_one(p, seq)) for p in peers]
        tasks = sends + recvs
        try:
            done, pending = await asyncio.wait(tasks, timeout=self.timeout, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t.exception() is not None:
                    raise t.exception()
            if pending:
                waiting = sorted({peers[i % len(peers)] for i, t in enumerate(tasks) if t in pending})
                raise CommError(f"rank {self.rank}: no answer from rank(s) {waiting} within {self.timeout:g} s "
                                f"(collective #{seq})", peer=waiting[0])
        finally:
            for t in tasks:  # a failed round leaves no receive posted that would swallow a later message
                t.cancel()
        return {p: t.result() for p, t in zip(peers, recvs)}

    def _round(self, send: dict[int, Any]) -> dict[int, Any]:
        if self._closed:
            raise CommError(f"rank {self.rank}: communicator is closed")
        if self._failed is not None:
            raise self._failed
        self._seq += 1
        if any(hasattr(a, "__cuda_array_interface__") for a in send.values()):
            import cupy

            # UCX reads device buffers from its own thread: the kernels that wrote them (queued on this
            # thread's stream) must have finished first
            cupy.cuda.get_current_stream().synchronize()
        fut = asyncio.run_coroutine_threadsafe(self._round_async(send, self._seq), self._loop)
        try:
            return fut.result()
        except CommError as e:
            self._failed = e
            raise

    def _exchange(self, send: dict[int, Any]) -> dict[int, Any]:
        return self._round(send)

    def close(self) -> None:
        """Close the endpoints and the listener (idempotent); the process's event loop stays for later sessions."""
        if self._closed:
            return
        self._closed = True
        failed = self._failed is not None

        async def goodbye(p, ep):
            # Closing a UCX endpoint aborts transfers still in flight, so the last round's data could be
            # lost if a rank closed as soon as its own part was done: every rank first tells each peer it
            # is done (sequence number 0) and waits briefly for the peer's word.  A peer still inside a
            # collective reads the goodbye as "rank closed" and fails at once.
            try:
                await asyncio.wait_for(ep.send(_goodbye()), 2.0)
                if failed:  # no round's data to protect, and a stalled peer would never answer: waiting
                    return  # for it only delays the failure report (the session sees it when we return)
                await asyncio.wait_for(ep.recv(np.empty(_SLOT, np.uint8)), 2.0)
            except BaseException:
                pass

        async def shut():
            await asyncio.gather(*(goodbye(p, ep) for p, ep in self._eps.items()))
            for ep in self._eps.values():
                try:
                    await asyncio.wait_for(ep.close(), 2.0)
                except BaseException:
                    pass
            if self._listener is not None:
                self._listener.close()

        try:
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(timeout=15)
        except Exception:
            pass
