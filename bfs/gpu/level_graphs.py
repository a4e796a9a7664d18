"""Multi-GPU BFS levels captured as CUDA graphs: one launch and one wait per level.

On two NVLink H200s a level's GPU work and NCCL rounds take tens of µs, but queueing them from Python
takes 90-230 µs per level (CuPy launches, NCCL calls, allocations: the time between a level's start and its
last launch), most of a search's "exchange" time.  Here a
level's whole sequence (parameter copy, frontier all-gather, kernels, the pairs' exchange, claims, the
counters' all-gather and their copy to the host) is captured once into a CUDA graph and replayed:

* **bottom-up**: every rank's frontier bitmap (``block / 64`` words, padded, so the all-gather lands as
  the global bitmap with no concatenation) -> ``bu_step`` -> counters.  Ping-pong bitmaps: graph ``k``
  reads ``bits[k]`` and writes ``bits[1 - k]``.
* **top-down**: degree prefix of the queue (one block, or tiles for a queue longer than
  ``_SMALL_QUEUE``) + expansion -> owner regions (3+ ranks) -> counters and ``cap`` pair rows to each peer
  in one grouped round -> claims that read the real count on the device -> counters.  ``cap`` is 4096 when
  every rank's frontier degree sum (which bounds its pairs) fits, else 65536 over NCCL (which moves whole
  buffers) and 2**20 over peer memory (whose rounds move only the rows filled); a sender whose pairs for a
  peer went past it shows it in the gathered counters, and an exact second round (the level's only other
  wait) resends those.  Ping-pong queues, one graph per (buffer, ``cap``, prefix kind).

The rounds go through the communicator: NCCL calls, or one :mod:`breadth.bfs.transport.peer_memory` kernel each
when the GPUs reach each other's memory; the buffers a round lands in are the communicator's
(:meth:`~breadth.bfs.transport.nccl.NCCLCommunicator.device_buffer`) and shared by every graph of a kind.

What varies between levels (the depth, this rank's queue length) is copied by the graph's first node from
pinned host memory into a device block that the ``*_g`` kernels read.  Every rank picks the graph and
decides on the second round from the same global counters, so the rounds of all ranks always match.
All graphs are captured before the first search's first level (:meth:`LevelGraphs.prepare`).
Timestamps from the GPU's global clock bracket the local kernels (``local_s``); a level's ``reduce_s`` is
the wait after the launch (the kernels, the rounds and the slowest peer).
"""

from __future__ import annotations

import time

import numpy as np

from .graph_capture import capture

#: pair rows per peer of a captured top-down level: the smaller when every rank's frontier degree sum fits
#: in it (no rank can have more pairs for a peer), else the larger, with an exact second round for the
#: (sender, receiver) pairs whose count went past it
CAPS = (1 << 12, 1 << 16)


def choose_top_down(counts, degs, caps: tuple[int, int], small_queue: int) -> tuple[int, bool]:
    """The captured top-down graph for a level: ``(cap, tiled)`` from every rank's queue length
    ``counts`` and frontier degree sum ``degs`` (the last counters, the same on every rank).  The small cap
    when every degree sum fits it (a rank makes at most one pair per edge), else the large one; the tiled
    prefix when some queue is longer than one block's ``small_queue``."""
    small, large = caps
    return (small if max(int(d) for d in degs) <= small else large), max(int(c) for c in counts) > small_queue


def resend_plan(cnt: np.ndarray, rank: int, cap: int):
    """Which pairs a top-down level's exact second round moves, from every rank's gathered counters ``cnt``
    (``(size, 4 + size)`` with per-owner counts from column 4 for 3+ ranks; ``(size, 4)`` with the remote
    total in column 2 for two): ``None`` if no sender made more than ``cap`` pairs for any receiver, else
    ``(nsend, nrecv, starts)``: what this rank resends to / receives from each rank (all of a sender's
    pairs for a receiver it overflowed, none otherwise) and where each owner's pairs start in this rank's
    pairs grouped by owner."""
    size = cnt.shape[0]
    if size == 1:  # a lone rank makes no pairs for anyone
        return None
    # counts[r, p]: the pairs rank r made for rank p
    counts = cnt[:, 4:4 + size] if size > 2 else np.array([[0, cnt[0, 2]], [cnt[1, 2], 0]])
    resend = counts > cap
    if not resend.any():
        return None
    nsend = np.where(resend[rank], counts[rank], 0)
    nrecv = np.where(resend[:, rank], counts[:, rank], 0)
    starts = np.concatenate(([0], np.cumsum(counts[rank])[:-1]))
    return nsend, nrecv, starts


#: graphs of sessions whose communicator failed (see :meth:`LevelGraphs.close`)
_ABANDONED: list = []


#: the same over peer memory, whose rounds move only the rows a sender filled (the count travels with
#: them), so a large cap costs receive memory (16 bytes a row per peer), not transfer time
PEER_CAPS = (1 << 12, 1 << 20)


def _caps(peer: bool, given: tuple[int, int] | None) -> tuple[int, int]:
    """:data:`CAPS` (:data:`PEER_CAPS` when ``peer``), or the config's ``graph_caps`` (tests force the
    second round with small ones)."""
    return tuple(given) if given else (PEER_CAPS if peer else CAPS)


class LevelGraphs:
    """The captured levels of one :class:`~breadth.bfs.engine.device_engine.DeviceEngine` (its buffers, graphs and
    stream).  Call :meth:`bottom_up` / :meth:`top_down` inside ``with graphs.stream:``."""

    def __init__(self, engine):
        import cupy as cp

        from .kernels import _SMALL_QUEUE

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
        self._bits = self._queues = self._td = None
        self._graphs: dict = {}
        self._outs: dict = {}
        self._bytes: dict = {}
        self.launches: dict[str, int] = {}  # replays per kind ("bu", "td"), and exact second rounds
        #: top-down pair rows move only as far as their count (peer memory); else whole ``cap`` blocks
        self.bounded = bool(comm.peer_memory)
        self.caps = _caps(self.bounded, engine.config.graph_caps)
        self.check_rounds = engine.config.check_rounds

    # -- buffers ------------------------------------------------------------------------------------
    def _recv_buffer(self, shape, dtype):
        """A zeroed array that a captured round receives into: the communicator's own kind (peer-mapped
        memory where it has it, allocated collectively: every rank captures the same graphs in order)."""
        return self.e.comm.device_buffer(shape, dtype)

    def _out(self, kind: str, k: int):
        """Device (counters of every rank, then 4 timestamps) and its pinned host copy, one per kind of
        level: every graph of a kind gathers into the same buffer.  (Ranks may replay different graphs of
        a kind at one level: a rank whose queue is empty takes ping-pong slot 0 where the others take
        slot 1.  A peer-memory round lands where the sender points, so the receiver must be reading the
        same buffer.)"""
        if (kind, k) not in self._outs:
            cp = self.cp
            dev = self._recv_buffer((self.size * k + 4,), cp.int64)
            host = cp.cuda.alloc_pinned_memory(dev.nbytes)
            self._outs[kind, k] = (dev, host, np.frombuffer(host, np.int64, dev.size))
        return self._outs[kind, k]

    def _bit_buffers(self):
        if self._bits is None:
            cp = self.cp
            # padding words past the owned vertices stay zero: bu_step writes the owned words only
            self._bits = [cp.zeros(self.words, cp.uint64), cp.zeros(self.words, cp.uint64)]
            self._gbits = self._recv_buffer((self.size * self.words,), cp.uint64)
        return self._bits

    def _queue_buffers(self):
        if self._queues is None:
            cp = self.cp
            self._queues = [cp.empty(self.nloc, cp.int64), cp.empty(self.nloc, cp.int64)]
            self._pre = cp.empty(self.small_queue, cp.int64)
        return self._queues

    def bits_buffer(self, k: int):
        """Ping-pong frontier bitmap ``k`` (uint64 words, padded): a bitmap written into it needs no copy
        before a captured bottom-up level."""
        return self._bit_buffers()[k]

    def queue_buffer(self, k: int):
        """Ping-pong queue buffer ``k`` (int64, one entry per owned vertex): a queue written into it needs
        no copy before a captured top-down level."""
        return self._queue_buffers()[k]

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

        def level():
            rt.memcpyAsync(self.prm.data.ptr, self._prm_host.ptr, 64, rt.memcpyHostToDevice, st.ptr)
            build()

        graph = capture(st, level)
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
        self.launches[key[0]] = self.launches.get(key[0], 0) + 1
        comm.note_sent(self._bytes[key])
        comm.wait(what)
        vals = out[2]
        k = (vals.size - 4) // self.size
        ts = vals[self.size * k:]
        cnt = vals[:self.size * k].reshape(self.size, k).copy()
        if self.check_rounds:
            self._check_same(cnt, key)
        return cnt, float(ts[1] - ts[0]) * 1e-9

    def _check_same(self, cnt: np.ndarray, key) -> None:
        """``SearchConfig.check_rounds``: every rank must read the same gathered counters after a level (the
        ranks' decisions depend on it); compared over the communicator's host mesh, slow, for diagnosis."""
        tcp = getattr(self.e.comm, "_tcp", None)
        if tcp is None:
            return
        views = tcp.allgather(cnt)
        if any(not np.array_equal(v, cnt) for v in views):
            raise RuntimeError(f"rank {self.rank}: ranks read different counters after level graph {key} "
                               f"(replay {self.launches}): {[v.tolist() for v in views]}")

    def close(self) -> None:
        """Destroy the graphs (and with them NCCL's references to the communicator's resources), then wait
        for the device, so that the communicator can be destroyed.  After a failed round nothing is waited
        for or destroyed: a replayed NCCL kernel may still wait for the lost peer until the communicator's
        abort ends it (the rank must stop within bounded time), and a graph's destruction would release
        NCCL state that the abort frees; the graphs are kept, like the aborted communicator, for the life
        of the process."""
        if getattr(self.e.comm, "_failed", None) is not None:
            _ABANDONED.append(self._graphs)
            self._graphs = {}
            return
        self._graphs.clear()
        self.cp.cuda.Device().synchronize()

    # -- levels ---------------------------------------------------------------------------------------
    def prepare(self, bu_off, bu_col) -> None:
        """Capture every level graph now (both ping-pong directions, every cap), so that no search pays
        for a capture; call after the backend's first ``start_search`` (it allocates the visited bits)."""
        for k in (0, 1):
            for first in (False, True):
                self._capture_bottom_up(k, bu_off, bu_col, first)
            for cap in self.caps:
                for tiled in (False, True):
                    self._capture_top_down(k, cap, tiled)
        self.ready = True

    ready = False

    def _capture_bottom_up(self, k: int, bu_off, bu_col, first: bool) -> None:
        e, b, comm = self.e, self.e.b, self.e.comm
        bufs = self._bit_buffers()
        key = ("bu", k, first)
        if key in self._graphs:
            return
        # built outside the capture (they allocate), kept alive with the graph
        keep = b.bottom_up_g_buffers(bu_off, bu_col)
        ctr = self.cp.zeros(3, self.cp.int64)  # found, their degree sum, deferred long-row tasks
        out = self._out("bu", 2)
        ts = out[0][self.size * 2:]

        def build():
            comm.allgather_into(bufs[k], self._gbits, payload=True)
            self.cp.cuda.runtime.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, self.stream.ptr)
            b.stamp(ts, 0)
            b.bottom_up_g(bu_off, bu_col, self._gbits, e.parent, e.level, self.prm, bufs[1 - k], ctr,
                          first_neighbours=first)
            b.stamp(ts, 1)
            comm.allgather_into(ctr[:2], out[0][:self.size * 2])
            self._finish(out)

        self._capture(key, build, out + (ctr, keep))

    def _td_buffers(self) -> dict:
        """Buffers shared by every top-down graph (one runs at a time): counters, every remote pair the
        level can make, owner regions, what arrives, and the tiled prefix of a long queue."""
        if self._td is None:
            cp, size, e = self.cp, self.size, self.e
            cmax = self.caps[-1]
            kc = 4 + (size if size > 2 else 0)
            nrem = max(int(e.sent.size) * 64 - self.nloc, cmax)  # the first cmax rows always go out
            self._td = {"ctr": cp.zeros(kc, cp.int64), "rpairs": cp.empty((nrem, 2), cp.int64),
                        "regions": cp.empty((size * cmax, 2), cp.int64) if size > 2 else None,
                        "rctr": self._recv_buffer((size, kc), cp.int64),
                        "recv": self._recv_buffer(((size - 1) * cmax, 2), cp.int64),
                        "pre": cp.empty(max(self.nloc, 1), cp.int64), "tiles": cp.empty(self.nloc // 1024 + 2, cp.int64)}
        return self._td

    def _capture_top_down(self, k: int, cap: int, tiled: bool) -> None:
        e, b, comm, cp = self.e, self.e.b, self.e.comm, self.cp
        s, size, rank = e.shard, self.size, self.rank
        bufs = self._queue_buffers()
        key = ("td", k, cap, tiled)
        if key in self._graphs:
            return
        td = self._td_buffers()
        ctr, rpairs, rctr, recv = td["ctr"], td["rpairs"], td["rctr"], td["recv"]
        pre, tiles = (td["pre"], td["tiles"]) if tiled else (self._pre, None)
        peers = [p for p in range(size) if p != rank]
        at = 4 + rank if size > 2 else 2  # where a sender counted the pairs meant for this rank
        out = self._out("td", int(ctr.size))
        ts = out[0][size * ctr.size:]
        rt = cp.cuda.runtime

        def build():
            rt.memsetAsync(ctr.data.ptr, 0, ctr.nbytes, self.stream.ptr)
            b.stamp(ts, 0)
            b.top_down_g(s.offsets, s.columns, s.lo, s.hi, bufs[k], pre, self.prm, e.parent, e.level, e.sent,
                         bufs[1 - k], rpairs, ctr, tiles)
            if size > 2:
                regions = td["regions"][:size * cap]
                b.pairs_to_regions(rpairs, ctr, s.block, size, cap, out=regions)
                mine = {p: regions[p * cap:(p + 1) * cap] for p in peers}
            else:
                mine = {p: rpairs[:cap] for p in peers}
            b.stamp(ts, 1)
            # where this rank counted its pairs for peer p (owner_regions' per-owner counts, or with two
            # ranks the remote total)
            count = {p: (ctr[4 + p:5 + p] if size > 2 else ctr[2:3]) for p in peers}
            kw = {"counts": {p: [None, (count[p], 16)] for p in peers}} if self.bounded else {}
            comm.exchange_device({p: [ctr, mine[p]] for p in peers},
                                 {p: [rctr[p], recv[i * cap:(i + 1) * cap]] for i, p in enumerate(peers)}, **kw)
            for i, p in enumerate(peers):
                b.claim_pairs_g(recv[i * cap:(i + 1) * cap], rctr[p, at:at + 1], s.lo, e.parent, e.level,
                                self.prm, bufs[1 - k], ctr, s.offsets)
            comm.allgather_into(ctr, out[0][:size * ctr.size])
            self._finish(out)

        self._capture(key, build, out + (b._visited,))

    def _overflow(self, cnt: np.ndarray, cap: int, depth: int, nxt) -> np.ndarray | None:
        """The exact second round of a top-down level whose pairs for some peer went past ``cap`` (every
        rank's counters ``cnt`` from the graph): those senders resend all their pairs for those receivers
        (claims already made are no-ops), the claims append to ``nxt``; returns the final ``(size, 2)``
        counters, or None when nothing overflowed."""
        size, rank = self.size, self.rank
        plan = resend_plan(cnt, rank, cap)
        if plan is None:
            return None
        nsend, nrecv, starts = plan
        self.launches["overflow"] = self.launches.get("overflow", 0) + 1
        e, b, comm, cp = self.e, self.e.b, self.e.comm, self.cp
        s, td = e.shard, self._td
        peers = [p for p in range(size) if p != rank]
        grouped = b.group_pairs(td["rpairs"], int(cnt[rank, 2]), starts, s.block) if size > 2 else td["rpairs"]
        rstarts = np.concatenate(([0], np.cumsum([nrecv[p] for p in peers])))
        recv = cp.empty((int(rstarts[-1]), 2), cp.int64)
        comm.exchange_device({p: grouped[starts[p]:starts[p] + nsend[p]] for p in peers},
                             {p: recv[rstarts[i]:rstarts[i + 1]] for i, p in enumerate(peers)})
        b.claim_pairs_async(recv, s.lo, e.parent, e.level, np.int32(depth), nxt, td["ctr"], s.offsets)
        return comm.gather_device(td["ctr"][:2])

    def bottom_up(self, bits, depth: int, bu_off, bu_col, first: bool = False) -> tuple[np.ndarray, float, object]:
        """One bottom-up level from local frontier ``bits`` (uint64 words over the owned vertices);
        ``first``: the kernel reads first neighbours from the backend's packed table.  Returns (every rank's
        ``[found, their degree sum]``, local seconds, the next local bitmap)."""
        k = self.bits_slot(bits)
        self._capture_bottom_up(k, bu_off, bu_col, first)
        self.prm_host[0] = depth
        cnt, local_s = self._run(("bu", k, first), "bottom-up level")
        return cnt, local_s, self._bits[1 - k][:self.e.nwords]

    def top_down(self, queue, depth: int, counts, degs) -> tuple[np.ndarray, float, object]:
        """One top-down level from local ``queue`` (int64 local ids); ``counts``/``degs`` every rank's queue
        length and frontier degree sum (the last counters).  Returns (every rank's ``[claimed, their degree
        sum]``, local seconds, the next queue buffer, whose first ``claimed`` entries are this rank's next
        queue)."""
        cap, tiled = choose_top_down(counts, degs, self.caps, self.small_queue)
        k = self.queue_slot(queue)
        self._capture_top_down(k, cap, tiled)
        self.prm_host[0], self.prm_host[1] = depth, queue.size
        cnt, local_s = self._run(("td", k, cap, tiled), "top-down level")
        if self.bounded:  # the launch counted every captured row as sent; only the filled ones moved
            mine = cnt[self.rank, 4:] if self.size > 2 else np.array([cnt[self.rank, 2]] * 2)
            moved = sum(min(int(mine[p]), cap) for p in range(self.size) if p != self.rank)
            self.e.comm.note_sent(16 * (moved - cap * (self.size - 1)))
        final = self._overflow(cnt, cap, depth, self._queues[1 - k]) if cap == self.caps[-1] else None
        return (cnt[:, :2] if final is None else final), local_s, self._queues[1 - k]
