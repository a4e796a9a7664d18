// The batched (MS-BFS) kernels of bfs/gpu/batch_kernels.py, which compiles them through cupy.RawModule
// (NVRTC; for int32 or int64 column ids, -DCOL64, and int32 or int64 recorded parents, -DREC64) and launches
// them.

typedef long long i64;
typedef unsigned long long u64;
#ifdef COL64
typedef long long col_t;
#else
typedef int col_t;
#endif
#ifdef REC64
typedef long long rec_t;
#else
typedef int rec_t;
#endif

#define FULL 0xffffffffu
#define BU_CHUNK 1024  // entries of a long row's task (a warp's, 32 a step); _BU_CHUNK in batch_kernels.py

// Parent u for every search of `bits` at local vertex j: rec is (searches, nloc), search-major, so a warp's
// consecutive vertices write consecutive entries of a search's row.  rec null: parents are derived later.
__device__ __forceinline__ void record(rec_t* rec, i64 nloc, i64 j, u64 bits, i64 u) {
    if (!rec) return;
    while (bits) {
        rec[(i64)(__ffsll((long long)bits) - 1) * nloc + j] = (rec_t)u;
        bits &= bits - 1;
    }
}

// Top-down over the frontier's edges, one thread an edge (grid-stride): a hub's row is spread over many
// threads instead of walked by one (at scale 26, 64 roots' second level of 2,086 frontier vertices takes
// 0.64 s with a thread per frontier vertex).  qstart: (qn + 1) prefix sums of the queue's degrees; a thread
// finds its queue entry by binary search.  An owned neighbour gets the bits of the frontier word its
// next word lacks (atomicOr: each bit set once, so its parent recorded once); a remote one becomes a
// (v, bits[, parent]) row of `pairs` (pwidth 3 when recording), bits filtered by atomicOr on sent[v].
extern "C" __global__ void batch_td(const i64* __restrict__ offsets, const col_t* __restrict__ cols, i64 lo,
                                    i64 nloc, const i64* __restrict__ queue, const i64* __restrict__ qstart,
                                    i64 qn, i64 total, const u64* __restrict__ frontier,
                                    const u64* __restrict__ seen, u64* nxt, u64* sent, int has_sent, i64* pairs,
                                    int pwidth, u64* pcount, i64* touched, u64* tcount, rec_t* rec) {
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < total; e += stride) {
        i64 a = 0, b = qn;  // qstart[a] <= e < qstart[b]
        while (b - a > 1) {
            const i64 m = (a + b) >> 1;
            if (__ldg(qstart + m) <= e) a = m; else b = m;
        }
        const i64 u = queue[a];
        const u64 f = frontier[u];
        const i64 v = (i64)cols[offsets[u] + (e - qstart[a])];
        const i64 j = v - lo;
        if (j >= 0 && j < nloc) {
            const u64 cand = f & ~(seen[j] | nxt[j]);
            if (!cand) continue;
            const u64 old = atomicOr(&nxt[j], cand);
            // the one OR that finds the word empty lists the vertex: each touched vertex once
            if (old == 0ULL) touched[atomicAdd(tcount, 1ULL)] = j;
            record(rec, nloc, j, cand & ~old, lo + u);
        } else if (has_sent) {
            const u64 cand = f & ~sent[v];
            if (!cand) continue;
            const u64 fresh = cand & ~atomicOr(&sent[v], cand);
            if (!fresh) continue;
            const u64 at = atomicAdd(pcount, 1ULL);
            pairs[pwidth * at] = v;
            pairs[pwidth * at + 1] = (i64)fresh;
            if (pwidth == 3) pairs[pwidth * at + 2] = lo + u;
        }
    }
}

extern "C" __global__ void batch_claim(const i64* __restrict__ pairs, int pwidth, i64 np, i64 lo, i64 nloc,
                                       const u64* __restrict__ seen, u64* nxt, i64* touched, u64* tcount,
                                       rec_t* rec) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= np) return;
    const i64 j = pairs[pwidth * t] - lo;
    const u64 bits = (u64)pairs[pwidth * t + 1] & ~seen[j];
    if (!bits) return;
    const u64 old = atomicOr(&nxt[j], bits);
    if (old == 0ULL) touched[atomicAdd(tcount, 1ULL)] = j;
    if (pwidth == 3) record(rec, nloc, j, bits & ~old, pairs[pwidth * t + 2]);
}

// A level's counters (vertices found, set bits, their out-degree sum, the unfinished in-degree sum, OR of the
// found words), summed in a thread and then over its warp (flush): one atomic per warp and counter, where one
// per vertex on the same five words would serialise the level (tens of millions of vertices end a level).
struct Counters {
    u64 found, bits, out_deg, unfinished, orw;
};

// The end of a level at vertex v: seen, planes (bit b of depth -> plane b), and the counters in c.
__device__ void end_level(i64 v, u64 w, u64 s, u64* seen, u64* planes, int nplanes, int depth, u64 active,
                          const i64* __restrict__ out_off, const i64* __restrict__ in_off, Counters& c) {
    if (w) {
        s |= w;
        seen[v] = s;
        for (int b = 0; b < nplanes; ++b)
            if ((depth >> b) & 1) planes[v * nplanes + b] |= w;
        c.found += 1;
        c.bits += (u64)__popcll(w);
        c.out_deg += (u64)(out_off[v + 1] - out_off[v]);
        c.orw |= w;
    }
    if (active & ~s) c.unfinished += (u64)(in_off[v + 1] - in_off[v]);
}

// The warp's counters into ctr; every lane of the warp calls it.
__device__ void flush(Counters c, u64* ctr) {
    for (int d = 16; d; d >>= 1) {
        c.found += __shfl_xor_sync(FULL, c.found, d);
        c.bits += __shfl_xor_sync(FULL, c.bits, d);
        c.out_deg += __shfl_xor_sync(FULL, c.out_deg, d);
        c.unfinished += __shfl_xor_sync(FULL, c.unfinished, d);
        c.orw |= __shfl_xor_sync(FULL, c.orw, d);
    }
    if ((threadIdx.x & 31) == 0) {
        if (c.found) {
            atomicAdd(&ctr[0], c.found);
            atomicAdd(&ctr[1], c.bits);
            atomicAdd(&ctr[2], c.out_deg);
            atomicOr(&ctr[4], c.orw);
        }
        if (c.unfinished) atomicAdd(&ctr[3], c.unfinished);
    }
}

extern "C" __global__ void batch_clear(const i64* __restrict__ queue, i64 qn, u64* frontier) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t < qn) frontier[queue[t]] = 0;
}

extern "C" __global__ void batch_finish(const i64* __restrict__ touched, i64 tn, u64* nxt, u64* frontier, u64* seen,
                                        u64* planes, int nplanes, int depth, const i64* __restrict__ out_off,
                                        u64* ctr) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    Counters c = {0, 0, 0, 0, 0};
    if (t < tn) {
        const i64 v = touched[t];
        const u64 s = seen[v];
        const u64 w = nxt[v] & ~s;
        frontier[v] = w;
        nxt[v] = 0;
        // active = 0: the unfinished in-degree sum is not counted here (see batch_frontier.finish_touched)
        end_level(v, w, s, seen, planes, nplanes, depth, 0ULL, out_off, out_off, c);
    }
    flush(c, ctr);
}

// Bottom-up, short rows: a thread per owned vertex ORs its in-neighbours' frontier words until it has every
// missing running search, recording each search's parent as the first neighbour that brings it.  Rows of
// `long_rows` (longer than _BU_LONG of batch_kernels.py) are left to batch_bu_long: their next word is cleared
// here, for the long rows' warps to OR into.
extern "C" __global__ void batch_bu(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                    const u64* __restrict__ frontier, const u64* __restrict__ nonzero, int sparse,
                                    u64 active, u64* seen, u64* nxt, u64* planes, int nplanes, int depth,
                                    const i64* __restrict__ out_off, i64 nloc, i64 long_rows, u64* ctr,
                                    rec_t* rec) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    Counters c = {0, 0, 0, 0, 0};
    if (v < nloc && offsets[v + 1] - offsets[v] > long_rows) {
        nxt[v] = 0;
    } else if (v < nloc) {
        const u64 s = seen[v];
        const u64 missing = active & ~s;
        u64 got = 0;
        if (missing) {
            for (i64 k = offsets[v]; k < offsets[v + 1]; ++k) {
                const i64 u = (i64)cols[k];
                if (sparse && !((nonzero[u >> 6] >> (u & 63)) & 1ULL)) continue;
                const u64 x = frontier[u] & missing & ~got;
                if (!x) continue;
                got |= x;
                record(rec, nloc, v, x, u);
                if (got == missing) break;
            }
        }
        nxt[v] = got;
        if (missing) end_level(v, got, s, seen, planes, nplanes, depth, active, out_off, offsets, c);
    }
    flush(c, ctr);
}

// Bottom-up, long rows: a warp per task (tasks[q] = row << 24 | chunk: BU_CHUNK entries of the row), 32
// neighbours a step.  A step's words are OR-scanned across the lanes, its bits OR-ed into the row's next word
// once (lane 31), and each lane records the searches its neighbour is the first to bring that the OR found
// new: a search's bit is set, and its parent written, once whatever the number of warps on the row.  A task
// stops once the row has every missing search.
extern "C" __global__ void batch_bu_long(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                         const u64* __restrict__ frontier, const u64* __restrict__ nonzero,
                                         int sparse, u64 active, const u64* __restrict__ seen, u64* nxt,
                                         const i64* __restrict__ tasks, i64 ntasks, i64 nloc, rec_t* rec) {
    const int lane = threadIdx.x & 31;
    const i64 nwarps = ((i64)gridDim.x * blockDim.x) >> 5;
    for (i64 q = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5; q < ntasks; q += nwarps) {
        const i64 v = tasks[q] >> 24;
        const u64 missing = active & ~seen[v];
        if (!missing) continue;
        const i64 t = offsets[v + 1];
        i64 a = offsets[v] + (tasks[q] & 0xffffff) * BU_CHUNK;
        const i64 b = a + BU_CHUNK < t ? a + BU_CHUNK : t;
        u64 have = __shfl_sync(FULL, *(volatile u64*)(nxt + v), 0);
        for (; a < b && (have & missing) != missing; a += 32) {
            const i64 k = a + lane;
            i64 u = -1;
            u64 x = 0;
            if (k < b) {
                u = (i64)__ldg(cols + k);
                if (!sparse || ((__ldg(nonzero + (u >> 6)) >> (u & 63)) & 1ULL))
                    x = __ldg(frontier + u) & missing & ~have;
            }
            u64 incl = x;  // OR of lanes 0..lane
            for (int d = 1; d < 32; d <<= 1) {
                const u64 y = __shfl_up_sync(FULL, incl, d);
                if (lane >= d) incl |= y;
            }
            const u64 all = __shfl_sync(FULL, incl, 31);
            if (!all) continue;
            u64 old = 0;
            if (lane == 31) old = atomicOr(nxt + v, all);
            old = __shfl_sync(FULL, old, 31);
            const u64 before = __shfl_up_sync(FULL, incl, 1);
            record(rec, nloc, v, x & ~(lane ? before : 0ULL) & ~old, u);
            have |= old | all;
        }
    }
}

// The end of the level for the long rows (after batch_bu_long): a thread per long row.
extern "C" __global__ void batch_bu_long_end(const i64* __restrict__ rows, i64 nrows, const i64* __restrict__ offsets,
                                             u64 active, u64* seen, const u64* __restrict__ nxt, u64* planes,
                                             int nplanes, int depth, const i64* __restrict__ out_off, u64* ctr) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    Counters c = {0, 0, 0, 0, 0};
    if (t < nrows) {
        const i64 v = rows[t];
        const u64 s = seen[v];
        const u64 missing = active & ~s;
        if (missing) end_level(v, nxt[v] & missing, s, seen, planes, nplanes, depth, active, out_off, offsets, c);
    }
    flush(c, ctr);
}

// table: (n, width) words, seen in column 0 and the nplanes planes in columns 1..nplanes (word_table)
extern "C" __global__ void batch_derive(const i64* __restrict__ in_off, const col_t* __restrict__ in_cols, i64 lo,
                                        i64 nloc, const u64* __restrict__ table, int width, int nplanes,
                                        const i64* __restrict__ roots, int first, int count, i64* parent,
                                        int* level) {
    const i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (j >= nloc) return;
    const i64 v = lo + j;
    const u64* row = table + v * width;
    const u64 group = count == 64 ? ~0ULL : ((1ULL << count) - 1) << first;
    const u64 s = row[0] & group;
    u64 deeper = 0;
    u64 target[64];
    for (int b = 0; b < nplanes; ++b) deeper |= row[1 + b] & s;
    u64 borrow = deeper;
    for (int b = 0; b < nplanes; ++b) {
        const u64 p = row[1 + b];
        target[b] = p ^ borrow;
        borrow &= ~p;
    }
    for (int i = 0; i < count; ++i) {
        const int bit = first + i;
        int lv = -1;
        i64 par = -1;
        if ((s >> bit) & 1ULL) {
            lv = 0;
            for (int b = 0; b < nplanes; ++b) lv |= (int)((row[1 + b] >> bit) & 1ULL) << b;
            if (lv == 0) par = v;
            if (lv == 1) par = roots[bit];  // level 1: the root is the parent, found without a scan
        }
        level[(i64)i * nloc + j] = lv;
        parent[(i64)i * nloc + j] = par;
    }
    u64 first_level = nplanes ? deeper & row[1] : 0;
    for (int b = 1; b < nplanes; ++b) first_level &= ~row[1 + b];
    u64 missing = deeper & ~first_level;
    for (i64 k = in_off[j]; missing && k < in_off[j + 1]; ++k) {
        const i64 u = (i64)in_cols[k];
        const u64* urow = table + u * width;
        u64 differ = 0;
        for (int b = 0; b < nplanes; ++b) differ |= urow[1 + b] ^ target[b];
        u64 eq = urow[0] & missing & ~differ;
        if (!eq) continue;
        missing &= ~eq;
        while (eq) {
            const int i = __ffsll((long long)eq) - 1;
            parent[(i64)(i - first) * nloc + j] = u;
            eq &= eq - 1;
        }
    }
}

extern "C" __global__ void batch_nonzero(const u64* __restrict__ words, i64 n, u64* out, i64 nw) {
    const i64 w = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (w >= nw) return;
    u64 x = 0;
    for (int b = 0; b < 64 && 64 * w + b < n; ++b)
        if (words[64 * w + b]) x |= 1ULL << b;
    out[w] = x;
}

// Levels of searches first .. first+count-1 from the planes, (count, nloc) int32, -1 where not reached: the
// results of a pass that recorded its parents.
extern "C" __global__ void batch_levels(const u64* __restrict__ seen, const u64* __restrict__ planes, int nplanes,
                                        i64 nloc, int first, int count, int* level) {
    const i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (j >= nloc) return;
    const u64 s = seen[j];
    const u64* p = planes + j * nplanes;
    for (int i = 0; i < count; ++i) {
        const int bit = first + i;
        int lv = -1;
        if ((s >> bit) & 1ULL) {
            lv = 0;
            for (int b = 0; b < nplanes; ++b) lv |= (int)((p[b] >> bit) & 1ULL) << b;
        }
        level[(i64)i * nloc + j] = lv;
    }
}
