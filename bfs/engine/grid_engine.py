"""The 2D R x C engine (Buluc-Madduri; Bisson, Bernaschi, Mastrostefano): the level's exchange in grid rows and
columns instead of among all ranks.

Each rank still owns its 1D block of vertices (parents, levels, the queue of the next frontier, the direction
rule's degree sums); the search's entries are its 2D block (:mod:`breadth.bfs.grid_blocks`).  A level:

* the owners' frontier is gathered within each grid column (``R - 1`` peers; a vertex list or a bitmap per
  owner, whichever is smaller, as the 1D gather does), giving the column set's frontier;
* top-down: the block's column-set rows of that frontier are expanded; every vertex reached goes with its
  parent to its owner within the grid row (``C - 1`` peers), which claims it;
* bottom-up: the row block's unvisited vertices look for a parent in the column frontier (the row's visited
  state is first brought up to date: each owner sends its row peers the vertices it claimed since they last
  heard, a list or a bitmap); the vertices found go with their parents to their owners within the row.

Levels and validation are the 1D engine's: same owners, same results, any valid parent.
"""

from __future__ import annotations

import time

import numpy as np

from ..cpu.frontier import num_words
from ..grid_blocks import global_ids, grid_position
from .backend import get_backend
from .engine import Engine
from .levels import Level


def _padded(a, xp):
    """1-D ``a`` with zeros appended up to a whole number of 8 bytes (the next part of a message stays
    aligned)."""
    extra = (-a.nbytes % 8) // a.itemsize
    return xp.concatenate([a, xp.zeros(extra, a.dtype)]) if extra else a


class GridEngine(Engine):
    """:class:`Engine` over a shard with :class:`~breadth.bfs.grid_blocks.GridBlocks` (CPU or GPU ranks)."""

    def __init__(self, shard, comm=None, *, backend: str = "cpu", bottom_up: str = "row", **kw):
        super().__init__(shard, comm, backend=backend, **kw)
        if bottom_up not in ("row", "owner"):
            raise ValueError(f"bottom_up must be 'row' or 'owner', got {bottom_up!r}")
        #: ``"row"``: bottom-up scans the row block against the column frontier (2D's own, ``n / C`` frontier
        #: bits, parents folded to their owners); ``"owner"``: 1D's bottom-up over the owners' own rows (the
        #: whole frontier gathered, no parents moved), which sends fewer bytes at 4 and 8 ranks
        self.bottom_up = bottom_up
        g = self.shard.blocks
        if g is None or self.shard.partitioning.kind != "2d":
            raise ValueError("GridEngine needs a shard of a 2D partition (breadth.bfs.partitioned.partition_graph)")
        rows, cols = self.grid = g.grid
        if rows * cols != self.comm.size:
            raise ValueError(f"a {rows}x{cols} grid needs {rows * cols} ranks, the session has {self.comm.size}")
        self.gi, self.gj = grid_position(self.comm.rank, g.grid)
        self.row_group = [self.gi * cols + k for k in range(cols)]
        self.col_group = [k * cols + self.gj for k in range(rows)]
        xp, n = self.b.xp, self.shard.num_vertices
        self.owner_words = self.shard.block // 64  # an owner's frontier bitmap, padded to its whole block
        pdt = self.b.parent_dtype(n)
        #: compact column-set ids in fold messages: 32-bit while the column set's ids fit (GPU parents are 64-bit)
        self.message_dtype = np.dtype(np.int32 if rows * self.shard.block <= np.iinfo(np.int32).max else np.int64)
        # bottom-up's state over the row block, on a backend of its own: its unvisited words are the row's.
        # Its parents are compact column-set ids, turned into global ids as they leave.
        self.rb = get_backend(backend, self.config)
        self.rb.use_bottom_up_columns(g.bu_columns, g.bu_columns)  # rows as built: no degree order across ranks
        self.row_parent = xp.full(g.row_hi - g.row_lo, -1, pdt)
        self.row_level = xp.full(g.row_hi - g.row_lo, -1, np.int32)
        # top-down claims nothing itself (lo = hi = 0): every vertex it reaches is a pair for its owner, even
        # its own, once per search (the `sent` filter over all ids)
        self.tb = get_backend(backend, self.config)
        self._td_parent = xp.full(64, -1, pdt)
        self._td_level = xp.full(64, -1, np.int32)
        # one word more than the ids need: the GPU step sizes its remote pairs by the bits beyond its own 64
        # dummy vertices, and every vertex it reaches is remote here
        self.sent = xp.zeros(num_words(n) + 1, np.uint64)

    # -- the rounds ---------------------------------------------------------------------------------
    def _column_frontier(self, queue, counts, as_bits: bool):
        """The column set's frontier from its owners' queues (``counts[r]``: rank ``r``'s queue length, from
        the last counters): compact ids (int64) or, ``as_bits``, a bitmap of ``R * block`` bits."""
        b, xp, me, nw = self.b, self.b.xp, self.comm.rank, self.owner_words
        is_list = {r: int(counts[r]) < nw for r in self.col_group}
        mine = queue if is_list[me] else b.queue_to_bits(queue, nw)
        parts = self.comm.exchange_among({r: mine for r in self.col_group})
        block = self.shard.block
        out = []
        for k, r in enumerate(self.col_group):
            part = parts[r]
            if as_bits:
                out.append(b.queue_to_bits(part, nw) if is_list[r] else part)
            else:
                out.append((part if is_list[r] else b.bits_to_queue(part)) + k * block)
        if not out:
            return xp.empty(0, np.uint64 if as_bits else np.int64)
        return xp.concatenate(out)

    def _sync_row(self, pending: list) -> None:
        """Bring the row block's visited state up to date: each owner sends its row peers the owned vertices
        it claimed since the last sync (``pending``: local-id arrays), a list (int64) or a bitmap (uint64)."""
        b, xp, nw = self.b, self.b.xp, self.owner_words
        ids = xp.concatenate(pending) if pending else xp.empty(0, np.int64)
        mine = ids if ids.size < nw else b.queue_to_bits(ids, nw)
        parts = self.comm.exchange_among({r: mine for r in self.row_group})
        block, first = self.shard.block, self.row_group[0]
        marked = [(part if part.dtype != np.uint64 else b.bits_to_queue(part)) + (r - first) * block
                  for r, part in parts.items()]
        rows = xp.concatenate(marked) if marked else xp.empty(0, np.int64)
        if rows.size:
            self.row_parent[rows] = 0  # visited: any parent >= 0 (only the owners' parents are results)
            self.rb.mark_visited(b.to_host(rows))

    def _pack(self, ids, par):
        """One fold message (uint8): a header ``[mode, count]`` (int64), then the owner-local ids of the reached
        vertices as int32 (mode 0) or, when smaller, as a bitmap of the owner's block (mode 1, ids ascending and
        distinct), then their parents as compact column-set ids (:attr:`message_dtype`): 4 + 4 bytes a vertex,
        or a bit and 4 bytes, where 1D's pairs take 16."""
        b, xp, nw = self.b, self.b.xp, self.owner_words
        as_bits = ids.size * 4 > nw * 8
        if as_bits:
            order = xp.argsort(ids)
            ids, par = ids[order], par[order]
            first = xp.ones(ids.size, bool)
            first[1:] = ids[1:] != ids[:-1]  # a vertex reached twice (racing threads) keeps one parent
            ids, par = ids[first], par[first]
            body = b.queue_to_bits(ids, nw)
        else:
            body = _padded(ids.astype(np.int32), xp)
        head = xp.asarray(np.array([int(as_bits), int(ids.size)], np.int64))
        return xp.concatenate([head.view(np.uint8), body.view(np.uint8),
                               _padded(par.astype(self.message_dtype), xp).view(np.uint8)])

    def _unpack(self, msg):
        """``(owner-local ids, compact parents)`` of a :meth:`_pack` message."""
        mode, count = (int(x) for x in self.b.to_host(msg[:16].view(np.int64)))
        if mode:
            cut = 16 + 8 * self.owner_words
            ids = self.b.bits_to_queue(msg[16:cut].view(np.uint64))
        else:
            cut = 16 + 8 * (-(-count // 2))
            ids = msg[16:16 + 4 * count].view(np.int32).astype(np.int64)
        width = np.dtype(self.message_dtype).itemsize
        return ids, msg[cut:cut + width * count].view(self.message_dtype).astype(np.int64)

    def _fold(self, rows, par, depth: int):
        """Send reached vertices (row-local ids, int64) with their parents (compact column-set ids) to their
        owners within the grid row; claim what arrives.  Returns the newly claimed local ids."""
        b, xp, s = self.b, self.b.xp, self.shard
        block, cols = s.block, self.grid[1]
        grouped, offs = b.pairs_by_owner(rows, par, block, cols)
        offs = b.to_host(offs)
        send = {}
        for k, r in enumerate(self.row_group):
            ids, pk = grouped[offs[k]:offs[k + 1], 0] - k * block, grouped[offs[k]:offs[k + 1], 1]
            send[r] = (ids, pk) if r == self.comm.rank else self._pack(ids, pk)
        got = self.comm.exchange_among(send)
        vs, ps = [], []
        for r, msg in got.items():
            ids, pk = msg if r == self.comm.rank else self._unpack(msg)
            vs.append(ids + s.lo)
            ps.append(global_ids(pk, block, cols, r % cols))
        v, p = xp.concatenate(vs), xp.concatenate(ps)
        if v.size == 0:
            return xp.empty(0, np.int64)
        return b.claim_remote(v, p, s.lo, self.parent, self.level, np.int32(depth))

    def _unvisited_in_row(self, rows, par):
        """Drop the vertices that the row already knows as visited (their owners would refuse them)."""
        keep = self.row_parent[rows] < 0
        return rows[keep], par[keep]

    # -- the steps of a level (:class:`~breadth.bfs.engine.levels.LevelSteps`) -----------------------------
    # Engine.search runs them: the level's expansion and exchange in grid rows and columns.  The frontier between
    # levels is the owned queue (local ids), in either direction.
    def begin_search(self, root) -> np.ndarray:
        """:meth:`Engine._start`, the row block's and the top-down claims' state reset."""
        queue = self._start(root)
        self.rb.start_search(self.row_parent, self.row_level, -1)
        self.tb.start_search(self._td_parent, self._td_level, -1)
        self._pending = [queue]  # owned vertices claimed since the row last learned them
        return self._counters(*self._next(queue))

    def _next(self, queue) -> tuple[int, int]:
        """``queue`` the frontier; its length and out-edges for the counters."""
        self._queue = queue
        return int(queue.size), int(self.b.degree_sum(self.shard.offsets, queue))

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """The column set's frontier expanded over the block's rows; the vertices reached that the row has not
        seen visited go with their parents to their owners in the row, which claim them."""
        g, depth = self.shard.blocks, level.depth
        cq = self._column_frontier(self._queue, level.counters[:, 0], as_bits=False)
        t1 = time.perf_counter()
        _, v, par, _ = self.tb.top_down_step(g.td_offsets, g.td_columns, 0, 0, cq, self._td_parent, self._td_level,
                                             np.int32(depth), self.sent, self.nchunks)
        rows, par = self._unvisited_in_row(v - g.row_lo, par)
        t2 = time.perf_counter()
        return self._close_level(self._claimed(self._fold(rows, par, depth)), t2 - t1)

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """``"row"``: the row block's unvisited vertices (brought up to date first) look for a parent in the
        column frontier, and the vertices found go to their owners; ``"owner"``: 1D's bottom-up over the owned
        rows against the whole gathered frontier."""
        b, xp, g = self.b, self.b.xp, self.shard.blocks
        depth, counts = level.depth, level.counters[:, 0]
        if self.bottom_up == "owner":
            fbits = self._gather_frontier(b.queue_to_bits(self._queue, self.nwords), counts)
            t1 = time.perf_counter()
            found_bits, _ = self._bottom_up_owned(fbits, depth)
            t2 = time.perf_counter()
            return self._close_level(self._claimed(b.bits_to_queue(found_bits)), t2 - t1)
        self._sync_row(self._pending)
        self._pending = []
        fbits = self._column_frontier(self._queue, counts, as_bits=True)
        t1 = time.perf_counter()
        found_bits = xp.empty(num_words(g.row_hi - g.row_lo), np.uint64)
        self.rb.bottom_up_step(g.bu_offsets, g.bu_columns, fbits, self.row_parent, self.row_level, np.int32(depth),
                               found_bits)
        rows = self.rb.bits_to_queue(found_bits)
        par = self.row_parent[rows].astype(np.int64)
        t2 = time.perf_counter()
        return self._close_level(self._claimed(self._fold(rows, par, depth)), t2 - t1)

    def _claimed(self, queue) -> tuple[int, int]:
        """The level's claimed vertices: the next frontier, and pending for the row where bottom-up scans it."""
        if self.bottom_up == "row":
            self._pending.append(queue)
        return self._next(queue)

    def turn_bottom_up(self) -> None:
        """Nothing: bottom-up reads the queue."""

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """Nothing: the last counters counted the queue's edges."""
        return frontier_edges

    def end_search(self) -> None:
        """Drop the last frontier."""
        self._queue, self._pending = None, []
