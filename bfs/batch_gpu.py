"""Batched BFS kernels on the GPU (CuPy): the MS-BFS steps of :mod:`.batch_top_down`, :mod:`.batch_bottom_up`
and :mod:`.batch_frontier` as CUDA C++ (NVRTC through ``cupy.RawModule``), for
:class:`~breadth.bfs.batch_engine.BatchEngine` with ``backend="gpu"``.

Algorithm (Then et al., VLDB 2015), one bit per search in each vertex's 64-bit ``seen``/``frontier``/``next``
word, as on the CPU:

* **top-down**: one thread per frontier vertex ``u``; for each out-neighbour ``v`` owned here,
  ``new = frontier[u] & ~atomicOr(&seen[v], frontier[u] & ~seen[v])`` -- the searches this thread claims
  -- then ``atomicOr(&next[v], new)`` and the parents/levels of those searches.  A remote ``v`` becomes a
  ``(v, u, bits)`` triple (bits filtered by ``atomicOr`` on ``sent[v]``), appended at an ``atomicAdd`` slot.
* **bottom-up**: one thread per owned vertex scans its in-neighbours until every missing running search
  is found, testing each neighbour in the bitmap of non-zero frontier words before reading its word.
* **advance**: ``frontier = next; next = 0`` with the level's counters (non-zero words, set bits, their
  out-degree sum, the in-degree sum of vertices still missing a running search, OR of the words), each
  thread adding into five device counters.

Imported only for GPU ranks (it imports CuPy at module level).  Untested on this project's CPU-only CI.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import cupy as cp
import numpy as np

_THREADS = 256

_SOURCE = r"""
typedef long long i64;
typedef unsigned long long u64;
#ifdef COL64
typedef long long col_t;
#else
typedef int col_t;
#endif

extern "C" __global__ void batch_td(const i64* __restrict__ offsets, const col_t* __restrict__ cols, i64 lo,
                                    i64 nloc, const i64* __restrict__ queue, i64 qn,
                                    const u64* __restrict__ frontier, u64* seen, u64* nxt, i64* parent,
                                    int* level, int depth, u64* sent, int has_sent, i64* trip, u64* tcount) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= qn) return;
    const i64 u = queue[t];
    const u64 f = frontier[u];
    const i64 ug = u + lo;
    for (i64 k = offsets[u]; k < offsets[u + 1]; ++k) {
        const i64 v = (i64)cols[k];
        const i64 j = v - lo;
        if (j >= 0 && j < nloc) {
            u64 cand = f & ~seen[j];
            if (!cand) continue;
            u64 fresh = cand & ~atomicOr(&seen[j], cand);
            if (!fresh) continue;
            atomicOr(&nxt[j], fresh);
            while (fresh) {
                const int i = __ffsll((long long)fresh) - 1;
                parent[j * 64 + i] = ug;
                level[j * 64 + i] = depth;
                fresh &= fresh - 1;
            }
        } else if (has_sent) {
            u64 cand = f & ~sent[v];
            if (!cand) continue;
            u64 fresh = cand & ~atomicOr(&sent[v], cand);
            if (!fresh) continue;
            const u64 at = atomicAdd(tcount, 1ULL);
            trip[3 * at] = v;
            trip[3 * at + 1] = ug;
            trip[3 * at + 2] = (i64)fresh;
        }
    }
}

extern "C" __global__ void batch_claim(const i64* __restrict__ trip, i64 nt, i64 lo, u64* seen, u64* nxt,
                                       i64* parent, int* level, int depth) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= nt) return;
    const i64 j = trip[3 * t] - lo;
    const u64 bits = (u64)trip[3 * t + 2];
    u64 fresh = bits & ~atomicOr(&seen[j], bits);
    if (!fresh) return;
    atomicOr(&nxt[j], fresh);
    while (fresh) {
        const int i = __ffsll((long long)fresh) - 1;
        parent[j * 64 + i] = trip[3 * t + 1];
        level[j * 64 + i] = depth;
        fresh &= fresh - 1;
    }
}

extern "C" __global__ void batch_bu(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                    const u64* __restrict__ frontier, const u64* __restrict__ nonzero, u64 active,
                                    u64* seen, u64* nxt, i64* parent, int* level, int depth, i64 nloc) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (v >= nloc) return;
    u64 missing = active & ~seen[v];
    u64 got_all = 0;
    for (i64 k = offsets[v]; missing && k < offsets[v + 1]; ++k) {
        const i64 u = (i64)cols[k];
        if (!((nonzero[u >> 6] >> (u & 63)) & 1ULL)) continue;
        u64 got = frontier[u] & missing;
        if (!got) continue;
        got_all |= got;
        missing &= ~got;
        while (got) {
            const int i = __ffsll((long long)got) - 1;
            parent[v * 64 + i] = u;
            level[v * 64 + i] = depth;
            got &= got - 1;
        }
    }
    seen[v] |= got_all;
    nxt[v] = got_all;
}

extern "C" __global__ void batch_advance(u64* nxt, u64* frontier, const u64* __restrict__ seen, u64 active,
                                         const i64* __restrict__ out_off, const i64* __restrict__ in_off, i64 nloc,
                                         u64* ctr) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (v >= nloc) return;
    const u64 w = nxt[v];
    frontier[v] = w;
    nxt[v] = 0;
    if (w) {
        atomicAdd(&ctr[0], 1ULL);
        atomicAdd(&ctr[1], (u64)__popcll(w));
        atomicAdd(&ctr[2], (u64)(out_off[v + 1] - out_off[v]));
        atomicOr(&ctr[4], w);
    }
    if (active & ~seen[v]) atomicAdd(&ctr[3], (u64)(in_off[v + 1] - in_off[v]));
}

extern "C" __global__ void batch_nonzero(const u64* __restrict__ words, i64 n, u64* out, i64 nw) {
    const i64 w = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (w >= nw) return;
    u64 x = 0;
    for (int b = 0; b < 64 && 64 * w + b < n; ++b)
        if (words[64 * w + b]) x |= 1ULL << b;
    out[w] = x;
}
"""

_KERNELS = ("batch_td", "batch_claim", "batch_bu", "batch_advance", "batch_nonzero")


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


def top_down_step(offsets, cols, lo: int, queue, frontier, seen, nxt, parent, level, depth: int, sent,
                  nchunks: int):
    """One batched top-down level (see :func:`.batch_top_down.top_down_step`); returns the ``(k, 3)`` int64
    triples for other ranks, on the device.  ``nchunks`` is unused (one thread per frontier vertex)."""
    qn = int(queue.size)
    if qn == 0:
        return cp.empty((0, 3), np.int64)
    cap = int((offsets[queue + 1] - offsets[queue]).sum()) if sent.size else 0
    trip = cp.empty(3 * max(cap, 1), np.int64)
    tcount = cp.zeros(1, np.uint64)
    _kern(cols)["batch_td"](_grid(qn), (_THREADS,),
                            (offsets, cols, _i64(lo), _i64(frontier.size), queue.astype(np.int64), _i64(qn),
                             frontier, seen, nxt, parent, level, np.int32(depth),
                             sent if sent.size else seen, np.int32(1 if sent.size else 0), trip, tcount))
    k = int(tcount.get()[0])
    return trip[:3 * k].reshape(k, 3)


def claim_triples(trip, lo: int, seen, nxt, parent, level, depth) -> int:
    """Apply received ``(vertex, parent, bits)`` triples (``(k, 3)`` int64 on the device)."""
    nt = int(trip.shape[0])
    if nt:
        _kern()["batch_claim"](_grid(nt), (_THREADS,), (cp.ascontiguousarray(trip), _i64(nt), _i64(lo), seen, nxt,
                                                        parent, level, np.int32(depth)))
    return nt


def bottom_up_step(offsets, cols, frontier, nonzero, active, seen, nxt, parent, level, depth) -> None:
    """One batched bottom-up level (see :func:`.batch_bottom_up.bottom_up_step`)."""
    nloc = int(seen.size)
    _kern(cols)["batch_bu"](_grid(nloc), (_THREADS,), (offsets, cols, frontier, nonzero, np.uint64(active), seen,
                                                       nxt, parent, level, np.int32(depth), _i64(nloc)))


def advance(nxt, frontier, seen, active, out_offsets, in_offsets):
    """``frontier = next; next = 0``; returns ``(vertices, pairs, out_degree_sum, unfinished_in_degree_sum,
    or_word)`` as host integers (see :func:`.batch_frontier.advance`)."""
    ctr = cp.zeros(5, np.uint64)
    nloc = int(nxt.size)
    if nloc:
        _kern()["batch_advance"](_grid(nloc), (_THREADS,), (nxt, frontier, seen, np.uint64(active), out_offsets,
                                                            in_offsets, _i64(nloc), ctr))
    c = ctr.get()
    return int(c[0]), int(c[1]), int(c[2]), int(c[3]), np.uint64(c[4])


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


def triples_by_owner(trip, block: int, nparts: int) -> list:
    """``trip`` split into one device array per owner rank."""
    if nparts == 1:
        return [trip]
    owner = trip[:, 0] // block
    order = cp.argsort(owner)
    srt = trip[order]
    cuts = cp.searchsorted(owner[order], cp.arange(nparts + 1)).get()
    return [srt[cuts[r]:cuts[r + 1]] for r in range(nparts)]


def gpu_batch_kernels() -> SimpleNamespace:
    """The batched engine's kernel names on CuPy arrays (int64 parents: the kernels write 64-bit ids)."""
    return SimpleNamespace(
        name="gpu", xp=cp, parent_dtype=lambda n: np.dtype(np.int64), to_host=cp.asnumpy,
        top_down_step=top_down_step, claim_triples=claim_triples, triples_by_owner=triples_by_owner,
        bottom_up_step=bottom_up_step, advance=advance, nonzero_bits=nonzero_bits, encode=encode, decode=decode,
    )
