"""How a graph's adjacency entries are laid out over its ranks: 1D, 2D R x C, or degree-separated delegates.

Vertex ownership is the same 1D blocks for every partitioning (:func:`~breadth.bfs.shard.block_size`): each
rank owns ids ``[rank * block, (rank + 1) * block)``, holds their parents and levels, and keeps their 1D rows
(validation, the direction rule's degree sums).  A partitioning decides only where the search's adjacency
entries live and how a level exchanges:

* ``"1d"``: entry ``u -> v`` at the owner of ``u`` (:mod:`breadth.bfs.engine.engine`);
* ``"2d"`` (Buluc-Madduri; Bisson, Bernaschi, Mastrostefano): ``P = R x C`` ranks, rank ``r`` at grid row
  ``r // C`` and column ``r % C``; entry ``u -> v`` at the rank of grid row ``owner(v) // C`` and grid
  column ``owner(u) % C`` (:mod:`breadth.bfs.grid_blocks`, :mod:`breadth.bfs.engine.grid_engine`);
* ``"delegates"`` (Pan, Pearce, Owens): vertices of (out-)degree at least ``delegate_degree`` are delegates,
  known to every rank; an entry from a delegate lives at the owner of its target, one from a normal vertex at
  its owner (:mod:`breadth.bfs.delegate_blocks`, :mod:`breadth.bfs.engine.delegate_engine`).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("1d", "2d", "delegates")

#: the delegates' default degree threshold: at Kronecker scale 20 (edgefactor 16) on 4 and 8 CPU ranks it
#: sends the fewest bytes per search of 16, 64, 256, 1024, 4096 and 16384 (0.68 and 0.80 of 1D's; 6,196
#: delegates)
DEFAULT_DELEGATE_DEGREE = 1024


def parse_grid(text: str) -> tuple[int, int]:
    """``"RxC"`` (e.g. ``"2x4"``) as ``(R, C)``; ``ValueError`` naming what was expected."""
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise ValueError(f"expected ROWSxCOLUMNS of positive integers such as 2x2, got {text!r}")
    return int(parts[0]), int(parts[1])


def default_grid(nparts: int) -> tuple[int, int]:
    """The squarest ``R x C = nparts`` with ``R <= C``: ``R + C - 1`` peers, the fewest for ``nparts``."""
    r = int(nparts ** 0.5)
    while nparts % r:
        r -= 1
    return r, nparts // r


@dataclass(frozen=True)
class Partitioning:
    """``kind`` one of :data:`KINDS`; ``grid`` ``(R, C)`` for ``"2d"`` (``None``: :func:`default_grid` of the
    rank count); ``delegate_degree`` for ``"delegates"`` (``None``: :data:`DEFAULT_DELEGATE_DEGREE`)."""

    kind: str = "1d"
    grid: tuple[int, int] | None = None
    delegate_degree: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown partition {self.kind!r}: expected one of {', '.join(KINDS)}")
        if self.grid is not None:
            if self.kind != "2d":
                raise ValueError(f"a grid is for partition '2d', not {self.kind!r}")
            g = tuple(int(x) for x in self.grid)
            if len(g) != 2 or min(g) < 1:
                raise ValueError(f"grid must be two positive integers (rows, columns), got {self.grid!r}")
            object.__setattr__(self, "grid", g)
        if self.delegate_degree is not None:
            if self.kind != "delegates":
                raise ValueError(f"a delegate degree is for partition 'delegates', not {self.kind!r}")
            if int(self.delegate_degree) < 1:
                raise ValueError(f"delegate degree must be a positive integer, got {self.delegate_degree!r}")
            object.__setattr__(self, "delegate_degree", int(self.delegate_degree))

    def resolved(self, nparts: int) -> "Partitioning":
        """This partitioning for ``nparts`` ranks with its defaults filled in; ``ValueError`` (one line, in the
        CLI's words) when the grid does not multiply to ``nparts``."""
        if self.kind == "2d":
            grid = self.grid or default_grid(nparts)
            if grid[0] * grid[1] != nparts:
                raise ValueError(f"--grid {grid[0]}x{grid[1]} needs {grid[0] * grid[1]} workers, got {nparts}")
            return Partitioning("2d", grid)
        if self.kind == "delegates":
            return Partitioning("delegates", delegate_degree=self.delegate_degree or DEFAULT_DELEGATE_DEGREE)
        return self

    def as_dict(self) -> dict:
        """The manifest's record (JSON)."""
        d: dict = {"kind": self.kind}
        if self.grid is not None:
            d["grid"] = list(self.grid)
        if self.delegate_degree is not None:
            d["delegate_degree"] = self.delegate_degree
        return d

    @classmethod
    def from_dict(cls, d: dict | None) -> "Partitioning":
        """The inverse of :meth:`as_dict`; ``None`` (a store written before partitionings) is 1D."""
        if not d:
            return cls()
        grid = d.get("grid")
        return cls(d.get("kind", "1d"), tuple(grid) if grid is not None else None, d.get("delegate_degree"))

    def __str__(self) -> str:
        if self.kind == "2d" and self.grid:
            return f"2d {self.grid[0]}x{self.grid[1]}"
        if self.kind == "delegates" and self.delegate_degree:
            return f"delegates (degree >= {self.delegate_degree})"
        return self.kind
