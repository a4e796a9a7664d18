"""Graph500 Kronecker (R-MAT) edge generator, counter-based.

Edge tuple ``e`` of a graph is a pure function of ``(seed, e)``: level ``l`` of its recursive quadrant
choice draws one 64-bit word ``mix64(key + (e * scale + l + 1) * GOLDEN)`` (a SplitMix64 stream position),
whose high and low 32-bit halves decide the row and column bit against integer thresholds.  Nothing
depends on how the edge range is chunked, and the integer arithmetic is exact on any backend, so the
CuPy kernel produces the same edges as this NumPy/Numba one.

Vertex ids are then scrambled by a keyed bijection of ``[0, 2**scale)`` (affine maps, xor-shifts and a
bit reversal), as the Graph500 reference does, so no permutation table is ever held in memory.

The probabilities follow the Graph500 reference ``kronecker_generator.m``: with ``ab = a + b``, the
row bit is set when ``u > ab``; the column bit is set when ``v > c / (1 - ab)`` (row bit set) or
``v > a / ab`` (row bit clear).
"""

from __future__ import annotations

import numba
import numpy as np

from .kronecker_numpy import KroneckerParams, generate_edges_numpy

__all__ = ["KroneckerParams", "generate_edges", "generate_edges_numpy", "kronecker", "scramble_ids"]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
M1 = np.uint64(0xBF58476D1CE4E5B9)
M2 = np.uint64(0x94D049BB133111EB)
MASK32 = np.uint64(0xFFFFFFFF)

DEFAULT_A, DEFAULT_B, DEFAULT_C = 0.57, 0.19, 0.19


@numba.njit(inline="always")
def mix64(z):
    """SplitMix64 finaliser: a bijection of uint64 with full avalanche."""
    z = (z ^ (z >> np.uint64(30))) * M1
    z = (z ^ (z >> np.uint64(27))) * M2
    return z ^ (z >> np.uint64(31))


@numba.njit(inline="always")
def _bitreverse64(v):
    v = ((v >> np.uint64(1)) & np.uint64(0x5555555555555555)) | ((v & np.uint64(0x5555555555555555)) << np.uint64(1))
    v = ((v >> np.uint64(2)) & np.uint64(0x3333333333333333)) | ((v & np.uint64(0x3333333333333333)) << np.uint64(2))
    v = ((v >> np.uint64(4)) & np.uint64(0x0F0F0F0F0F0F0F0F)) | ((v & np.uint64(0x0F0F0F0F0F0F0F0F)) << np.uint64(4))
    v = ((v >> np.uint64(8)) & np.uint64(0x00FF00FF00FF00FF)) | ((v & np.uint64(0x00FF00FF00FF00FF)) << np.uint64(8))
    v = ((v >> np.uint64(16)) & np.uint64(0x0000FFFF0000FFFF)) | ((v & np.uint64(0x0000FFFF0000FFFF)) << np.uint64(16))
    return (v >> np.uint64(32)) | (v << np.uint64(32))


@numba.njit(inline="always")
def scramble(v, scale, k0, k1, k2, k3):
    """Keyed bijection of [0, 2**scale): every step is invertible on scale-bit words."""
    mask = (np.uint64(1) << np.uint64(scale)) - np.uint64(1)
    half = np.uint64((scale + 1) // 2)
    v = (v * k0 + k1) & mask
    v = v ^ (v >> half)
    v = _bitreverse64(v) >> np.uint64(64 - scale)  # moves entropy from high bits down
    v = (v * k2 + k3) & mask
    v = v ^ (v >> half)
    return v


@numba.njit(nogil=True, cache=True)
def _generate(start, stop, scale, key, t_ab, t_a_norm, t_c_norm, k0, k1, k2, k3, out):
    s = np.uint64(scale)
    for i in range(stop - start):
        e = np.uint64(start + i)
        base = np.uint64(key) + (e * s + np.uint64(1)) * GOLDEN
        row = np.uint64(0)
        col = np.uint64(0)
        for lvl in range(scale):
            h = mix64(base + np.uint64(lvl) * GOLDEN)
            u = h >> np.uint64(32)
            w = h & MASK32
            ib = u > t_ab
            if ib:
                jb = w > t_c_norm
            else:
                jb = w > t_a_norm
            row |= np.uint64(ib) << np.uint64(lvl)
            col |= np.uint64(jb) << np.uint64(lvl)
        out[i, 0] = np.int64(scramble(row, scale, k0, k1, k2, k3))
        out[i, 1] = np.int64(scramble(col, scale, k0, k1, k2, k3))


def generate_edges(params: KroneckerParams, start: int, stop: int) -> np.ndarray:
    """Edge tuples ``start..stop-1`` of the graph as an ``(stop - start, 2)`` int64 array."""
    out = np.empty((stop - start, 2), dtype=np.int64)
    k = [np.uint64(x) for x in params.scramble_keys]
    _generate(start, stop, params.scale, np.uint64(params.key), np.uint64(params.t_ab),
              np.uint64(params.t_a_norm), np.uint64(params.t_c_norm), k[0], k[1], k[2], k[3], out)
    return out


def scramble_ids(params: KroneckerParams, v: np.ndarray) -> np.ndarray:
    """Apply the generator's id bijection to unscrambled ids (used by tests and the GPU kernel's check)."""
    return _scramble_array(np.asarray(v, dtype=np.uint64), params.scale,
                           *[np.uint64(x) for x in params.scramble_keys]).astype(np.int64)


@numba.njit(nogil=True, cache=True)
def _scramble_array(v, scale, k0, k1, k2, k3):
    out = np.empty_like(v)
    for i in range(v.size):
        out[i] = scramble(v[i], scale, k0, k1, k2, k3)
    return out


def kronecker(scale: int, edgefactor: int = 16, seed: int = 1, a: float = DEFAULT_A, b: float = DEFAULT_B,
              c: float = DEFAULT_C, chunk_edges: int | None = None, device: str = "cpu", jit: bool = True):
    """The Graph500 Kronecker (R-MAT) graph as a lazy :class:`~breadth.pipeline.edges.EdgeList`.

    Nothing is generated here: each Dask chunk is made by the task that needs it, on a worker, so no
    process ever holds the whole edge list.  Tuple ``e`` is a pure function of ``(seed, e)``, so the graph
    does not depend on ``chunk_edges`` nor on ``device`` (see the module docstring).

    Parameters
    ----------
    scale : int
        log2 of the vertex count, 1..40: ``2**scale`` vertices.
    edgefactor : int, default 16
        Edge tuples per vertex, at least 1: ``edgefactor * 2**scale`` tuples (Graph500's 16).
    seed : int, default 1
        Selects the graph: the quadrant draws and the vertex-id scrambling.
    a, b, c : float, default 0.57, 0.19, 0.19
        Probabilities of the top-left, top-right and bottom-left quadrants at each level (Graph500's);
        the bottom-right one is ``1 - a - b - c``.
    chunk_edges : int, optional
        Tuples per Dask chunk; default 2**22 on the CPU (64 MiB of int64 pairs), 2**26 on the GPU, where a
        chunk takes milliseconds.
    device : {"cpu", "gpu"}, default "cpu"
        ``"gpu"``: each chunk is generated on the worker's GPU as a CuPy array
        (:mod:`breadth.pipeline.sources.kronecker_gpu`), bit for bit the same tuples.
    jit : bool, default True
        ``False`` (CPU): chunks are generated with NumPy alone
        (:func:`~breadth.pipeline.sources.kronecker_numpy.generate_edges_numpy`; slower, the same tuples), so that
        the workers never import Numba, whose ~110 MiB a small ``--memory-limit`` cannot spare.

    Returns
    -------
    EdgeList
        Undirected; ``edges`` an int64 Dask array of shape ``(edgefactor * 2**scale, 2)`` (self-loops and
        duplicates included, as Graph500 generates them), ``num_vertices = 2**scale``, no id map, and
        ``source`` recording the parameters.

    Raises
    ------
    ValueError
        ``scale`` outside 1..40, ``edgefactor < 1``, ``device`` neither ``"cpu"`` nor ``"gpu"``, or
        probabilities with ``min(a, b, c) < 0`` or ``a + b + c >= 1``.

    Examples
    --------
    >>> from breadth.pipeline import kronecker
    >>> g = kronecker(10, seed=7)
    >>> g.num_vertices, g.num_edges, g.directed, g.edges.dtype
    (1024, 16384, False, dtype('int64'))
    >>> g.npartitions, g.source["kind"]
    (1, 'kronecker')
    >>> tiny = kronecker(4, edgefactor=2, jit=False).edges.compute()  # NumPy's generator: no Numba
    >>> tiny.shape, bool(((tiny >= 0) & (tiny < 16)).all())
    ((32, 2), True)
    """
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    from ..edges import EdgeList

    if edgefactor < 1:
        raise ValueError(f"edgefactor must be >= 1, got {edgefactor}")
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu', got {device!r}")
    params = KroneckerParams.make(scale, seed, a, b, c)
    m = edgefactor << scale
    chunk_edges = chunk_edges or (1 << (26 if device == "gpu" else 22))
    bounds = list(range(0, m, chunk_edges)) + [m]
    name = f"kronecker-{device}{'' if jit else '-numpy'}-s{scale}-e{edgefactor}-seed{seed}-{params.key:x}-{chunk_edges}"
    meta = None
    if device == "gpu":  # imported lazily: CPU installs never need CuPy
        import cupy

        from .kronecker_gpu import generate_edges_gpu as gen

        meta = cupy.empty((0, 2), cupy.int64)
    else:
        gen = generate_edges if jit else generate_edges_numpy
    dsk = {(name, i, 0): (gen, params, bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)}
    chunks = (tuple(bounds[i + 1] - bounds[i] for i in range(len(bounds) - 1)), (2,))
    arr = da.Array(HighLevelGraph.from_collections(name, dsk), name, chunks, dtype=np.int64, meta=meta)
    return EdgeList(arr, num_vertices=1 << scale, directed=False,
                    source={"kind": "kronecker", "scale": scale, "edgefactor": edgefactor, "seed": seed,
                            "a": a, "b": b, "c": c, "device": device})
