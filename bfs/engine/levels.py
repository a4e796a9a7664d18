"""The level-synchronous, direction-optimizing loop that every engine runs (gapbs' ``DOBFS`` on ranks).

A search is levels; each expands the frontier top-down or bottom-up (:func:`~breadth.bfs.engine.direction.
next_direction` decides from the counts of the last level) and ends with every rank's counters of the frontier it
made: its size and, where the step counts them, its edges.  What a level does -- which rows it reads, what it sends
to whom, how the frontier is held between levels, where the counters are summed -- is the engine's, through the
steps of :class:`LevelSteps`: :class:`~breadth.bfs.engine.engine.Engine` (1D, counters all-reduced on the host),
:class:`~breadth.bfs.engine.grid_engine.GridEngine` (2D), :class:`~breadth.bfs.engine.delegate_engine.
DelegateEngine`, :class:`~breadth.bfs.engine.device_engine.DeviceEngine` (counters on the GPU: captured levels,
one-round levels over UCX, queued ones) and :class:`~breadth.bfs.engine.batch_engine.BatchEngine` (up to 64
searches a pass, counting (vertex, search) pairs) run it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple, Protocol

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


class Level(NamedTuple):
    """What a step is told of the level it runs.

    Parameters
    ----------
    depth : int
        The level: ``1`` expands the sources.
    counters : ndarray
        ``(size, k)`` int64 on the host: every rank's counters of the frontier this level expands, as the last step
        (or :meth:`LevelSteps.begin_search`) returned them; column 0 is each rank's part of the frontier.
    edges_to_check : int
        The direction rule's unexplored edges before this level (all ranks).
    last : bool
        No level follows this one (the search's depth limit).
    """

    depth: int
    counters: np.ndarray
    edges_to_check: int
    last: bool


class Counts(NamedTuple):
    """What :func:`run_levels` reads of a frontier's counters (all ranks).

    Parameters
    ----------
    frontier : int
        Vertices in the frontier (the rule's count; 0 ends the search).
    edges : int or None
        Their out-edges; None where the step did not count them (bottom-up levels of the host engines: the rule
        reads them only once the search turns top-down, see :meth:`LevelSteps.turn_top_down`).
    reported : int
        What the level's record counts as found: ``frontier``, or a batch's (vertex, search) pairs.
    unexplored : int or None
        Edges still to check, where the engine counts them itself (a batch: the in-edges of the vertices still
        missing a running search); None: the loop's count, the graph's edges less those of each frontier expanded
        top-down.
    """

    frontier: int
    edges: int | None
    reported: int
    unexplored: int | None = None


def vertex_counts(cnt: np.ndarray) -> Counts:
    """:class:`Counts` of counters whose column 0 counts frontier vertices and column 1, where present, their
    out-edges (the single-search engines').

    Parameters
    ----------
    cnt : ndarray
        ``(size, k)`` every rank's counters.

    Returns
    -------
    Counts
        Column sums; ``edges`` None for a single column.

    Examples
    --------
    >>> import numpy as np
    >>> from breadth.bfs.engine.levels import vertex_counts
    >>> vertex_counts(np.array([[3, 40], [2, 10]]))
    Counts(frontier=5, edges=50, reported=5, unexplored=None)
    """
    cols = list(zip(*cnt.tolist()))  # (on the host between a one-round level's rounds: no NumPy reductions)
    f = sum(cols[0])
    return Counts(f, sum(cols[1]) if len(cols) > 1 else None, f)


def rank_counters(comm, values) -> np.ndarray:
    """Every rank's ``values`` as a ``(size, k)`` host matrix, in one all-reduce (each rank fills its own row):
    column sums are the global counters, and column 0 (a rank's part of the frontier) tells the next bottom-up
    gather what each rank will send.  Collective.

    Parameters
    ----------
    comm : Communicator
        The ranks' collectives.
    values : sequence of int
        This rank's ``k`` counters.

    Returns
    -------
    ndarray
        ``(size, k)`` int64.

    Examples
    --------
    >>> from breadth.bfs.engine.levels import rank_counters
    >>> from breadth.bfs.transport.communicator import SelfCommunicator
    >>> rank_counters(SelfCommunicator(), (4, 17)).tolist()
    [[4, 17]]
    """
    size = comm.size
    v = np.zeros((size, len(values)), np.int64)
    v[comm.rank] = values
    return comm.allreduce(v.ravel()).reshape(size, -1) if size > 1 else v


class LevelSteps(Protocol):
    """What :func:`run_levels` asks of an engine: its ranks, its rule's parameters, and the steps of a level.

    The frontier between levels is the engine's own (a queue of local ids, a bitmap, a batch's words); the loop
    holds only every rank's counters of it, as the steps return them, and reads them through :meth:`counts`.
    """

    comm: Any  # the ranks' Communicator
    shard: Any  # this rank's Shard (its num_vertices)
    alpha: float
    beta: float
    #: edges of the graph, all ranks: the edges still to check when a search starts
    total_edges: int
    records: list

    def begin_search(self, root) -> np.ndarray:
        """Reset for a search from ``root``; returns every rank's counters of the first frontier (the sources),
        ``(size, k)`` on the host."""

    def counts(self, cnt: np.ndarray) -> Counts:
        """What the loop reads of counters ``cnt`` (:func:`vertex_counts` for the single-search engines)."""

    def step_top_down(self, level: Level) -> tuple[np.ndarray, float, float]:
        """One top-down level; returns every rank's counters of the frontier it made (``(size, k)``, on the
        host), the seconds of this rank's local work (its kernels) and those of the counters' last round."""

    def step_bottom_up(self, level: Level) -> tuple[np.ndarray, float, float]:
        """One bottom-up level; as :meth:`step_top_down`."""

    def turn_bottom_up(self) -> None:
        """The search turns bottom-up before this level: the frontier as the bottom-up step reads it."""

    def turn_top_down(self, frontier_edges: int | None) -> int:
        """The search turns top-down after this level: the frontier as the top-down step reads it; returns its
        out-edges, all ranks (``frontier_edges``, the last counters' :attr:`Counts.edges`, where counted)."""

    def end_search(self) -> None:
        """The search is over: settle what the levels left pending, drop the frontier."""


def run_levels(engine: LevelSteps, root, depth_limit: int | None = None) -> list:
    """Breadth-first search from ``root`` in levels; collective: every rank calls it with the same arguments.

    Parameters
    ----------
    engine : LevelSteps
        The rank's engine.
    root : int or array_like
        A global id, or ``(k,)`` global ids searched together (see :meth:`~breadth.bfs.engine.engine.Engine.search`;
        a batch: one search each).
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
    cnt = engine.begin_search(root)
    c = engine.counts(cnt)
    frontier, reported, scout = c.frontier, c.reported, c.edges
    edges_to_check = engine.total_edges if c.unexplored is None else c.unexplored
    previous, direction, depth = 0, "td", 1
    records = []
    while frontier and (depth_limit is None or depth <= depth_limit):
        bytes0, t0 = comm.bytes_sent(), time.perf_counter()
        if direction == "td" and next_direction("td", frontier_edges=scout, edges_to_check=edges_to_check,
                                                frontier=frontier, previous=previous, **rule) == "bu":
            direction = "bu"
            engine.turn_bottom_up()
        step = engine.step_top_down if direction == "td" else engine.step_bottom_up
        cnt, local_s, reduce_s = step(Level(depth, cnt, edges_to_check, depth == depth_limit))
        t1 = time.perf_counter()
        c = engine.counts(cnt)
        records.append(LevelRecord(depth, direction, reported, c.reported, local_s, t1 - t0 - local_s,
                                   comm.bytes_sent() - bytes0, reduce_s))
        if c.unexplored is not None:
            edges_to_check = c.unexplored
        elif direction == "td":  # (never below 0: racing top-down claims can count a vertex's edges twice)
            edges_to_check = max(edges_to_check - scout, 0)
        if c.edges is not None:
            scout = c.edges
        if direction == "bu" and next_direction("bu", frontier_edges=scout, edges_to_check=edges_to_check,
                                                frontier=c.frontier, previous=frontier, **rule) == "td":
            direction = "td"
            scout = engine.turn_top_down(c.edges)
        previous, frontier, reported = frontier, c.frontier, c.reported
        depth += 1
    engine.end_search()
    engine.records = records
    return records
