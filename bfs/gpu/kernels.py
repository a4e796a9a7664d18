"""GPU backend: the engine's kernels on CuPy arrays, written as CUDA C++ (NVRTC through ``cupy.RawModule``).

Same names and signatures as the CPU backend (:func:`breadth.bfs.engine.backend.cpu_backend`), so the engine's
orchestration is shared; only the kernels differ.  What changes on the device:

* **Visited bitmap.**  Each backend instance keeps one bit per owned vertex (``uint32`` words; 2**26
  vertices are 8 MB, which stays in the H100/H200 L2).  Top-down claims a vertex with one ``atomicOr`` on
  it (so a vertex is claimed exactly once: no duplicates in the next queue), bottom-up skips visited
  vertices 32 at a time without touching ``parent``.  :meth:`GpuBackend.start_search` (the engine's
  start-of-search hook) resets it.
* **Top-down, load-balanced per edge.**  A prefix sum of the frontier's degrees maps edge ``e`` to its
  frontier vertex by binary search (one search per 32 edges for the warp, then a short one per lane), so a
  hub of a million neighbours is spread over the whole chip.  Claimed vertices are appended with one
  warp-aggregated ``atomicAdd`` per warp, and the degree sum of the next frontier (the next level's
  ``scout``) is accumulated in the same pass.
* **Bottom-up, a warp per 32 vertices.**  Each lane owns one vertex, scans its row until it meets a
  frontier bit, and the warp's ``__ballot_sync`` is the next-frontier word (stored once, no atomics).
  Rows longer than 32 that miss on their first neighbour are handed to a second kernel as tasks of 1024
  entries, a warp each, so no lane walks a long row alone.
* **One host round trip per level.**  Each step reads its small counter array back once (the only
  synchronisation); the counts it learns (queue length and degree sum of what it returns) are remembered
  for exactly the array it returned, so the engine's following ``degree_sum``/``bits_to_queue`` calls on that
  array cost no further synchronisation.

CuPy is imported when this module is; the CPU path never imports it (see :mod:`breadth.bfs.engine.backend`).
"""

from __future__ import annotations

import functools
from typing import Any

import cupy as cp
import numpy as np

from ..search_config import SearchConfig

_BU_LONG, _BU_CHUNK, _SCAN_TILE = 32, 1024, 1024  # BU_LONG, BU_CHUNK and SCAN_TILE of the CUDA source
_FULL_GRID_PER_SM = 16  # blocks per multiprocessor for grid-stride kernels whose work size is on the device
_THREADS = 256

_SOURCE = r"""
typedef long long i64;
typedef unsigned long long u64;
typedef unsigned int u32;
#ifdef COL64
typedef long long col_t;
#else
typedef int col_t;
#endif

#define FULL 0xffffffffu

__device__ __forceinline__ i64 warp_sum(i64 x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(FULL, x, o);
    return x;
}

// Block-wide sum of two per-thread counters, added to ctr[a] and ctr[b] once per block: a grid-stride
// kernel then issues a few thousand global atomics instead of one per warp.
__device__ __forceinline__ void block_add2(i64 x, i64 y, i64* ctr, int a, int b) {
    __shared__ unsigned long long sx, sy;
    if (threadIdx.x == 0) { sx = 0; sy = 0; }
    __syncthreads();
    x = warp_sum(x);
    y = warp_sum(y);
    if ((threadIdx.x & 31) == 0) {
        if (x) atomicAdd(&sx, (u64)x);
        if (y) atomicAdd(&sy, (u64)y);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (sx) atomicAdd((u64*)&ctr[a], sx);
        if (sy) atomicAdd((u64*)&ctr[b], sy);
    }
}

// deg[i] = degree of queue[i] (local ids); the host turns it into an inclusive prefix sum.
extern "C" __global__ void queue_degrees(const i64* __restrict__ offsets, const i64* __restrict__ queue,
                                         i64 qn, i64* __restrict__ deg) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < qn; i += (i64)gridDim.x * blockDim.x) {
        const i64 u = queue[i];
        deg[i] = offsets[u + 1] - offsets[u];
    }
}

// ctr[0] += sum of degrees of queue (local ids)
extern "C" __global__ void degree_sum(const i64* __restrict__ offsets, const i64* __restrict__ queue, i64 qn,
                                      i64* ctr) {
    i64 s = 0;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < qn; i += (i64)gridDim.x * blockDim.x) {
        const i64 u = queue[i];
        s += offsets[u + 1] - offsets[u];
    }
    block_add2(s, 0, ctr, 0, 1);
}

// One top-down level, one thread per frontier edge.
//   pre: inclusive prefix sum of the frontier's degrees (qn entries); the edge count is pre[qn-1], read
//        here, so the host never has to know it.
//   Local neighbours are claimed by atomicOr on the visited bitmap; the winner writes parent (global id)
//   and level, appends the local id to nxt (ctr[0] counts them) and adds its degree to ctr[1].
//   Remote neighbours (has_sent) go out once per search through the sent bitmap (global ids, 64-bit words):
//   the pair (v, parent) is appended to rpairs (interleaved, the layout the exchange sends), ctr[2] counts
//   them.  ctr[0..1] have the layout claim_remote appends to, so claimed vertices join the same queue.
__device__ __forceinline__ void td_body(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                        const i64* __restrict__ queue, const i64* __restrict__ pre, i64 qn,
                                        i64 lo, i64 hi, i64* __restrict__ parent, int* __restrict__ level,
                                        int depth, u32* visited, u64* sent, int has_sent,
                                        i64* __restrict__ nxt, i64* __restrict__ rpairs, i64* ctr) {
    if (qn <= 0) return;
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 total = pre[qn - 1];
    const u32 lanemask_lt = (1u << lane) - 1u;
    i64 scout = 0;
    for (i64 base = warp * 32; base < total; base += nwarps * 32) {
        // First frontier index whose inclusive prefix exceeds `base` (same address on every lane: broadcast).
        i64 a = 0, b = qn - 1;
        while (a < b) { const i64 m = (a + b) >> 1; if (pre[m] > base) b = m; else a = m + 1; }
        const i64 e = base + lane;
        bool win_l = false, win_r = false;
        i64 v = 0, ug = 0;
        if (e < total) {
            // This lane's vertex is at most 31 edges further; zero-degree entries can make it more than
            // 31 indices further, hence the fallback to the whole tail.
            i64 c = a, d = a + 32 < qn - 1 ? a + 32 : qn - 1;
            if (pre[d] <= e) { c = d; d = qn - 1; }
            while (c < d) { const i64 m = (c + d) >> 1; if (pre[m] > e) d = m; else c = m + 1; }
            const i64 u = queue[c];
            const i64 first = c ? pre[c - 1] : 0;
            v = (i64)cols[offsets[u] + (e - first)];
            ug = u + lo;
            if (v >= lo && v < hi) {
                const i64 lv = v - lo;
                const u32 bit = 1u << (lv & 31);
                u32* w = visited + (lv >> 5);
                // Plain read first: most edges of a big level hit visited vertices, and a read is far
                // cheaper than an atomic.  A stale read only costs the atomic, which decides.
                if (!(*w & bit) && !(atomicOr(w, bit) & bit)) {
                    win_l = true;
                    v = lv;
                    parent[lv] = ug;
                    level[lv] = depth;
                    scout += offsets[lv + 1] - offsets[lv];
                }
            } else if (has_sent) {
                const u64 bit = 1ull << (v & 63);
                u64* w = sent + (v >> 6);
                if (!(*w & bit) && !(atomicOr(w, bit) & bit)) win_r = true;
            }
        }
        const u32 bl = __ballot_sync(FULL, win_l);
        if (bl) {
            u64 pos = 0;
            if (lane == 0) pos = atomicAdd((u64*)&ctr[0], (u64)__popc(bl));
            pos = __shfl_sync(FULL, pos, 0);
            if (win_l) nxt[pos + __popc(bl & lanemask_lt)] = v;
        }
        const u32 br = __ballot_sync(FULL, win_r);
        if (br) {
            u64 pos = 0;
            if (lane == 0) pos = atomicAdd((u64*)&ctr[2], (u64)__popc(br));
            pos = __shfl_sync(FULL, pos, 0);
            if (win_r) { const u64 j = pos + __popc(br & lanemask_lt); rpairs[2 * j] = v; rpairs[2 * j + 1] = ug; }
        }
    }
    block_add2(scout, 0, ctr, 1, 3);
}

extern "C" __global__ void td_expand(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                     const i64* __restrict__ queue, const i64* __restrict__ pre, i64 qn,
                                     i64 lo, i64 hi, i64* __restrict__ parent, int* __restrict__ level, int depth,
                                     u32* visited, u64* sent, int has_sent,
                                     i64* __restrict__ nxt, i64* __restrict__ rpairs, i64* ctr) {
    td_body(offsets, cols, queue, pre, qn, lo, hi, parent, level, depth, visited, sent, has_sent, nxt, rpairs, ctr);
}

// The *_g kernels are the same steps for a CUDA graph (bfs/gpu/level_graphs.py): what changes from one level
// to the next is read from the device parameter block prm (prm[0] the depth, prm[1] the queue length),
// which the graph's first node copies from pinned host memory, so a captured level replays unchanged.
extern "C" __global__ void td_expand_g(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                       const i64* __restrict__ queue, const i64* __restrict__ pre,
                                       const i64* __restrict__ prm, i64 lo, i64 hi, i64* __restrict__ parent,
                                       int* __restrict__ level, u32* visited, u64* sent, int has_sent,
                                       i64* __restrict__ nxt, i64* __restrict__ rpairs, i64* ctr) {
    td_body(offsets, cols, queue, pre, prm[1], lo, hi, parent, level, (int)prm[0], visited, sent, has_sent, nxt,
            rpairs, ctr);
}

// ts[i] = the GPU's global nanosecond clock (one thread): the local-work time of a captured level.
__device__ __forceinline__ i64 global_ns() {
#ifdef __CUDACC__
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (i64)t;
#else
    return 0;
#endif
}

extern "C" __global__ void stamp(i64* ts, int i) {
    if (threadIdx.x == 0 && blockIdx.x == 0) ts[i] = global_ns();
}

// One bottom-up level.  A warp handles BU_WORDS consecutive words of 32 local vertices per iteration (one
// word of visited / skip / next each), a lane one vertex per word.  The words are unrolled so that a lane
// has BU_WORDS independent chains (offsets -> first column -> frontier bit) in flight: on the late levels
// almost every vertex is settled by its first neighbour, and the step is bound by the latency of that
// chain, not by bandwidth.  Vertices not settled by their first neighbour then scan the rest of their row.
//   fbits: global frontier bitmap as 32-bit words; skip: vertices with no row entries (never found here).
//   next[w] is written for every w (the next frontier); visited[w] gains the vertices found.
//   ctr[0] += vertices found, ctr[1] += sum of their degrees.
#define BU_WORDS 4
// Rows longer than BU_LONG whose first neighbour is not in the frontier are not scanned by their lane: a
// lane walking a long row alone holds its warp (and the level) for the whole row, and on a level whose
// frontier is small but whose unvisited rows are long (a degree-1 root next to a hub) that serial tail
// was most of the level.  They become tasks of BU_CHUNK entries (tasks[], counted in ctr[2]) that bu_long
// scans a warp per task, 32 entries per step.
// A long row is first scanned inline up to BU_INLINE entries (its lane's work stays bounded): rows are
// ordered by decreasing neighbour degree, so most vertices that miss on their first neighbour (a hub found
// one level earlier, settled but no longer in the frontier) hit on one of the next few, and a task per
// such row cost more than those checks (at scale 26, deferring after one entry made bu_long most of the
// first bottom-up level).  The rest of the row, from entry BU_INLINE, becomes the tasks.
#define BU_LONG 32
#ifndef BU_INLINE
#define BU_INLINE 8
#endif
#define BU_CHUNK 1024
__device__ __forceinline__ void bu_body(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                        const u32* __restrict__ fbits, u32* __restrict__ visited,
                                        const u32* __restrict__ skip, i64* __restrict__ parent,
                                        int* __restrict__ level, int depth, u32* __restrict__ next,
                                        i64 nwords, i64 nloc, i64* ctr, i64* __restrict__ tasks, int defer,
                                        const u64* __restrict__ fdeg) {
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    i64 found = 0, found_edges = 0;
    for (i64 w0 = warp * BU_WORDS; w0 < nwords; w0 += nwarps * BU_WORDS) {
        u32 vis[BU_WORDS];
        bool act[BU_WORDS], hit[BU_WORDS];
        i64 s[BU_WORDS], t[BU_WORDS], u[BU_WORDS];
#pragma unroll
        for (int j = 0; j < BU_WORDS; ++j) {
            const i64 w = w0 + j;
            vis[j] = w < nwords ? visited[w] : FULL;
            const u32 sk = w < nwords ? (vis[j] | skip[w]) : FULL;
            const i64 i = w * 32 + lane;
            act[j] = !((sk >> lane) & 1u) && i < nloc;
            hit[j] = false;
            if (fdeg != nullptr) {  // degree << 32 | first neighbour: 8 coalesced bytes, the row only on a miss
                const u64 fd = act[j] ? fdeg[i] : 0;
                u[j] = (i64)(u32)fd;
                s[j] = 0;
                t[j] = (i64)(fd >> 32);
            } else {
                s[j] = act[j] ? offsets[i] : 0;
                t[j] = act[j] ? offsets[i + 1] : 0;
            }
        }
        if (fdeg == nullptr) {
#pragma unroll
            for (int j = 0; j < BU_WORDS; ++j) {
                act[j] = act[j] && s[j] < t[j];
                u[j] = act[j] ? (i64)__ldg(cols + s[j]) : 0;
            }
        } else {
#pragma unroll
            for (int j = 0; j < BU_WORDS; ++j) act[j] = act[j] && t[j] > 0;
        }
#pragma unroll
        for (int j = 0; j < BU_WORDS; ++j)
            if (act[j] && ((__ldg(fbits + (u[j] >> 5)) >> (u[j] & 31)) & 1u)) hit[j] = true;
#pragma unroll
        for (int j = 0; j < BU_WORDS; ++j) {
            i64 c = 0;  // bu_long tasks this lane hands over
            if (fdeg != nullptr && act[j] && !hit[j]) {  // a miss: now the row's place (t held the degree)
                const i64 i = (w0 + j) * 32 + lane;
                s[j] = offsets[i];
                t[j] += s[j];
            }
            if (act[j] && !hit[j]) {
                const bool long_row = defer && t[j] - s[j] > BU_LONG;
                const i64 stop = long_row ? s[j] + BU_INLINE : t[j];
                for (i64 k = s[j] + 1; k < stop; ++k) {
                    const i64 x = (i64)__ldg(cols + k);
                    if ((__ldg(fbits + (x >> 5)) >> (x & 31)) & 1u) { u[j] = x; hit[j] = true; break; }
                }
                if (long_row && !hit[j]) c = (t[j] - s[j] - BU_INLINE + BU_CHUNK - 1) / BU_CHUNK;
            }
            if (defer && __any_sync(FULL, c > 0)) {
                i64 x = c;  // inclusive warp scan of the task counts, one atomicAdd per warp
                for (int o = 1; o < 32; o <<= 1) { const i64 y = __shfl_up_sync(FULL, x, o); if (lane >= o) x += y; }
                u64 base = 0;
                if (lane == 31) base = atomicAdd((u64*)&ctr[2], (u64)x);
                base = __shfl_sync(FULL, base, 31);
                const i64 i = (w0 + j) * 32 + lane;
                for (i64 q = 0; q < c; ++q) tasks[base + x - c + q] = (i << 24) | q;
            }
            if (hit[j]) {
                const i64 i = (w0 + j) * 32 + lane;
                parent[i] = u[j];
                level[i] = depth;
                found += 1;
                found_edges += t[j] - s[j];
            }
        }
#pragma unroll
        for (int j = 0; j < BU_WORDS; ++j) {
            const u32 b = __ballot_sync(FULL, hit[j]);
            if (lane == 0 && w0 + j < nwords) {
                next[w0 + j] = b;
                if (b) visited[w0 + j] = vis[j] | b;
            }
        }
    }
    block_add2(found, found_edges, ctr, 0, 1);
}

extern "C" __global__ void bu_step(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                   const u32* __restrict__ fbits, u32* __restrict__ visited,
                                   const u32* __restrict__ skip, i64* __restrict__ parent,
                                   int* __restrict__ level, int depth, u32* __restrict__ next,
                                   i64 nwords, i64 nloc, i64* ctr, i64* __restrict__ tasks, int defer,
                                   const u64* __restrict__ fdeg) {
    bu_body(offsets, cols, fbits, visited, skip, parent, level, depth, next, nwords, nloc, ctr, tasks, defer, fdeg);
}

extern "C" __global__ void bu_step_g(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                     const u32* __restrict__ fbits, u32* __restrict__ visited,
                                     const u32* __restrict__ skip, i64* __restrict__ parent,
                                     int* __restrict__ level, const i64* __restrict__ prm, u32* __restrict__ next,
                                     i64 nwords, i64 nloc, i64* ctr, i64* __restrict__ tasks, int defer,
                                     const u64* __restrict__ fdeg) {
    bu_body(offsets, cols, fbits, visited, skip, parent, level, (int)prm[0], next, nwords, nloc, ctr, tasks,
            defer, fdeg);
}

// The deferred long rows: a warp per task (row i, chunk q: entries s+BU_INLINE+q*BU_CHUNK.. of row i), 32 entries
// a step; it stops once row i is visited (found by another task's warp) or a frontier neighbour is met,
// and the first warp to set i's visited bit records it (parent, level, next bit, counters).
__device__ __forceinline__ void bu_long_body(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                             const u32* __restrict__ fbits, u32* visited, i64* __restrict__ parent,
                                             int* __restrict__ level, int depth, u32* next,
                                             const i64* __restrict__ tasks, i64* ctr) {
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    const i64 ntasks = ctr[2];
    i64 found = 0, found_edges = 0;
    for (i64 q = warp; q < ntasks; q += nwarps) {
        const i64 task = tasks[q];
        const i64 i = task >> 24;
        const i64 s = offsets[i], t = offsets[i + 1];
        i64 a = s + BU_INLINE + (task & 0xffffff) * BU_CHUNK;
        const i64 b = a + BU_CHUNK < t ? a + BU_CHUNK : t;
        u32* vw = visited + (i >> 5);
        const u32 bit = 1u << (i & 31);
        for (; a < b; a += 32) {
            if (*(volatile u32*)vw & bit) break;
            const i64 k = a + lane;
            i64 x = 0;
            bool h = false;
            if (k < b) { x = (i64)__ldg(cols + k); h = (__ldg(fbits + (x >> 5)) >> (x & 31)) & 1u; }
            const u32 bl = __ballot_sync(FULL, h);
            if (bl) {
                const i64 p = __shfl_sync(FULL, x, __ffs(bl) - 1);
                if (lane == 0 && !(atomicOr(vw, bit) & bit)) {
                    parent[i] = p;
                    level[i] = depth;
                    atomicOr(next + (i >> 5), bit);
                    found += 1;
                    found_edges += t - s;
                }
                break;
            }
        }
    }
    block_add2(found, found_edges, ctr, 0, 1);
}

extern "C" __global__ void bu_long(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                   const u32* __restrict__ fbits, u32* visited, i64* __restrict__ parent,
                                   int* __restrict__ level, int depth, u32* next, const i64* __restrict__ tasks,
                                   i64* ctr) {
    bu_long_body(offsets, cols, fbits, visited, parent, level, depth, next, tasks, ctr);
}

extern "C" __global__ void bu_long_g(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                     const u32* __restrict__ fbits, u32* visited, i64* __restrict__ parent,
                                     int* __restrict__ level, const i64* __restrict__ prm, u32* next,
                                     const i64* __restrict__ tasks, i64* ctr) {
    bu_long_body(offsets, cols, fbits, visited, parent, level, (int)prm[0], next, tasks, ctr);
}

// Start of a search, after memsets set parent and level to -1 (they write faster than a kernel's stores):
// visited = 0 but for the root's bit; with a root and a queue, also parent[root] = root_global, level = 0
// and queue[0] = root_local, so that a one-root search starts with no copy from the host.
extern "C" __global__ void init_search(i64* __restrict__ parent, int* __restrict__ level, u32* __restrict__ visited,
                                       i64 nw32, i64 root_local, i64 root_global, i64* __restrict__ queue) {
    const i64 tid = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 w = tid; w < nw32; w += stride)
        visited[w] = (root_local >= 0 && w == (root_local >> 5)) ? (1u << (root_local & 31)) : 0u;
    if (tid == 0 && root_local >= 0 && queue != nullptr) {
        parent[root_local] = root_global;
        level[root_local] = 0;
        queue[0] = root_local;
    }
}

// Inclusive prefix sum of the degrees of a small queue in one block of 1024 threads (one launch instead of
// a degree pass and a multi-kernel scan), and ctr[0..3] = 0 for the expansion that follows in the stream.
__device__ __forceinline__ void prefix_small_body(const i64* __restrict__ offsets, const i64* __restrict__ queue,
                                                  i64 qn, i64* __restrict__ pre, i64* ctr) {
    __shared__ i64 wsum[32];
    __shared__ i64 carry;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    if (tid == 0) { carry = 0; ctr[0] = 0; ctr[1] = 0; ctr[2] = 0; ctr[3] = 0; }
    __syncthreads();
    for (i64 base = 0; base < qn; base += blockDim.x) {
        const i64 i = base + tid;
        i64 x = 0;
        if (i < qn) { const i64 q = queue[i]; x = offsets[q + 1] - offsets[q]; }
        for (int o = 1; o < 32; o <<= 1) { const i64 y = __shfl_up_sync(FULL, x, o); if (lane >= o) x += y; }
        if (lane == 31) wsum[wid] = x;
        __syncthreads();
        if (wid == 0) {
            i64 v = lane < (int)(blockDim.x >> 5) ? wsum[lane] : 0;
            for (int o = 1; o < 32; o <<= 1) { const i64 y = __shfl_up_sync(FULL, v, o); if (lane >= o) v += y; }
            wsum[lane] = v;
        }
        __syncthreads();
        x += (wid ? wsum[wid - 1] : 0) + carry;
        if (i < qn) pre[i] = x;
        __syncthreads();
        if (tid == (int)blockDim.x - 1) carry = x;
        __syncthreads();
    }
}

extern "C" __global__ void queue_prefix_small(const i64* __restrict__ offsets, const i64* __restrict__ queue,
                                              i64 qn, i64* __restrict__ pre, i64* ctr) {
    prefix_small_body(offsets, queue, qn, pre, ctr);
}

extern "C" __global__ void queue_prefix_small_g(const i64* __restrict__ offsets, const i64* __restrict__ queue,
                                                const i64* __restrict__ prm, i64* __restrict__ pre, i64* ctr) {
    prefix_small_body(offsets, queue, prm[1], pre, ctr);
}

// The same prefix for a queue of any length prm[1], in three fixed-grid kernels (a captured level cannot
// size its launches): tiles of SCAN_TILE degrees scanned per block (tiles[t] = the tile's sum), the tile
// sums scanned to exclusive offsets by one block, the offsets added.  Blocks of SCAN_TILE threads.
#define SCAN_TILE 1024
__device__ __forceinline__ i64 block_scan(i64 x, i64* total) {
    __shared__ i64 wsum[32];
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    for (int o = 1; o < 32; o <<= 1) { const i64 y = __shfl_up_sync(FULL, x, o); if (lane >= o) x += y; }
    if (lane == 31) wsum[wid] = x;
    __syncthreads();
    if (wid == 0) {
        i64 v = wsum[lane];
        for (int o = 1; o < 32; o <<= 1) { const i64 y = __shfl_up_sync(FULL, v, o); if (lane >= o) v += y; }
        wsum[lane] = v;
    }
    __syncthreads();
    x += wid ? wsum[wid - 1] : 0;
    *total = wsum[31];
    __syncthreads();
    return x;
}

extern "C" __global__ void scan_tiles_g(const i64* __restrict__ offsets, const i64* __restrict__ queue,
                                        const i64* __restrict__ prm, i64* __restrict__ pre, i64* __restrict__ tiles) {
    const i64 qn = prm[1];
    for (i64 t = blockIdx.x; t * SCAN_TILE < qn; t += gridDim.x) {
        const i64 i = t * SCAN_TILE + threadIdx.x;
        i64 x = 0, tot;
        if (i < qn) { const i64 q = queue[i]; x = offsets[q + 1] - offsets[q]; }
        x = block_scan(x, &tot);
        if (i < qn) pre[i] = x;
        if (threadIdx.x == 0) tiles[t] = tot;
    }
}

// tiles[0..nt) -> their exclusive prefix sums, in one block of SCAN_TILE threads; returns the total.
__device__ __forceinline__ i64 exclusive_tile_scan(i64* __restrict__ tiles, i64 nt) {
    i64 carry = 0;
    for (i64 base = 0; base < nt; base += SCAN_TILE) {
        const i64 i = base + threadIdx.x;
        const i64 x = i < nt ? tiles[i] : 0;
        i64 tot;
        const i64 inc = block_scan(x, &tot);
        if (i < nt) tiles[i] = carry + inc - x;
        carry += tot;
    }
    return carry;
}

extern "C" __global__ void scan_tile_sums_g(const i64* __restrict__ prm, i64* __restrict__ tiles) {
    exclusive_tile_scan(tiles, (prm[1] + SCAN_TILE - 1) / SCAN_TILE);
}

extern "C" __global__ void scan_add_g(const i64* __restrict__ prm, i64* __restrict__ pre,
                                      const i64* __restrict__ tiles) {
    const i64 qn = prm[1];
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < qn; i += (i64)gridDim.x * blockDim.x)
        pre[i] += tiles[i / SCAN_TILE];
}

// Set bits of 64-bit words -> ascending ids with no host round trip and no library scan (CuPy's cumsum
// cost ~80 us of host time a call): each tile of SCAN_TILE words counts its bits, one block turns the
// counts into each tile's first position (and the total at tiles[nt]), and each word writes its ids at its
// tile's position plus the bits before it in the tile.
extern "C" __global__ void popcount_tiles(const u64* __restrict__ bits, i64 nwords, i64* __restrict__ tiles) {
    for (i64 t = blockIdx.x; t * SCAN_TILE < nwords; t += gridDim.x) {
        const i64 w = t * SCAN_TILE + threadIdx.x;
        i64 tot;
        block_scan(w < nwords ? (i64)__popcll(bits[w]) : 0, &tot);
        if (threadIdx.x == 0) tiles[t] = tot;
    }
}

extern "C" __global__ void scan_tile_sums(i64* __restrict__ tiles, i64 nt) {
    const i64 total = exclusive_tile_scan(tiles, nt);
    if (threadIdx.x == 0) tiles[nt] = total;
}

extern "C" __global__ void tile_bits_to_ids(const u64* __restrict__ bits, i64 nwords, const i64* __restrict__ tiles,
                                            i64* __restrict__ out) {
    for (i64 t = blockIdx.x; t * SCAN_TILE < nwords; t += gridDim.x) {
        const i64 w = t * SCAN_TILE + threadIdx.x;
        u64 x = w < nwords ? bits[w] : 0;
        const i64 c = __popcll(x);
        i64 tot;
        i64 pos = tiles[t] + block_scan(c, &tot) - c;
        while (x) {
            out[pos++] = w * 64 + (__ffsll((long long)x) - 1);
            x &= x - 1;
        }
    }
}

// Sort keys that order each row's neighbours by decreasing degree (bucketed by bit length), so that
// bottom-up meets a frontier vertex (hubs enter the frontier first) after fewer checks:
// key = row << (cbits + 6) | bucket[col] << cbits | col, where bucket[c] = 63 - bitlength(degree(c))
// (:func:`degree_buckets`, over every global id, so the order works for one rank or many).  A warp per row.
extern "C" __global__ void bu_order_keys(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                         i64 nloc, int cbits, const unsigned char* __restrict__ bucket,
                                         u64* __restrict__ keys) {
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 i = warp; i < nloc; i += nwarps) {
        const u64 hi = (u64)i << (cbits + 6);
        for (i64 k = offsets[i] + lane; k < offsets[i + 1]; k += 32) {
            const i64 c = (i64)cols[k];
            keys[k] = hi | ((u64)bucket[c] << cbits) | (u64)c;
        }
    }
}

// skip[w] bit j set when local vertex 32w+j has no row entries or is past nloc.
extern "C" __global__ void zero_degree_bits(const i64* __restrict__ offsets, i64 nloc, u32* __restrict__ skip,
                                            i64 nwords) {
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 w = warp; w < nwords; w += nwarps) {
        const i64 i = w * 32 + lane;
        const bool z = i >= nloc || offsets[i + 1] == offsets[i];
        const u32 b = __ballot_sync(FULL, z);
        if (lane == 0) skip[w] = b;
    }
}

// bits (32-bit words) |= bit of each id in ids; optional visited |= the same bits.
extern "C" __global__ void set_bits(const i64* __restrict__ ids, i64 n, u32* bits) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 u = ids[i];
        atomicOr(bits + (u >> 5), 1u << (u & 31));
    }
}

// Received (v global, p) pairs (v[i * step], p[i * step]): claim unvisited owned vertices (atomicOr on
// visited), append local ids; ctr[0] counts them, ctr[1] sums their out-degrees in ``offsets`` (the next
// top-down step's work).  claim_remote_dn reads the pair count from the device (*np: a count that arrived
// with the pairs), so the host never learns it.
__device__ __forceinline__ void claim_body(const i64* __restrict__ v, const i64* __restrict__ p, i64 step, i64 n,
                                           i64 lo, i64* __restrict__ parent, int* __restrict__ level, int depth,
                                           u32* visited, i64* __restrict__ out, i64* ctr,
                                           const i64* __restrict__ offsets, int with_deg) {
    const int lane = threadIdx.x & 31;
    const u32 lanemask_lt = (1u << lane) - 1u;
    const i64 stride = (i64)gridDim.x * blockDim.x;
    // The loop test reads the warp's first index, so every lane of a warp runs the same iterations and
    // reaches the ballot.
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i - lane < n; i += stride) {
        bool win = false;
        i64 j = 0;
        if (i < n) {
            j = v[i * step] - lo;
            const u32 bit = 1u << (j & 31);
            if (!(atomicOr(visited + (j >> 5), bit) & bit)) {
                win = true;
                parent[j] = p[i * step];
                level[j] = depth;
            }
        }
        const u32 b = __ballot_sync(FULL, win);
        if (b) {
            u64 pos = 0;
            if (lane == 0) pos = atomicAdd((u64*)&ctr[0], (u64)__popc(b));
            pos = __shfl_sync(FULL, pos, 0);
            if (win) out[pos + __popc(b & lanemask_lt)] = j;
            const i64 d = with_deg ? warp_sum(win ? offsets[j + 1] - offsets[j] : (i64)0) : 0;
            if (lane == 0 && d) atomicAdd((u64*)&ctr[1], (u64)d);
        }
    }
}

extern "C" __global__ void claim_remote(const i64* __restrict__ v, const i64* __restrict__ p, i64 step, i64 n,
                                        i64 lo, i64* __restrict__ parent, int* __restrict__ level, int depth,
                                        u32* visited, i64* __restrict__ out, i64* ctr,
                                        const i64* __restrict__ offsets, int with_deg) {
    claim_body(v, p, step, n, lo, parent, level, depth, visited, out, ctr, offsets, with_deg);
}

extern "C" __global__ void claim_remote_dn(const i64* __restrict__ v, const i64* __restrict__ p, i64 step,
                                           const i64* __restrict__ np, i64 lo, i64* __restrict__ parent,
                                           int* __restrict__ level, int depth, u32* visited, i64* __restrict__ out,
                                           i64* ctr, const i64* __restrict__ offsets, int with_deg) {
    claim_body(v, p, step, *np, lo, parent, level, depth, visited, out, ctr, offsets, with_deg);
}

// claim_remote_g: at most ``cap`` of the *np pairs (the rows that arrived; a sender's count may exceed them)
extern "C" __global__ void claim_remote_g(const i64* __restrict__ v, const i64* __restrict__ p, i64 step,
                                          const i64* __restrict__ np, i64 cap, i64 lo, i64* __restrict__ parent,
                                          int* __restrict__ level, const i64* __restrict__ prm, u32* visited,
                                          i64* __restrict__ out, i64* ctr, const i64* __restrict__ offsets,
                                          int with_deg) {
    claim_body(v, p, step, *np < cap ? *np : cap, lo, parent, level, (int)prm[0], visited, out, ctr, offsets,
               with_deg);
}

// Interleaved (v global, p) pairs to their owners v / block: owner_counts counts per owner (the pair count
// *np is read on the device, so it can follow td_expand without a synchronisation), owner_scatter writes
// each pair at its owner's next free slot (cursor starts at the owners' exclusive prefix; order within an
// owner is arbitrary).  out is (n, 2).
extern "C" __global__ void owner_counts(const i64* __restrict__ pairs, const i64* __restrict__ np, i64 block,
                                        i64* cnt) {
    const i64 n = *np;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
        atomicAdd((u64*)&cnt[pairs[2 * i] / block], 1ull);
}

// owner_regions: the first *np pairs into fixed regions of ``cap`` pairs per owner (owner r's from row
// r * cap), counting them in cnt[r]: grouping with no prefix sum, so no count has to reach the host.  An
// owner's pairs past ``cap`` are counted but not placed.
extern "C" __global__ void owner_regions(const i64* __restrict__ pairs, const i64* __restrict__ np, i64 block,
                                         i64 cap, i64* cnt, i64* __restrict__ out) {
    const i64 n = *np;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 v = pairs[2 * i];
        const i64 r = v / block;
        const i64 j = (i64)atomicAdd((u64*)&cnt[r], 1ull);
        if (j >= cap) continue;  // counted, not placed: the sender sees the overflow in its counters
        out[2 * (r * cap + j)] = v;
        out[2 * (r * cap + j) + 1] = pairs[2 * i + 1];
    }
}

extern "C" __global__ void owner_scatter(const i64* __restrict__ pairs, i64 n, i64 block, i64* cursor,
                                         i64* __restrict__ out) {
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x) {
        const i64 v = pairs[2 * i];
        const i64 k = (i64)atomicAdd((u64*)&cursor[v / block], 1ull);
        out[2 * k] = v;
        out[2 * k + 1] = pairs[2 * i + 1];
    }
}

// Graph500 rules 2-5 over this shard's rows (same counts as breadth.bfs.graph500.validate._row_rules), a warp per
// row so that hub rows are read by 32 lanes.  cnt[0..3] += rule 2, 3, 4, 5 violations.
extern "C" __global__ void row_rules(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                     const i64* __restrict__ in_offsets, const col_t* __restrict__ in_cols,
                                     i64 nloc, i64 lo, const i64* __restrict__ parent,
                                     const int* __restrict__ level_g, i64 n, i64 root, int directed, i64* cnt) {
    const int lane = threadIdx.x & 31;
    const i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    i64 r2 = 0, r3 = 0, r4 = 0, r5 = 0;
    for (i64 i = warp; i < nloc; i += nwarps) {
        const i64 v = lo + i;
        const int lv = level_g[v];
        const i64 p = parent[i];
        for (i64 k = offsets[i] + lane; k < offsets[i + 1]; k += 32) {
            const i64 u = (i64)cols[k];
            const int lu = level_g[u];
            if (directed) {
                if (lv >= 0 && lu < 0) r4++;
                else if (lv >= 0 && lu > lv + 1) r3++;
            } else if ((lv >= 0) != (lu >= 0)) {
                r4++;
            } else if (lv >= 0 && abs(lv - lu) > 1) {
                r3++;
            }
        }
        if (lane == 0) {
            if ((p >= 0) != (lv >= 0)) r4++;
            if (lv >= 0 && p >= 0) {
                if (v == root) {
                    if (p != root || lv != 0) r2++;
                } else {
                    if (p >= n || level_g[p] != lv - 1) r2++;
                    i64 a = in_offsets[i], b = in_offsets[i + 1];
                    const i64 end = b;
                    while (a < b) { const i64 m = (a + b) >> 1; if ((i64)in_cols[m] < p) a = m + 1; else b = m; }
                    if (a == end || (i64)in_cols[a] != p) r5++;
                }
            }
        }
    }
    r2 = warp_sum(r2); r3 = warp_sum(r3); r4 = warp_sum(r4); r5 = warp_sum(r5);
    if (lane == 0) {
        if (r2) atomicAdd((u64*)&cnt[0], (u64)r2);
        if (r3) atomicAdd((u64*)&cnt[1], (u64)r3);
        if (r4) atomicAdd((u64*)&cnt[2], (u64)r4);
        if (r5) atomicAdd((u64*)&cnt[3], (u64)r5);
    }
}
"""

_KERNELS = ("queue_degrees", "degree_sum", "td_expand", "bu_step", "zero_degree_bits", "set_bits",
            "claim_remote", "row_rules", "init_search", "queue_prefix_small", "bu_order_keys",
            "owner_counts", "owner_scatter", "owner_regions", "claim_remote_dn", "td_expand_g", "bu_step_g",
            "queue_prefix_small_g", "claim_remote_g", "stamp", "bu_long", "bu_long_g", "scan_tiles_g",
            "scan_tile_sums_g", "scan_add_g", "popcount_tiles", "scan_tile_sums", "tile_bits_to_ids")
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


def degree_buckets(offsets):
    """uint8 ``63 - bitlength(degree)`` per row of ``offsets`` (``(num_local,)``): the sort key that puts
    high-degree neighbours first; owners exchange theirs so every rank can order by global degree."""
    return _degree_bucket(offsets, size=int(offsets.size) - 1)


def degree_ordered_columns(offsets, cols, buckets=None):
    """``cols`` with each row's neighbours by decreasing degree bucket: bottom-up then meets a frontier
    neighbour after fewer probes (any frontier neighbour is a valid parent, so the order changes which
    one is found, never the levels).  The sorted rows stay as they are (validation binary-searches them).
    ``buckets``: :func:`degree_buckets` of every global id (uint8 ``(num_vertices,)``); ``None`` for a
    one-rank shard, whose rows are all the ids.  Returns ``None`` when ids are too wide for the packed
    sort keys or device memory is short."""
    nloc, nnz = offsets.size - 1, int(cols.size)
    if buckets is None:
        buckets = degree_buckets(offsets)
    buckets = cp.asarray(buckets, cp.uint8)
    cbits = max(1, int(buckets.size - 1).bit_length())
    rbits = max(1, int(nloc - 1).bit_length())
    if rbits + 6 + cbits > 64:
        return None
    # memory is asked for, not estimated: whichever allocator CuPy has (its own pool, or RMM's, which cuDF
    # and dask-cuda install and whose reserved bytes cudaMemGetInfo counts as used) says whether it fits
    try:
        keys = cp.empty(nnz, cp.uint64)
        _module("int64" if cols.dtype == np.int64 else "int32")["bu_order_keys"](
            _grid(nloc, _THREADS // 32), (_THREADS,), (offsets, cols, _i64(nloc), np.int32(cbits), buckets, keys))
        keys.sort()
        ordered = (keys & np.uint64((1 << cbits) - 1)).astype(cols.dtype)
    except (cp.cuda.memory.OutOfMemoryError, MemoryError):
        return None
    finally:
        keys = None
        cp.get_default_memory_pool().free_all_blocks()
    return ordered


def use_cupy_pool() -> None:
    """Make CuPy allocate from its own memory pool in this process.  Where RMM is installed, dask-cuda (and
    cuDF) route CuPy through RMM, whose default resource is a cudaMalloc/cudaFree per array and whose pool
    costs more per allocation than CuPy's: a search allocates per level, and on one H200 at scale 26 made
    91-113 GTEPS (no pool) or 181-194 (an RMM pool) against 231-256 with CuPy's pool.  cuDF keeps RMM for
    its own buffers; arrays already allocated keep their allocator."""
    cp.cuda.set_allocator(cp.get_default_memory_pool().malloc)


class GpuBackend:
    """The engine's kernel set on CuPy arrays, plus per-engine device state (visited bitmap, known counts).

    One instance serves one :class:`~breadth.bfs.engine.engine.Engine` (``get_backend("gpu")`` makes a new one
    each time).  Arrays: ``offsets`` int64 ``(num_local + 1,)``; ``cols`` int32/int64 global ids; queues
    int64 local ids; bitmaps uint64 words (viewed as uint32 words inside the kernels).
    """

    name = "gpu"
    xp = cp
    #: optional features (see :class:`~breadth.bfs.engine.backend.Backend`): all of them
    async_levels = True
    claims_count_degrees = True
    checks_on_device = True

    @staticmethod
    def parent_dtype(num_vertices: int) -> np.dtype:
        """int64 parents: the kernels write them as 64-bit words."""
        return np.dtype(np.int64)

    def __init__(self):
        use_cupy_pool()  # a search allocates per level: CuPy's pool, whatever allocator cuDF/dask-cuda set
        self._visited = None  # uint32 words over the owned vertices
        self._root_pin = None  # (pinned 16 bytes, event) through which start_root reads the root's degree
        self._skip = None  # (offsets, uint32 words of zero-degree vertices) for bottom-up
        self._bu_cols = None  # (cols, the same rows with neighbours by decreasing degree) for bottom-up
        self._first = None  # (offsets, bottom-up columns, degree << 32 | first neighbour per owned vertex)
        #: bottom-up may read each vertex's degree and first neighbour from one packed array on levels with a
        #: large frontier (see :meth:`bottom_up_async`); False: always from its row (for A/B measurements)
        self.first_neighbours = True
        self._tasks = None  # (offsets, int64 buffer of bottom-up's deferred long-row tasks)
        #: bottom-up hands rows longer than BU_LONG to bu_long, a warp per 1024 entries (False, from
        #: SearchConfig.defer_long_rows: every lane scans its own row, for A/B measurements)
        self.defer_long_rows = True
        #: bottom-up scans a copy of the rows ordered by neighbour degree (one-rank shards, when device
        #: memory allows; built once, in the first bottom-up step); False keeps the sorted rows
        self.degree_order = True
        # Counts learned at a step's one synchronisation, valid for exactly the array they describe.
        self._deg_of: tuple[Any, Any, int] | None = None  # (queue, offsets, sum of its degrees in offsets)
        self._bits_of: tuple[Any, int, int, Any] | None = None  # (bitmap, set bits, their degree sum, offsets)

    # -- state ------------------------------------------------------------------------------------
    def start_search(self, parent, level, root_local: int) -> None:
        """Engine hook at the start of a search: ``parent = level = -1`` (all bytes 0xFF: two memsets, which
        write at ~1.5x the speed of the fused kernel's 16-byte stores on an H200: 0.19 against 0.28 ms at
        2^26 vertices) and the visited bitmap cleared but for the root (``root_local`` < 0 when another
        rank owns it)."""
        self._start(parent, level, root_local, -1, None)

    def start_root(self, parent, level, offsets, root_local: int, root: int, queue) -> int:
        """:meth:`start_search` for a search from the one global id ``root`` that also seeds it on the device
        (``parent[root] = root``, ``level = 0``, ``queue[0] = root_local``; ``queue`` an int64 device array)
        and returns the root's degree in ``offsets`` (0 where another rank owns it), read from pinned
        memory as soon as its own copy lands: the resets are still running, and the first level waits for
        them on the stream, not the host."""
        deg = 0
        if root_local >= 0:
            if self._root_pin is None:
                self._root_pin = (cp.cuda.alloc_pinned_memory(16), cp.cuda.Event(block=False, disable_timing=True))
            pin, ev = self._root_pin
            st = cp.cuda.get_current_stream()
            cp.cuda.runtime.memcpyAsync(pin.ptr, offsets.data.ptr + 8 * root_local, 16,
                                        cp.cuda.runtime.memcpyDeviceToHost, st.ptr)
            ev.record(st)
        self._start(parent, level, root_local, root, queue)
        if root_local >= 0:
            ev.synchronize()
            lo_hi = np.frombuffer(pin, np.int64, 2)
            deg = int(lo_hi[1] - lo_hi[0])
        return deg

    def _start(self, parent, level, root_local: int, root: int, queue) -> None:
        nw32 = 2 * ((parent.size + 63) // 64)
        if self._visited is None or self._visited.size != nw32:
            self._visited = cp.empty(nw32, cp.uint32)
        self._deg_of = self._bits_of = None
        st = cp.cuda.get_current_stream().ptr
        for a in (parent, level):
            cp.cuda.runtime.memsetAsync(a.data.ptr, 0xFF, a.nbytes, st)
        self._kern(None)["init_search"](_grid(nw32), (_THREADS,),
                                        (parent, level, self._visited, _i64(nw32), _i64(root_local), _i64(root),
                                         queue if queue is not None else np.uint64(0)))

    def mark_visited(self, local_ids) -> None:
        """Engine hook for a search from several sources, after :meth:`start_search` (given no root) cleared
        the visited bitmap: set the bits of ``local_ids`` (distinct owned local ids, a host array)."""
        ids = np.asarray(local_ids, np.int64)
        words, inv = np.unique(ids >> 5, return_inverse=True)
        masks = np.zeros(words.size, np.uint32)
        np.bitwise_or.at(masks, inv, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
        w = cp.asarray(words)
        self._visited[w] = self._visited[w] | cp.asarray(masks)  # words are distinct: no lost update

    def _kern(self, cols) -> dict[str, Any]:
        return _module("int64" if cols is not None and cols.dtype == np.int64 else "int32")

    def _skip_bits(self, offsets):
        if self._skip is None or self._skip[0] is not offsets:
            nloc = offsets.size - 1
            nw32 = 2 * ((nloc + 63) // 64)
            skip = cp.empty(nw32, cp.uint32)
            self._kern(None)["zero_degree_bits"](_grid(nw32, _THREADS // 32), (_THREADS,),
                                                 (offsets, _i64(nloc), skip, _i64(nw32)))
            self._skip = (offsets, skip)
        return self._skip[1]

    def _first_neighbours(self, offsets, bu_cols):
        """What bottom-up reads first for each owned vertex, packed as uint64 ``degree << 32 | first
        neighbour`` in ``bu_cols`` (0 for an empty row): 8 coalesced bytes instead of the row's two offsets
        and a scattered 32-byte sector of its columns, which on the late levels (almost every vertex settled
        by its first, highest-degree neighbour) was most of the kernel's memory traffic.  Built once per
        ``(offsets, bu_cols)``; a null pointer (the rows are read directly) for 64-bit column ids."""
        if bu_cols.dtype != cp.int32 or not self.first_neighbours:
            return np.uint64(0)
        f = self._first
        if f is None or f[0] is not offsets or f[1] is not bu_cols:
            deg = cp.diff(offsets)
            first = cp.zeros(deg.size, cp.uint64)
            has = cp.flatnonzero(deg > 0)
            first[has] = bu_cols[offsets[:-1][has]].astype(cp.uint64)
            first |= deg.astype(cp.uint64) << cp.uint64(32)
            del deg, has
            self._first = f = (offsets, bu_cols, first)
        return f[2]

    def _bottom_up_columns(self, offsets, cols, one_rank: bool):
        """Bottom-up's copy of ``cols`` ordered by neighbour degree (see :func:`degree_ordered_columns`),
        normally built with the shard (:meth:`use_bottom_up_columns`); built here only for a one-rank shard
        that came without it (several ranks need the other owners' degrees, which preparation gathers).
        Falls back to ``cols`` when memory is short."""
        if self._bu_cols is not None and self._bu_cols[0] is cols:
            return self._bu_cols[1]
        if not (self.degree_order and one_rank):
            return cols
        ordered = degree_ordered_columns(offsets, cols)
        self._bu_cols = (cols, cols if ordered is None else ordered)
        return self._bu_cols[1]

    def use_bottom_up_columns(self, cols, ordered) -> None:
        """Engine hook: the shard's prebuilt degree-ordered copy of ``cols`` (built during preparation, so
        that Graph500's construction time includes it)."""
        self._bu_cols = (cols, ordered)

    def _ensure_visited(self, nloc: int) -> None:
        if self._visited is None:
            raise RuntimeError("GpuBackend.start_search was not called: the engine must call it before a search")

    # -- the engine's kernel set ------------------------------------------------------------------
    def degree_sum(self, offsets, queue) -> int:
        """Sum of the out-degrees of local ids ``queue`` (a host int)."""
        known = self._known_degree_sum(offsets, queue)
        if known is not None:
            return known
        if queue.size == 0:
            return 0
        ctr = cp.zeros(2, cp.int64)
        self._kern(None)["degree_sum"](_grid(int(queue.size)), (_THREADS,), (offsets, queue, _i64(queue.size), ctr))
        total = int(ctr[0].get())
        self._deg_of = (queue, offsets, total)
        return total

    def _known_degree_sum(self, offsets, queue) -> int | None:
        d = self._deg_of
        return d[2] if d is not None and d[0] is queue and d[1] is offsets else None

    def top_down_step(self, offsets, cols, lo: int, hi: int, queue, parent, level, depth, sent, nchunks=None):
        """One top-down level; returns ``(next_queue, remote_v, remote_parent, scanned)`` like the CPU's."""
        total = self._known_degree_sum(offsets, queue)
        if total is None:
            total = self.degree_sum(offsets, queue)
        nxt, rpairs, ctr = self.top_down_async(offsets, cols, lo, hi, queue, parent, level, depth, sent, total)
        c = ctr.get()  # the level's one synchronisation
        out = nxt[:int(c[0])]
        self._deg_of = (out, offsets, int(c[1]))
        rem = rpairs[:int(c[2])]
        return out, cp.ascontiguousarray(rem[:, 0]), cp.ascontiguousarray(rem[:, 1]), total

    def top_down_async(self, offsets, cols, lo: int, hi: int, queue, parent, level, depth, sent, total: int,
                       nparts: int = 0, block: int = 0, count_owners: bool = True):
        """Queue one top-down level on the stream, with no synchronisation.

        ``total``: the degree sum of ``queue`` (host int, known from the last counters).  Returns device
        arrays ``(next, rpairs, ctr)``: ``next`` (``num_local``,) int64 whose first ``ctr[0]`` entries are
        the claimed local ids (their degree sum in ``ctr[1]``), ``rpairs`` ``(k, 2)`` int64 whose first
        ``ctr[2]`` rows are (remote vertex, parent) pairs, and ``ctr`` int64 ``(4 + nparts,)`` whose
        ``ctr[4 + r]`` counts the pairs owned by rank ``r`` (``nparts > 0``; owner ``v // block``; left at
        zero for :meth:`pairs_to_regions` with ``count_owners=False``).
        """
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        qn = int(queue.size)
        nloc = parent.size
        has_sent = int(sent.size > 0)
        nxt = cp.empty(nloc, cp.int64)  # each owned vertex is claimed at most once per search
        nrem = sent.size * 64 - nloc if has_sent else 0  # each remote vertex goes out at most once
        rpairs = cp.empty((max(nrem, 0), 2), cp.int64)
        ctr = cp.zeros(4 + nparts, cp.int64)
        if qn and total:
            if qn <= _SMALL_QUEUE:
                pre = cp.empty(qn, cp.int64)
                k["queue_prefix_small"]((1,), (1024,), (offsets, queue, _i64(qn), pre, ctr))
            else:
                deg = cp.empty(qn, cp.int64)
                k["queue_degrees"](_grid(qn), (_THREADS,), (offsets, queue, _i64(qn), deg))
                pre = cp.cumsum(deg)
            k["td_expand"](_grid(total), (_THREADS,),
                           (offsets, cols, queue, pre, _i64(qn), _i64(lo), _i64(hi), parent, level, np.int32(depth),
                            self._visited, sent if has_sent else nxt, np.int32(has_sent), nxt, rpairs, ctr))
            if nparts and has_sent and count_owners:
                k["owner_counts"](_grid(None), (_THREADS,), (rpairs, ctr[2:3], _i64(block), ctr[4:]))
        return nxt, rpairs, ctr

    def bottom_up_step(self, offsets, cols, frontier_bits, parent, level, depth, next_bits):
        """One bottom-up level; ``next_bits`` (uint64 words over the owned vertices) is overwritten.
        Returns ``(awake, awake_edges)`` as host ints."""
        c = self.bottom_up_async(offsets, cols, frontier_bits, parent, level, depth, next_bits).get()
        awake, awake_edges = int(c[0]), int(c[1])
        self.note_bits(next_bits, awake, awake_edges, offsets)
        return awake, awake_edges

    def bottom_up_async(self, offsets, cols, frontier_bits, parent, level, depth, next_bits,
                        first_neighbours: bool = False):
        """:meth:`bottom_up_step` queued on the stream: returns the device counters ``[awake, awake_edges,
        long-row tasks]`` (int64) without a synchronisation.  ``first_neighbours``: read each vertex's
        first neighbour from the packed table (:meth:`_first_neighbours`), which pays on levels whose
        frontier is large (most vertices settle there) and costs on the others (a miss then waits for the
        table and the row in turn)."""
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        nloc = offsets.size - 1
        nw32 = 2 * next_bits.size
        ctr = cp.zeros(3, cp.int64)
        # one rank: the global frontier has as many words as the local one
        bu_cols = self._bottom_up_columns(offsets, cols, frontier_bits.size == next_bits.size)
        tasks = self._long_tasks(offsets)
        fb, nb = frontier_bits.view(cp.uint32), next_bits.view(cp.uint32)
        k["bu_step"](_grid(-(-nw32 // 4), _THREADS // 32), (_THREADS,),
                     (offsets, bu_cols, fb, self._visited, self._skip_bits(offsets), parent, level, np.int32(depth),
                      nb, _i64(nw32), _i64(nloc), ctr, tasks, np.int32(self.defer_long_rows),
                      self._first_neighbours(offsets, bu_cols) if first_neighbours else np.uint64(0)))
        if self.defer_long_rows:
            k["bu_long"](_grid(None), (_THREADS,),
                         (offsets, bu_cols, fb, self._visited, parent, level, np.int32(depth), nb, tasks, ctr))
        return ctr

    def _long_tasks(self, offsets):
        """Buffer for bottom-up's deferred long-row tasks (int64, as many as the rows longer than
        ``BU_LONG`` can make: one per ``BU_CHUNK`` entries after the first), built once per ``offsets``."""
        if self._tasks is None or self._tasks[0] is not offsets:
            deg = cp.diff(offsets)
            long_deg = deg[deg > _BU_LONG]
            bound = int(((long_deg - 1 + _BU_CHUNK - 1) // _BU_CHUNK).sum()) if long_deg.size else 0
            self._tasks = (offsets, cp.empty(max(bound, 1), cp.int64))
        return self._tasks[1]

    # -- steps of a captured level (bfs/gpu/level_graphs.py): what varies is read from the device block prm
    #    (prm[0] depth, prm[1] queue length), the grids are fixed, nothing is allocated ----------------
    def bottom_up_g(self, offsets, cols, fbits, parent, level, prm, next_bits, ctr, first_neighbours: bool = False
                    ) -> None:
        """:meth:`bottom_up_async` with the depth in ``prm[0]`` and the counters in ``ctr`` (zeroed by the
        caller); ``next_bits`` holds at least the owned vertices' words."""
        self._ensure_visited(parent.size)
        nloc = offsets.size - 1
        nw32 = 2 * ((nloc + 63) // 64)
        bu_cols = self._bottom_up_columns(offsets, cols, False)
        k = self._kern(cols)
        tasks = self._long_tasks(offsets)
        fb, nb = fbits.view(cp.uint32), next_bits.view(cp.uint32)
        k["bu_step_g"](_grid(-(-nw32 // 4), _THREADS // 32), (_THREADS,),
                       (offsets, bu_cols, fb, self._visited, self._skip_bits(offsets), parent, level, prm, nb,
                        _i64(nw32), _i64(nloc), ctr, tasks, np.int32(self.defer_long_rows),
                        self._first_neighbours(offsets, bu_cols) if first_neighbours else np.uint64(0)))
        if self.defer_long_rows:
            k["bu_long_g"](_grid(None), (_THREADS,),
                           (offsets, bu_cols, fb, self._visited, parent, level, prm, nb, tasks, ctr))

    def top_down_g(self, offsets, cols, lo: int, hi: int, queue, pre, prm, parent, level, sent, nxt, rpairs,
                   ctr, tiles=None) -> None:
        """:meth:`top_down_async` for a queue whose length is ``prm[1]``: the prefix of its degrees in one
        block (``tiles`` None: at most ``_SMALL_QUEUE`` ids, ``pre`` holds that many) or in tiles (``pre``
        holds the longest queue, ``tiles`` one entry per ``SCAN_TILE`` of it), then the expansion over the
        whole chip.  ``ctr`` zeroed by the caller; ``rpairs`` must hold every remote pair the level can make."""
        self._ensure_visited(parent.size)
        k = self._kern(cols)
        if tiles is None:
            k["queue_prefix_small_g"]((1,), (1024,), (offsets, queue, prm, pre, ctr))
        else:
            full = _grid(None)
            k["scan_tiles_g"](full, (_SCAN_TILE,), (offsets, queue, prm, pre, tiles))
            k["scan_tile_sums_g"]((1,), (_SCAN_TILE,), (prm, tiles))
            k["scan_add_g"](full, (_THREADS,), (prm, pre, tiles))
        k["td_expand_g"](_grid(None), (_THREADS,),
                         (offsets, cols, queue, pre, prm, _i64(lo), _i64(hi), parent, level, self._visited,
                          sent, np.int32(1), nxt, rpairs, ctr))

    def claim_pairs_g(self, pairs, count, lo: int, parent, level, prm, out, ctr, offsets) -> None:
        """:meth:`claim_pairs_async` with ``count`` on the device (only the ``len(pairs)`` rows that arrived
        are claimed if it is larger) and the depth in ``prm[0]``."""
        flat = pairs.reshape(-1)
        if pairs.shape[0]:
            self._kern(None)["claim_remote_g"](_grid(int(pairs.shape[0])), (_THREADS,),
                                               (flat, flat[1:], _i64(2), count, _i64(pairs.shape[0]), _i64(lo),
                                                parent, level, prm, self._visited, out, ctr, offsets, np.int32(1)))

    def stamp(self, ts, i: int) -> None:
        """``ts[i]`` = the GPU's nanosecond clock when the stream reaches this point."""
        self._kern(None)["stamp"]((1,), (32,), (ts, np.int32(i)))

    def note_bits(self, bits, count: int, degree_sum: int, offsets) -> None:
        """Record that ``bits`` has ``count`` set bits whose degrees in ``offsets`` sum to ``degree_sum``
        (learned from the counters), so :meth:`bits_to_queue` and :meth:`degree_sum` need no round trip."""
        self._bits_of = (bits, int(count), int(degree_sum), offsets)

    def queue_to_bits(self, queue, nwords: int, out=None):
        """uint64 bitmap of ``nwords`` words with the bits of local ids ``queue`` set (written into ``out``,
        a uint64 device array of ``nwords`` words, when given)."""
        if out is None:
            bits = cp.zeros(nwords, cp.uint64)
        else:
            bits = out
            cp.cuda.runtime.memsetAsync(bits.data.ptr, 0, 8 * nwords, cp.cuda.get_current_stream().ptr)
        if queue.size:
            self._kern(None)["set_bits"](_grid(int(queue.size)), (_THREADS,),
                                         (queue, _i64(queue.size), bits.view(cp.uint32)))
        return bits

    def bits_to_queue(self, bits, out=None):
        """int64 local ids of the set bits, ascending (the first entries of ``out``, an int64 device array
        long enough, when given)."""
        k = self._kern(None)
        nw = int(bits.size)
        nt = (nw + _SCAN_TILE - 1) // _SCAN_TILE
        tiles = cp.empty(nt + 1, cp.int64)  # each tile's first position, then the total
        grid = (max(1, min(nt, _num_sms() * _FULL_GRID_PER_SM // 4)),)
        k["popcount_tiles"](grid, (_SCAN_TILE,), (bits, _i64(nw), tiles))
        k["scan_tile_sums"]((1,), (_SCAN_TILE,), (tiles, _i64(nt)))
        known = self._bits_of is not None and self._bits_of[0] is bits
        n = self._bits_of[1] if known else int(tiles[nt].get())
        out = cp.empty(n, cp.int64) if out is None else out[:n]
        if n:
            k["tile_bits_to_ids"](grid, (_SCAN_TILE,), (bits, _i64(nw), tiles, out))
        if known:
            self._deg_of = (out, self._bits_of[3], self._bits_of[2])
        return out

    def claim_remote(self, v, p, lo: int, parent, level, depth, offsets=None):
        """Apply received (vertex, parent) pairs; return the newly claimed local ids.  With ``offsets`` the
        same synchronisation also learns their degree sum (``degree_sum`` of the result is then free)."""
        n = int(v.size)
        out = cp.empty(n, cp.int64)
        ctr = cp.zeros(2, cp.int64)
        self._claim(v, p, 1, n, lo, parent, level, depth, out, ctr, offsets)
        c = ctr.get()
        out = out[:int(c[0])]
        if offsets is not None:
            self._deg_of = (out, offsets, int(c[1]))
        return out

    def claim_pairs_async(self, pairs, lo: int, parent, level, depth, out, ctr, offsets, count=None) -> None:
        """Claim received ``(k, 2)`` (vertex, parent) pairs on the stream, appending the winners to ``out``
        and counting them (and their degree sum) in ``ctr[0..1]``: the layout of :meth:`top_down_async`'s
        outputs, so remote claims join the level's own queue with no synchronisation.  ``count``: a
        one-element int64 device array holding how many of the ``k`` rows are pairs (it arrived with them;
        ``k`` is then only a bound), else all ``k`` are."""
        flat = pairs.reshape(-1)
        if count is None:
            self._claim(flat, flat[1:], 2, int(pairs.shape[0]), lo, parent, level, depth, out, ctr, offsets)
        elif pairs.shape[0]:
            self._ensure_visited(parent.size)
            self._kern(None)["claim_remote_dn"](_grid(int(pairs.shape[0])), (_THREADS,),
                                                (flat, flat[1:], _i64(2), count, _i64(lo), parent, level,
                                                 np.int32(depth), self._visited, out, ctr, offsets, np.int32(1)))

    @staticmethod
    def pairs_to_regions(rpairs, ctr, block: int, nparts: int, cap: int, out=None):
        """The first ``ctr[2]`` rows of ``rpairs`` into ``(nparts * cap, 2)`` regions (``out`` if given),
        owner ``r``'s from row ``r * cap``, counted in ``ctr[4 + r]`` (zero before): :meth:`top_down_async`'s
        pairs grouped with no synchronisation, when ``cap`` bounds every owner's count (the frontier's
        degree sum does)."""
        if out is None:
            out = cp.empty((nparts * cap, 2), cp.int64)
        if cap:
            _module("int32")["owner_regions"](_grid(int(rpairs.shape[0])), (_THREADS,),
                                              (rpairs, ctr[2:3], _i64(block), _i64(cap), ctr[4:], out))
        return out

    def _claim(self, v, p, stride: int, n: int, lo, parent, level, depth, out, ctr, offsets) -> None:
        self._ensure_visited(parent.size)
        if n:
            self._kern(None)["claim_remote"](_grid(n), (_THREADS,),
                                             (v, p, _i64(stride), _i64(n), _i64(lo), parent, level, np.int32(depth),
                                              self._visited, out, ctr, offsets if offsets is not None else ctr,
                                              np.int32(offsets is not None)))

    def note_degree_sum(self, queue, offsets, total: int) -> None:
        """Record ``total`` as the degree sum of ``queue`` (the engine knows it for a concatenation)."""
        self._deg_of = (queue, offsets, int(total))

    @staticmethod
    def pairs_by_owner(v, p, block: int, nparts: int):
        """(vertex, parent) pairs grouped by owner ``v // block``: ``(k, 2)`` int64 and ``nparts + 1``
        offsets (device), by an atomic counting scatter: no sort and no synchronisation."""
        pairs = cp.stack([v, p], axis=1)
        offs = cp.zeros(nparts + 1, cp.int64)
        if pairs.shape[0]:
            _module("int32")["owner_counts"](_grid(int(pairs.shape[0])), (_THREADS,),
                                             (pairs, cp.array([pairs.shape[0]], cp.int64), _i64(block), offs[1:]))
            offs = cp.cumsum(offs)
        return GpuBackend.group_pairs(pairs, int(pairs.shape[0]), offs[:-1], block), offs

    @staticmethod
    def group_pairs(pairs, n: int, starts, block: int):
        """The first ``n`` rows of ``pairs`` grouped by owner, owner ``r``'s from ``starts[r]`` on (device
        or host exclusive prefix of the owners' counts)."""
        out = cp.empty((n, 2), cp.int64)
        if n:
            cursor = cp.array(starts, cp.int64)  # a copy: the scatter advances it
            _module("int32")["owner_scatter"](_grid(n), (_THREADS,), (pairs, _i64(n), _i64(block), cursor, out))
        return out

    @staticmethod
    def to_host(a):
        return cp.asnumpy(a)

    # -- validation on the device (breadth.bfs.validate uses these when present) ------------------
    def row_violations(self, shard, parent_local, level_g, root: int) -> tuple[int, int, int, int]:
        """Rules 2-5 over ``shard``'s rows, as :func:`breadth.bfs.graph500.validate.row_violations` counts
        them."""
        in_off = shard.in_offsets if shard.directed else shard.offsets
        in_col = shard.in_columns if shard.directed else shard.columns
        if in_col.dtype != shard.columns.dtype:
            in_col = in_col.astype(shard.columns.dtype)
        cnt = cp.zeros(4, cp.int64)
        nloc = shard.num_local
        self._kern(shard.columns)["row_rules"](
            _grid(nloc, _THREADS // 32), (_THREADS,),
            (shard.offsets, shard.columns, in_off, in_col, _i64(nloc), _i64(shard.lo),
             cp.ascontiguousarray(parent_local, cp.int64), cp.ascontiguousarray(level_g, cp.int32),
             _i64(level_g.size), _i64(root), np.int32(shard.directed), cnt))
        return tuple(int(x) for x in cnt.get())

    @staticmethod
    def tree_violations(parent_g, root: int) -> int:
        """Rule 1 on the device: :func:`breadth.bfs.graph500.validate.tree_violations` with CuPy arrays."""
        parent_g = cp.asarray(parent_g, cp.int64)
        n = parent_g.size
        reached = parent_g >= 0
        bad = int(((parent_g >= n) & reached).sum()) + int(parent_g[root].get() != root)
        anc = cp.where(reached & (parent_g < n), parent_g, -1)
        anc[root] = root
        for _ in range(max(1, int(np.ceil(np.log2(max(n, 2))))) + 1):
            nxt = cp.where(anc >= 0, anc[cp.maximum(anc, 0)], -1)
            if bool(cp.array_equal(nxt, anc)):
                break
            anc = nxt
        return bad + int((reached & (anc != root)).sum())


def gpu_backend(config: SearchConfig | None = None) -> GpuBackend:
    """A fresh GPU backend (one per engine: it holds the engine's visited bitmap), its switches from
    ``config``."""
    b = GpuBackend()
    b.defer_long_rows = (config or SearchConfig()).defer_long_rows
    return b
