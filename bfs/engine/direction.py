"""The direction rule of every engine (Beamer, Asanović, Patterson, "Direction-Optimizing Breadth-First Search",
SC 2012): when a level-synchronous search expands its frontier top-down (each frontier vertex's edges) and when
bottom-up (each unvisited vertex looks for a parent in the frontier).

The engines differ in what they count -- one search or a batch's (vertex, search) pairs, counters read on the host
or gathered from the device, out-edges or in-edges of the vertices still missing -- and in where their alpha comes
from (:meth:`~breadth.bfs.engine.engine.Engine.default_alpha`, :attr:`~breadth.bfs.engine.batch_engine.
BatchEngine.ALPHA`); the rule they apply to those counts is this module's.
"""

from __future__ import annotations

__all__ = ["next_direction", "top_down_bound"]


def next_direction(direction: str, *, frontier_edges: int, edges_to_check: int, frontier: int, previous: int,
                   num_vertices: int, alpha: float, beta: float) -> str:
    """The direction of the next level, given the one in force and the counts of the frontier it made.

    Top-down turns bottom-up once the frontier's edges exceed the edges still to check / ``alpha``; bottom-up
    turns top-down once the frontier shrinks (fewer vertices than the one before) and holds fewer than
    ``num_vertices / beta`` vertices.  One step of the rule: a loop that turns top-down and then learns the new
    frontier's edges asks again.

    Parameters
    ----------
    direction : {"td", "bu"}
        The direction in force.
    frontier_edges : int
        Edges of the frontier (all ranks; a batch: its (vertex, search) pairs' out-edges).  Read in top-down only.
    edges_to_check : int
        Edges not yet explored (all ranks; ``>= 0``): the graph's minus those of every frontier expanded top-down
        (a batch: the in-edges of the vertices still missing a running search).  Read in top-down only.
    frontier : int
        Vertices in the frontier (all ranks).  Read in bottom-up only.
    previous : int
        Vertices in the frontier before it (0 before the first level).  Read in bottom-up only.
    num_vertices : int
        Vertices in the graph.
    alpha : float
        ``frontier_edges * alpha > edges_to_check`` goes bottom-up (a product, not a quotient: ``alpha = 0``
        keeps top-down, an infinite one goes bottom-up at the first frontier with an edge).
    beta : float
        Bottom-up comes back below ``num_vertices / beta`` frontier vertices.

    Returns
    -------
    str
        ``"td"`` or ``"bu"``.

    Examples
    --------
    A frontier with 1,000 edges, 10,000 still to check: alpha 15 goes bottom-up, alpha 5 stays top-down.

    >>> from breadth.bfs.engine.direction import next_direction
    >>> counts = dict(frontier_edges=1000, edges_to_check=10_000, frontier=50, previous=10, num_vertices=4096,
    ...               beta=18.0)
    >>> next_direction("td", alpha=15.0, **counts), next_direction("td", alpha=5.0, **counts)
    ('bu', 'td')

    Bottom-up stays while the frontier grows, and comes back once it shrinks below 4096 / 18 ~ 227 vertices:

    >>> next_direction("bu", alpha=15.0, **counts)
    'bu'
    >>> next_direction("bu", alpha=15.0, **{**counts, "frontier": 200, "previous": 900})
    'td'
    >>> next_direction("bu", alpha=15.0, **{**counts, "frontier": 300, "previous": 900})
    'bu'
    """
    if direction == "td":
        return "bu" if frontier_edges * alpha > edges_to_check else "td"
    return "td" if 0 < frontier < previous and frontier < num_vertices / beta else "bu"


def top_down_bound(edges_to_check: int, alpha: float, parts: int, cap: int) -> int:
    """The largest frontier edges one of ``parts`` ranks may hold such that :func:`next_direction` keeps top-down
    whatever the other parts hold, as long as each holds at most as many: ``parts`` such parts have at most
    ``edges_to_check / alpha`` edges together.  A rank that expands its part before it knows the others'
    (:mod:`~breadth.bfs.engine.one_round_levels`) expands only up to it.

    Parameters
    ----------
    edges_to_check : int
        Edges not yet explored (all ranks), as :func:`next_direction` takes them.
    alpha : float
        The rule's alpha (``>= 0``).
    parts : int
        Ranks holding a part of the frontier (``>= 1``).
    cap : int
        The bound where the rule never goes bottom-up (``alpha = 0``).

    Returns
    -------
    int
        ``int(edges_to_check / (alpha * parts))``, or ``cap`` for ``alpha = 0``.

    Examples
    --------
    >>> from breadth.bfs.engine.direction import next_direction, top_down_bound
    >>> top_down_bound(10_000, 15.0, 2, cap=1 << 18), top_down_bound(10_000, 0.0, 2, cap=1 << 18)
    (333, 262144)
    >>> next_direction("td", frontier_edges=2 * 333, edges_to_check=10_000, frontier=0, previous=0,
    ...                num_vertices=4096, alpha=15.0, beta=18.0)
    'td'
    """
    return int(edges_to_check / (alpha * parts)) if alpha > 0 else cap
