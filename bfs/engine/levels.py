"""The level-synchronous, direction-optimizing loop that the host-counted engines run (gapbs' ``DOBFS`` on ranks).

A search is levels; each expands the frontier top-down or bottom-up (:func:`~breadth.bfs.engine.direction.
next_direction` decides from the counts of the last level), then one all-reduce of every rank's counters: the next
frontier's size and, where the step counts them, its edges.  What a level does -- which rows it reads, what it
sends to whom, how the frontier is held between levels -- is the engine's, through the steps of
:class:`LevelSteps`: :class:`~breadth.bfs.engine.engine.Engine` (1D), :class:`~breadth.bfs.engine.grid_engine.
GridEngine` (2D) and :class:`~breadth.bfs.engine.delegate_engine.DelegateEngine` run it.  The device engine keeps its
counts on the GPU and runs levels of its own (:mod:`.device_engine`), as does the batched engine
(:mod:`.batch_engine`); both apply the same rule.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

from .direction import next_direction


@dataclass
class LevelRecord:
    """What one level of a search did on this rank; the engines' ``search`` return a list of them.

    Parameters
    ----------
    depth : int
        The level: ``1`` expands the sources (level 0) and finds their neighbours.
    direction : str
        ``"td"`` (top-down, from the frontier's queue) or ``"bu"`` (bottom-up, every unvisited vertex looks
        for a parent in the frontier).
    frontier : int
        Vertices in the frontier this level expanded, all ranks (batched searches: (vertex, search) pairs).
    found : int
        Vertices reached at this level, all ranks (batched searches: (vertex, search) pairs).
    local_s : float
        Seconds of this rank's local work (its kernels).
    exchange_s : float
        Seconds of the level's exchange with the other ranks, and its waits.
    bytes_sent : int
        Payload bytes this rank sent during the level (headers not counted; 0 on one rank).
    reduce_s : float
        Seconds of the counters' all-reduce, part of ``exchange_s``.

    Examples
    --------
    >>> from breadth.bfs import LevelRecord
    >>> rec = LevelRecord(depth=1, direction="td", frontier=1, found=16, local_s=2e-5, exchange_s=1e-5,
    ...                   bytes_sent=0)
    >>> rec.as_dict()["found"], rec.reduce_s
    (16, 0.0)
    """

    depth: int
    direction: str  # "td" or "bu"
    frontier: int  # vertices in the frontier this level expanded
    found: int  # vertices reached at this level, all ranks
    local_s: float
    exchange_s: float
    bytes_sent: int
    reduce_s: float = 0.0  # the counters' all-reduce, part of exchange_s

    def as_dict(self) -> dict:
        """The fields as a dict.

        Returns
        -------
        dict
            Field name -> value (JSON-ready: ints, floats and a string).

        Examples
        --------
        >>> from breadth.bfs import LevelRecord
        >>> LevelRecord(2, "bu", 16, 900, 1e-4, 3e-5, 4096).as_dict()["direction"]
        'bu'
        """
        return asdict(self)


class LevelSteps(Protocol):
    """What :func:`run_levels` asks of an engine: its ranks and counts, and the steps of a level.

    The frontier between levels is the engine's own (a queue of local ids, a bitmap): the loop hands the steps
    only the depth and every rank's frontier size (``counts``, ``(size,)`` int64 on the host, from the last
    counters).
    """

    comm: Any  # the ranks' Communicator
    shard: Any  # this rank's Shard (its num_vertices)
    alpha: float
    beta: float
    #: edges of the graph, all ranks: the edges still to check when a search starts
    total_edges: int
    records: list

    def _counters(self, *values: int) -> np.ndarray:
        """Every rank's ``values`` as a ``(size, k)`` host matrix, in one all-reduce."""

    def begin_search(self, root) -> tuple[int, int]:
        """Reset for a search from ``root`` (a global id or an array of them); returns this rank's part of the
        first frontier: ``(vertices, their out-edges)``."""

    def step_top_down(self, depth: int, counts: np.ndarray) -> tuple[tuple[int, ...], float]:
        """One top-down level; returns this rank's ``(vertices found, [their out-edges])`` for the level's
        counters and the seconds of its local work."""

    def step_bottom_up(self, depth: int, counts: np.ndarray) -> tuple[tuple[int, ...], float]:
        """One bottom-up level; as :meth:`step_top_down` (a step that leaves the edges uncounted returns
        ``(found,)``: the rule reads them only once the search turns top-down, see :meth:`turn_top_down`)."""

    def turn_bottom_up(self) -> None:
        """The search turns bottom-up before this level: the frontier as the bottom-up step reads it."""

    def turn_top_down(self, frontier_edges: int) -> int:
        """The search turns top-down after this level: the frontier as the top-down step reads it; returns its
        out-edges, all ranks (``frontier_edges``, the last counters' sum, where the bottom-up step counted them)."""

    def end_search(self) -> None:
        """The search is over: settle what the levels left pending, drop the frontier."""


def run_levels(engine: LevelSteps, root, depth_limit: int | None = None) -> list:
    """Breadth-first search from ``root`` in levels; collective: every rank calls it with the same arguments.

    Parameters
    ----------
    engine : LevelSteps
        The rank's engine (:class:`~breadth.bfs.engine.engine.Engine` or a subclass that runs this loop).
    root : int or array_like
        A global id, or ``(k,)`` global ids searched together (see :meth:`~breadth.bfs.engine.engine.Engine.search`).
    depth_limit : int, optional
        Stop after that many levels (0 keeps only the sources); checked by the caller.

    Returns
    -------
    list of LevelRecord
        One record per level, also kept in ``engine.records``.

    Examples
    --------
    A path 0 - 1 - 2 on one rank: two levels find a vertex each, the third finds none.  Its 4 edges are so few
    that the root's one edge turns the search bottom-up at once (1 x alpha 15 > 4); alpha 0 keeps it top-down.

    >>> import numpy as np
    >>> from breadth.bfs import Engine, Shard
    >>> from breadth.bfs.engine.levels import run_levels
    >>> path = Shard(0, 1, 3, 0, 3, np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1], np.int32),
    ...              np.array([1, 2, 1], np.int32), np.zeros(3, np.int32))
    >>> [(r.depth, r.direction, r.frontier, r.found) for r in run_levels(Engine(path), 0)]
    [(1, 'bu', 1, 1), (2, 'bu', 1, 1), (3, 'bu', 1, 0)]
    >>> [r.direction for r in run_levels(Engine(path, alpha=0.0), 0)]
    ['td', 'td', 'td']
    """
    comm = engine.comm
    rule = dict(num_vertices=engine.shard.num_vertices, alpha=engine.alpha, beta=engine.beta)
    cnt = engine._counters(*engine.begin_search(root))
    counts, scout = cnt[:, 0], int(cnt[:, 1].sum())
    edges_to_check = engine.total_edges  # (never below 0: racing top-down claims can count a vertex's edges twice)
    frontier, previous, direction, depth = int(counts.sum()), 0, "td", 1
    records = []
    while depth_limit is None or depth <= depth_limit:
        bytes0, t0 = comm.bytes_sent(), time.perf_counter()
        if direction == "td" and next_direction("td", frontier_edges=scout, edges_to_check=edges_to_check,
                                                frontier=frontier, previous=previous, **rule) == "bu":
            direction = "bu"
            engine.turn_bottom_up()
        step = engine.step_top_down if direction == "td" else engine.step_bottom_up
        values, local_s = step(depth, counts)
        tr = time.perf_counter()
        cnt = engine._counters(*values)
        t1 = time.perf_counter()
        found, counts = int(cnt[:, 0].sum()), cnt[:, 0]
        records.append(LevelRecord(depth, direction, frontier, found, local_s, t1 - t0 - local_s,
                                   comm.bytes_sent() - bytes0, t1 - tr))
        if direction == "td":
            edges_to_check = max(edges_to_check - scout, 0)
        if cnt.shape[1] > 1:
            scout = int(cnt[:, 1].sum())
        if direction == "bu" and next_direction("bu", frontier_edges=scout, edges_to_check=edges_to_check,
                                                frontier=found, previous=frontier, **rule) == "td":
            direction = "td"
            scout = engine.turn_top_down(scout)
        previous, frontier = frontier, found
        if found == 0:
            break
        depth += 1
    engine.end_search()
    engine.records = records
    return records
