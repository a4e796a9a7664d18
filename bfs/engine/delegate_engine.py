"""The delegates engine (Pan, Pearce, Owens): high-degree vertices replicated, their visited bits all-reduced.

Each rank owns its 1D block (parents, levels, queue) and holds the blocks of
:mod:`breadth.bfs.delegate_blocks`.  A top-down level:

* the delegates that entered the frontier last level (known to every rank) are expanded over their entries
  held here, all of whose targets are owned here: local claims, no message;
* the owned normal frontier is expanded over its rows: owned targets are claimed, remote delegates are noted
  in this level's delegate bitmask (with a candidate parent), remote normal targets go with their parents to
  their owners (point to point, as 1D);
* the bitmask (one bit per delegate) is all-reduced (OR): every rank learns the next delegate frontier, and
  each delegate's owner gives it its level.

A bottom-up level is 1D's, over the owned vertices' own rows (the shard keeps them): the owners' frontier is
gathered (list or bitmap) and each owner finds its vertices' parents; the delegates it found join the same
bitmask.  The direction rule is 1D's.

A delegate's parent is settled once per search: each rank keeps the parent it saw for the delegates it
reached first at a top-down level, and one all-reduce (min) of those candidates gives the owners a valid
parent (a delegate found bottom-up has its owner's parent already, and no candidate).
"""

from __future__ import annotations

import time

import numpy as np

from ..cpu.frontier import num_words
from .engine import Engine
from .levels import Level

_NONE = np.iinfo(np.int64).max  # no candidate parent


class DelegateEngine(Engine):
    """:class:`Engine` over a shard with :class:`~breadth.bfs.delegate_blocks.DelegateBlocks` (CPU or GPU)."""

    def __init__(self, shard, comm=None, *, backend: str = "cpu", **kw):
        super().__init__(shard, comm, backend=backend, **kw)
        d = self.shard.blocks
        if d is None or self.shard.partitioning.kind != "delegates":
            raise ValueError("DelegateEngine needs a shard of a delegates partition "
                             "(breadth.bfs.partitioned.partition_graph)")
        xp = self.b.xp
        self.delegates = d.delegates
        self.ndel = int(d.delegates.size)
        self.dwords = num_words(self.ndel)
        s = self.shard
        self.sent = xp.zeros(num_words(s.num_vertices), np.uint64)
        self._no_sent = xp.zeros(0, np.uint64)  # the delegates' entries reach owned vertices only
        host = self.b.to_host(d.delegates)
        self.own_first, self.own_last = (int(x) for x in np.searchsorted(host, [s.lo, s.hi]))

    def _delegate_index(self, ids):
        """``(is_delegate, index)`` of global ids ``ids`` (int64): a mask, and the delegate indices of the
        ids it selects."""
        xp = self.b.xp
        if self.ndel == 0 or ids.size == 0:
            return xp.zeros(ids.size, bool), xp.empty(0, np.int64)
        pos = xp.searchsorted(self.delegates, ids)
        hit = self.delegates[xp.minimum(pos, self.ndel - 1)] == ids
        return hit, pos[hit]

    def _fold(self, v, p, depth: int):
        """Normal (vertex, parent) pairs to their owners (1D's exchange); returns the claimed local ids."""
        xp, size = self.b.xp, self.comm.size
        if size == 1:
            return xp.empty(0, np.int64)
        return self._exchange_pairs(v, p, depth)

    # -- the steps of a level (:class:`~breadth.bfs.engine.levels.LevelSteps`) -----------------------------
    # Engine.search runs them: top-down levels expand the delegates' entries where they live and send only normal
    # vertices' pairs; bottom-up levels are 1D's (the shard's own rows, the owners' frontier gathered); after
    # either, the delegates reached are all-reduced as one bitmask.  The frontier between levels is the owned
    # queue (local ids), and the delegate frontier (indices), the same on every rank.
    def begin_search(self, root) -> np.ndarray:
        """:meth:`Engine._start`; the delegates among the sources are visited, each its own parent."""
        xp = self.b.xp
        queue = self._start(root)
        roots = xp.asarray(np.unique(np.asarray(root, np.int64).ravel()))
        self._visited_d = xp.zeros(self.ndel, bool)  # delegates visited so far (the same on every rank)
        self._cand = xp.full(self.ndel, _NONE, np.int64)  # parent candidates of delegates reached here first
        is_d, self._frontier_d = self._delegate_index(roots)
        self._visited_d[self._frontier_d] = True
        self._cand[self._frontier_d] = roots[is_d]  # a source is its own parent
        self._queue = queue
        return self._counters(int(queue.size), int(self.b.degree_sum(self.shard.offsets, queue)))

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """:meth:`_top_down`, then the delegates reached."""
        depth = level.depth
        t0 = time.perf_counter()
        nxt, reached = self._top_down(self._queue, self._frontier_d, self._visited_d, self._cand, depth)
        local_s = time.perf_counter() - t0
        return self._close_level(self._with_delegates(nxt, reached, depth), local_s)

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """1D's bottom-up over the owned rows against the gathered frontier, then the delegates reached."""
        s, b, depth = self.shard, self.b, level.depth
        fbits = self._gather_frontier(b.queue_to_bits(self._queue, self.nwords), level.counters[:, 0])
        t1 = time.perf_counter()
        found_bits, _ = self._bottom_up_owned(fbits, depth)
        nxt = b.bits_to_queue(found_bits)
        _, reached = self._delegate_index(nxt + s.lo)  # found by their owners, parents final
        t2 = time.perf_counter()
        return self._close_level(self._with_delegates(nxt, reached, depth), t2 - t1)

    def _with_delegates(self, nxt, reached, depth: int) -> tuple[int, int]:
        """The next frontier: ``nxt`` (owned vertices claimed) and the owned delegates that any rank reached this
        level (``reached``: this rank's, delegate indices), each given its level here (its parent comes at the end);
        returns its length and out-edges."""
        s, b, xp = self.shard, self.b, self.b.xp
        self._frontier_d = frontier_d = self._delegates_reached(reached, self._visited_d)
        own = frontier_d[(frontier_d >= self.own_first) & (frontier_d < self.own_last)]
        local = self.delegates[own] - s.lo
        local = local[self.level[local] < 0]
        if local.size:
            self.parent[local] = (local + s.lo).astype(self.parent.dtype)  # a placeholder: visited
            self.level[local] = depth
            b.mark_visited(b.to_host(local))
        self._queue = queue = xp.concatenate([nxt, local])
        return int(queue.size), int(b.degree_sum(s.offsets, queue))

    def turn_bottom_up(self) -> None:
        """Nothing: bottom-up reads the queue."""

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """Nothing: the last counters counted the queue's edges."""
        return frontier_edges

    def end_search(self) -> None:
        """The delegates' parents settled (:meth:`_settle_delegate_parents`); the last frontier dropped."""
        self._settle_delegate_parents(self._cand)
        self._queue = self._frontier_d = self._visited_d = self._cand = None

    def _top_down(self, queue, frontier_d, visited, cand, depth: int):
        """One top-down level: returns the owned vertices claimed (local ids) and the delegates this rank
        reached (indices), noting the candidate parents of those reached first now."""
        s, b, xp, d = self.shard, self.b, self.b.xp, self.shard.blocks
        # the delegates' own entries: parents come out as `index + lo`, made global ids here
        got_d, _, _, _ = b.top_down_step(d.delegate_offsets, d.delegate_columns, s.lo, s.hi, frontier_d,
                                         self.parent, self.level, np.int32(depth), self._no_sent, self.nchunks,
                                         claim_offsets=s.offsets)
        if got_d.size:
            got_d = xp.unique(got_d)  # racing threads may claim a vertex twice: translate it once
            self.parent[got_d] = self.delegates[self.parent[got_d].astype(np.int64) - s.lo].astype(self.parent.dtype)
        got_n, rv, rp, _ = b.top_down_step(d.normal_offsets, d.normal_columns, s.lo, s.hi, queue, self.parent,
                                           self.level, np.int32(depth), self.sent, self.nchunks)
        remote_d, idx = self._delegate_index(rv)
        fresh = ~visited[idx]
        cand[idx[fresh]] = rp[remote_d][fresh]
        claimed = self._fold(rv[~remote_d], rp[~remote_d], depth)
        nxt = xp.concatenate([got_d, got_n, claimed])
        mine_d, midx = self._delegate_index(nxt + s.lo)
        cand[midx] = self.parent[nxt[mine_d]].astype(np.int64)
        return nxt, xp.concatenate([idx[fresh], midx])

    def _delegates_reached(self, reached, visited):
        """The delegates that every rank reached this level (all-reduced bitmask, OR) and none before: the
        next delegate frontier (indices), now marked in ``visited``."""
        b, xp, comm = self.b, self.b.xp, self.comm
        if not self.dwords:
            return xp.empty(0, np.int64)
        mask = b.queue_to_bits(reached, self.dwords)
        parts = comm.allgather(mask) if comm.size > 1 else [mask]
        mask = parts[0]
        for part in parts[1:]:
            mask = mask | part
        new = b.bits_to_queue(mask)
        new = new[~visited[new]]
        visited[new] = True
        return new

    def _settle_delegate_parents(self, cand) -> None:
        """Each reached owned delegate's parent: the least candidate over all ranks (all of the right level)."""
        if self.ndel == 0:
            return
        s, b, xp = self.shard, self.b, self.b.xp
        best = self.comm.allreduce(b.to_host(cand), "min") if self.comm.size > 1 else b.to_host(cand)
        best = xp.asarray(best[self.own_first:self.own_last])
        local = self.delegates[self.own_first:self.own_last] - s.lo
        hit = (self.level[local] >= 0) & (best != _NONE)
        self.parent[local[hit]] = best[hit].astype(self.parent.dtype)
