"""The GPU engine's kernels (``kernels.cu``) compiled for 32- or 64-bit column ids, their launch grids, and
the neighbour order by degree that preparation builds on the device.

:mod:`.backend` launches the kernels (its docstring gives their design).  Compilation is NVRTC through
``cupy.RawModule``, once per column type and process, cached on disk by CuPy.  CuPy is imported when this
module is; the CPU path never imports it (see :mod:`breadth.bfs.engine.backend`).
"""

from __future__ import annotations

import functools
from typing import Any

import cupy as cp
import numpy as np

from .cuda_source import read

_BU_LONG, _BU_CHUNK, _SCAN_TILE = 32, 1024, 1024  # BU_LONG, BU_CHUNK and SCAN_TILE of the CUDA source
_FULL_GRID_PER_SM = 16  # blocks per multiprocessor for grid-stride kernels whose work size is on the device
_THREADS = 256

_SOURCE = read("kernels.cu")

_KERNELS = ("queue_degrees", "degree_sum", "td_expand", "bu_step", "zero_degree_bits", "set_bits",
            "claim_remote", "row_rules", "init_search", "queue_prefix_small", "bu_order_keys",
            "owner_counts", "owner_scatter", "owner_regions", "claim_remote_dn", "td_expand_g", "bu_step_g",
            "queue_prefix_small_g", "claim_remote_g", "stamp", "bu_long", "bu_long_g", "scan_tiles_g",
            "scan_tile_sums_g", "scan_add_g", "popcount_tiles", "scan_tile_sums", "tile_bits_to_ids", "td_gate",
            "td_undo", "td_publish", "bu_publish", "claim_split_g")
_SMALL_QUEUE = 16384  # frontiers up to this many vertices get their prefix sum from one block


@functools.lru_cache(maxsize=None)
def _module(col_dtype: str) -> dict[str, Any]:
    """Compiled kernels for int32 or int64 column ids (NVRTC, cached on disk by CuPy)."""
    opts = ("-std=c++17",) + (("-DCOL64",) if col_dtype == "int64" else ())
    mod = cp.RawModule(code=_SOURCE, options=opts)
    return {k: mod.get_function(k) for k in _KERNELS}


@functools.lru_cache(maxsize=None)
def _num_sms() -> int:
    return int(cp.cuda.Device().attributes["MultiProcessorCount"])


def _grid(work_items: int | None, per_block: int = _THREADS) -> tuple[int]:
    """Blocks for ``work_items`` items (one per thread, or per warp when ``per_block`` is 8): enough to fill
    the chip, no more; ``None`` (size known only on the device) gives the full grid."""
    full = _num_sms() * _FULL_GRID_PER_SM
    if work_items is None:
        return (full,)
    return (max(1, min(full, -(-work_items // per_block))),)


def _i64(x: int) -> np.int64:
    return np.int64(x)


_degree_bucket = cp.ElementwiseKernel(
    "raw int64 off", "uint8 b",
    "const long long d = off[i + 1] - off[i]; b = (unsigned char)(63 - (d > 0 ? 64 - __clzll(d) : 0));",
    "breadth_degree_bucket")


def free_device_bytes() -> int:
    """Bytes this process may still allocate on its GPU: the device's free memory and the blocks CuPy's pool
    holds unused (``cudaMemGetInfo`` counts those as used)."""
    return int(cp.cuda.runtime.memGetInfo()[0]) + int(cp.get_default_memory_pool().free_bytes())


def degree_buckets(offsets):
    """uint8 ``63 - bitlength(degree)`` per row of ``offsets`` (``(num_local,)``): the sort key that puts
    high-degree neighbours first; owners exchange theirs so every rank can order by global degree."""
    return _degree_bucket(offsets, size=int(offsets.size) - 1)


def degree_ordered_columns(offsets, cols, buckets=None, sort_entries: int | None = None):
    """``cols`` with each row's neighbours by decreasing degree bucket: bottom-up then meets a frontier
    neighbour after fewer probes (any frontier neighbour is a valid parent, so the order changes which
    one is found, never the levels).  The sorted rows stay as they are (validation binary-searches them).
    ``buckets``: :func:`degree_buckets` of every global id (uint8 ``(num_vertices,)``); ``None`` for a
    one-rank shard, whose rows are all the ids.  ``sort_entries``: sort the rows a range of about this many
    entries at a time (a range's keys all precede the next one's, so the order is the one sort's) so that
    the keys and the sort's scratch (~24 bytes an entry) stay small beside the shard; ``None``: one sort
    (2^30 tuples on one GPU: 44 GB in use at its peak, 18 GB by ranges of 2^27).  Returns ``None`` when ids
    are too wide for the packed sort keys or device memory is short."""
    nloc, nnz = offsets.size - 1, int(cols.size)
    if buckets is None:
        buckets = degree_buckets(offsets)
    buckets = cp.asarray(buckets, cp.uint8)
    cbits = max(1, int(buckets.size - 1).bit_length())
    rbits = max(1, int(nloc - 1).bit_length())
    if rbits + 6 + cbits > 64:
        return None
    kernel = _module("int64" if cols.dtype == np.int64 else "int32")["bu_order_keys"]
    mask = np.uint64((1 << cbits) - 1)
    step = max(1, sort_entries or nnz)
    starts = cp.searchsorted(offsets, cp.arange(step, nnz, step, dtype=cp.int64)) if step < nnz else ()
    bounds = sorted({0, nloc} | {int(r) for r in cp.asnumpy(starts)})  # row ranges' first rows, and the end
    # memory is asked for, not estimated: whichever allocator CuPy has (its own pool, or RMM's, which cuDF
    # and dask-cuda install and whose reserved bytes cudaMemGetInfo counts as used) says whether it fits
    try:
        ordered = cp.empty(nnz, cols.dtype)
        for r0, r1 in zip(bounds[:-1], bounds[1:]):
            lo, hi = int(offsets[r0]), int(offsets[r1])
            if hi == lo:
                continue
            keys = cp.empty(hi - lo, cp.uint64)
            kernel(_grid(r1 - r0, _THREADS // 32), (_THREADS,),
                   (offsets[r0:r1 + 1] - lo, cols[lo:hi], _i64(r1 - r0), np.int32(cbits), buckets, keys))
            keys.sort()
            cp.bitwise_and(keys, mask, out=keys)
            ordered[lo:hi] = keys
            keys = None
    except (cp.cuda.memory.OutOfMemoryError, MemoryError):
        return None
    finally:
        keys = None
        cp.get_default_memory_pool().free_all_blocks()
    return ordered
