"""Batched BFS kernels on the GPU (CuPy): the MS-BFS steps of :mod:`~breadth.bfs.cpu.batch_top_down`,
:mod:`~breadth.bfs.cpu.batch_bottom_up`, :mod:`~breadth.bfs.cpu.batch_frontier` and
:mod:`~breadth.bfs.cpu.batch_results` as CUDA C++ (``batch_kernels.cu``, NVRTC through ``cupy.RawModule``),
for :class:`~breadth.bfs.engine.batch_engine.BatchEngine` with ``backend="gpu"``.

Algorithm (Then et al., VLDB 2015), one bit per search in each vertex's 64-bit ``seen``/``frontier``/``next``
word and bit-sliced levels (``planes``, ``(nloc, B)`` row-major), as on the CPU:

* **top-down**: one thread per edge of the frontier (a binary search over the queue's degree prefix sums
  finds its frontier vertex ``u``, so a hub's row is shared by many threads); for each out-neighbour ``v``
  owned here, ``atomicOr(&next[v], frontier[u] & ~(seen[v] | next[v]))`` when that is not zero.  A remote
  ``v`` becomes a ``(v, bits[, u])`` row (bits filtered by ``atomicOr`` on ``sent[v]``), appended at an
  ``atomicAdd`` slot.
* **bottom-up**: one thread per owned vertex with a short in-row ORs its in-neighbours' frontier words until
  it has every missing running search (testing each neighbour in the bitmap of non-zero frontier words
  first when the frontier is sparse), then ends the level for its vertex (``seen``, ``planes``, counters);
  rows longer than ``_BU_LONG`` are cut into tasks of ``_BU_CHUNK`` entries, a warp each
  (:func:`long_row_tasks`, built once per shard).
* **finish** (after top-down, over the vertices the level touched, listed by the ``atomicOr`` that found
  their ``next`` word empty): the old frontier cleared, ``frontier = next; seen |= next; planes; next = 0``
  with the level's counters (non-zero words, set bits, their out-degree sum, OR of the words), each thread
  adding into device counters.
* **parents**: where the device has room (:func:`records_fit`), every step records the parent of each
  (vertex, search) it finds -- the bit's ``atomicOr`` tells which thread set it -- into a search-major
  ``(k, nloc)`` array (int32 below 2**31 vertices), which is then the searches' parents as they are
  (``parents_in_place``); the
  levels are read from the planes a group of searches at a time.  Otherwise (**derive**) one thread per owned
  vertex writes a group of searches' levels (from the planes) and parents (the first in-neighbour one level
  up, for all the group's searches in one scan) after the pass, ``(count, nloc)`` each, a group at a time.
  At scale 26 on an H200, deriving 64 searches' parents takes 5.2 s after a 1.5 s pass.

Device memory of a pass: ``3 + B`` words per owned vertex (``B`` = 4 up to depth 15), the recorded parents
(``4 k`` bytes per owned vertex below 2**31 vertices), plus, on several ranks, the gathered frontier and the
sent filter (two words per global vertex); the results add a group's ``4 * count`` bytes per owned vertex
for its levels (and where parents are derived, its ``8 * count`` bytes of parents, and on several ranks
``seen`` and ``planes`` gathered over all vertices, ``(1 + B) * 8`` bytes per global vertex).

Imported only for GPU ranks (it imports CuPy at module level).  Untested on this project's CPU-only CI.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import cupy as cp
import numpy as np

from ..shard import column_dtype
from .cuda_source import read
from .kernels import free_device_bytes

_THREADS = 256

_SOURCE = read("batch_kernels.cu")

_KERNELS = ("batch_td", "batch_claim", "batch_clear", "batch_finish", "batch_bu", "batch_bu_long", "batch_bu_long_end",
            "batch_derive", "batch_levels", "batch_nonzero")
#: rows longer than this go to warps in bottom-up, in tasks of _BU_CHUNK entries (BU_CHUNK of the CUDA source).
#: Scale 26, 64 roots on an H100, pass seconds by threshold: 8: 0.264, 32: 0.231, 128: 0.207, 512: 0.201,
#: 4096: 0.220: a lane walks a row of a few hundred entries faster than a warp's steps (a scan and an atomic
#: each) cover it
_BU_LONG, _BU_CHUNK = 512, 1024
#: the most blocks of a grid-stride launch
_MAX_BLOCKS = 1 << 16
#: the share of the device's free memory that recorded parents may take (else they are derived after the pass)
RECORD_SHARE = 0.5


@functools.lru_cache(maxsize=None)
def _module(col_dtype: str, rec_dtype: str) -> dict:
    """Compiled kernels for int32 or int64 column ids and recorded parents."""
    opts = ("-std=c++17",) + (("-DCOL64",) if col_dtype == "int64" else ()) + \
        (("-DREC64",) if rec_dtype == "int64" else ())
    mod = cp.RawModule(code=_SOURCE, options=opts)
    return {k: mod.get_function(k) for k in _KERNELS}


def _kern(cols=None, rec=None) -> dict:
    """The kernels for ``cols``' column ids and ``rec``'s recorded parents (int32 when not given)."""
    return _module("int64" if cols is not None and cols.dtype == np.int64 else "int32",
                   "int64" if rec is not None and rec[0].dtype == np.int64 else "int32")


def _grid(n: int) -> tuple[int]:
    return (max(1, (int(n) + _THREADS - 1) // _THREADS),)


def _i64(x) -> np.int64:
    return np.int64(x)


def _counters(ctr) -> tuple[int, int, int, int, int]:
    c = ctr.get()
    return int(c[0]), int(c[1]), int(c[2]), int(c[3]), int(np.uint64(c[4]).view(np.int64))


def _rec(rec):
    """The recorded parents' array for a kernel, or a null pointer when parents are derived later."""
    return rec[0] if rec is not None else np.uint64(0)


def top_down_step(offsets, cols, lo: int, queue, frontier, seen, nxt, sent, nchunks: int, rec=None):
    """One batched top-down level (see :func:`.batch_top_down.top_down_step`); returns ``(touched, pairs)``
    on the device, ``pairs`` ``(k, 3)`` rows ``(vertex, bits, parent)`` when ``rec`` records parents (``(k,
    2)`` otherwise).  ``nchunks`` is unused (one thread per frontier edge)."""
    qn = int(queue.size)
    width = 2 if rec is None else 3
    if qn == 0:
        return cp.empty(0, np.int64), cp.empty((0, width), np.int64)
    queue = queue.astype(np.int64, copy=False)
    qstart = cp.zeros(qn + 1, np.int64)
    cp.cumsum(offsets[queue + 1] - offsets[queue], out=qstart[1:])
    total = int(qstart[-1])
    pairs = cp.empty(width * max(total if sent.size else 0, 1), np.int64)
    touched = cp.empty(max(int(frontier.size), 1), np.int64)  # each owned vertex at most once
    count = cp.zeros(2, np.uint64)  # touched, pairs
    if total:
        _kern(cols, rec)["batch_td"]((min(_grid(total)[0], _MAX_BLOCKS),), (_THREADS,),
                                     (offsets, cols, _i64(lo), _i64(frontier.size), queue, qstart, _i64(qn),
                                      _i64(total), frontier, seen, nxt, sent if sent.size else nxt,
                                      np.int32(1 if sent.size else 0), pairs, np.int32(width), count[1:], touched,
                                      count[:1], _rec(rec)))
    nt, k = (int(x) for x in count.get())
    return touched[:nt], pairs[:width * k].reshape(k, width)


def claim_pairs(pairs, lo: int, seen, nxt, rec=None):
    """Apply received ``(vertex, bits[, parent])`` rows (``(k, 2)`` or ``(k, 3)`` int64 on the device; with
    ``rec``, three); returns the local ids whose ``nxt`` word this made non-zero."""
    nt, width = int(pairs.shape[0]), int(pairs.shape[1])
    touched = cp.empty(max(nt, 1), np.int64)
    count = cp.zeros(1, np.uint64)
    if nt:
        _kern(None, rec)["batch_claim"](_grid(nt), (_THREADS,),
                                        (cp.ascontiguousarray(pairs), np.int32(width), _i64(nt), _i64(lo),
                                         _i64(seen.size), seen, nxt, touched, count, _rec(rec)))
    return touched[:int(count.get()[0])]


def finish_touched(touched, queue, nxt, frontier, seen, planes, depth, out_offsets, nchunks, rec=None):
    """The end of a top-down level over the vertices it touched (see :func:`.batch_frontier.finish_touched`);
    returns the counters as host integers (the unfinished in-degree sum 0).  ``nchunks`` and ``rec`` are
    unused (parents are recorded where they are found)."""
    ctr = cp.zeros(5, np.uint64)
    k = _kern()
    if queue.size:
        k["batch_clear"](_grid(queue.size), (_THREADS,), (queue, _i64(queue.size), frontier))
    if touched.size:
        k["batch_finish"](_grid(touched.size), (_THREADS,),
                          (touched, _i64(touched.size), nxt, frontier, seen, planes, np.int32(planes.shape[1]),
                           np.int32(depth), out_offsets, ctr))
    return _counters(ctr)


def long_row_tasks(offsets, nchunks: int = 0) -> SimpleNamespace:
    """Bottom-up's split of the in-rows (the batched engine's ``chunks``): the rows longer than ``_BU_LONG``
    (``rows``, int64 local ids) and their tasks of ``_BU_CHUNK`` entries (``tasks``: ``row << 24 | chunk``),
    a warp each.  ``nchunks`` is unused (the CPU's thread count)."""
    deg = offsets[1:] - offsets[:-1]
    rows = cp.flatnonzero(deg > _BU_LONG).astype(np.int64)
    per = (deg[rows] + _BU_CHUNK - 1) // _BU_CHUNK
    ends = cp.cumsum(per)  # one past each row's last task
    ntasks = int(ends[-1]) if rows.size else 0
    q = cp.arange(ntasks, dtype=np.int64)
    owner = cp.searchsorted(ends, q, side="right")
    tasks = (rows[owner] << 24) | (q - (ends - per)[owner])
    return SimpleNamespace(rows=rows, tasks=tasks)


def bottom_up_step(offsets, cols, frontier, nonzero, sparse, active, seen, nxt, planes, depth, out_offsets, chunks,
                   rec=None):
    """One batched bottom-up level with its end (see :func:`.batch_bottom_up.bottom_up_step`); returns the
    counters as host integers.  ``chunks``: :func:`long_row_tasks` of ``offsets``."""
    ctr = cp.zeros(5, np.uint64)
    nloc = int(seen.size)
    if not nloc:
        return _counters(ctr)
    k = _kern(cols, rec)
    nz = nonzero if sparse else frontier
    k["batch_bu"](_grid(nloc), (_THREADS,),
                  (offsets, cols, frontier, nz, np.int32(bool(sparse)), np.uint64(active), seen, nxt, planes,
                   np.int32(planes.shape[1]), np.int32(depth), out_offsets, _i64(nloc), _i64(_BU_LONG), ctr,
                   _rec(rec)))
    nt = int(chunks.tasks.size)
    if nt:
        k["batch_bu_long"]((min((nt * 32 + _THREADS - 1) // _THREADS, _MAX_BLOCKS),), (_THREADS,),
                           (offsets, cols, frontier, nz, np.int32(bool(sparse)), np.uint64(active), seen, nxt,
                            chunks.tasks, _i64(nt), _i64(nloc), _rec(rec)))
        k["batch_bu_long_end"](_grid(chunks.rows.size), (_THREADS,),
                               (chunks.rows, _i64(chunks.rows.size), offsets, np.uint64(active), seen, nxt, planes,
                                np.int32(planes.shape[1]), np.int32(depth), out_offsets, ctr))
    return _counters(ctr)


def word_table(seen, planes):
    """``seen`` and ``planes`` side by side, ``(n, max(8, B + 1))`` uint64 (see
    :func:`.batch_results.word_table`; CuPy's allocations are 256-byte aligned)."""
    n, nplanes = planes.shape
    table = cp.zeros((n, max(8, nplanes + 1)), np.uint64)
    table[:, 0] = seen
    table[:, 1:1 + nplanes] = planes
    return table


def new_records(nloc: int, count: int, num_vertices: int, old=None):
    """Recorded parents of ``count`` searches, ``((count, nloc),)`` on the device (int32 below 2**31
    vertices, else int64: the shard's column dtype), -1 until found; ``old`` (the last batch's, of as many
    searches) reset instead where given."""
    if old is None:
        return (cp.full((count, nloc), -1, column_dtype(num_vertices)),)
    old[0].fill(-1)
    return old


def record_roots(rec, local, search, root) -> None:
    """Each root its own parent: ``rec``'s entry of search ``search[i]`` at local vertex ``local[i]`` is
    ``root[i]`` (host ``(r,)`` int64 arrays)."""
    rec[0][cp.asarray(search), cp.asarray(local)] = cp.asarray(root)


def records_fit(nloc: int, count: int, num_vertices: int) -> bool:
    """Whether :func:`new_records` fits in ``RECORD_SHARE`` of the device's free memory (the memory pool's
    unused blocks counted as free)."""
    return nloc * count * column_dtype(num_vertices).itemsize <= RECORD_SHARE * free_device_bytes()


def lay_out(seen, planes, rec, chunks, first: int, parent, level):
    """Searches ``first .. first+count-1``'s results from a pass that recorded its parents: ``(parent,
    level)``, ``(count, nloc)`` each -- the recorded rows themselves (``parent`` None: they are in place) and
    the levels read from the planes into ``level`` (int32, -1 unreached).  ``chunks`` is unused."""
    count, nloc = int(level.shape[0]), int(level.shape[1])
    if nloc:
        _kern()["batch_levels"](_grid(nloc), (_THREADS,), (seen, planes, np.int32(planes.shape[1]), _i64(nloc),
                                                           np.int32(first), np.int32(count), level))
    return rec[0][first:first + count], level


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
    """The batched engine's kernel names on CuPy arrays (recorded parents int32 below 2**31 vertices, derived
    ones int64), and the single-search GPU backend for validating results on the device."""
    from .backend import gpu_backend

    return SimpleNamespace(
        name="gpu", xp=cp, parent_dtype=lambda n: np.dtype(np.int64), to_host=cp.asnumpy,
        synchronize=lambda: cp.cuda.get_current_stream().synchronize(),
        result_bytes=RESULT_BYTES, derives_parents=True, parents_in_place=True, validation=gpu_backend(),
        vertex_chunks=long_row_tasks, new_records=new_records, record_roots=record_roots,
        record_searches=lambda rec: int(rec[0].shape[0]), records_fit=records_fit,
        lay_out=lay_out,
        finish_touched=finish_touched, bottom_up_step=bottom_up_step, top_down_step=top_down_step,
        claim_pairs=claim_pairs, pairs_by_owner=pairs_by_owner, nonzero_bits=nonzero_bits, encode=encode,
        decode=decode, word_table=word_table, derive=derive,
    )
