"""Array backends of the batched engine: the same kernel names on NumPy (Numba) or CuPy arrays.

:class:`~breadth.bfs.engine.batch_engine.BatchEngine` calls only these names, so its level loop is the same on
CPU and GPU ranks (as :mod:`.backend` does for the single-search engine).  The level steps return the
level's counters as host integers ``(vertices, pairs, out_degree_sum, unfinished_in_degree_sum, or_word)``
(``or_word``: the OR of the new frontier words, viewed as int64).

Parents: the steps record them during the pass where ``records_fit`` says the records fit (always on
CPUs; ``derives_parents`` False: their steps need the records): the steps write the parent of each
(vertex, search) they find into ``rec`` (``new_records``, the roots set by ``record_roots``; how many
searches they hold: ``record_searches``) and the top-down exchange carries ``(vertex, bits, parent)`` rows;
a group of searches' results is then ``lay_out``.  The CPU's records are blocked (a search's entries of 8
consecutive vertices are one run of parents, of 64 one run of the levels' low bytes:
:func:`~breadth.bfs.cpu.batch_frontier.record_arrays`) and laid out per search into buffers;
the GPU's are search-major ``(k, nloc)`` parents (a warp's vertices write consecutive entries), the
results themselves (``parents_in_place``), with the levels read from the planes.  Where they do not fit
(GPUs with too little free memory), the steps take ``rec=None``, exchange ``(vertex, bits)`` rows, and
parents are derived after the pass from the levels (``word_table``, ``derive``, a group at a time).

>>> k = batch_kernels("cpu")
>>> k.xp.__name__, k.parent_dtype(1000)
('numpy', dtype('int32'))
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .backend import _parent_dtype


#: a top-down level that touched at least 1 / SORTED_TOUCHED of the owned vertices ends over them in
#: increasing order (:func:`~breadth.bfs.cpu.batch_frontier.nonzero_ids`, two sweeps over ``next``)
SORTED_TOUCHED = 64


def _reduced(ctr: np.ndarray, orw: np.ndarray) -> tuple[int, int, int, int, int]:
    """Per-chunk counters (``(chunks, 4)``) and OR words (``(chunks,)``) summed and OR-ed."""
    total = ctr.sum(axis=0)
    o = np.bitwise_or.reduce(orw) if orw.size else np.uint64(0)
    return int(total[0]), int(total[1]), int(total[2]), int(total[3]), int(np.uint64(o).view(np.int64))


def cpu_batch_kernels() -> SimpleNamespace:
    """NumPy arrays, Numba kernels (:mod:`~breadth.bfs.cpu.batch_top_down`,
    :mod:`~breadth.bfs.cpu.batch_bottom_up`, :mod:`~breadth.bfs.cpu.batch_frontier`,
    :mod:`~breadth.bfs.cpu.batch_results`)."""
    from ..cpu import batch_bottom_up, batch_frontier, batch_results, batch_top_down

    def bottom_up_step(offsets, cols, frontier, nonzero, sparse, active, seen, nxt, planes, depth, out_offsets,
                       chunks, rec):
        ctr = np.zeros((chunks.size - 1, 4), np.int64)
        orw = np.zeros(chunks.size - 1, np.uint64)
        batch_bottom_up.bottom_up_step(offsets, cols, frontier, nonzero, bool(sparse), np.uint64(active), seen,
                                       nxt, planes, int(depth), out_offsets, chunks, ctr, orw, *rec)
        return _reduced(ctr, orw)

    def finish_touched(touched, queue, nxt, frontier, seen, planes, depth, out_offsets, nchunks, rec):
        if touched.size * SORTED_TOUCHED >= nxt.size:
            # in increasing order (the same ids, in place: the engine's next queue), so that the level's
            # writes walk the words, planes and records instead of landing at random
            batch_frontier.nonzero_ids(nxt, max(1, min(nchunks, nxt.size)), touched)
        bounds = np.linspace(0, touched.size, max(1, min(nchunks, touched.size)) + 1).astype(np.int64)
        ctr = np.zeros((bounds.size - 1, 4), np.int64)
        orw = np.zeros(bounds.size - 1, np.uint64)
        batch_frontier.finish_touched(touched, queue, nxt, frontier, seen, planes, int(depth), out_offsets, bounds,
                                      ctr, orw, rec[1])
        return _reduced(ctr, orw)

    def top_down_step(offsets, cols, lo, queue, frontier, seen, nxt, sent, nchunks, rec):
        return batch_top_down.top_down_step(offsets, cols, lo, queue, frontier, seen, nxt, sent, rec[0])

    def claim_pairs(pairs, lo, seen, nxt, rec):
        return batch_top_down.claim_pairs(pairs, lo, seen, nxt, rec[0])

    def new_records(nloc, count, num_vertices, old=None):
        # every entry a search reaches is written before it is read: old arrays need no reset
        return old or batch_frontier.record_arrays(nloc, count, _parent_dtype(num_vertices))

    def record_roots(rec, local, search, root):
        pb, lb = batch_frontier.PARENT_BLOCK, batch_frontier.LEVEL_BLOCK
        rec[0][local // pb, search, local % pb] = root
        rec[1][local // lb, search, local % lb] = 0

    def lay_out(seen, planes, rec, chunks, first, parent, level):
        batch_results.unpack(seen, planes, *rec, chunks, int(first), parent, level)
        return parent, level

    def derive(in_offsets, in_cols, lo, table, nplanes, roots, first, count, chunks, parent, level):
        batch_results.derive(in_offsets, in_cols, int(lo), table, int(nplanes), roots, int(first), int(count),
                             chunks, parent, level)

    return SimpleNamespace(
        name="cpu", xp=np, parent_dtype=_parent_dtype, to_host=np.asarray, synchronize=lambda: None,
        result_bytes=None, derives_parents=False, parents_in_place=False,
        new_records=new_records, record_roots=record_roots, record_searches=lambda rec: int(rec[0].shape[1]),
        lay_out=lay_out,
        records_fit=lambda nloc, count, num_vertices: True,
        validation=SimpleNamespace(name="cpu", xp=np, to_host=np.asarray, checks_on_device=False),
        vertex_chunks=batch_frontier.vertex_chunks, finish_touched=finish_touched, bottom_up_step=bottom_up_step,
        top_down_step=top_down_step, claim_pairs=claim_pairs,
        pairs_by_owner=batch_top_down.pairs_by_owner, nonzero_bits=batch_frontier.nonzero_bits,
        encode=batch_frontier.encode, decode=batch_frontier.decode,
        word_table=batch_results.word_table, derive=derive,
    )


def batch_kernels(name: str = "cpu") -> SimpleNamespace:
    """``"cpu"`` or ``"gpu"`` (CuPy kernels of :mod:`~breadth.bfs.gpu.batch_kernels`, imported only when
    asked for)."""
    if name == "cpu":
        return cpu_batch_kernels()
    if name == "gpu":
        from ..gpu.batch_kernels import gpu_batch_kernels

        return gpu_batch_kernels()
    raise ValueError(f"unknown backend {name!r}: expected 'cpu' or 'gpu'")
