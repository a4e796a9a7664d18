"""Array backends of the batched engine: the same kernel names on NumPy (Numba) or CuPy arrays.

:class:`~breadth.bfs.batch_engine.BatchEngine` calls only these names, so its level loop is the same on
CPU and GPU ranks (as :mod:`.backend` does for the single-search engine).

>>> k = batch_kernels("cpu")
>>> k.xp.__name__, k.parent_dtype(1000)
('numpy', dtype('int32'))
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .backend import _parent_dtype


def cpu_batch_kernels() -> SimpleNamespace:
    """NumPy arrays, Numba kernels (:mod:`.batch_top_down`, :mod:`.batch_bottom_up`, :mod:`.batch_frontier`)."""
    from . import batch_bottom_up, batch_frontier, batch_top_down

    def advance(nxt, frontier, seen, active, out_offsets, in_offsets):
        nv, pairs, fdeg, unfinished = batch_frontier.advance(nxt, frontier, seen, active, out_offsets, in_offsets)
        return int(nv), int(pairs), int(fdeg), int(unfinished), batch_frontier.or_words(frontier)

    return SimpleNamespace(
        name="cpu", xp=np, parent_dtype=_parent_dtype, to_host=np.asarray,
        top_down_step=batch_top_down.top_down_step, claim_triples=batch_top_down.claim_triples,
        triples_by_owner=batch_top_down.triples_by_owner, bottom_up_step=batch_bottom_up.bottom_up_step,
        advance=advance, nonzero_bits=batch_frontier.nonzero_bits, encode=batch_frontier.encode,
        decode=batch_frontier.decode,
    )


def batch_kernels(name: str = "cpu") -> SimpleNamespace:
    """``"cpu"`` or ``"gpu"`` (CuPy kernels of :mod:`.batch_gpu`, imported only when asked for)."""
    if name == "cpu":
        return cpu_batch_kernels()
    if name == "gpu":
        from .batch_gpu import gpu_batch_kernels

        return gpu_batch_kernels()
    raise ValueError(f"unknown backend {name!r}: expected 'cpu' or 'gpu'")
