// The CUDA C++ kernels of one breadth-first search on a GPU.  NVRTC compiles them through cupy.RawModule
// (bfs/gpu/kernels.py: once for int32 and once for int64 column ids, -DCOL64); the engine's GPU backend
// (bfs/gpu/backend.py, whose docstring gives the design) launches them.

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
//   them; with skip_parent not the frontier vertex's own parent, visited by definition (a search's last
//   frontier then mostly sends nothing, which lets one-round levels end it without another round).
//   ctr[0..1] have the layout claim_remote appends to, so claimed vertices join the same queue.
__device__ __forceinline__ void td_body(const i64* __restrict__ offsets, const i64* __restrict__ claim_offsets,
                                        const col_t* __restrict__ cols,
                                        const i64* __restrict__ queue, const i64* __restrict__ pre, i64 qn,
                                        i64 lo, i64 hi, i64* __restrict__ parent, int* __restrict__ level,
                                        int depth, u32* visited, u64* sent, int has_sent, int skip_parent,
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
                    scout += claim_offsets[lv + 1] - claim_offsets[lv];
                }
            } else if (has_sent && !(skip_parent && v == parent[u])) {
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

// claim_offsets: the rows whose degrees the claimed (owned) vertices add to ctr[1] -- ``offsets`` itself,
// unless the queue indexes other rows than the owned vertices' (the delegates' entries).
extern "C" __global__ void td_expand(const i64* __restrict__ offsets, const i64* __restrict__ claim_offsets,
                                     const col_t* __restrict__ cols,
                                     const i64* __restrict__ queue, const i64* __restrict__ pre, i64 qn,
                                     i64 lo, i64 hi, i64* __restrict__ parent, int* __restrict__ level, int depth,
                                     u32* visited, u64* sent, int has_sent,
                                     i64* __restrict__ nxt, i64* __restrict__ rpairs, i64* ctr) {
    td_body(offsets, claim_offsets, cols, queue, pre, qn, lo, hi, parent, level, depth, visited, sent, has_sent, 0,
            nxt, rpairs, ctr);
}

// The *_g kernels are the same steps for a CUDA graph (bfs/gpu/level_graphs.py): what changes from one level
// to the next is read from the device parameter block prm (prm[0] the depth, prm[1] the queue length),
// which the graph's first node copies from pinned host memory, so a captured level replays unchanged.
extern "C" __global__ void td_expand_g(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                       const i64* __restrict__ queue, const i64* __restrict__ pre,
                                       const i64* __restrict__ prm, i64 lo, i64 hi, i64* __restrict__ parent,
                                       int* __restrict__ level, u32* visited, u64* sent, int has_sent,
                                       int skip_parent, i64* __restrict__ nxt, i64* __restrict__ rpairs, i64* ctr) {
    td_body(offsets, offsets, cols, queue, pre, prm[1], lo, hi, parent, level, (int)prm[0], visited, sent, has_sent,
            skip_parent, nxt, rpairs, ctr);
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
// is most of the level.  They become tasks of BU_CHUNK entries (tasks[], counted in ctr[2]) that bu_long
// scans a warp per task, 32 entries per step.
// A long row is first scanned inline up to BU_INLINE entries (its lane's work stays bounded): rows are
// ordered by decreasing neighbour degree, so most vertices that miss on their first neighbour (a hub found
// one level earlier, settled but no longer in the frontier) hit on one of the next few, and a task per
// such row costs more than those checks (at scale 26, deferring after one entry makes bu_long most of the
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

// One-round top-down levels (bfs/engine/one_round_levels.py).  claim_split_g: one peer's pairs, the first
// min(*nh, hcap) rows of hv (its capped message, page-locked host memory read in place), then the first
// min(*nd, dcap) of dv (the rows past them, a sized round's, on the device): one node, not two.  td_gate:
// the queue length the next expansion reads (prm[1]), the frontier's (fctr[0], counted by the claims that
// appended to it) when its degree sum fctr[1] is at most the limit prm[2], else none; and the expansion's
// kc counters zeroed (a node less than a memset).  A run's first level has no claims: first = [1, length,
// degree sum] sets the frontier's counters (a host copy less), [0, ...] leaves them.  td_undo: an expansion
// taken back -- its claimed local ids (nxt) unvisited again (parent and level -1), its pairs' remote vertices
// unmarked in `sent`.
extern "C" __global__ void claim_split_g(const i64* __restrict__ hv, const i64* __restrict__ nh, i64 hcap,
                                         const i64* __restrict__ dv, const i64* __restrict__ nd, i64 dcap, i64 lo,
                                         i64* __restrict__ parent, int* __restrict__ level,
                                         const i64* __restrict__ prm, u32* visited, i64* __restrict__ out, i64* ctr,
                                         const i64* __restrict__ offsets) {
    const int depth = (int)prm[0];
    claim_body(hv, hv + 1, 2, *nh < hcap ? *nh : hcap, lo, parent, level, depth, visited, out, ctr, offsets, 1);
    claim_body(dv, dv + 1, 2, *nd < dcap ? *nd : dcap, lo, parent, level, depth, visited, out, ctr, offsets, 1);
}

extern "C" __global__ void td_gate(i64* __restrict__ fctr, i64* __restrict__ prm, i64* __restrict__ ctr, i64 kc,
                                   const i64* __restrict__ first) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (first[0]) {
            fctr[0] = first[1];
            fctr[1] = first[2];
        }
        prm[1] = fctr[1] <= prm[2] ? fctr[0] : 0;
    }
    if (blockIdx.x == 0)
        for (i64 k = threadIdx.x; k < kc; k += blockDim.x) ctr[k] = 0;
}

// td_publish: what a one-round top-down level tells its host, written by the GPU straight into page-locked host
// memory (one node instead of a copy per buffer, and only the pair rows filled): stat (unless null) = [fctr[0],
// fctr[1], ctr[0..kc), ts[0], now (the GPU's clock, ending the level's kernels)], and the first
// min(ctr[at], cap) (vertex, parent) rows of `rows` into out.
extern "C" __global__ void td_publish(const i64* __restrict__ fctr, const i64* __restrict__ ctr, i64 kc,
                                      const i64* __restrict__ ts, i64* __restrict__ stat,
                                      const i64* __restrict__ rows, i64 at, i64 cap, i64* __restrict__ out) {
    const i64 tid = blockIdx.x * (i64)blockDim.x + threadIdx.x, stride = (i64)gridDim.x * blockDim.x;
    if (stat != nullptr && tid == 0) {
        stat[0] = fctr[0];
        stat[1] = fctr[1];
        for (i64 k = 0; k < kc; k++) stat[2 + k] = ctr[k];
        stat[2 + kc] = ts[0];
        stat[3 + kc] = global_ns();
    }
    const i64 n = 2 * (ctr[at] < cap ? ctr[at] : cap);
    for (i64 i = tid; i < n; i += stride) out[i] = rows[i];
}

// bu_publish: what a one-round bottom-up level tells its host, written by the GPU straight into page-locked host
// memory: stat = [ctr[0], ctr[1], ctr[2], ts[0], ts[1]] and, where the level found at most `cap` vertices
// (ctr[0]), their local ids (in no particular order) into out, appended at ctr[3] (zero before the level): a
// short list travels in the host words of the level's round in place of its bitmap.
extern "C" __global__ void bu_publish(i64* __restrict__ ctr, const i64* __restrict__ ts, i64* __restrict__ stat,
                                      const u32* __restrict__ next, i64 nwords, i64 cap, i64* __restrict__ out) {
    const i64 tid = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (tid == 0) {
        stat[0] = ctr[0];
        stat[1] = ctr[1];
        stat[2] = ctr[2];
        stat[3] = ts[0];
        stat[4] = ts[1];
    }
    if (ctr[0] > cap) return;
    for (i64 w = tid; w < nwords; w += (i64)gridDim.x * blockDim.x) {
        u32 b = next[w];
        if (!b) continue;
        i64 at = (i64)atomicAdd((u64*)&ctr[3], (u64)__popc(b));
        for (; b; b &= b - 1) out[at++] = w * 32 + __ffs(b) - 1;
    }
}

extern "C" __global__ void td_undo(const i64* __restrict__ nxt, i64 nl, const i64* __restrict__ rpairs, i64 np,
                                   i64* __restrict__ parent, int* __restrict__ level, u32* visited, u64* sent) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < nl; i += stride) {
        const i64 j = nxt[i];
        parent[j] = -1;
        level[j] = -1;
        atomicAnd(visited + (j >> 5), ~(1u << (j & 31)));
    }
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < np; i += stride) {
        const i64 v = rpairs[2 * i];
        atomicAnd(sent + (v >> 6), ~(1ull << (v & 63)));
    }
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
