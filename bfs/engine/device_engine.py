"""The SPMD engine with its counters kept on the device: multi-GPU levels with one or two synchronisations.

:class:`~breadth.bfs.engine.engine.Engine` learns each count on the host as soon as a kernel produces it.  On
GPUs every such read is a synchronisation, and with two ranks a top-down level makes about five of them
(expansion, shape header, payload, claim, counters) and a bottom-up level three: ~350 µs a level on two
NVLink H200s, where the data moved takes a few µs.  Here each kernel adds its counts to a small int64 vector
on the device, the NCCL rounds are queued on the same stream without being waited for, and the host
waits only where it must know a size:

* **bottom-up**: the frontier all-gather (every rank's size is known from the last counters) and the
  bottom-up kernel are queued, then one all-gather of every rank's ``[found, their degree sum]``: **one**
  synchronisation per level.
* **top-down, small frontier** (every rank's frontier degree sum, known from the last counters, at most
  ``spec_pairs``): that degree sum bounds the pairs a rank can send to any peer, so each rank sends its
  whole bounded buffer together with its counters and the receivers' claims read the real count on the
  device (:meth:`GpuBackend.claim_pairs_async` with ``count``): **one** synchronisation, for at most
  ``spec_pairs`` x 16 bytes on the wire (4 MB, ~25 µs over NVLink, less than a synchronisation).
* **top-down, large frontier**: the expansion kernel claims local vertices, lists remote ``(vertex,
  parent)`` pairs and counts them per owner; an all-gather of those counters tells every rank what each
  peer will send it (synchronisation one).  The exact pairs then go out, the receivers' claims append to
  the level's own queue and counters, and a second all-gather closes the level (synchronisation two).

Over a communicator with capped rounds (UCX) every level takes one round instead
(:mod:`breadth.bfs.engine.one_round_levels`, ``SearchConfig(one_round_levels=False)`` turns it off): a
top-down frontier's counters travel with the pairs expanded from it (a rank expands before it knows the
other parts only where the direction rule keeps top-down whatever they hold), a bottom-up level's with the
frontier it found.

By default (``SearchConfig(level_graphs=False)`` turns it off) each of these levels is replayed as a CUDA graph
(:mod:`breadth.bfs.gpu.level_graphs`) where the communicator's rounds can be captured (``capturable_rounds``:
NCCL, one GPU alone): one launch and one wait per level, a second exact round only when a top-down level's
pairs overflow the captured buffers.  The queued levels below serve UCX, whose rounds are posted from the
host (there each round waits for the stream once and has landed when it returns), and runs with the graphs
turned off.

The search is the loop every engine runs (:func:`~breadth.bfs.engine.levels.run_levels`: the direction rule,
the levels, their records), with this engine's steps; only where the counts live changes.  Per-level
``local_s`` is the kernels' time from CUDA events; ``exchange_s`` the rest of the level; ``reduce_s`` the last
counters round.  Selected by :func:`breadth.bfs.engine.session.run_session` for GPU ranks whose communicator
supports device rounds (NCCL, UCX), unless ``SearchConfig(device_counters=False)``.
"""

from __future__ import annotations

import time

import numpy as np

from ..search_order import bottom_up_rows
from .engine import Engine, check_depth_limit
from .levels import Level, LevelRecord, run_levels


class DeviceEngine(Engine):
    """:class:`Engine` for GPU ranks over a communicator with ``gather_device``/``exchange_device``."""

    _gather_kw = {"wait": False}
    #: largest frontier degree sum (pairs) for the one-synchronisation top-down level
    #: (``SearchConfig.spec_pairs`` overrides it; 0 always takes the exact two-synchronisation level)
    spec_pairs = 1 << 18
    #: bottom-up reads first neighbours from the backend's packed table once the frontier holds this share
    #: of the vertices (most unvisited vertices then settle on their first neighbour; on an H200 at scale
    #: 26 the table takes the level after the first bottom-up one to 0.61 ms from 0.76, but the first, whose
    #: frontier is 0.1% of the vertices, to 1.55 ms from 1.35)
    first_neighbour_fraction = 1 / 16

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        if self.config.spec_pairs is not None:
            self.spec_pairs = int(self.config.spec_pairs)
        if not self.comm.device_counters or not self.b.async_levels:
            raise TypeError("DeviceEngine needs the GPU backend and a communicator with device rounds (NCCL, UCX)")
        cp = self.b.xp
        self._ev = [cp.cuda.Event(block=False), cp.cuda.Event(block=False)]
        # config.level_graphs off queues every level from Python (to measure the graphs' gain); so does a
        # communicator whose rounds run on the host (UCX), which no CUDA graph can hold
        self.graphs = None
        if self.config.level_graphs and self.comm.capturable_rounds:
            from ..gpu.level_graphs import LevelGraphs

            self.graphs = LevelGraphs(self)
        self.one_round = None
        if (self.graphs is None and self.comm.capped_rounds and self.comm.size > 1 and self.config.one_round_levels
                and self.spec_pairs > 0):
            from .one_round_levels import OneRoundLevels

            self.one_round = OneRoundLevels(self, self.spec_pairs)

    def describe(self) -> dict:
        """:meth:`Engine.describe`, with how levels are issued: ``"captured"`` (CUDA graphs), ``"one-round"``
        or ``"queued"`` from Python."""
        how = "captured" if self.graphs is not None else "one-round" if self.one_round is not None else "queued"
        return {**super().describe(), "levels": how}

    def close(self) -> None:
        """Destroy the captured levels: NCCL's ncclCommDestroy waits (here: for ever) while a CUDA graph
        holding its operations exists."""
        if self.graphs is not None:
            self.graphs.close()

    def _kernel_s(self) -> float:
        """Seconds between the two events (recorded around a level's kernels; complete after a wait)."""
        return self.b.xp.cuda.get_elapsed_time(self._ev[0], self._ev[1]) * 1e-3

    def _cap(self, r: int, deg: int) -> int:
        """Bound on the pairs rank ``r`` (frontier degree sum ``deg``) sends one peer in a one-sync level:
        an edge gives at most one pair, a peer owns at most ``block`` vertices, and the sender's pair
        buffer holds ``n - num_local(r)`` (the two-rank case sends from it directly)."""
        s = self.shard
        nloc = min(s.block, max(s.num_vertices - r * s.block, 0))
        return int(min(deg, s.block, s.num_vertices - nloc))

    def _td_exact(self, nxt, rpairs, ctr, depth: int):
        """The top-down exchange whose sizes come from a counters round (the level's first wait)."""
        s, b, xp, comm = self.shard, self.b, self.b.xp, self.comm
        rank, size = comm.rank, comm.size
        c1 = comm.gather_device(ctr)  # who sends how many pairs to whom
        peers = [p for p in range(size) if p != rank]
        if size > 2:
            nsend, nrecv = c1[rank, 4:], c1[:, 4 + rank]
            starts = np.concatenate(([0], np.cumsum(nsend)[:-1]))
            rpairs = b.group_pairs(rpairs, int(c1[rank, 2]), starts, s.block)
        else:  # two ranks: every remote pair is the other rank's, in td_expand's order
            nsend, nrecv, starts = np.zeros(2, np.int64), np.zeros(2, np.int64), np.zeros(2, np.int64)
            nsend[1 - rank], nrecv[1 - rank] = c1[rank, 2], c1[1 - rank, 2]
        rstarts = np.concatenate(([0], np.cumsum([nrecv[p] for p in peers])))
        recv = xp.empty((int(rstarts[-1]), 2), np.int64)
        comm.exchange_device({p: rpairs[starts[p]:starts[p] + nsend[p]] for p in peers},
                             {p: recv[rstarts[i]:rstarts[i + 1]] for i, p in enumerate(peers)})
        b.claim_pairs_async(recv, s.lo, self.parent, self.level, np.int32(depth), nxt, ctr, s.offsets)

    def _td_bounded(self, nxt, rpairs, ctr, depth: int, caps: list[int]):
        """The top-down exchange with sizes bounded in advance (``caps[r]`` rows from rank ``r`` to each
        peer): counters and pairs in one round, no wait."""
        s, b, xp, comm = self.shard, self.b, self.b.xp, self.comm
        rank, size = comm.rank, comm.size
        peers = [p for p in range(size) if p != rank]
        cap = caps[rank]
        if size > 2:
            regions = b.pairs_to_regions(rpairs, ctr, s.block, size, cap)
            mine = {p: regions[p * cap:(p + 1) * cap] for p in peers}
        else:
            mine = {p: rpairs[:cap] for p in peers}
        rctr = xp.empty((size, int(ctr.size)), np.int64)
        rstarts = np.concatenate(([0], np.cumsum([caps[p] for p in peers])))
        recv = xp.empty((int(rstarts[-1]), 2), np.int64)
        comm.exchange_device({p: [ctr, mine[p]] for p in peers},
                             {p: [rctr[p], recv[rstarts[i]:rstarts[i + 1]]] for i, p in enumerate(peers)})
        at = 4 + rank if size > 2 else 2  # where a sender counted the pairs meant for this rank
        for i, p in enumerate(peers):
            b.claim_pairs_async(recv[rstarts[i]:rstarts[i + 1]], s.lo, self.parent, self.level, np.int32(depth),
                                nxt, ctr, s.offsets, count=rctr[p, at:at + 1])

    def search(self, root, depth_limit: int | None = None) -> list[LevelRecord]:
        """Breadth-first search from global id ``root`` (or several sources together, with an optional
        ``depth_limit``: see :meth:`Engine.search`); returns the per-level records."""
        check_depth_limit(depth_limit)
        if self.graphs is None:
            return run_levels(self, root, depth_limit)
        cp = self.b.xp
        # the captured levels need a stream of their own: it starts after what the caller queued, and
        # the caller's stream continues after the search
        caller, st = cp.cuda.get_current_stream(), self.graphs.stream
        st.wait_event(caller.record())
        try:
            with st:
                return run_levels(self, root, depth_limit)
        finally:
            caller.wait_event(st.record())

    def _start(self, root):
        """:meth:`Engine._start`; one root (an integer) is seeded on the device, straight into the first
        level's queue buffer, and its degree read without waiting for the resets (the multi-source case and
        the host engine's checks stay in :meth:`Engine._start`)."""
        if not isinstance(root, (int, np.integer)):
            return super()._start(root)
        s, r = self.shard, int(root)
        if not 0 <= r < s.num_vertices:
            raise ValueError(f"root {r} outside [0, {s.num_vertices})")
        local = r - s.lo if s.lo <= r < s.hi else -1
        buf = self._entry_queue()
        if buf is None:
            if self._root_queue is None:
                self._root_queue = self.b.xp.empty(1, np.int64)
            buf = self._root_queue
        deg = self.b.start_root(self.parent, self.level, s.offsets, local, r, buf)
        if self.sent.size:
            self.sent.fill(0)
        queue = buf[:1 if local >= 0 else 0]
        self.b.note_degree_sum(queue, s.offsets, deg)
        return queue

    _root_queue = None

    def _entry_queue(self):
        """The queue buffer the next top-down level reads in place (the captured levels', a one-round run's), or
        None where its levels take their queue wherever it is."""
        if self.graphs is not None:
            return self.graphs.queue_buffer(0)
        return self.one_round.entry if self.one_round is not None else None

    # -- the steps of a level (:class:`~breadth.bfs.engine.levels.LevelSteps`) ---------------------------
    # The frontier between levels: a queue of local ids (``_queue``) with every rank's degree sum (``_degs``, from
    # the last counters) while the search runs top-down (None while a one-round run holds it: its next round reads
    # it in place); this rank's words of the frontier bitmap (``_bits``), and where a one-round level brought it,
    # the global bitmap (``_gathered``), while it runs bottom-up.
    _degs = None
    _gathered = None
    _cnt = None
    _listed = None  # the last one-round level's frontier parts, where every other rank's came listed

    def begin_search(self, root) -> np.ndarray:
        """:meth:`Engine.begin_search`, keeping every rank's degree sum; the captured levels prepared once."""
        cnt = super().begin_search(root)
        self._gathered, self._degs = None, cnt[:, 1]
        if self.graphs is not None and not self.graphs.ready:
            self.graphs.prepare(*bottom_up_rows(self.shard))
        if self.one_round is not None:
            self.one_round.begin()
        return cnt

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """The captured level where the rounds can be captured; else a one-round level where every part fits the
        pair capacity (or the last round expanded this one), else the queued level (one or two waits)."""
        rank, degs = self.comm.rank, self._degs
        self._listed = None
        if self.graphs is not None:
            cnt, local_s, qbuf = self.graphs.top_down(self._queue, level.depth, level.counters[:, 0], degs)
            reduce_s = time.perf_counter() - self.graphs.launched
            self._queue = qbuf[:int(cnt[rank, 0])]
        elif self.one_round is not None and (self.one_round.pending is not None
                                             or max(int(d) for d in degs) <= self.one_round.cap):
            cnt, local_s, reduce_s, self._queue, self._listed = self.one_round.step(self._queue, level, degs)
        else:
            cnt, local_s, reduce_s = self._top_down_queued(level.depth, degs)
        self._degs = cnt[:, 1]
        return cnt, local_s, reduce_s

    def _top_down_queued(self, depth: int, degs) -> tuple[np.ndarray, float, float]:
        """A top-down level queued from Python: its pairs bounded in advance where every rank's degree sum allows
        (one wait), else sized by a counters round (two)."""
        s, b, comm = self.shard, self.b, self.comm
        size = comm.size
        caps = [self._cap(r, int(degs[r])) for r in range(size)]
        bounded = max(caps) <= self.spec_pairs
        self._ev[0].record()
        nxt, rpairs, ctr = b.top_down_async(s.offsets, s.columns, s.lo, s.hi, self._queue, self.parent, self.level,
                                            np.int32(depth), self.sent, int(degs[comm.rank]),
                                            size if size > 2 else 0, s.block, count_owners=not bounded)
        self._ev[1].record()
        if bounded:
            self._td_bounded(nxt, rpairs, ctr, depth, caps)
        else:
            self._td_exact(nxt, rpairs, ctr, depth)
        tr = time.perf_counter()
        cnt = comm.gather_device(ctr[:2])  # the level's last synchronisation: its counters
        reduce_s = time.perf_counter() - tr
        self._queue = nxt[:int(cnt[comm.rank, 0])]
        return cnt, self._kernel_s(), reduce_s

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """The captured level; else the global frontier (brought by the last one-round level, written by the ranks
        into each other's, or gathered) and a one-round or queued level.  Counts ``(found, their degree sum)``
        (one-round levels add their tasks)."""
        s, b, xp, comm = self.shard, self.b, self.b.xp, self.comm
        depth, counts = level.depth, level.counters[:, 0]
        bu_off, bu_col = bottom_up_rows(s)
        first = int(counts.sum()) >= s.num_vertices * self.first_neighbour_fraction
        if self.graphs is not None:
            cnt, local_s, bits = self.graphs.bottom_up(self._bits, depth, bu_off, bu_col, first)
            t1 = self.graphs.launched
        else:
            # over UCX the last bottom-up level's round brought this frontier with its counters
            fbits = self._gathered
            if fbits is None and self.one_round is not None:  # (None where the ranks cannot write each other's)
                fbits = self.one_round.gather(self._bits)
            if fbits is None:
                fbits = self._gather_frontier(self._bits, counts)
            if self.one_round is not None:  # a captured level, and its one round: counters and frontier
                cnt, local_s, bits, self._gathered = self.one_round.bottom_up(fbits, depth, bu_off, bu_col, first)
                t1 = self.one_round.launched
            else:
                bits = xp.empty(self.nwords, np.uint64)
                self._ev[0].record()
                ctr = b.bottom_up_async(bu_off, bu_col, fbits, self.parent, self.level, np.int32(depth), bits, first)
                self._ev[1].record()
                t1 = time.perf_counter()
                cnt = comm.gather_device(ctr)  # the level's one synchronisation
                local_s = self._kernel_s()
        reduce_s = time.perf_counter() - t1
        rank = comm.rank
        b.note_bits(bits, int(cnt[rank, 0]), int(cnt[rank, 1]), bu_off)
        self._bits, self._cnt = bits, cnt
        return cnt, local_s, reduce_s

    def turn_bottom_up(self) -> None:
        """The queue as this rank's words of the frontier bitmap, written where the next level reads them (the
        captured level's slot, a one-round level's global bitmap); a one-round level that brought every part
        listed gives the global frontier too."""
        s, b, graphs, one = self.shard, self.b, self.graphs, self.one_round
        if one is not None and one.pending is not None:  # (a run expands ahead only where the rule keeps top-down)
            self._queue = one.take_back()
        out = (graphs.bits_buffer(0)[:self.nwords] if graphs is not None
               else one.turn_bits() if one is not None else None)
        self._bits = b.queue_to_bits(self._queue, self.nwords, out=out)
        b.note_bits(self._bits, int(self._queue.size), int(self._degs[self.comm.rank]), s.offsets)
        self._gathered = one.frontier_from_parts(*self._listed) if self._listed is not None else None
        self._listed = None

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """The bitmap as a queue, where the next level reads it; returns its out-edges, all ranks (counted by the
        bottom-up level's counters, or for a directed graph, whose bottom-up counted in-edges, one all-reduce)."""
        s, b = self.shard, self.b
        self._gathered = None
        self._queue = b.bits_to_queue(self._bits, out=self._entry_queue())  # (idle while bottom-up ran)
        if s.directed:
            self._degs = self._counters(int(b.degree_sum(s.offsets, self._queue)))[:, 0]
        else:
            self._degs = self._cnt[:, 1]
        return int(self._degs.sum())

    def end_search(self) -> None:
        """Drop the last frontier and whatever a one-round level left pending."""
        self._queue = self._bits = self._gathered = self._cnt = self._listed = None
        if self.one_round is not None:
            self.one_round.begin()
