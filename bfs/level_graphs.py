"""Multi-GPU BFS levels captured as CUDA graphs: one launch and one wait per level.

On two NVLink H200s a level's GPU work and NCCL rounds take tens of µs, but queueing them from Python
took 90-230 µs per level (CuPy launches, NCCL calls, allocations, measured as the time between a level's
start and its last launch), and that host time was most of the "exchange" time of a search.  Here a
level's whole sequence (parameter copy, frontier all-gather, kernels, the pairs' exchange, claims, the
counters' all-gather and their copy to the host) is captured once into a CUDA graph and replayed:

* **bottom-up**: every rank's frontier bitmap (``block / 64`` words, padded, so the all-gather lands as
  the global bitmap with no concatenation) -> ``bu_step`` -> counters.  Ping-pong bitmaps: graph ``k``
  reads ``bits[k]`` and writes ``bits[1 - k]``.
* **top-down with a small frontier** (every rank's queue at most ``_SMALL_QUEUE`` ids and frontier degree
  sum at most ``cap``): prefix + expansion -> owner regions (3+ ranks) -> counters and ``cap`` pair rows to
  each peer in one grouped round -> claims that read the real count on the device -> counters.  Ping-pong
  queues, one graph per (buffer, ``cap``) for ``cap`` in :data:`CAPS`.

What varies between levels (the depth, this rank's queue length) is copied by the graph's first node from
pinned host memory into a device block that the ``*_g`` kernels read.  Every rank decides from the same
global counters whether a level runs as a graph, so the NCCL rounds of all ranks always match.
Timestamps from the GPU's global clock bracket the local kernels (``local_s``).
"""

from __future__ import annotations

import time

import numpy as np

#: pair rows per peer of the captured top-down levels (the smallest that bounds every rank's frontier
#: degree sum is used; larger frontiers take the engine's uncaptured top-down level)
CAPS = (1 << 12, 1 << 15, 1 << 18)


class LevelGraphs:
    """The captured levels of one :class:`~breadth.bfs.device_engine.DeviceEngine` (its buffers, graphs and
    stream).  Call :meth:`bottom_up` / :meth:`top_down` inside ``with graphs.stream:``."""

    def __init__(self, engine):
        import cupy as cp

        from .gpu_kernels import _SMALL_QUEUE

        self.cp, self.e = cp, engine
        s, comm = engine.shard, engine.comm
        self.size, self.rank = comm.size, comm.rank
        self.small_queue = _SMALL_QUEUE
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.words = s.block // 64  # uint64 words of every rank's (padded) frontier bitmap
        self.nloc = s.num_local
        self._prm_host = cp.cuda.alloc_pinned_memory(64)
        self.prm_host = np.frombuffer(self._prm_host, np.int64, 8)
        self.prm = cp.zeros(8, cp.int64)
        self._bits = self._queues = None
        self._graphs: dict = {}
        self._bytes: dict = {}

    # -- buffers ------------------------------------------------------------------------------------
    def _out(self, k: int):
        """Device (counters of every rank, then 4 timestamps) and its pinned host copy."""
        cp = self.cp
        dev = cp.zeros(self.size * k + 4, cp.int64)
        host = cp.cuda.alloc_pinned_memory(dev.nbytes)
        return dev, host, np.frombuffer(host, np.int64, dev.size)

    def _bit_buffers(self):
        if self._bits is None:
            cp = self.cp
            # padding words past the owned vertices stay zero: bu_step writes the owned words only
            self._bits = [cp.zeros(self.words, cp.uint64), cp.zeros(self.words, cp.uint64)]
            self._gbits = cp.empty(self.size * self.words, cp.uint64)
        return self._bits

    def _queue_buffers(self):
        if self._queues is None:
            cp = self.cp
            self._queues = [cp.empty(self.nloc, cp.int64), cp.empty(self.nloc, cp.int64)]
            self._pre = cp.empty(self.small_queue, cp.int64)
        return self._queues

    @staticmethod
    def _slot(arr, bufs) -> int | None:
        ptr = arr.data.ptr if arr.size else None
        return next((j for j, b in enumerate(bufs) if b.data.ptr == ptr), None)

    def bits_slot(self, bits) -> int:
        """Index of the ping-pong bitmap holding local frontier ``bits`` (copied into slot 0 if neither)."""
        bufs = self._bit_buffers()
        j = self._slot(bits, bufs)
        if j is None:
            j = 0
            bufs[0][:bits.size] = bits
        return j

    def queue_slot(self, queue) -> int:
        """Index of the ping-pong queue holding ``queue`` (copied into slot 0 if neither)."""
        bufs = self._queue_buffers()
        j = self._slot(queue, bufs)
        if j is None:
            j = 0
            if queue.size:
                bufs[0][:queue.size] = queue
        return j

    # -- capture --------------------------------------------------------------------------------------
    def _capture(self, key, build, out) -> None:
        """Capture ``build()`` (which queues the level and uses only buffers allocated before: nothing may
        be allocated while capturing) after the parameter copy, as graph ``key``; ``out`` its results."""
        cp, comm = self.cp, self.e.comm
        rt = cp.cuda.runtime
        st = self.stream
        sent0 = comm.bytes_sent()
        mode = getattr(rt, "streamCaptureModeRelaxed", None)
        st.begin_capture(mode) if mode is not None else st.begin_capture()
        try:
            rt.memcpyAsync(self.prm.data.ptr, self._prm_host.ptr, 64, rt.memcpyHostToDevice, st.ptr)
            build()
        except BaseException:
            try:
                st.end_capture()
            except Exception:
                pass
            raise
        graph = st.end_capture()
        self._bytes[key] = comm.bytes_sent() - sent0
        comm.note_sent(-self._bytes[key])  # nothing ran yet: each launch counts them
        self._graphs[key] = (graph, out)  # out keeps every captured buffer alive

    def _finish(self, out) -> None:
        """The graph's tail: one copy of the gathered counters and the stamps into pinned host memory."""
        cp = self.cp
        rt = cp.cuda.runtime
        dev, host, _ = out
        rt.memcpyAsync(host.ptr, dev.data.ptr, dev.nbytes, rt.memcpyDeviceToHost, self.stream.ptr)

    def _run(self, key, what: str) -> tuple[np.ndarray, float]:
        """Launch graph ``key`` and wait: returns ``((size, k) counters, local seconds)``."""
        graph, out = self._graphs[key]
        comm = self.e.comm
        graph.launch(self.stream)
        self.launched = time.perf_counter()
        comm.note_sent(self._bytes[key])
        comm.wait(what)
        vals = out[2]
        k = (vals.size - 4) // self.size
        ts = vals[self.size * k:]
        return vals[:self.size * k].reshape(self.size, k).copy(), float(ts[1] - ts[0]) * 1e-9

    def close(self) -> None:
        """Destroy the graphs (and with them NCCL's references to the communicator's resources)."""
        self._graphs.clear()
        self.cp.cuda.Device().synchronize()

    # -- levels ---------------------------------------------------------------------------------------
    def bottom_up(self, bits, depth: int, bu_off, bu_col) -> tuple[np.ndarray, float, object]:
        """One bottom-up level from local frontier ``bits`` (uint64 words over the owned vertices).
        Returns (every rank's ``[found, their degree sum]``, local seconds, the next local bitmap)."""
        e, b, comm = self.e, self.e.b, self.e.comm
        k = self.bits_slot(bits)
        bufs = self._bit_buffers()
        key = ("bu", k)
        if key not in self._graphs:
            keep = (b._skip_bits(bu_off), b._visited)  # built outside the capture (it allocates); kept alive
            ctr = self.cp.zeros(2, self.cp.int64)
            out = self._out(2)
            ts = out[0][self.size * 2:]

            def build():
                comm.allgather_into(bufs[k], self._gbits, payload=True)
                self.cp.cuda.runtime.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, self.stream.ptr)
                b.stamp(ts, 0)
                b.bottom_up_g(bu_off, bu_col, self._gbits, e.parent, e.level, self.prm, bufs[1 - k], ctr)
                b.stamp(ts, 1)
                comm.allgather_into(ctr, out[0][:self.size * 2])
                self._finish(out)

            self._capture(key, build, out + (ctr, keep))
        self.prm_host[0] = depth
        cnt, local_s = self._run(key, "bottom-up level")
        return cnt, local_s, bufs[1 - k][:e.nwords]

    def top_down_cap(self, counts, degs) -> int | None:
        """The pair rows per peer of a captured top-down level for these frontiers (every rank's queue
        length and degree sum, from the last counters), or None when the level is too large for one."""
        if max(int(c) for c in counts) > self.small_queue:
            return None
        need = max(int(d) for d in degs)
        return next((c for c in CAPS if need <= c), None)

    def top_down(self, queue, depth: int, cap: int) -> tuple[np.ndarray, float, object]:
        """One top-down level from local ``queue`` (int64 local ids) with ``cap`` pair rows per peer.
        Returns (every rank's ``[claimed, their degree sum]``, local seconds, the next queue buffer, whose
        first ``claimed`` entries are this rank's next queue)."""
        e, b, comm, cp = self.e, self.e.b, self.e.comm, self.cp
        s, size, rank = e.shard, self.size, self.rank
        k = self.queue_slot(queue)
        bufs = self._queue_buffers()
        key = ("td", k, cap)
        if key not in self._graphs:
            nparts = size if size > 2 else 0
            kc = 4 + nparts
            ctr = cp.zeros(kc, cp.int64)
            rpairs = cp.empty((cap, 2), cp.int64)
            regions = cp.empty((size * cap, 2), cp.int64) if size > 2 else None
            peers = [p for p in range(size) if p != rank]
            rctr = cp.zeros((size, kc), cp.int64)
            recv = cp.empty((len(peers) * cap, 2), cp.int64)
            at = 4 + rank if size > 2 else 2  # where a sender counted the pairs meant for this rank
            out = self._out(2)
            ts = out[0][size * 2:]
            rt = cp.cuda.runtime

            def build():
                rt.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, self.stream.ptr)
                b.stamp(ts, 0)
                b.top_down_g(s.offsets, s.columns, s.lo, s.hi, bufs[k], self._pre, self.prm, e.parent, e.level,
                             e.sent, bufs[1 - k], rpairs, ctr)
                if size > 2:
                    b.pairs_to_regions(rpairs, ctr, s.block, size, cap, out=regions)
                    mine = {p: regions[p * cap:(p + 1) * cap] for p in peers}
                else:
                    mine = {p: rpairs for p in peers}
                b.stamp(ts, 1)
                comm.exchange_device({p: [ctr, mine[p]] for p in peers},
                                     {p: [rctr[p], recv[i * cap:(i + 1) * cap]] for i, p in enumerate(peers)})
                for i, p in enumerate(peers):
                    b.claim_pairs_g(recv[i * cap:(i + 1) * cap], rctr[p, at:at + 1], s.lo, e.parent, e.level,
                                    self.prm, bufs[1 - k], ctr, s.offsets)
                comm.allgather_into(ctr[:2], out[0][:size * 2])
                self._finish(out)

            self._capture(key, build, out + (ctr, rpairs, regions, rctr, recv, b._visited))
        self.prm_host[0], self.prm_host[1] = depth, queue.size
        cnt, local_s = self._run(key, "top-down level")
        return cnt, local_s, bufs[1 - k]
