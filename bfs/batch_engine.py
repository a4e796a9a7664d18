"""The SPMD batched BFS engine (MS-BFS): up to 64 searches in one level-synchronous pass, one rank per worker.

Algorithm (Then et al., "The More the Merrier: Efficient Multi-Source Graph Traversal", VLDB 2015, on the
1D partition of :mod:`.engine`): each owned vertex has a 64-bit ``seen``/``frontier``/``next`` word, bit ``i``
for search ``i``.  Each level is

1. a local step over the aggregate frontier -- top-down (:mod:`.batch_top_down`: each frontier vertex's
   edges read once for all its searches) or bottom-up (:mod:`.batch_bottom_up`: each unfinished vertex
   scans its in-neighbours until it has every search still running);
2. the exchange -- top-down: ``(vertex, parent, bits)`` triples to the vertices' owners, who claim the
   searches not yet there; bottom-up: an all-gather of the frontier words (as ``(id, word)`` pairs when
   sparser than half the words);
3. one all-reduce of each rank's counters and the OR of its frontier words (the searches still running).

The direction is chosen on the aggregate frontier with Beamer's rule (bottom-up once the frontier
vertices' out-edges times ``alpha`` exceed the in-edges of the vertices still missing a running search;
top-down again once the frontier shrinks below ``n / beta`` vertices).  Per-search levels equal the
single-root search's; parents may differ but are BFS parents (one level up, a neighbour).

>>> eng = BatchEngine(shard)                         # doctest: +SKIP
>>> eng.search([3, 17, 99]); eng.result(1)           # doctest: +SKIP
"""

from __future__ import annotations

import os
import time

import numpy as np

from .batch_backend import batch_kernels
from .communicator import Communicator, SelfCommunicator
from .engine import Engine, LevelRecord
from .shard import Shard

#: searches per batch: one bit of a 64-bit word each
MAX_BATCH = 64


class BatchEngine:
    """Batched searches over one rank's shard (``backend`` "cpu": Numba kernels; "gpu": the CuPy kernels of
    :mod:`.batch_gpu`).  After :meth:`search`, :meth:`result` gives search ``i``'s ``(parent, level)`` of the
    owned vertices as host arrays (parents in global ids; -1 unreached).

    ``records`` are :class:`~breadth.bfs.engine.LevelRecord` whose ``frontier``/``found`` count (vertex,
    search) pairs, all ranks."""

    def __init__(self, shard: Shard, comm: Communicator | None = None, *, alpha: float | None = None,
                 beta: float = 18.0, backend: str = "cpu", nchunks: int | None = None):
        self.k = k = batch_kernels(backend)
        xp = self.xp = k.xp
        self.shard = shard.to(xp) if backend != "cpu" else shard
        self.comm = comm or SelfCommunicator()
        # the single search's default: at scale 20 on this machine's CPUs, lower alphas (4, 2, 1, 0.5: more
        # top-down levels) made a 64-root batch slower (0.69-1.5 s against 0.52 s in one noisy run)
        self.alpha = Engine.default_alpha(backend, self.comm.size) if alpha is None else alpha
        self.beta = beta
        self.nchunks = nchunks or 8 * (os.cpu_count() or 1)
        nloc, n = shard.num_local, shard.num_vertices
        self.seen = xp.zeros(nloc, np.uint64)
        self.frontier = xp.zeros(nloc, np.uint64)
        self.next = xp.zeros(nloc, np.uint64)
        # Never initialised: an entry is meaningful only where its ``seen`` bit is set (result() masks the
        # rest), which saves a 64-entries-per-vertex fill per batch.
        self.parent = xp.empty((nloc, MAX_BATCH), k.parent_dtype(n))
        self.level = xp.empty((nloc, MAX_BATCH), np.int32)
        self.sent = xp.zeros(n if self.comm.size > 1 else 0, np.uint64)
        self.fglobal = xp.zeros(n, np.uint64) if self.comm.size > 1 else None
        self._all_ones = None
        self._host_shard = None
        self.nroots = 0
        self.records: list[LevelRecord] = []

    def close(self) -> None:
        """Nothing beyond the arrays to release (the session calls it before closing the communicator)."""

    # ---------------------------------------------------------------------------------------------
    def _counters(self, *values: int) -> np.ndarray:
        """Every rank's ``values`` as a ``(size, k)`` matrix, in one all-reduce (each rank fills its row)."""
        size = self.comm.size
        v = np.zeros((size, len(values)), np.int64)
        v[self.comm.rank] = values
        return self.comm.allreduce(v.ravel()).reshape(size, -1) if size > 1 else v

    def _gather_frontier(self, counts) -> np.ndarray:
        """The global frontier words (``(n,)`` uint64), each rank sending its own as pairs or words."""
        if self.comm.size == 1:
            return self.frontier
        s = self.shard
        block, n = s.block, s.num_vertices
        nlocs = [min(r * block + block, n) - min(r * block, n) for r in range(self.comm.size)]
        sizes = [2 * int(c) if 2 * int(c) < nl else nl for c, nl in zip(counts, nlocs)]
        parts = self.comm.allgatherv(self.k.encode(self.frontier, int(counts[self.comm.rank])), sizes)
        for r, part in enumerate(parts):
            lo = min(r * block, n)
            self.k.decode(part, int(counts[r]), nlocs[r], self.fglobal[lo:lo + nlocs[r]])
        return self.fglobal

    def _start(self, roots: np.ndarray) -> None:
        s = self.shard
        self.seen.fill(0)
        self.next.fill(0)
        if self.sent.size:
            self.sent.fill(0)
        # built on the host (at most 64 roots), then copied: one transfer per array on a GPU
        seen = {}
        for i, r in enumerate(roots.tolist()):
            if s.lo <= r < s.hi:
                seen[r - s.lo] = seen.get(r - s.lo, 0) | (1 << i)
        if seen:
            xp = self.xp
            j = xp.asarray(np.fromiter(seen, np.int64))
            words = xp.asarray(np.array(list(seen.values()), np.uint64))
            self.seen[j] = words
            self.next[j] = words
            mine = np.flatnonzero((roots >= s.lo) & (roots < s.hi))
            rows, cols = xp.asarray(roots[mine] - s.lo), xp.asarray(mine)
            self.parent[rows, cols] = xp.asarray(roots[mine]).astype(self.parent.dtype)
            self.level[rows, cols] = 0

    def search(self, roots, depth_limit: int | None = None) -> list[LevelRecord]:
        """Searches from global ids ``roots`` (1 to 64, each its own search; repeats allowed) together;
        ``depth_limit``: stop after that many levels (vertices further away stay unreached).  Returns the
        per-level records."""
        s, comm = self.shard, self.comm
        roots = np.asarray(roots, np.int64).ravel()
        if not 1 <= roots.size <= MAX_BATCH:
            raise ValueError(f"a batch holds 1 to {MAX_BATCH} roots, got {roots.size}")
        if ((roots < 0) | (roots >= s.num_vertices)).any():
            raise ValueError(f"root outside [0, {s.num_vertices})")
        if depth_limit is not None and depth_limit < 0:
            raise ValueError(f"depth_limit must be >= 0, got {depth_limit}")
        self.nroots = int(roots.size)
        self._start(roots)
        bu_off, bu_col = (s.in_offsets, s.in_columns) if s.directed else (s.offsets, s.columns)
        every = np.uint64((1 << roots.size) - 1) if roots.size < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        k = self.k
        nv, pairs, fdeg, unfinished, orw = k.advance(self.next, self.frontier, self.seen, every, s.offsets, bu_off)
        cnt = self._counters(nv, pairs, fdeg, unfinished, int(np.uint64(orw).view(np.int64)))
        counts, active = cnt[:, 0], self._active(cnt)
        frontier_vertices, frontier_pairs = int(counts.sum()), int(cnt[:, 1].sum())
        scout, unexplored = int(cnt[:, 2].sum()), int(cnt[:, 3].sum())
        direction, depth, records, previous = "td", 1, [], 0
        while frontier_pairs and (depth_limit is None or depth <= depth_limit):
            bytes0 = comm.bytes_sent()
            t0 = time.perf_counter()
            if direction == "td" and scout * self.alpha > unexplored:
                direction = "bu"
            elif direction == "bu" and frontier_vertices < s.num_vertices / self.beta and \
                    frontier_vertices < previous:
                direction = "td"
            if direction == "bu":
                fglobal = self._gather_frontier(counts)
                t1 = time.perf_counter()
                k.bottom_up_step(bu_off, bu_col, fglobal, self._filter(fglobal, frontier_vertices), active,
                                 self.seen, self.next, self.parent, self.level, np.int32(depth))
                t2 = time.perf_counter()
                local_s, exch = t2 - t1, t1 - t0
            else:
                queue = self.xp.flatnonzero(self.frontier)
                trip = k.top_down_step(s.offsets, s.columns, s.lo, queue, self.frontier, self.seen, self.next,
                                     self.parent, self.level, depth, self.sent, self.nchunks)
                t1 = time.perf_counter()
                if comm.size > 1:
                    recv = comm.alltoallv(k.triples_by_owner(trip, s.block, comm.size))
                    for part in recv:
                        if part.shape[0]:
                            k.claim_triples(part.reshape(-1, 3), s.lo, self.seen, self.next, self.parent,
                                          self.level, np.int32(depth))
                t2 = time.perf_counter()
                local_s, exch = t1 - t0, t2 - t1
            nv, pairs, fdeg, unfinished, orw = k.advance(self.next, self.frontier, self.seen, active, s.offsets,
                                                         bu_off)
            t3 = time.perf_counter()
            cnt = self._counters(nv, pairs, fdeg, unfinished, int(np.uint64(orw).view(np.int64)))
            t4 = time.perf_counter()
            records.append(LevelRecord(depth, direction, frontier_pairs, int(cnt[:, 1].sum()), local_s + (t3 - t2),
                                       exch + (t4 - t3), comm.bytes_sent() - bytes0, t4 - t3))
            previous = frontier_vertices
            counts, active = cnt[:, 0], self._active(cnt)
            frontier_vertices, frontier_pairs = int(counts.sum()), int(cnt[:, 1].sum())
            scout, unexplored = int(cnt[:, 2].sum()), int(cnt[:, 3].sum())
            depth += 1
        self.records = records
        return records

    def _filter(self, fglobal: np.ndarray, frontier_vertices: int) -> np.ndarray:
        """Bottom-up's bitmap of non-zero frontier words: built when the frontier is sparse (at most 1/8 of
        the vertices: it then saves most word reads, measured 2x on a level at scale 20); all ones
        otherwise, where building it costs more than the reads it saves."""
        n = fglobal.size
        if 8 * frontier_vertices <= n:
            return self.k.nonzero_bits(fglobal)
        if self._all_ones is None:
            self._all_ones = self.xp.full((n + 63) // 64, np.uint64(0xFFFFFFFFFFFFFFFF))
        return self._all_ones

    @staticmethod
    def _active(cnt: np.ndarray) -> np.uint64:
        """The searches with a frontier on any rank: the OR of the ranks' words (column 4)."""
        return np.bitwise_or.reduce(cnt[:, 4].view(np.uint64))

    def host_shard(self) -> Shard:
        """The shard with host (NumPy) arrays, for host-side checks of results (a copy on GPU ranks, made once)."""
        if self.k.name == "cpu":
            return self.shard
        if self._host_shard is None:
            self._host_shard = self.shard.to(np)
        return self._host_shard

    def result(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Search ``i``'s ``(parent, level)`` of the owned vertices: ``(nloc,)`` parents (global ids, the
        root its own parent, -1 unreached) and ``(nloc,)`` int32 levels (-1 unreached)."""
        if not 0 <= i < self.nroots:
            raise IndexError(f"search {i} not in this batch of {self.nroots}")
        xp, host = self.xp, self.k.to_host
        reached = (self.seen >> np.uint64(i)) & np.uint64(1) != 0
        parent = xp.where(reached, self.parent[:, i], -1).astype(np.int64)
        level = xp.where(reached, self.level[:, i], -1).astype(np.int32)
        return host(parent), host(level)
