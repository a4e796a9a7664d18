"""GPU backend: the engine's kernels on CuPy arrays, written as CUDA C++ (``kernels.cu``, compiled by
:mod:`.kernels`).

Same names and signatures as the CPU backend (:func:`breadth.bfs.engine.backend.cpu_backend`), so the engine's
orchestration is shared; only the kernels differ.  What changes on the device:

* **Visited bitmap.**  Each backend instance keeps one bit per owned vertex (``uint32`` words; 2**26
  vertices are 8 MB, which stays in the H100/H200 L2).  Top-down claims a vertex with one ``atomicOr`` on
  it (so a vertex is claimed exactly once: no duplicates in the next queue), bottom-up skips visited
  vertices 32 at a time without touching ``parent``.  :meth:`GpuBackend.start_search` (the engine's
  start-of-search hook) resets it.
* **Top-down, load-balanced per edge.**  A prefix sum of the frontier's degrees maps edge ``e`` to its
  frontier vertex by binary search (one search per 32 edges for the warp, then a short one per lane), so a
  hub of a million neighbours is spread over the whole chip.  Claimed vertices are appended with one
  warp-aggregated ``atomicAdd`` per warp, and the degree sum of the next frontier (the next level's
  ``scout``) is accumulated in the same pass.
* **Bottom-up, a warp per 32 vertices.**  Each lane owns one vertex, scans its row until it meets a
  frontier bit, and the warp's ``__ballot_sync`` is the next-frontier word (stored once, no atomics).
  Rows longer than 32 that miss on their first neighbour are handed to a second kernel as tasks of 1024
  entries, a warp each, so no lane walks a long row alone.
* **One host round trip per level.**  Each step reads its small counter array back once (the only
  synchronisation); the counts it learns (queue length and degree sum of what it returns) are remembered
  for exactly the array it returned, so the engine's following ``degree_sum``/``bits_to_queue`` calls on that
  array cost no further synchronisation.

CuPy is imported when this module is; the CPU path never imports it (see :mod:`breadth.bfs.engine.backend`).
"""

from __future__ import annotations

from typing import Any

import cupy as cp
import numpy as np

from ..search_config import SearchConfig
from .kernels import (_BU_CHUNK, _BU_LONG, _FULL_GRID_PER_SM, _SCAN_TILE, _SMALL_QUEUE, _THREADS, _grid, _i64,
                      _module, _num_sms, degree_ordered_columns)


def use_cupy_pool() -> None:
    """Make CuPy allocate from its own memory pool in this process.  Where RMM is installed, dask-cuda (and
    cuDF) route CuPy through RMM, whose default resource is a cudaMalloc/cudaFree per array and whose pool
    costs more per allocation than CuPy's: a search allocates per level, and on one H200 at scale 26 makes
    91-113 GTEPS with no pool, 181-194 with an RMM pool and 231-256 with CuPy's.  cuDF keeps RMM for
    its own buffers; arrays already allocated keep their allocator."""
    cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)


class GpuBackend:
    """The engine's kernel set on CuPy arrays, plus per-engine device state (visited bitmap, known counts).

    One instance serves one :class:`~breadth.bfs.engine.engine.Engine` (``get_backend("gpu")`` makes a new one
    each time).  Arrays: ``offsets`` int64 ``(num_local + 1,)``; ``cols`` int32/int64 global ids; queues
    int64 local ids; bitmaps uint64 words (viewed as uint32 words inside the kernels).
    """

    name = "gpu"
    xp = cp
    #: optional features (see :class:`~breadth.bfs.engine.backend.Backend`): all of them
    async_levels = True
    claims_count_degrees = True
    checks_on_device = True

    @staticmethod
    def parent_dtype(num_vertices: int) -> np.dtype:
        """int64 parents: the kernels write them as 64-bit words."""
        return np.dtype(np.int64)

    def __init__(self):
        use_cupy_pool()  # a search allocates per level: CuPy's pool, whatever allocator cuDF/dask-cuda set
        self._visited = None  # uint32 words over the owned vertices
        self._root_pin = None  # (pinned 16 bytes, event) through which start_root reads the root's degree
        self._skip = None  # (offsets, uint32 words of zero-degree vertices) for bottom-up
        self._bu_cols = None  # (cols, the same rows with neighbours by decreasing degree) for bottom-up
        self._first = None  # (offsets, bottom-up columns, degree << 32 | first neighbour per owned vertex)
        #: bottom-up may read each vertex's degree and first neighbour from one packed array on levels with a
        #: large frontier (see :meth:`bottom_up_async`); False: always from its row (to measure what it saves)
        self.first_neighbours = True
        self._tasks = None  # (offsets, int64 buffer of bottom-up's deferred long-row tasks)
        #: bottom-up hands rows longer than BU_LONG to bu_long, a warp per 1024 entries (False, from
        #: SearchConfig.defer_long_rows: every lane scans its own row, to measure what deferring saves)
        self.defer_long_rows = True
        #: bottom-up scans a copy of the rows ordered by neighbour degree (one-rank shards, when device
        #: memory allows; built once, in the first bottom-up step); False keeps the sorted rows
        self.degree_order = True
        # Counts learned at a step's one synchronisation, valid for exactly the array they describe.
        self._deg_of: tuple[Any, Any, int] | None = None  # (queue, offsets, sum of its degrees in offsets)
        self._bits_of: tuple[Any, int, int, Any] | None = None  # (bitmap, set bits, their degree sum, offsets)

    # -- state ------------------------------------------------------------------------------------
    def start_search(self, parent, level, root_local: int) -> None:
        """Engine hook at the start of a search: ``parent = level = -1`` (all bytes 0xFF: two memsets, which
        write at ~1.5x the speed of a fused kernel's 16-byte stores on an H200: 0.19 ms, the kernel 0.28, at
        2^26 vertices) and the visited bitmap cleared but for the root (``root_local`` < 0 when another
        rank owns it)."""
        self._start(parent, level, root_local, -1, None)

    def start_root(self, parent, level, offsets, root_local: int, root: int, queue) -> int:
        """:meth:`start_search` for a search from the one global id ``root`` that also seeds it on the device
        (``parent[root] = root``, ``level = 0``, ``queue[0] = root_local``; ``queue`` an int64 device array)
        and returns the root's degree in ``offsets`` (0 where another rank owns it), read from pinned
        memory as soon as its own copy lands: the resets are still running, and the first level waits for
        them on the stream, not the host."""
        deg = 0
        if root_local >= 0:
            if self._root_pin is None:
                self._root_pin = (cp.cuda.alloc_pinned_memory(16), cp.cuda.Event(block=False, disable_timing=True))
            pin, ev = self._root_pin
            st = cp.cuda.get_current_stream()
            cp.cuda.runtime.memcpyAsync(pin.ptr, offsets.data.ptr + 8 * root_local, 16,
                                        cp.cuda.runtime.memcpyDeviceToHost, st.ptr)
            ev.record(st)
        self._start(parent, level, root_local, root, queue)
        if root_local >= 0:
            ev.synchronize()
            lo_hi = np.frombuffer(pin, np.int64, 2)
            deg = int(lo_hi[1] - lo_hi[0])
        return deg

    def _start(self, parent, level, root_local: int, root: int, queue) -> None:
        nw32 = 2 * ((parent.size + 63) // 64)
        if self._visited is None or self._visited.size != nw32:
            self._visited = cp.empty(nw32, cp.uint32)
        self._deg_of = self._bits_of = None
        st = cp.cuda.get_current_stream().ptr
        for a in (parent, level):
            cp.cuda.runtime.memsetAsync(a.data.ptr, 0xFF, a.nbytes, st)
        self._kern(None)["init_search"](_grid(nw32), (_THREADS,),
                                        (parent, level, self._visited, _i64(nw32), _i64(root_local), _i64(root),
                                         queue if queue is not None else np.uint64(0)))

    def mark_visited(self, local_ids) -> None:
        """Engine hook for a search from several sources, after :meth:`start_search` (given no root) cleared
        the visited bitmap: set the bits of ``local_ids`` (distinct owned local ids, a host array)."""
        ids = np.asarray(local_ids, np.int64)
        words, inv = np.unique(ids >> 5, return_inverse=True)
        masks = np.zeros(words.size, np.uint32)
        np.bitwise_or.at(masks, inv, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
        w = cp.asarray(words)
        self._visited[w] = self._visited[w] | cp.asarray(masks)  # words are distinct: no lost update

    def _kern(self, cols) -> dict[str, Any]:
        return _module("int64" if cols is not None and cols.dtype == np.int64 else "int32")

    def _skip_bits(self, offsets):
        if self._skip is None or self._skip[0] is not offsets:
            nloc = offsets.size - 1
            nw32 = 2 * ((nloc + 63) // 64)
            skip = cp.empty(nw32, cp.uint32)
            self._kern(None)["zero_degree_bits"](_grid(nw32, _THREADS // 32), (_THREADS,),
                                                 (offsets, _i64(nloc), skip, _i64(nw32)))
            self._skip = (offsets, skip)
        return self._skip[1]

    def _first_neighbours(self, offsets, bu_cols):
        """What bottom-up reads first for each owned vertex, packed as uint64 ``degree << 32 | first
        neighbour`` in ``bu_cols`` (0 for an empty row): 8 coalesced bytes instead of the row's two offsets
        and a scattered 32-byte sector of its columns, which on the late levels (almost every vertex settled
        by its first, highest-degree neighbour) are most of the kernel's memory traffic.  Built once per
        ``(offsets, bu_cols)``; a null pointer (the rows are read directly) for 64-bit column ids."""
        if bu_cols.dtype != cp.int32 or not self.first_neighbours:
            return np.uint64(0)
        f = self._first
        if f is None or f[0] is not offsets or f[1] is not bu_cols:
            deg = cp.diff(offsets)
            first = cp.zeros(deg.size, cp.uint64)
            has = cp.flatnonzero(deg > 0)
            first[has] = bu_cols[offsets[:-1][has]].astype(cp.uint64)
            first |= deg.astype(cp.uint64) << cp.uint64(32)
            del deg, has
            self._first = f = (offsets, bu_cols, first)
        return f[2]

    def _bottom_up_columns(self, offsets, cols, one_rank: bool):
        """Bottom-up's copy of ``cols`` ordered by neighbour degree (see :func:`degree_ordered_columns`),
        normally built with the shard (:meth:`use_bottom_up_columns`); built here only for a one-rank shard
        that came without it (several ranks need the other owners' degrees, which preparation gathers).
        Falls back to ``cols`` when memory is short."""
        if self._bu_cols is not None and self._bu_cols[0] is cols:
            return self._bu_cols[1]
        if not (self.degree_order and one_rank):
            return cols
        ordered = degree_ordered_columns(offsets, cols)
        self._bu_cols = (cols, cols if ordered is None else ordered)
        return self._bu_cols[1]

    @property
    def bottom_up_ordered(self) -> bool:
        """Whether bottom-up scans degree-ordered rows (the shard's, or built here for a one-rank shard)."""
        return self._bu_cols is not None and self._bu_cols[1] is not self._bu_cols[0]

    def use_bottom_up_columns(self, cols, ordered) -> None:
        """Engine hook: the shard's degree-ordered copy of ``cols`` (built where the graph was prepared or
        loaded, :mod:`breadth.bfs.search_order`)."""
        self._bu_cols = (cols, ordered)

    def _ensure_visited(self, nloc: int) -> None:
        if self._visited is None:
            raise RuntimeError("GpuBackend.start_search was not called: the engine must call it before a search")

    # -- the engine's kernel set ------------------------------------------------------------------
    def degree_sum(self, offsets, queue) -> int:
        """Sum of the out-degrees of local ids ``queue`` (a host int)."""
        known = self._known_degree_sum(offsets, queue)
        if known is not None:
            return known
        if queue.size == 0:
            return 0
        ctr = cp.zeros(2, cp.int64)
        self._kern(None)["degree_sum"](_grid(int(queue.size)), (_THREADS,), (offsets, queue, _i64(queue.size), ctr))
        total = int(ctr[0].get())
        self._deg_of = (queue, offsets, total)
        return total

    def _known_degree_sum(self, offsets, queue) -> int | None:
        d = self._deg_of
        return d[2] if d is not None and d[0] is queue and d[1] is offsets else None

    def top_down_step(self, offsets, cols, lo: int, hi: int, queue, parent, level, depth, sent, nchunks=None,
                      claim_offsets=None):
        """One top-down level; returns ``(next_queue, remote_v, remote_parent, scanned)`` like the CPU's.
        ``claim_offsets``: the owned vertices' rows, when ``queue`` indexes other rows (``offsets``/``cols``:
        a delegates partition's entries by delegate); the claimed vertices' degrees are read there."""
        total = self._known_degree_sum(offsets, queue)
        if total is None:
            total = self.degree_sum(offsets, queue)
        nxt, rpairs, ctr = self.top_down_async(offsets, cols, lo, hi, queue, parent, level, depth, sent, total,
                                               claim_offsets=claim_offsets)
        c = ctr.get()  # the level's one synchronisation
        out = nxt[:int(c[0])]
        self._deg_of = (out, offsets if claim_offsets is None else claim_offsets, int(c[1]))
        rem = rpairs[:int(c[2])]
        return out, cp.ascontiguousarray(rem[:, 0]), cp.ascontiguousarray(rem[:, 1]), total

    def top_down_async(self, offsets, cols, lo: int, hi: int, queue, parent, level, depth, sent, total: int,
                       nparts: int = 0, block: int = 0, count_owners: bool = True, claim_offsets=None):
        """Queue one top-down level on the stream, with no synchronisation.

        ``total``: the degree sum of ``queue`` (host int, known from the last counters).  Returns device
        arrays ``(next, rpairs, ctr)``: ``next`` (``num_local``,) int64 whose first ``ctr[0]`` entries are
        the claimed local ids (their degree sum in ``ctr[1]``), ``rpairs`` ``(k, 2)`` int64 whose first
        ``ctr[2]`` rows are (remote vertex, parent) pairs, and ``ctr`` int64 ``(4 + nparts,)`` whose
        ``ctr[4 + r]`` counts the pairs owned by rank ``r`` (``nparts > 0``; owner ``v // block``; left at
        zero for :meth:`pairs_to_regions` with ``count_owners=False``).
        """
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        qn = int(queue.size)
        nloc = parent.size
        has_sent = int(sent.size > 0)
        nxt = cp.empty(nloc, cp.int64)  # each owned vertex is claimed at most once per search
        nrem = sent.size * 64 - nloc if has_sent else 0  # each remote vertex goes out at most once
        rpairs = cp.empty((max(nrem, 0), 2), cp.int64)
        ctr = cp.zeros(4 + nparts, cp.int64)
        if qn and total:
            if qn <= _SMALL_QUEUE:
                pre = cp.empty(qn, cp.int64)
                k["queue_prefix_small"]((1,), (1024,), (offsets, queue, _i64(qn), pre, ctr))
            else:
                deg = cp.empty(qn, cp.int64)
                k["queue_degrees"](_grid(qn), (_THREADS,), (offsets, queue, _i64(qn), deg))
                pre = cp.cumsum(deg)
            claim = offsets if claim_offsets is None else claim_offsets
            k["td_expand"](_grid(total), (_THREADS,),
                           (offsets, claim, cols, queue, pre, _i64(qn), _i64(lo), _i64(hi), parent, level,
                            np.int32(depth), self._visited, sent if has_sent else nxt, np.int32(has_sent), nxt, rpairs,
                            ctr))
            if nparts and has_sent and count_owners:
                k["owner_counts"](_grid(None), (_THREADS,), (rpairs, ctr[2:3], _i64(block), ctr[4:]))
        return nxt, rpairs, ctr

    def bottom_up_step(self, offsets, cols, frontier_bits, parent, level, depth, next_bits):
        """One bottom-up level; ``next_bits`` (uint64 words over the owned vertices) is overwritten.
        Returns ``(awake, awake_edges)`` as host ints."""
        c = self.bottom_up_async(offsets, cols, frontier_bits, parent, level, depth, next_bits).get()
        awake, awake_edges = int(c[0]), int(c[1])
        self.note_bits(next_bits, awake, awake_edges, offsets)
        return awake, awake_edges

    def bottom_up_async(self, offsets, cols, frontier_bits, parent, level, depth, next_bits,
                        first_neighbours: bool = False):
        """:meth:`bottom_up_step` queued on the stream: returns the device counters ``[awake, awake_edges,
        long-row tasks]`` (int64) without a synchronisation.  ``first_neighbours``: read each vertex's
        first neighbour from the packed table (:meth:`_first_neighbours`), which pays on levels whose
        frontier is large (most vertices settle there) and costs on the others (a miss then waits for the
        table and the row in turn)."""
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        nloc = offsets.size - 1
        nw32 = 2 * next_bits.size
        ctr = cp.zeros(3, cp.int64)
        # one rank: the global frontier has as many words as the local one
        bu_cols = self._bottom_up_columns(offsets, cols, frontier_bits.size == next_bits.size)
        tasks = self._long_tasks(offsets)
        fb, nb = frontier_bits.view(cp.uint32), next_bits.view(cp.uint32)
        k["bu_step"](_grid(-(-nw32 // 4), _THREADS // 32), (_THREADS,),
                     (offsets, bu_cols, fb, self._visited, self._skip_bits(offsets), parent, level, np.int32(depth),
                      nb, _i64(nw32), _i64(nloc), ctr, tasks, np.int32(self.defer_long_rows),
                      self._first_neighbours(offsets, bu_cols) if first_neighbours else np.uint64(0)))
        if self.defer_long_rows:
            k["bu_long"](_grid(None), (_THREADS,),
                         (offsets, bu_cols, fb, self._visited, parent, level, np.int32(depth), nb, tasks, ctr))
        return ctr

    def _long_tasks(self, offsets):
        """Buffer for bottom-up's deferred long-row tasks (int64, as many as the rows longer than
        ``BU_LONG`` can make: one per ``BU_CHUNK`` entries after the first), built once per ``offsets``."""
        if self._tasks is None or self._tasks[0] is not offsets:
            deg = cp.diff(offsets)
            long_deg = deg[deg > _BU_LONG]
            bound = int(((long_deg - 1 + _BU_CHUNK - 1) // _BU_CHUNK).sum()) if long_deg.size else 0
            self._tasks = (offsets, cp.empty(max(bound, 1), cp.int64))
        return self._tasks[1]

    # -- steps of a captured level (bfs/gpu/level_graphs.py): what varies is read from the device block prm
    #    (prm[0] depth, prm[1] queue length), the grids are fixed, nothing is allocated ----------------
    def bottom_up_g_buffers(self, offsets, cols) -> tuple:
        """Build what :meth:`bottom_up_g` reads for ``(offsets, cols)`` but must not allocate while a CUDA graph
        is captured (the zero-degree bits, the long-row tasks, the first-neighbour table; cached here); returns
        them with the visited bits, for a caller to keep alive with its graph."""
        return (self._skip_bits(offsets), self._long_tasks(offsets), self._visited,
                self._first_neighbours(offsets, self._bottom_up_columns(offsets, cols, False)))

    def bottom_up_g(self, offsets, cols, fbits, parent, level, prm, next_bits, ctr, first_neighbours: bool = False
                    ) -> None:
        """:meth:`bottom_up_async` with the depth in ``prm[0]`` and the counters in ``ctr`` (zeroed by the
        caller); ``next_bits`` holds at least the owned vertices' words."""
        self._ensure_visited(parent.size)
        nloc = offsets.size - 1
        nw32 = 2 * ((nloc + 63) // 64)
        bu_cols = self._bottom_up_columns(offsets, cols, False)
        k = self._kern(cols)
        tasks = self._long_tasks(offsets)
        fb, nb = fbits.view(cp.uint32), next_bits.view(cp.uint32)
        k["bu_step_g"](_grid(-(-nw32 // 4), _THREADS // 32), (_THREADS,),
                       (offsets, bu_cols, fb, self._visited, self._skip_bits(offsets), parent, level, prm, nb,
                        _i64(nw32), _i64(nloc), ctr, tasks, np.int32(self.defer_long_rows),
                        self._first_neighbours(offsets, bu_cols) if first_neighbours else np.uint64(0)))
        if self.defer_long_rows:
            k["bu_long_g"](_grid(None), (_THREADS,),
                           (offsets, bu_cols, fb, self._visited, parent, level, prm, nb, tasks, ctr))

    def top_down_g(self, offsets, cols, lo: int, hi: int, queue, pre, prm, parent, level, sent, nxt, rpairs,
                   ctr, tiles=None, skip_parent: bool = False) -> None:
        """:meth:`top_down_async` for a queue whose length is ``prm[1]``: the prefix of its degrees in one
        block (``tiles`` None: at most ``_SMALL_QUEUE`` ids, ``pre`` holds that many) or in tiles (``pre``
        holds the longest queue, ``tiles`` one entry per ``SCAN_TILE`` of it), then the expansion over the
        whole chip.  ``ctr`` zeroed by the caller; ``rpairs`` must hold every remote pair the level can make.
        ``skip_parent``: no pair for a frontier vertex's own parent (visited by definition)."""
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        if tiles is None:
            k["queue_prefix_small_g"]((1,), (1024,), (offsets, queue, prm, pre, ctr))
        else:
            full = _grid(None)
            k["scan_tiles_g"](full, (_SCAN_TILE,), (offsets, queue, prm, pre, tiles))
            k["scan_tile_sums_g"]((1,), (_SCAN_TILE,), (prm, tiles))
            k["scan_add_g"](full, (_THREADS,), (prm, pre, tiles))
        k["td_expand_g"](_grid(None), (_THREADS,),
                         (offsets, cols, queue, pre, prm, _i64(lo), _i64(hi), parent, level, self._visited,
                          sent, np.int32(1), np.int32(skip_parent), nxt, rpairs, ctr))

    def claim_pairs_g(self, pairs, count, lo: int, parent, level, prm, out, ctr, offsets,
                      grid_rows: int | None = None) -> None:
        """:meth:`claim_pairs_async` with ``count`` on the device (only the ``len(pairs)`` rows that arrived
        are claimed if it is larger) and the depth in ``prm[0]``; the grid is sized for ``grid_rows`` rows
        (default all; its threads stride over the rest)."""
        flat = pairs.reshape(-1)
        if pairs.shape[0]:
            self._kern(None)["claim_remote_g"](_grid(int(grid_rows or pairs.shape[0])), (_THREADS,),
                                               (flat, flat[1:], _i64(2), count, _i64(pairs.shape[0]), _i64(lo),
                                                parent, level, prm, self._visited, out, ctr, offsets, np.int32(1)))

    # -- one-round top-down levels (bfs/engine/one_round_levels.py) ------------------------------------
    def claim_split_g(self, host_rows, nh, dev_rows, nd, lo: int, parent, level, prm, out, ctr, offsets,
                      grid_rows: int) -> None:
        """:meth:`claim_pairs_g` of one peer's pairs in two parts, one node: the first ``nh[0]`` rows of
        ``host_rows`` (a CuPy view of page-locked host memory, read in place), then the first ``nd[0]`` of
        ``dev_rows`` (each at most its rows); the grid is sized for ``grid_rows`` rows."""
        hf, df = host_rows.reshape(-1), dev_rows.reshape(-1)
        self._kern(None)["claim_split_g"](_grid(int(grid_rows)), (_THREADS,),
                                          (hf, nh, _i64(host_rows.shape[0]), df, nd, _i64(dev_rows.shape[0]),
                                           _i64(lo), parent, level, prm, self._visited, out, ctr, offsets))

    def gate_queue(self, fctr, prm, ctr, first) -> None:
        """Queue ``prm[1]`` = the frontier's length ``fctr[0]`` if its degree sum ``fctr[1]`` is at most the
        limit ``prm[2]``, else 0: the length :meth:`top_down_g` then expands (nothing above the limit),
        decided on the device; and the expansion's counters ``ctr`` zeroed.  Where ``first[0]`` is set,
        ``fctr[:2]`` = ``first[1:3]`` first (a run's first frontier, which no claims counted)."""
        self._kern(None)["td_gate"]((1,), (32,), (fctr, prm, ctr, _i64(ctr.size), first))

    def publish_level(self, fctr, ctr, stamps, stat: int, rows, at: int, cap: int, out: int) -> None:
        """Write a one-round top-down level's counters and pairs into page-locked host memory from the GPU: at
        address ``stat`` (0: not this call) the int64 words ``[fctr[0], fctr[1], *ctr, stamps[0], the GPU's
        nanosecond clock now]``, at ``out`` the first ``min(ctr[at], cap)`` rows of the ``(n, 2)`` int64
        ``rows``.  (Page-locked memory is the GPU's to write where addresses are unified: every 64-bit CUDA
        platform.)"""
        self._kern(None)["td_publish"](_grid(2 * cap), (_THREADS,),
                                       (fctr, ctr, _i64(ctr.size), stamps, np.uint64(stat), rows, _i64(at), _i64(cap),
                                        np.uint64(out)))

    def publish_bottom_up(self, ctr, stamps, stat: int, next_bits, cap: int, out: int) -> None:
        """Write a one-round bottom-up level's counters into page-locked host memory from the GPU: at address
        ``stat`` the int64 words ``[ctr[0], ctr[1], ctr[2], stamps[0], stamps[1]]``; where the level found at
        most ``cap`` vertices (``ctr[0]``), their local ids (int64, unordered) from its bitmap ``next_bits``
        (uint64 words) at ``out``, appended at ``ctr[3]``, which must be zero."""
        nw32 = 2 * int(next_bits.size)
        self._kern(None)["bu_publish"](_grid(nw32), (_THREADS,), (ctr, stamps, np.uint64(stat),
                                                                 next_bits.view(cp.uint32), _i64(nw32), _i64(cap),
                                                                 np.uint64(out)))

    def undo_top_down(self, nxt, rpairs, parent, level, sent) -> None:
        """Take back an expansion: its claimed local ids ``nxt`` unvisited again (``parent`` and ``level``
        -1) and the remote vertices of its ``(k, 2)`` pairs ``rpairs`` unmarked in ``sent``."""
        n = max(int(nxt.size), int(rpairs.shape[0]))
        if n:
            self._kern(None)["td_undo"](_grid(n), (_THREADS,), (nxt, _i64(nxt.size), rpairs, _i64(rpairs.shape[0]),
                                                                 parent, level, self._visited, sent))

    def stamp(self, ts, i: int) -> None:
        """``ts[i]`` = the GPU's nanosecond clock when the stream reaches this point."""
        self._kern(None)["stamp"]((1,), (32,), (ts, np.int32(i)))

    def note_bits(self, bits, count: int, degree_sum: int, offsets) -> None:
        """Record that ``bits`` has ``count`` set bits whose degrees in ``offsets`` sum to ``degree_sum``
        (learned from the counters), so :meth:`bits_to_queue` and :meth:`degree_sum` need no round trip."""
        self._bits_of = (bits, int(count), int(degree_sum), offsets)

    def queue_to_bits(self, queue, nwords: int, out=None):
        """uint64 bitmap of ``nwords`` words with the bits of local ids ``queue`` set (written into ``out``,
        a uint64 device array of ``nwords`` words, when given)."""
        if out is None:
            bits = cp.zeros(nwords, cp.uint64)
        else:
            bits = out
            cp.cuda.runtime.memsetAsync(bits.data.ptr, 0, 8 * nwords, cp.cuda.get_current_stream().ptr)
        if queue.size:
            self._kern(None)["set_bits"](_grid(int(queue.size)), (_THREADS,),
                                         (queue, _i64(queue.size), bits.view(cp.uint32)))
        return bits

    def bits_to_queue(self, bits, out=None):
        """int64 local ids of the set bits, ascending (the first entries of ``out``, an int64 device array
        long enough, when given)."""
        k = self._kern(None)
        nw = int(bits.size)
        nt = (nw + _SCAN_TILE - 1) // _SCAN_TILE
        tiles = cp.empty(nt + 1, cp.int64)  # each tile's first position, then the total
        grid = (max(1, min(nt, _num_sms() * _FULL_GRID_PER_SM // 4)),)
        k["popcount_tiles"](grid, (_SCAN_TILE,), (bits, _i64(nw), tiles))
        k["scan_tile_sums"]((1,), (_SCAN_TILE,), (tiles, _i64(nt)))
        known = self._bits_of is not None and self._bits_of[0] is bits
        n = self._bits_of[1] if known else int(tiles[nt].get())
        out = cp.empty(n, cp.int64) if out is None else out[:n]
        if n:
            k["tile_bits_to_ids"](grid, (_SCAN_TILE,), (bits, _i64(nw), tiles, out))
        if known:
            self._deg_of = (out, self._bits_of[3], self._bits_of[2])
        return out

    def claim_remote(self, v, p, lo: int, parent, level, depth, offsets=None):
        """Apply received (vertex, parent) pairs; return the newly claimed local ids.  With ``offsets`` the
        same synchronisation also learns their degree sum (``degree_sum`` of the result is then free)."""
        n = int(v.size)
        out = cp.empty(n, cp.int64)
        ctr = cp.zeros(2, cp.int64)
        self._claim(v, p, 1, n, lo, parent, level, depth, out, ctr, offsets)
        c = ctr.get()
        out = out[:int(c[0])]
        if offsets is not None:
            self._deg_of = (out, offsets, int(c[1]))
        return out

    def claim_pairs_async(self, pairs, lo: int, parent, level, depth, out, ctr, offsets, count=None) -> None:
        """Claim received ``(k, 2)`` (vertex, parent) pairs on the stream, appending the winners to ``out``
        and counting them (and their degree sum) in ``ctr[0..1]``: the layout of :meth:`top_down_async`'s
        outputs, so remote claims join the level's own queue with no synchronisation.  ``count``: a
        one-element int64 device array holding how many of the ``k`` rows are pairs (it arrived with them;
        ``k`` is then only a bound), else all ``k`` are."""
        flat = pairs.reshape(-1)
        if count is None:
            self._claim(flat, flat[1:], 2, int(pairs.shape[0]), lo, parent, level, depth, out, ctr, offsets)
        elif pairs.shape[0]:
            self._ensure_visited(parent.size)
            self._kern(None)["claim_remote_dn"](_grid(int(pairs.shape[0])), (_THREADS,),
                                                (flat, flat[1:], _i64(2), count, _i64(lo), parent, level,
                                                 np.int32(depth), self._visited, out, ctr, offsets, np.int32(1)))

    @staticmethod
    def pairs_to_regions(rpairs, ctr, block: int, nparts: int, cap: int, out=None):
        """The first ``ctr[2]`` rows of ``rpairs`` into ``(nparts * cap, 2)`` regions (``out`` if given),
        owner ``r``'s from row ``r * cap``, counted in ``ctr[4 + r]`` (zero before): :meth:`top_down_async`'s
        pairs grouped with no synchronisation, when ``cap`` bounds every owner's count (the frontier's
        degree sum does)."""
        if out is None:
            out = cp.empty((nparts * cap, 2), cp.int64)
        if cap:
            _module("int32")["owner_regions"](_grid(int(rpairs.shape[0])), (_THREADS,),
                                              (rpairs, ctr[2:3], _i64(block), _i64(cap), ctr[4:], out))
        return out

    def _claim(self, v, p, stride: int, n: int, lo, parent, level, depth, out, ctr, offsets) -> None:
        self._ensure_visited(parent.size)
        if n:
            self._kern(None)["claim_remote"](_grid(n), (_THREADS,),
                                             (v, p, _i64(stride), _i64(n), _i64(lo), parent, level, np.int32(depth),
                                              self._visited, out, ctr, offsets if offsets is not None else ctr,
                                              np.int32(offsets is not None)))

    def note_degree_sum(self, queue, offsets, total: int) -> None:
        """Record ``total`` as the degree sum of ``queue`` (the engine knows it for a concatenation)."""
        self._deg_of = (queue, offsets, int(total))

    @staticmethod
    def pairs_by_owner(v, p, block: int, nparts: int):
        """(vertex, parent) pairs grouped by owner ``v // block``: ``(k, 2)`` int64 and ``nparts + 1``
        offsets (device), by an atomic counting scatter: no sort and no synchronisation."""
        pairs = cp.stack([v, p], axis=1)
        offs = cp.zeros(nparts + 1, cp.int64)
        if pairs.shape[0]:
            _module("int32")["owner_counts"](_grid(int(pairs.shape[0])), (_THREADS,),
                                             (pairs, cp.array([pairs.shape[0]], cp.int64), _i64(block), offs[1:]))
            offs = cp.cumsum(offs)
        return GpuBackend.group_pairs(pairs, int(pairs.shape[0]), offs[:-1], block), offs

    @staticmethod
    def group_pairs(pairs, n: int, starts, block: int):
        """The first ``n`` rows of ``pairs`` grouped by owner, owner ``r``'s from ``starts[r]`` on (device
        or host exclusive prefix of the owners' counts)."""
        out = cp.empty((n, 2), cp.int64)
        if n:
            cursor = cp.array(starts, cp.int64)  # a copy: the scatter advances it
            _module("int32")["owner_scatter"](_grid(n), (_THREADS,), (pairs, _i64(n), _i64(block), cursor, out))
        return out

    @staticmethod
    def to_host(a):
        return cp.asnumpy(a)

    # -- validation on the device (breadth.bfs.graph500.validate uses these when present) ---------
    def row_violations(self, shard, parent_local, level_g, root: int) -> tuple[int, int, int, int]:
        """Rules 2-5 over ``shard``'s rows, as :func:`breadth.bfs.graph500.validate.row_violations` counts
        them."""
        in_off = shard.in_offsets if shard.directed else shard.offsets
        in_col = shard.in_columns if shard.directed else shard.columns
        if in_col.dtype != shard.columns.dtype:
            in_col = in_col.astype(shard.columns.dtype)
        cnt = cp.zeros(4, cp.int64)
        nloc = shard.num_local
        self._kern(shard.columns)["row_rules"](
            _grid(nloc, _THREADS // 32), (_THREADS,),
            (shard.offsets, shard.columns, in_off, in_col, _i64(nloc), _i64(shard.lo),
             cp.ascontiguousarray(parent_local, cp.int64), cp.ascontiguousarray(level_g, cp.int32),
             _i64(level_g.size), _i64(root), np.int32(shard.directed), cnt))
        return tuple(int(x) for x in cnt.get())

    @staticmethod
    def tree_violations(parent_g, root: int) -> int:
        """Rule 1 on the device: :func:`breadth.bfs.graph500.validate.tree_violations` with CuPy arrays."""
        parent_g = cp.asarray(parent_g, cp.int64)
        n = parent_g.size
        reached = parent_g >= 0
        bad = int(((parent_g >= n) & reached).sum()) + int(parent_g[root].get() != root)
        anc = cp.where(reached & (parent_g < n), parent_g, -1)
        anc[root] = root
        for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
            nxt = cp.where(anc >= 0, anc[cp.maximum(anc, 0)], -1)
            if bool(cp.array_equal(nxt, anc)):
                break
            anc = nxt
        return bad + int((reached & (anc != root)).sum())


def gpu_backend(config: SearchConfig | None = None) -> GpuBackend:
    """A fresh GPU backend (one per engine: it holds the engine's visited bitmap), its switches from
    ``config``."""
    b = GpuBackend()
    b.defer_long_rows = (config or SearchConfig()).defer_long_rows
    return b
