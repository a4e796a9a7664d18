"""Batched BFS kernels on the GPU (CuPy): the MS-BFS steps of :mod:`~breadth.bfs.cpu.batch_top_down`,
:mod:`~breadth.bfs.cpu.batch_bottom_up`, :mod:`~breadth.bfs.cpu.batch_frontier` and
:mod:`~breadth.bfs.cpu.batch_results` as CUDA C++ (``batch_kernels.cu``, NVRTC through ``cupy.RawModule``),
for :class:`~breadth.bfs.engine.batch_engine.BatchEngine` with ``backend="gpu"``.

Algorithm (Then et al., VLDB 2015), one bit per search in each vertex's 64-bit ``seen``/``frontier``/``next``
word and bit-sliced levels (``planes``, ``(nloc, B)`` row-major), as on the CPU:

* **top-down**: one thread per frontier vertex ``u``; for each out-neighbour ``v`` owned here,
  ``atomicOr(&next[v], frontier[u] & ~(seen[v] | next[v]))`` when that is not zero.  A remote ``v``
  becomes a ``(v, bits)`` pair (bits filtered by ``atomicOr`` on ``sent[v]``), appended at an
  ``atomicAdd`` slot.
* **bottom-up**: one thread per owned vertex ORs its in-neighbours' frontier words until it has every
  missing running search (testing each neighbour in the bitmap of non-zero frontier words first when the
  frontier is sparse), then ends the level for its vertex (``seen``, ``planes``, counters).
* **finish** (after top-down, over the vertices the level touched, listed by the ``atomicOr`` that found
  their ``next`` word empty): the old frontier cleared, ``frontier = next; seen |= next; planes; next = 0``
  with the level's counters (non-zero words, set bits, their out-degree sum, OR of the words), each thread
  adding into device counters.
* **derive**: one thread per owned vertex writes a group of searches' levels (from the planes) and parents
  (the first in-neighbour one level up, for all the group's searches in one scan), ``(count, nloc)``
  each: a batch's results are derived a group at a time (``BatchEngine.result_bytes``), never 64
  n-sized parent arrays at once.

Device memory of a pass: ``3 + B`` words per owned vertex (``B`` = 4 up to depth 15), plus, on several
ranks, the gathered frontier and the sent filter (two words per global vertex); the results add a
group's ``12 * count`` bytes per owned vertex and, on several ranks, ``seen`` and ``planes`` gathered
over all vertices (``(1 + B) * 8`` bytes per global vertex).

Imported only for GPU ranks (it imports CuPy at module level).  Untested on this project's CPU-only CI.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import cupy as cp
import numpy as np

from .cuda_source import read

_THREADS = 256

_SOURCE = read("batch_kernels.cu")

_KERNELS = ("batch_td", "batch_claim", "batch_clear", "batch_finish", "batch_bu", "batch_derive", "batch_nonzero")


@functools.lru_cache(maxsize=None)
def _module(col_dtype: str) -> dict:
    """Compiled kernels for int32 or int64 column ids."""
    opts = ("-std=c++17",) + (("-DCOL64",) if col_dtype == "int64" else ())
    mod = cp.RawModule(code=_SOURCE, options=opts)
    return {k: mod.get_function(k) for k in _KERNELS}


def _kern(cols=None) -> dict:
    return _module("int64" if cols is not None and cols.dtype == np.int64 else "int32")


def _grid(n: int) -> tuple[int]:
    return (max(1, (int(n) + _THREADS - 1) // _THREADS),)


def _i64(x) -> np.int64:
    return np.int64(x)


def _counters(ctr) -> tuple[int, int, int, int, int]:
    c = ctr.get()
    return int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(np.uint64(c[4]).view(np.int64))


def top_down_step(offsets, cols, lo: int, queue, frontier, seen, nxt, sent, nchunks: int, rec=None):
    """One batched top-down level (see :func:`.batch_top_down.top_down_step`); returns ``(touched, pairs)``
    on the device.  ``nchunks`` is unused (one thread per frontier vertex), ``rec`` None (parents are
    derived after the pass: ``records_parents`` False)."""
    qn = int(queue.size)
    if qn == 0:
        return cp.empty(0, np.int64), cp.empty((0, 2), np.int64)
    cap = int((offsets[queue + 1] - offsets[queue]).sum()) if sent.size else 0
    pairs = cp.empty(2 * max(cap, 1), np.int64)
    touched = cp.empty(max(int(frontier.size), 1), np.int64)  # each owned vertex at most once
    count = cp.zeros(2, np.uint64)  # touched, pairs
    _kern(cols)["batch_td"](_grid(qn), (_THREADS,),
                            (offsets, cols, _i64(lo), _i64(frontier.size), queue.astype(np.int64), _i64(qn),
                             frontier, seen, nxt, sent if sent.size else nxt, np.int32(1 if sent.size else 0),
                             pairs, count[1:], touched, count[:1]))
    nt, k = (int(x) for x in count.get())
    return touched[:nt], pairs[:2 * k].reshape(k, 2)


def claim_pairs(pairs, lo: int, seen, nxt, rec=None):
    """Apply received ``(vertex, bits)`` pairs (``(k, 2)`` int64 on the device); returns the local ids whose
    ``nxt`` word this made non-zero.  ``rec`` None (see :func:`top_down_step`)."""
    nt = int(pairs.shape[0])
    touched = cp.empty(max(nt, 1), np.int64)
    count = cp.zeros(1, np.uint64)
    if nt:
        _kern()["batch_claim"](_grid(nt), (_THREADS,), (cp.ascontiguousarray(pairs), _i64(nt), _i64(lo), seen, nxt,
                                                        touched, count))
    return touched[:int(count.get()[0])]


def finish_touched(touched, queue, nxt, frontier, seen, planes, depth, out_offsets, nchunks, rec=None):
    """The end of a top-down level over the vertices it touched (see :func:`.batch_frontier.finish_touched`);
    returns the counters as host integers (the unfinished in-degree sum 0).  ``nchunks`` is unused, ``rec``
    None (see :func:`top_down_step`)."""
    ctr = cp.zeros(5, np.uint64)
    k = _kern()
    if queue.size:
        k["batch_clear"](_grid(queue.size), (_THREADS,), (queue, _i64(queue.size), frontier))
    if touched.size:
        k["batch_finish"](_grid(touched.size), (_THREADS,),
                          (touched, _i64(touched.size), nxt, frontier, seen, planes, np.int32(planes.shape[1]),
                           np.int32(depth), out_offsets, ctr))
    return _counters(ctr)


def bottom_up_step(offsets, cols, frontier, nonzero, sparse, active, seen, nxt, planes, depth, out_offsets, chunks,
                   rec=None):
    """One batched bottom-up level with its end (see :func:`.batch_bottom_up.bottom_up_step`); returns the
    counters as host integers.  ``rec`` None (see :func:`top_down_step`)."""
    ctr = cp.zeros(5, np.uint64)
    nloc = int(seen.size)
    if nloc:
        _kern(cols)["batch_bu"](_grid(nloc), (_THREADS,),
                                (offsets, cols, frontier, nonzero if sparse else frontier, np.int32(bool(sparse)),
                                 np.uint64(active), seen, nxt, planes, np.int32(planes.shape[1]), np.int32(depth),
                                 out_offsets, _i64(nloc), ctr))
    return _counters(ctr)


def word_table(seen, planes):
    """``seen`` and ``planes`` side by side, ``(n, max(8, B + 1))`` uint64 (see
    :func:`.batch_results.word_table`; CuPy's allocations are 256-byte aligned)."""
    n, nplanes = planes.shape
    table = cp.zeros((n, max(8, nplanes + 1)), np.uint64)
    table[:, 0] = seen
    table[:, 1:1 + nplanes] = planes
    return table


def derive(in_offsets, in_cols, lo, table, nplanes, roots, first, count, chunks, parent, level) -> None:
    """Levels and parents of searches ``first .. first+count-1`` (see :func:`.batch_results.derive`), into
    ``(count, nloc)`` device arrays (int64 parents, int32 levels).  ``chunks`` is unused."""
    nloc = int(parent.shape[1])
    if nloc:
        _kern(in_cols)["batch_derive"](_grid(nloc), (_THREADS,),
                                       (in_offsets, in_cols, _i64(lo), _i64(nloc), table, np.int32(table.shape[1]),
                                        np.int32(nplanes), cp.asarray(roots, np.int64), np.int32(first),
                                        np.int32(count), parent, level))


def nonzero_bits(words):
    """Bitmap of the non-zero ``words`` (``(ceil(n/64),)`` uint64, on the device)."""
    n = int(words.size)
    nw = (n + 63) // 64
    out = cp.empty(nw, np.uint64)
    if nw:
        _kern()["batch_nonzero"](_grid(nw), (_THREADS,), (words, _i64(n), out, _i64(nw)))
    return out


def encode(frontier, nonzero: int):
    """As :func:`.batch_frontier.encode`, on the device."""
    if 2 * nonzero < frontier.size:
        idx = cp.flatnonzero(frontier)
        return cp.stack([idx.astype(np.uint64), frontier[idx]], axis=1).ravel()
    return frontier


def decode(part, nonzero: int, nloc: int, out) -> None:
    """As :func:`.batch_frontier.decode`, on the device."""
    if 2 * nonzero < nloc:
        out[:] = 0
        pairs = cp.asarray(part).reshape(-1, 2)
        out[pairs[:, 0].astype(np.int64)] = pairs[:, 1]
    else:
        out[:] = cp.asarray(part)


def pairs_by_owner(pairs, block: int, nparts: int) -> list:
    """``pairs`` split into one device array per owner rank."""
    if nparts == 1:
        return [pairs]
    owner = pairs[:, 0] // block
    order = cp.argsort(owner)
    srt = pairs[order]
    cuts = cp.searchsorted(owner[order], cp.arange(nparts + 1)).get()
    return [srt[cuts[r]:cuts[r + 1]] for r in range(nparts)]


#: device bytes of per-search results derived at once (a group of searches' parents and levels): at
#: scale 26 on one GPU, 5 searches of 2**26 vertices at 12 bytes each
RESULT_BYTES = 4 << 30


def gpu_batch_kernels() -> SimpleNamespace:
    """The batched engine's kernel names on CuPy arrays (int64 parents: the kernels write 64-bit ids), and the
    single-search GPU backend for validating results on the device."""
    from .backend import gpu_backend

    return SimpleNamespace(
        name="gpu", xp=cp, parent_dtype=lambda n: np.dtype(np.int64), to_host=cp.asnumpy,
        synchronize=lambda: cp.cuda.get_current_stream().synchronize(),
        result_bytes=RESULT_BYTES, records_parents=False, pair_width=2, validation=gpu_backend(),
        vertex_chunks=lambda offsets, nchunks: None,
        finish_touched=finish_touched, bottom_up_step=bottom_up_step, top_down_step=top_down_step,
        claim_pairs=claim_pairs, pairs_by_owner=pairs_by_owner, nonzero_bits=nonzero_bits, encode=encode,
        decode=decode, word_table=word_table, derive=derive,
    )
