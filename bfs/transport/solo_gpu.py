"""One GPU rank alone: the device rounds of :mod:`breadth.bfs.engine.device_engine` with no peer to talk to.

With a single GPU there is nothing to exchange, yet the device engine still pays off: its levels are
captured as CUDA graphs (:mod:`breadth.bfs.gpu.level_graphs`), one launch and one wait each, where the host
engine queues every kernel of a level from Python and waits several times.  Here the "rounds" are what
they mean for one rank: an all-gather is a device-to-device copy on the current stream (capturable), an
exchange has no peer, and gathering the counters is one copy to pinned memory and one wait.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .communicator import SelfCommunicator


class SoloGpuCommunicator(SelfCommunicator):
    """:class:`SelfCommunicator` with the device rounds of :class:`~breadth.bfs.transport.nccl.NCCLCommunicator`
    (``gather_device``, ``exchange_device``, ``allgather_into``, ``device_buffer``, ``wait``), so that a
    lone GPU rank runs the device engine.

    >>> comm = SoloGpuCommunicator()              # doctest: +SKIP
    >>> comm.gather_device(cupy.arange(3))        # doctest: +SKIP
    array([[0, 1, 2]])
    """

    #: the engine may keep its counters on the device (see :func:`breadth.bfs.engine.session._engine_class`)
    device_counters = True
    #: the "rounds" are copies on the stream: the device engine captures its levels in CUDA graphs
    capturable_rounds = True
    #: no peer's memory is mapped: a round is a local copy
    peer_memory = False

    def __init__(self):
        import cupy

        super().__init__()
        self._cp = cupy
        self._pin = None  # pinned host buffer of gather_device, grown as needed
        self._pin_n = 0

    def gather_device(self, vec) -> np.ndarray:
        """This rank's int64 device vector ``vec`` (``(k,)``) as a host ``(1, k)`` matrix: one copy to
        pinned memory queued behind whatever produced ``vec`` on the current stream, and one wait."""
        cp = self._cp
        v = cp.ascontiguousarray(vec, cp.int64)
        k = int(v.size)
        if k > self._pin_n:
            self._pin_n = max(k, 64)
            self._pin = cp.cuda.alloc_pinned_memory(8 * self._pin_n)
        st = cp.cuda.get_current_stream()
        cp.cuda.runtime.memcpyAsync(self._pin.ptr, v.data.ptr, 8 * k, cp.cuda.runtime.memcpyDeviceToHost, st.ptr)
        st.synchronize()
        return np.frombuffer(self._pin, np.int64, k).reshape(1, k).copy()

    def exchange_device(self, sends: dict[int, Any], recvs: dict[int, Any], counts: dict[int, list] | None = None
                        ) -> None:
        """Nothing to move: a lone rank has no peer (the engine passes empty ``sends``/``recvs``)."""
        if any(p != 0 for p in list(sends) + list(recvs)):
            raise ValueError(f"a one-rank session has no peer {sorted(set(sends) | set(recvs))}")

    def device_buffer(self, shape, dtype):
        """A zeroed device array for a captured round to receive into."""
        return self._cp.zeros(shape, dtype)

    def allgather_into(self, send, recv, payload: bool = False) -> None:
        """``recv[:send.size] = send``: one device-to-device copy queued on the current stream (it may be
        captured in a CUDA graph); nothing counts as sent."""
        cp = self._cp
        cp.cuda.runtime.memcpyAsync(recv.data.ptr, send.data.ptr, send.nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
                                    cp.cuda.get_current_stream().ptr)

    def wait(self, what: str) -> None:
        """Wait for the work queued on the current stream (a replayed CUDA graph)."""
        self._cp.cuda.get_current_stream().synchronize()

    def note_sent(self, nbytes: int) -> None:
        """A replayed graph's rounds moved nothing between ranks here."""
