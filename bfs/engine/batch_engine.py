"""The SPMD batched BFS engine (MS-BFS): up to 64 searches in one level-synchronous pass, one rank per worker.

Algorithm (Then et al., "The More the Merrier: Efficient Multi-Source Graph Traversal", VLDB 2015, on the
1D partition of :mod:`.engine`): each owned vertex has a 64-bit ``seen``/``frontier``/``next`` word, bit ``i``
for search ``i``, and ``B`` words of bit-sliced levels (``planes``, see
:mod:`~breadth.bfs.cpu.batch_frontier`).  Each level is

1. a local step over the aggregate frontier -- top-down (:mod:`~breadth.bfs.cpu.batch_top_down`: each
   frontier vertex's edges read once for all its searches) or bottom-up
   (:mod:`~breadth.bfs.cpu.batch_bottom_up`: each unfinished vertex ORs its in-neighbours' frontier words until
   it has every search still running);
2. the exchange -- top-down: ``(vertex, bits)`` pairs to the vertices' owners; bottom-up: an all-gather of
   the frontier words (as ``(id, word)`` pairs when sparser than half the words);
3. the end of the level (``seen |= next``, the level's bits into ``planes``, ``frontier = next``; fused into
   the bottom-up step) and one all-reduce of each rank's counters and the OR of its frontier words (the
   searches still running).

The pass's state is ``3 + B`` words per owned vertex (``B = 4`` planes hold 15 levels; more are added as
the depth grows), plus, on several ranks, two words per global vertex (the gathered frontier and the sent
filter).  The steps also record each found (vertex, search)'s parent (:mod:`.batch_backend`: on CPUs with
the level's low byte, in blocks of consecutive vertices, ``5 k`` bytes per owned vertex for ``k`` searches,
laid out per search by :meth:`BatchEngine.results`; on GPUs search-major, ``4 k`` bytes per owned vertex,
the results themselves).  Where the records do not fit (a GPU's free memory), per-search parents are
derived after the pass instead, a group of searches at a time
(:func:`~breadth.bfs.cpu.batch_results.derive`'s algorithm).  Recording pays: at scale 20, 64 roots, one
rank of 2 threads, it adds 0.08 s to a 0.13 s pass and laying the results out takes 0.10 s, where deriving
them takes 0.36 s.

The direction is chosen on the aggregate frontier with Beamer's rule, by the level loop every engine runs
(:func:`~breadth.bfs.engine.levels.run_levels`): bottom-up once the frontier vertices' out-edges times
``alpha`` exceed the in-edges of the vertices still missing a running search; top-down again once the
frontier shrinks below ``n / beta`` vertices, and asked again at once: a small frontier whose out-edges times
``alpha`` still exceed the missing in-edges (a pass's last levels, mostly) stays bottom-up.  Per-search levels equal the
single-root search's; parents may differ but are BFS parents (one level up, an in-neighbour).

See :class:`BatchEngine` for an example.
"""

from __future__ import annotations

import os
import time

import numpy as np

from ..search_config import SearchConfig
from ..search_order import bottom_up_rows
from ..shard import Shard
from ..transport.communicator import Communicator, SelfCommunicator
from .batch_backend import batch_kernels
from .engine import Engine, describe_rank
from .levels import Counts, Level, LevelRecord, rank_counters, run_levels

#: searches per batch: one bit of a 64-bit word each
MAX_BATCH = 64
#: level planes allocated at first: levels up to 2**4 - 1 (Kronecker graphs need 3 or 4)
FIRST_PLANES = 4


class BatchEngine:
    """Up to 64 breadth-first searches in one level-synchronous pass over one rank's shard (MS-BFS).

    Every rank of a batch builds one over its shard and the same communicator and calls :meth:`search`
    with the same roots (:func:`~breadth.bfs.engine.session.run_session` with ``engine_class=BatchEngine``
    does both); on one rank no communicator is needed.  After :meth:`search`, :meth:`result` gives search
    ``i``'s parents and levels of the owned vertices.

    Parameters
    ----------
    shard : Shard
        This rank's rows (:class:`~breadth.bfs.shard.Shard`); moved to the GPU for ``backend="gpu"``.
    comm : Communicator, optional
        The ranks' collectives (default: one rank alone).
    alpha, beta : float, optional
        The direction rule on the aggregate frontier (see the module notes); None takes ``config``'s, whose
        ``alpha`` None is :attr:`ALPHA`'s (GPUs: the single search's default).
    backend : str
        ``"cpu"`` (Numba kernels) or ``"gpu"`` (the CuPy kernels of :mod:`~breadth.bfs.gpu.batch_kernels`).
    nchunks : int, optional
        Thread chunks of a pass over the owned vertices (default 8 per core).
    result_bytes : int, optional
        The most bytes of per-search results laid out or derived at once: ``level`` of the owned vertices,
        and ``parent`` where not recorded in place, ``nloc * 4`` or ``nloc * (parent itemsize + 4)`` bytes a
        search.  None takes the backend's (CPUs: no bound, the whole batch at once; GPUs: 4 GiB).
    record_parents : bool, optional
        Whether the steps record parents as they find them.  None: where the backend says they fit (always
        on CPUs); False (GPUs only) derives them after the pass, as a GPU short of memory does.
    config : SearchConfig, optional
        The search's tunables (default: its defaults).

    Attributes
    ----------
    records : list of LevelRecord
        The last pass's levels; their ``frontier``/``found`` count (vertex, search) pairs, all ranks.
    roots : ndarray
        ``(k,)`` int64 global ids of the last batch's searches, in order.
    nroots : int
        ``k``.

    Raises
    ------
    ValueError
        For ``record_parents=False`` on CPUs.

    Examples
    --------
    An undirected path 0 - 1 - 2 - 3 and a vertex 4 alone, searched from 0 and from 3 in one pass:

    >>> import numpy as np
    >>> from breadth.bfs import BatchEngine, Shard
    >>> shard = Shard(rank=0, nparts=1, num_vertices=5, lo=0, hi=5,
    ...               offsets=np.array([0, 1, 3, 5, 6, 6]), columns=np.array([1, 0, 2, 1, 3, 2], np.int32),
    ...               tuple_degree=np.array([1, 2, 2, 1, 0], np.int32), self_loops=np.zeros(5, np.int32))
    >>> eng = BatchEngine(shard)
    >>> records = eng.search([0, 3])
    >>> parent, level = eng.result(1)
    >>> level.tolist(), parent.tolist()
    ([3, 2, 1, 0, -1], [1, 2, 3, 3, -1])
    >>> eng.result(0)[1].tolist()
    [0, 1, 2, 3, -1]
    """

    #: the direction rule's ``alpha`` when none is given (GPUs: the single search's).  A batch's bottom-up
    #: level rarely stops a vertex's scan early (it needs every missing search), so it costs about the
    #: unexplored edges and top-down pays sooner than for one search: at scale 20 on CPUs a batch takes
    #: ~0.35 s of CPU time with 4 (level 2 stays top-down: 5.3 M frontier edges, 31 M unexplored), 0.42-0.45 s
    #: with 15
    ALPHA = {"cpu": 4.0}

    def __init__(self, shard: Shard, comm: Communicator | None = None, *, alpha: float | None = None,
                 beta: float | None = None, backend: str = "cpu", nchunks: int | None = None,
                 result_bytes: int | None = None, record_parents: bool | None = None,
                 config: SearchConfig | None = None):
        #: the search's tunables (its alpha, beta); ``alpha``/``beta`` given here override the config's
        self.config = (config or SearchConfig()).replace(alpha=alpha, beta=beta)
        alpha, beta = self.config.alpha, self.config.beta
        self.k = k = batch_kernels(backend)
        xp = self.xp = k.xp
        self.shard = shard.to(xp) if backend != "cpu" else shard
        self.comm = comm or SelfCommunicator()
        if alpha is None:
            alpha = self.ALPHA.get(backend, Engine.default_alpha(backend, self.comm.size))
        self.alpha = alpha
        self.beta = beta
        self.result_bytes = k.result_bytes if result_bytes is None else result_bytes
        if record_parents is False and not k.derives_parents:
            raise ValueError(f"the {backend} batch kernels record parents during the pass (record_parents=False "
                             "is for GPUs)")
        self.record_parents = record_parents
        nloc, n = shard.num_local, shard.num_vertices
        self.seen = xp.zeros(nloc, np.uint64)
        self.frontier = xp.zeros(nloc, np.uint64)
        self.next = xp.zeros(nloc, np.uint64)
        self.planes = xp.zeros((nloc, FIRST_PLANES), np.uint64)
        self.sent = xp.zeros(n if self.comm.size > 1 else 0, np.uint64)
        self.fglobal = xp.zeros(n, np.uint64) if self.comm.size > 1 else None
        s = self.shard
        self._bu = bottom_up_rows(s)
        if "bu_columns" in s.meta and self.config.degree_order:
            # the rows by decreasing neighbour degree (as the single search's bottom-up): a hub is in
            # most searches' frontiers, so a vertex meets all its missing searches sooner
            self._bu = (self._bu[0], s.meta["bu_columns"])
        self._in_edges = int(self._bu[0][-1])
        #: edges of the graph, all ranks (the rule's unexplored in-edges before a pass; each level counts them)
        self.total_edges = int(self.comm.allreduce(np.array([self._in_edges], np.int64))[0])
        self.nchunks = nchunks or 8 * (os.cpu_count() or 1)
        # the threads' vertex ranges for passes over all owned vertices, balanced on the in-edge rows
        # that bottom-up and the results scan (GPUs: the long in-rows' tasks, a warp each)
        self.chunks = k.vertex_chunks(self._bu[0], self.nchunks)
        self._words = None  # seen and planes over all global ids, gathered once per batch for results
        self.backend = backend
        self._group = None  # (first, parent, level): the last derived group of results
        self._buffers = None  # (parent, level) of a group, reused from group to group
        # the parents the steps record (``rec``, the backend's ``new_records``), None where they are derived
        self._found = None
        self.nroots = 0
        self.roots = np.empty(0, np.int64)
        self.records: list[LevelRecord] = []

    def describe(self) -> dict:
        """What this rank's batched searches run on, as :meth:`Engine.describe` says it for single ones."""
        s = self.shard
        return describe_rank(self, self.backend, "bu_columns" in s.meta and self._bu[1] is s.meta["bu_columns"])

    def close(self) -> None:
        """Release what the engine holds besides its arrays: nothing (the session calls it before closing the
        communicator)."""

    # ---------------------------------------------------------------------------------------------
    def _counters(self, *values: int) -> np.ndarray:
        """Every rank's ``values`` as a ``(size, k)`` matrix, in one all-reduce (each rank fills its row)."""
        return rank_counters(self.comm, values)

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

    def _start(self, roots: np.ndarray):
        """Reset the words; the roots' bits go into ``next``.  Returns the roots' distinct local ids (the
        vertices the first end-of-level makes the frontier)."""
        s, xp = self.shard, self.xp
        for a in (self.seen, self.next, self.frontier, self.planes, self.sent):
            a.fill(0)
        self._words = self._group = None
        kept, self._found = self._found, None
        if kept is not None and (self.k.record_searches(kept) != roots.size or not s.num_local):
            kept = None  # another batch size: the last batch's records go before new ones are allocated
        record = not self.k.derives_parents or (
            self.record_parents if self.record_parents is not None else
            kept is not None or self.k.records_fit(s.num_local, roots.size, s.num_vertices))
        if self.comm.size > 1:  # every rank records, or none: the exchanged rows' width follows
            record = bool(self.comm.allreduce(np.array([int(record)]), "min")[0])
        if record:  # the last batch's arrays for as many roots (fresh pages cost more than reuse)
            self._found = self.k.new_records(s.num_local, roots.size, s.num_vertices, kept)
        # built on the host (at most 64 roots), then copied: one transfer per array on a GPU
        words = {}
        mine = [(r - s.lo, i, r) for i, r in enumerate(roots.tolist()) if s.lo <= r < s.hi]
        for j, i, _ in mine:
            words[j] = words.get(j, 0) | (1 << i)
        if record and mine:  # a root is its own parent, at level 0
            self.k.record_roots(self._found, *(np.array(c, np.int64) for c in zip(*mine)))
        local = xp.asarray(np.fromiter(words, np.int64, len(words)))
        if words:
            self.next[local] = xp.asarray(np.array(list(words.values()), np.uint64))
        return local

    def _parents_in_place(self) -> bool:
        """Whether the last batch's recorded parents are its results as they are (no parent buffers)."""
        return self._found is not None and self.k.parents_in_place

    def _result_buffers(self, count: int):
        """``(parent, level)``, ``(count, nloc)`` views of buffers kept from call to call (grown when short);
        ``parent`` None where the recorded parents are the results."""
        s = self.shard
        with_parents = not self._parents_in_place()
        b = self._buffers
        if b is None or b[1].shape[0] < count or (b[0] is None) == with_parents:
            self._buffers = None  # let the old ones go before the new ones are allocated
            self._buffers = (self.xp.empty((count, s.num_local), self.k.parent_dtype(s.num_vertices))
                             if with_parents else None, self.xp.empty((count, s.num_local), np.int32))
        parent, level = self._buffers
        return (parent[:count] if parent is not None else None), level[:count]

    def _planes_for(self, depth: int) -> None:
        """Grow ``planes`` so that it holds level ``depth`` (one more plane, the old ones copied)."""
        b = self.planes.shape[1]
        if depth >> b:
            grown = self.xp.zeros((self.planes.shape[0], b + 1), np.uint64)
            grown[:, :b] = self.planes
            self.planes = grown

    def search(self, roots, depth_limit: int | None = None) -> list[LevelRecord]:
        """One pass of searches from ``roots``, each its own search; collective: every rank calls it alike.

        The results stay in the engine until the next pass (:meth:`result`, :meth:`results`).

        Parameters
        ----------
        roots : array_like
            ``(k,)`` global (dense) ids, ``1 <= k <= 64``; search ``i`` starts at ``roots[i]`` (repeats
            allowed).
        depth_limit : int, optional
            Stop after that many levels: vertices farther away stay unreached.

        Returns
        -------
        list of LevelRecord
            One record per level of the pass (also kept in :attr:`records`), counting (vertex, search)
            pairs.

        Raises
        ------
        ValueError
            For no roots or more than 64, a root outside ``[0, n)``, or a negative ``depth_limit``.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import BatchEngine, Shard
        >>> eng = BatchEngine(Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # 0 - 1
        ...                         np.ones(2, np.int32), np.zeros(2, np.int32)))
        >>> [(r.depth, r.found) for r in eng.search([0, 1])]       # level 1 finds a vertex for each search
        [(1, 2), (2, 0)]
        """
        s = self.shard
        roots = np.asarray(roots, np.int64).ravel()
        if not 1 <= roots.size <= MAX_BATCH:
            raise ValueError(f"a batch holds 1 to {MAX_BATCH} roots, got {roots.size}")
        if ((roots < 0) | (roots >= s.num_vertices)).any():
            raise ValueError(f"root outside [0, {s.num_vertices})")
        if depth_limit is not None and depth_limit < 0:
            raise ValueError(f"depth_limit must be >= 0, got {depth_limit}")
        return run_levels(self, roots, depth_limit)

    # -- the steps of a level (:class:`~breadth.bfs.engine.levels.LevelSteps`) ---------------------------
    # The frontier between levels is the ``frontier`` words (a search's bit where the vertex is in its frontier),
    # with the queue of its vertices while the pass runs top-down.  Every step's counters are ``(vertices,
    # (vertex, search) pairs, the vertices' out-edges, the in-edges of the vertices still missing a running search,
    # the OR of the frontier words)``, the last column OR-ed by :meth:`_active`.
    def begin_search(self, roots) -> np.ndarray:
        """Reset for the searches from ``roots``; level 0 makes the roots the frontier, with every in-edge still to
        explore."""
        s, k = self.shard, self.k
        self.nroots, self.roots = int(roots.size), roots
        queue = self._start(roots)
        c = k.finish_touched(queue, queue[:0], self.next, self.frontier, self.seen, self.planes, 0, s.offsets,
                             self.nchunks, self._found)
        self._queue, self._next_is_clear = queue, True  # top-down ORs into ``next``; bottom-up leaves it dirty
        self._unexplored = self._in_edges  # this rank's part of the rule's unexplored edges (bottom-up counts it)
        return self._counters(*c[:3], self._unexplored, c[4])

    def counts(self, cnt: np.ndarray) -> Counts:
        """The rule counts frontier vertices and their out-edges against the unexplored in-edges; the records count
        (vertex, search) pairs."""
        return Counts(int(cnt[:, 0].sum()), int(cnt[:, 2].sum()), int(cnt[:, 1].sum()), int(cnt[:, 3].sum()))

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """Each frontier vertex's edges read once for all its searches; ``(vertex, bits)`` rows to the owners,
        which claim them; the level ends over the vertices touched (its queue)."""
        s, comm, k, xp, rec = self.shard, self.comm, self.k, self.xp, self._found
        t0 = time.perf_counter()
        self._planes_for(level.depth)
        if not self._next_is_clear:
            self.next.fill(0)
            self._next_is_clear = True
        queue = self._queue if self._queue is not None else xp.flatnonzero(self.frontier)
        touched, pairs = k.top_down_step(s.offsets, s.columns, s.lo, queue, self.frontier, self.seen, self.next,
                                         self.sent, self.nchunks, rec)
        t1 = time.perf_counter()
        if comm.size > 1:
            width = 2 if rec is None else 3  # rows: (vertex, bits[, parent])
            got = [touched]
            for part in comm.alltoallv(k.pairs_by_owner(pairs, s.block, comm.size)):
                if part.shape[0]:
                    got.append(k.claim_pairs(part.reshape(-1, width), s.lo, self.seen, self.next, rec))
            touched = xp.concatenate(got) if len(got) > 1 else touched
        t2 = time.perf_counter()
        c = k.finish_touched(touched, queue, self.next, self.frontier, self.seen, self.planes, level.depth, s.offsets,
                             self.nchunks, rec)
        self._queue = touched
        t3 = time.perf_counter()
        cnt = self._counters(*c[:3], self._unexplored, c[4])  # (top-down does not count the unexplored edges)
        return cnt, (t1 - t0) + (t3 - t2), time.perf_counter() - t3

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """The frontier words gathered; each unfinished vertex ORs its in-neighbours' words until it has every
        search still running (the end of the level fused in)."""
        s, k = self.shard, self.k
        self._planes_for(level.depth)
        fglobal = self._gather_frontier(level.counters[:, 0])
        t1 = time.perf_counter()
        sparse = 8 * int(level.counters[:, 0].sum()) <= fglobal.size
        nonzero = k.nonzero_bits(fglobal) if sparse else fglobal[:0]
        bu_off, bu_col = self._bu
        c = k.bottom_up_step(bu_off, bu_col, fglobal, nonzero, sparse, self._active(level.counters), self.seen,
                             self.next, self.planes, level.depth, s.offsets, self.chunks, self._found)
        self.frontier, self.next = self.next, self.frontier
        self._next_is_clear, self._queue, self._unexplored = False, None, c[3]
        t2 = time.perf_counter()
        cnt = self._counters(*c)
        return cnt, t2 - t1, time.perf_counter() - t2

    def turn_bottom_up(self) -> None:
        """Nothing: bottom-up reads the frontier words."""

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """Nothing: the bottom-up step counted the frontier's out-edges (its queue is made by the next step)."""
        return frontier_edges

    def end_search(self) -> None:
        """Drop the last queue."""
        self._queue = None

    @staticmethod
    def _active(cnt: np.ndarray) -> np.uint64:
        """The searches with a frontier on any rank: the OR of the ranks' words (column 4)."""
        return np.bitwise_or.reduce(cnt[:, 4].view(np.uint64))

    # -- results ---------------------------------------------------------------------------------
    def _global_words(self):
        """``seen`` and ``planes`` side by side (``k.word_table``) over all global ids (a parent may be owned
        by another rank): this rank's own on one rank, else all-gathered, once per batch (collective)."""
        if self._words is None:
            table = self.k.word_table(self.seen, self.planes)
            if self.comm.size > 1:
                table = self.xp.concatenate(self.comm.allgather(table))
            self._words = table
        return self._words

    def group_size(self) -> int:
        """How many searches' results :meth:`device_result` lays out or derives at once.

        Returns
        -------
        int
            ``result_bytes`` over one search's result bytes, in ``1..64`` (64 where ``result_bytes`` is None).

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import BatchEngine, Shard
        >>> eng = BatchEngine(Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # 0 - 1
        ...                         np.ones(2, np.int32), np.zeros(2, np.int32)))
        >>> eng.group_size()
        64
        """
        per = self.shard.num_local * (4 + (0 if self._parents_in_place() else
                                           self.k.parent_dtype(self.shard.num_vertices).itemsize))
        if self.result_bytes is None or per == 0:
            return MAX_BATCH
        return int(max(1, min(MAX_BATCH, self.result_bytes // per)))

    def results(self, first: int = 0, count: int | None = None):
        """Parents and levels of a run of the last pass's searches, for the owned vertices.

        Laid out from what the steps recorded, else derived in one pass over the owned vertices (then
        collective on several ranks: every rank asks for the same searches).

        Parameters
        ----------
        first : int
            The first search, ``0 <= first < nroots``.
        count : int, optional
            How many searches (default: to the end of the batch).

        Returns
        -------
        parent : ndarray or None
            ``(count, nloc)`` parents in global ids (a root its own parent, -1 unreached), on the engine's
            array module; None where the recorded parents are the results themselves (GPUs).
        level : ndarray
            ``(count, nloc)`` int32 levels (-1 unreached).
            Both are views of buffers the engine keeps, overwritten by the next call: copy what must outlive
            it.

        Raises
        ------
        IndexError
            For searches outside the last batch.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import BatchEngine, Shard
        >>> eng = BatchEngine(Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # 0 - 1
        ...                         np.ones(2, np.int32), np.zeros(2, np.int32)))
        >>> _ = eng.search([0, 1])
        >>> parent, level = eng.results()
        >>> parent.tolist(), level.tolist()
        ([[0, 0], [1, 1]], [[0, 1], [1, 0]])
        """
        count = self.nroots - first if count is None else count
        if not (0 <= first and 1 <= count and first + count <= self.nroots):
            raise IndexError(f"searches {first}..{first + count - 1} not in this batch of {self.nroots}")
        self._group = None  # its views are about to be overwritten
        if self._found is not None:  # the steps wrote every reached (vertex, search)'s parent
            return self.k.lay_out(self.seen, self.planes, self._found, self.chunks, first,
                                  *self._result_buffers(count))
        s = self.shard
        table = self._global_words()
        parent, level = self._result_buffers(count)
        self.k.derive(*self._bu, s.lo, table, self.planes.shape[1], self.roots, first, count, self.chunks, parent,
                      level)
        return parent, level

    def device_result(self, i: int):
        """Search ``i``'s parents and levels of the owned vertices, where the engine computes (no host copy).

        The group of :meth:`group_size` searches that holds ``i`` is laid out or derived when first asked
        for: ask in order, all ranks together.

        Parameters
        ----------
        i : int
            The search, ``0 <= i < nroots``.

        Returns
        -------
        parent : ndarray
            ``(nloc,)`` parents in global ids (a root its own parent, -1 unreached), on the engine's array
            module (CuPy on GPUs).
        level : ndarray
            ``(nloc,)`` int32 levels (-1 unreached).  Both are views, valid until another group is laid out.

        Raises
        ------
        IndexError
            For a search outside the last batch.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import BatchEngine, Shard
        >>> eng = BatchEngine(Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # 0 - 1
        ...                         np.ones(2, np.int32), np.zeros(2, np.int32)))
        >>> _ = eng.search([0, 1])
        >>> parent, level = eng.device_result(1)
        >>> parent.tolist(), level.tolist()
        ([1, 1], [1, 0])
        """
        if not 0 <= i < self.nroots:
            raise IndexError(f"search {i} not in this batch of {self.nroots}")
        g = self._group
        if g is None or not g[0] <= i < g[0] + g[1].shape[0]:
            size = self.group_size()
            first = i - i % size
            g = self._group = (first, *self.results(first, min(size, self.nroots - first)))
        return g[1][i - g[0]], g[2][i - g[0]]

    def result(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Search ``i``'s parents and levels of the owned vertices as host arrays, as the single search
        gives them (collective where :meth:`device_result` is).

        Parameters
        ----------
        i : int
            The search, ``0 <= i < nroots``.

        Returns
        -------
        parent : ndarray
            ``(nloc,)`` int64 parents in global ids (the root its own parent, -1 unreached).
        level : ndarray
            ``(nloc,)`` int32 levels (-1 unreached).

        Raises
        ------
        IndexError
            For a search outside the last batch.

        Examples
        --------
        >>> import numpy as np
        >>> from breadth.bfs import BatchEngine, Shard
        >>> eng = BatchEngine(Shard(0, 1, 2, 0, 2, np.array([0, 1, 2]), np.array([1, 0], np.int32),  # 0 - 1
        ...                         np.ones(2, np.int32), np.zeros(2, np.int32)))
        >>> _ = eng.search([0, 1])
        >>> eng.result(0)
        (array([0, 0]), array([0, 1], dtype=int32))
        """
        parent, level = self.device_result(i)
        host = self.k.to_host
        return np.asarray(host(parent), np.int64), np.array(host(level), np.int32)
