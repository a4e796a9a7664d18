"""The SPMD direction-optimizing BFS engine: one instance per rank, collectives through a Communicator.

Each level is: local expansion (top-down from a queue, or bottom-up against the global frontier bitmap),
the exchange (top-down: reached remote vertices with their parents to their owners; bottom-up: all-gather
of the frontier), and one all-reduce of the counters that decide the next direction (Beamer, Asanović,
Patterson: go bottom-up when the frontier's edges exceed the unexplored edges / alpha, come back when the
frontier shrinks below n / beta; :mod:`.direction`).  The loop over levels is :func:`~breadth.bfs.engine.levels.
run_levels`, which every engine runs; this one provides its 1D steps, with its counters read on the host.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..cpu.frontier import num_words
from ..search_config import SearchConfig
from ..search_order import bottom_up_rows
from ..shard import Shard
from ..transport.communicator import Communicator, SelfCommunicator
from .backend import get_backend
from .levels import Counts, Level, LevelRecord, rank_counters, run_levels, vertex_counts


def describe_rank(engine, backend: str, ordered: bool) -> dict:
    """An engine's :meth:`Engine.describe` record, for the single-search and the batched engines alike."""
    from ..id_map import on_device

    return {"engine": type(engine).__name__, "backend": backend,
            "arrays": "device" if on_device(engine.shard.columns) else "host",
            "bottom_up_rows": "degree-ordered" if ordered else "sorted",
            "communicator": type(engine.comm).__name__}


def check_depth_limit(depth_limit: int | None) -> None:
    """``depth_limit`` is None (no limit) or a non-negative level count."""
    if depth_limit is not None and (not isinstance(depth_limit, (int, np.integer)) or depth_limit < 0):
        raise ValueError(f"depth_limit must be a non-negative integer or None, got {depth_limit!r}")


class Engine:
    """Direction-optimizing breadth-first searches over one rank's shard (one instance per rank).

    Every rank of a search builds one over its shard and the same communicator, and calls :meth:`search`
    with the same arguments (:func:`~breadth.bfs.engine.session.run_session` does both); on one rank no
    communicator is needed.  The arrays live where the backend computes: NumPy with Numba kernels on
    ``"cpu"``, CuPy on ``"gpu"``.

    Parameters
    ----------
    shard : Shard
        This rank's rows (:class:`~breadth.bfs.shard.Shard`); moved to the GPU for ``backend="gpu"``.
    comm : Communicator, optional
        The ranks' collectives (:mod:`breadth.bfs.transport`); default: one rank alone.
    alpha, beta : float, optional
        The direction rule: bottom-up once the frontier's edges exceed the unexplored edges / ``alpha``,
        top-down again once the frontier shrinks below ``n / beta`` vertices.  None takes ``config``'s
        (whose ``alpha`` None is :meth:`default_alpha`).
    backend : str
        ``"cpu"`` or ``"gpu"``.
    nchunks : int, optional
        Thread chunks of a CPU level (default 8 per core).
    config : SearchConfig, optional
        The search's tunables (:class:`~breadth.bfs.search_config.SearchConfig`; default: its defaults).

    Attributes
    ----------
    parent : ndarray
        ``(num_local,)`` the last search's parents of the owned vertices, in global ids (a source is its own
        parent; -1 unreached); int32 below 2**31 vertices on CPUs, int64 on GPUs.
    level : ndarray
        ``(num_local,)`` int32 hops from the nearest source (-1 unreached).
    records : list of LevelRecord
        The last search's levels.
    alpha, beta : float
        The direction rule in force.

    Examples
    --------
    An undirected path 0 - 1 - 2 - 3 and a vertex 4 alone, searched on one rank from vertex 0:

    >>> import numpy as np
    >>> from breadth.bfs import Engine, Shard
    >>> shard = Shard(rank=0, nparts=1, num_vertices=5, lo=0, hi=5,
    ...               offsets=np.array([0, 1, 3, 5, 6, 6]), columns=np.array([1, 0, 2, 1, 3, 2], np.int32),
    ...               tuple_degree=np.array([1, 2, 2, 1, 0], np.int32), self_loops=np.zeros(5, np.int32))
    >>> eng = Engine(shard)
    >>> records = eng.search(0)
    >>> eng.level.tolist(), eng.parent.tolist()
    ([0, 1, 2, 3, -1], [0, 0, 1, 2, -1])
    >>> [(r.depth, r.found) for r in records]
    [(1, 1), (2, 1), (3, 1), (4, 0)]
    """

    #: default ``alpha`` per backend: on GPUs bottom-up is cheap enough that switching earlier pays
    #: (H200, Kronecker scale 26, 64 roots: 260 GTEPS at 50, 235 at 15 on one GPU; 378 and 363 on two).
    #: Beyond two GPU ranks a top-down level's pairs go to more peers and it is scaled by (size / 2)^2:
    #: scale 28 on four H200s makes 558 GTEPS at 200, 522 at 50 (and 555 at 800), while scale 27 on two
    #: makes 417 at 50, 395 at 200.
    ALPHA = {"cpu": 15.0, "gpu": 50.0}

    @classmethod
    def default_alpha(cls, backend: str, size: int) -> float:
        """The direction rule's ``alpha`` when none is given.

        Parameters
        ----------
        backend : str
            ``"cpu"`` or ``"gpu"``.
        size : int
            The number of ranks.

        Returns
        -------
        float
            :attr:`ALPHA`'s value for ``backend`` (15 on CPUs, 50 on GPUs), times ``(size / 2) ** 2`` for GPU
            ranks beyond two.

        Examples
        --------
        >>> from breadth.bfs import Engine
        >>> Engine.default_alpha("cpu", 4), Engine.default_alpha("gpu", 2), Engine.default_alpha("gpu", 4)
        (15.0, 50.0, 200.0)
        """
        a = cls.ALPHA.get(backend, 15.0)
        return a * (size / 2) ** 2 if backend == "gpu" and size > 2 else a

    def __init__(self, shard: Shard, comm: Communicator | None = None, *, alpha: float | None = None,
                 beta: float | None = None, backend: str = "cpu", nchunks: int | None = None,
                 config: SearchConfig | None = None):
        #: the search's tunables; ``alpha``/``beta`` given here override the config's
        self.config = (config or SearchConfig()).replace(alpha=alpha, beta=beta)
        self.b = get_backend(backend, self.config)
        xp = self.b.xp
        self.shard = shard.to(xp) if backend != "cpu" else shard
        # config.degree_order off ignores the shard's degree-ordered bottom-up rows (to measure their gain)
        if "bu_columns" in self.shard.meta and self.config.degree_order:
            s = self.shard
            self.b.use_bottom_up_columns(s.in_columns if s.directed else s.columns, s.meta["bu_columns"])
        self.comm = comm or SelfCommunicator()
        a = self.config.alpha
        self.alpha = self.default_alpha(backend, self.comm.size) if a is None else a
        self.beta = self.config.beta
        self.nchunks = nchunks or 8 * (os.cpu_count() or 1)
        n = shard.num_vertices
        pdt = self.b.parent_dtype(n)
        self.parent = xp.full(shard.num_local, -1, pdt)
        self.level = xp.full(shard.num_local, -1, np.int32)
        self.nwords = num_words(shard.num_local)
        #: every rank's words of the global frontier bitmap (rank ``r``'s block of vertices), in rank order
        self.rank_words = [num_words(min(r * shard.block + shard.block, n) - min(r * shard.block, n))
                           for r in range(self.comm.size)]
        self.sent = xp.zeros(num_words(n) if self.comm.size > 1 else 0, np.uint64)
        self.total_edges = int(self.comm.allreduce(np.array([shard.num_local_edges], np.int64))[0])
        self.records: list[LevelRecord] = []

    def describe(self) -> dict:
        """What this rank's searches run on: the engine, the array backend, where the shard's arrays live,
        the rows bottom-up scans and the communicator.  Two graphs whose engines describe themselves alike
        take the same kernels (a stored graph and the same graph prepared in memory do).

        Returns
        -------
        dict
            ``{"engine", "backend", "arrays", "bottom_up_rows", "communicator"}``, all strings; the device
            engine adds ``"levels"``.
        """
        return describe_rank(self, self.b.name, self.b.bottom_up_ordered)

    # -- exchange helpers -------------------------------------------------------------------------
    #: keyword arguments of the frontier's all-gather (the device engine leaves it queued, not waited for)
    _gather_kw: dict = {}

    def _gather_frontier(self, bits, counts):
        """Global frontier bitmap from every rank's local words.  Rank ``r`` sends its vertex list instead
        of its bitmap when the list is smaller (Bisson et al.); ``counts[r]`` (its frontier size, known to
        every rank from the last counters) tells the receivers which and how long, so the gather needs no
        size header: one round."""
        if self.comm.size == 1:
            return bits
        xp = self.b.xp
        nws = self.rank_words
        is_list = [int(c) < nw for c, nw in zip(counts, nws)]
        sizes = [int(c) if lst else nw for c, lst, nw in zip(counts, is_list, nws)]
        r0 = self.comm.rank
        mine = self.b.bits_to_queue(bits).view(np.uint64) if is_list[r0] else bits  # int64 ids as words
        parts = self.comm.allgatherv(mine, sizes, **self._gather_kw)
        out = [self.b.queue_to_bits(part.view(np.int64), nw) if lst else part
               for part, lst, nw in zip(parts, is_list, nws)]
        return xp.concatenate(out)

    def _exchange_pairs(self, rv, rp, depth: int):
        """Send reached remote vertices with their parents to their owners; claim what arrives."""
        xp, size, rank = self.b.xp, self.comm.size, self.comm.rank
        if size == 2:  # every remote vertex has the one other owner: nothing to group, no offsets to learn
            pairs = xp.stack([rv, rp], axis=1)
            send = [pairs[:0], pairs[:0]]
            send[1 - rank] = pairs
        else:
            pairs, offs = self.b.pairs_by_owner(rv, rp, self.shard.block, size)
            offs = self.b.to_host(offs)
            send = [pairs[offs[r]:offs[r + 1]] for r in range(size)]
        recv = self.comm.alltoallv(send)
        got = [p for p in recv if p.shape[0]]
        if not got:
            return xp.empty(0, np.int64)
        allp = xp.concatenate(got)
        # a backend that can learns the claimed vertices' degree sum in the claim's own synchronisation
        kw = {"offsets": self.shard.offsets} if self.b.claims_count_degrees else {}
        return self.b.claim_remote(xp.ascontiguousarray(allp[:, 0]), xp.ascontiguousarray(allp[:, 1]),
                                   self.shard.lo, self.parent, self.level, np.int32(depth), **kw)

    def _bottom_up_owned(self, fbits, depth: int):
        """One bottom-up step over the owned vertices' rows (in-neighbours: the CSC rows of a directed graph)
        against the global frontier bitmap ``fbits``; returns ``(next_bits, found)``: this rank's words of
        the vertices found and their count."""
        s, xp = self.shard, self.b.xp
        nxt = xp.empty(self.nwords, np.uint64)
        bu_off, bu_col = bottom_up_rows(s)
        found, _ = self.b.bottom_up_step(bu_off, bu_col, fbits, self.parent, self.level, np.int32(depth), nxt)
        return nxt, found

    def _allreduce(self, *values: int) -> np.ndarray:
        return self.comm.allreduce(np.array(values, np.int64))

    def _counters(self, *values: int) -> np.ndarray:
        """Every rank's ``values`` as a ``(size, k)`` host matrix, in one all-reduce
        (:func:`~breadth.bfs.engine.levels.rank_counters`)."""
        return rank_counters(self.comm, values)

    def _close_level(self, values: tuple, local_s: float) -> tuple[np.ndarray, float, float]:
        """A host-counted step's return: every rank's ``values`` (one all-reduce), ``local_s``, the round's
        seconds."""
        t0 = time.perf_counter()
        cnt = self._counters(*values)
        return cnt, local_s, time.perf_counter() - t0

    def close(self) -> None:
        """Release what the engine holds besides its arrays (nothing here; the device engine destroys its
        captured CUDA graphs).  The session calls it before closing the communicator."""

    # -- the search -------------------------------------------------------------------------------
    def _start(self, root):
        """Reset the search state for ``root`` (a global id, or an array of them searched together at
        level 0); returns this rank's first queue (the sources owned here, local ids)."""
        s, b, xp = self.shard, self.b, self.b.xp
        roots = np.unique(np.asarray(root, np.int64).ravel())
        if roots.size == 0:
            raise ValueError("a search needs at least one source")
        bad = roots[(roots < 0) | (roots >= s.num_vertices)]
        if bad.size:
            raise ValueError(f"root {int(bad[0])} outside [0, {s.num_vertices})")
        mine = roots[(roots >= s.lo) & (roots < s.hi)] - s.lo
        # backend hook: parents and levels reset (one fused device pass on GPUs) with the backend's own state
        b.start_search(self.parent, self.level, int(mine[0]) if roots.size == 1 and mine.size else -1)
        if roots.size > 1 and mine.size:
            b.mark_visited(mine)  # a visited bitmap the backend keeps learns every source, not one root
        if self.sent.size:
            self.sent.fill(0)
        if roots.size == 1 and mine.size:
            self.parent[int(mine[0])] = int(mine[0]) + s.lo
            self.level[int(mine[0])] = 0
            return xp.array(mine, np.int64)
        if mine.size:
            dev = xp.asarray(mine)
            self.parent[dev] = dev + s.lo  # a source is its own parent
            self.level[dev] = 0
            return dev
        return xp.empty(0, np.int64)

    def search(self, root, depth_limit: int | None = None) -> list[LevelRecord]:
        """Breadth-first search; collective: every rank calls it with the same arguments.

        The result is left in :attr:`parent` and :attr:`level` (this rank's vertices), overwritten by the
        next search.

        Parameters
        ----------
        root : int or array_like
            A global (dense) id, or ``(k,)`` global ids searched together: all at level 0, each its own
            parent, so that every reached vertex's level is its distance to the nearest one and its parent
            chain ends in one of them (repeats count once).
        depth_limit : int, optional
            Stop after that many levels: farther vertices stay unreached (0 keeps only the sources).

        Returns
        -------
        list of LevelRecord
            One record per level, also kept in :attr:`records`.

        Raises
        ------
        ValueError
            For a root outside ``[0, n)``, no root at all, or a negative ``depth_limit``.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import Engine, Shard
        >>> shard = Shard(rank=0, nparts=1, num_vertices=5, lo=0, hi=5,
        ...               offsets=np.array([0, 1, 3, 5, 6, 6]), columns=np.array([1, 0, 2, 1, 3, 2], np.int32),
        ...               tuple_degree=np.array([1, 2, 2, 1, 0], np.int32), self_loops=np.zeros(5, np.int32))
        >>> eng = Engine(shard)
        >>> _ = eng.search(np.array([0, 3]), depth_limit=1)
        >>> eng.level.tolist(), eng.parent.tolist()
        ([0, 1, 1, 0, -1], [0, 0, 3, 3, -1])
        """
        check_depth_limit(depth_limit)
        return run_levels(self, root, depth_limit)

    # -- the steps of a level (:class:`~breadth.bfs.engine.levels.LevelSteps`) ---------------------------
    # The frontier between levels: a queue of local ids while the search runs top-down, this rank's words of
    # the frontier bitmap while it runs bottom-up.
    _queue = None
    _bits = None

    def begin_search(self, root) -> np.ndarray:
        """:meth:`_start`; returns every rank's first queue length and out-edges."""
        self._queue, self._bits = self._start(root), None
        return self._counters(int(self._queue.size), int(self.b.degree_sum(self.shard.offsets, self._queue)))

    def counts(self, cnt: np.ndarray) -> Counts:
        """:func:`~breadth.bfs.engine.levels.vertex_counts`: column 0 the frontier's vertices, column 1 (where
        counted) their out-edges."""
        return vertex_counts(cnt)

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """Expand the queue over the owned rows; reached remote vertices go with their parents to their owners,
        which claim them.  Counts ``(claimed, their out-edges)``."""
        s, b, xp, comm = self.shard, self.b, self.b.xp, self.comm
        depth = level.depth
        t0 = time.perf_counter()
        nxt, rv, rp, _ = b.top_down_step(s.offsets, s.columns, s.lo, s.hi, self._queue, self.parent, self.level,
                                         np.int32(depth), self.sent, self.nchunks)
        t1 = time.perf_counter()
        deg = int(b.degree_sum(s.offsets, nxt))  # known to the GPU step: no synchronisation
        if comm.size > 1:
            claimed = self._exchange_pairs(rv, rp, depth)
            deg += int(b.degree_sum(s.offsets, claimed))
            nxt = xp.concatenate([nxt, claimed])
            b.note_degree_sum(nxt, s.offsets, deg)
        self._queue = nxt
        return self._close_level((int(nxt.size), deg), t1 - t0)

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """Gather the global frontier bitmap (every rank's part, list or bitmap, as the counters size it); the
        owned vertices look for a parent in it.  Counts ``(found,)``: their edges are summed only if the search
        turns top-down."""
        fbits = self._gather_frontier(self._bits, level.counters[:, 0])
        t1 = time.perf_counter()
        self._bits, awake = self._bottom_up_owned(fbits, level.depth)
        return self._close_level((int(awake),), time.perf_counter() - t1)

    def turn_bottom_up(self) -> None:
        """The queue as this rank's words of the frontier bitmap."""
        self._bits = self.b.queue_to_bits(self._queue, self.nwords)

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """The bitmap as a queue; returns its out-edges, all ranks (one all-reduce)."""
        b = self.b
        self._queue = b.bits_to_queue(self._bits)
        return int(self._allreduce(int(b.degree_sum(self.shard.offsets, self._queue)))[0])

    def end_search(self) -> None:
        """Drop the last frontier."""
        self._queue = self._bits = None
