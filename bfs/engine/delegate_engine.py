"""The delegates engine (Pan, Pearce, Owens): high-degree vertices replicated, their visited bits all-reduced.

Each rank owns its 1D block (parents, levels, queue) and holds the blocks of
:mod:`breadth.bfs.delegate_blocks`.  Every level is top-down:

* the delegates that entered the frontier last level (known to every rank) are expanded over their entries
  held here, all of whose targets are owned here: local claims, no message;
* the owned normal frontier is expanded over its rows: owned targets are claimed, remote delegates are noted
  in this level's delegate bitmask (with a candidate parent), remote normal targets go with their parents to
  their owners (point to point, as 1D);
* the bitmask (one bit per delegate) is all-reduced (OR): every rank learns the next delegate frontier, and
  each delegate's owner gives it its level.

A delegate's parent is settled once per search: each rank keeps the parent it saw for the delegates it
reached first at their level, and one all-reduce (min) of those candidates gives the owners a valid parent.
Bottom-up is not used (the delegates' entries, spread over the targets' owners, are what make a level cheap).
"""

from __future__ import annotations

import time

import numpy as np

from ..cpu.frontier import num_words
from .engine import Engine, LevelRecord, check_depth_limit

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

    def search(self, root, depth_limit: int | None = None) -> list[LevelRecord]:
        """As :meth:`Engine.search`, every level top-down with the delegates' bitmask all-reduced."""
        s, b, xp, comm, d = self.shard, self.b, self.b.xp, self.comm, self.shard.blocks
        check_depth_limit(depth_limit)
        queue = self._start(root)
        roots = xp.asarray(np.unique(np.asarray(root, np.int64).ravel()))
        visited = xp.zeros(self.ndel, bool)  # delegates visited so far (the same on every rank)
        cand = xp.full(self.ndel, _NONE, np.int64)  # parent candidates of delegates reached here first
        is_d, frontier_d = self._delegate_index(roots)
        visited[frontier_d] = True
        cand[frontier_d] = roots[is_d]  # a source is its own parent
        records: list[LevelRecord] = []
        frontier_size, depth = int(self._allreduce(int(queue.size))[0]), 1
        while depth_limit is None or depth <= depth_limit:
            bytes0 = comm.bytes_sent()
            t0 = time.perf_counter()
            # the delegates' own entries: parents come out as `index + lo`, made global ids here
            got_d, _, _, _ = b.top_down_step(d.delegate_offsets, d.delegate_columns, s.lo, s.hi, frontier_d,
                                             self.parent, self.level, np.int32(depth), self._no_sent, self.nchunks)
            if got_d.size:
                got_d = xp.unique(got_d)  # racing threads may claim a vertex twice: translate it once
                self.parent[got_d] = self.delegates[self.parent[got_d].astype(np.int64) - s.lo].astype(self.parent.dtype)
            got_n, rv, rp, _ = b.top_down_step(d.normal_offsets, d.normal_columns, s.lo, s.hi, queue, self.parent,
                                               self.level, np.int32(depth), self.sent, self.nchunks)
            remote_d, idx = self._delegate_index(rv)
            fresh = ~visited[idx]
            cand[idx[fresh]] = rp[remote_d][fresh]
            t1 = time.perf_counter()
            claimed = self._fold(rv[~remote_d], rp[~remote_d], depth)
            nxt = xp.concatenate([got_d, got_n, claimed])
            mine_d, midx = self._delegate_index(nxt + s.lo)
            cand[midx] = self.parent[nxt[mine_d]].astype(np.int64)
            reached = xp.concatenate([idx[fresh], midx])
            mask = b.queue_to_bits(reached, self.dwords) if self.dwords else xp.zeros(0, np.uint64)
            parts = comm.allgather(mask) if comm.size > 1 else [mask]
            for part in parts[1:]:
                parts[0] = parts[0] | part
            frontier_d = b.bits_to_queue(parts[0]) if self.dwords else xp.empty(0, np.int64)
            frontier_d = frontier_d[~visited[frontier_d]]
            visited[frontier_d] = True
            # the owners give their delegates reached elsewhere a level (their parent comes at the end)
            own = frontier_d[(frontier_d >= self.own_first) & (frontier_d < self.own_last)]
            local = self.delegates[own] - s.lo
            local = local[self.level[local] < 0]
            if local.size:
                self.parent[local] = (local + s.lo).astype(self.parent.dtype)  # a placeholder: visited
                self.level[local] = depth
                b.mark_visited(b.to_host(local))
            queue = xp.concatenate([nxt, local])
            tr = time.perf_counter()
            found = int(self._allreduce(int(queue.size))[0])
            t2 = time.perf_counter()
            records.append(LevelRecord(depth, "td", frontier_size, found, t1 - t0, t2 - t1,
                                       comm.bytes_sent() - bytes0, t2 - tr))
            frontier_size = found
            if found == 0:
                break
            depth += 1
        self._settle_delegate_parents(cand)
        self.records = records
        return records

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
