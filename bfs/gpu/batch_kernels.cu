// The batched (MS-BFS) kernels of bfs/gpu/batch_kernels.py, which compiles them through cupy.RawModule
// (NVRTC; once for int32 and once for int64 column ids, -DCOL64) and launches them.

typedef long long i64;
typedef unsigned long long u64;
#ifdef COL64
typedef long long col_t;
#else
typedef int col_t;
#endif

extern "C" __global__ void batch_td(const i64* __restrict__ offsets, const col_t* __restrict__ cols, i64 lo,
                                    i64 nloc, const i64* __restrict__ queue, i64 qn,
                                    const u64* __restrict__ frontier, const u64* __restrict__ seen, u64* nxt,
                                    u64* sent, int has_sent, i64* pairs, u64* pcount, i64* touched, u64* tcount) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= qn) return;
    const i64 u = queue[t];
    const u64 f = frontier[u];
    for (i64 k = offsets[u]; k < offsets[u + 1]; ++k) {
        const i64 v = (i64)cols[k];
        const i64 j = v - lo;
        if (j >= 0 && j < nloc) {
            const u64 cand = f & ~(seen[j] | nxt[j]);
            // the one OR that finds the word empty lists the vertex: each touched vertex once
            if (cand && atomicOr(&nxt[j], cand) == 0ULL) touched[atomicAdd(tcount, 1ULL)] = j;
        } else if (has_sent) {
            const u64 cand = f & ~sent[v];
            if (!cand) continue;
            const u64 fresh = cand & ~atomicOr(&sent[v], cand);
            if (!fresh) continue;
            const u64 at = atomicAdd(pcount, 1ULL);
            pairs[2 * at] = v;
            pairs[2 * at + 1] = (i64)fresh;
        }
    }
}

extern "C" __global__ void batch_claim(const i64* __restrict__ pairs, i64 np, i64 lo, const u64* __restrict__ seen,
                                       u64* nxt, i64* touched, u64* tcount) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= np) return;
    const i64 j = pairs[2 * t] - lo;
    const u64 bits = (u64)pairs[2 * t + 1] & ~seen[j];
    if (bits && atomicOr(&nxt[j], bits) == 0ULL) touched[atomicAdd(tcount, 1ULL)] = j;
}

// The end of a level at vertex v: seen, planes (bit b of depth -> plane b) and the five counters.
__device__ void end_level(i64 v, u64 w, u64 s, u64* seen, u64* planes, int nplanes, int depth, u64 active,
                          const i64* __restrict__ out_off, const i64* __restrict__ in_off, u64* ctr) {
    if (w) {
        s |= w;
        seen[v] = s;
        for (int b = 0; b < nplanes; ++b)
            if ((depth >> b) & 1) planes[v * nplanes + b] |= w;
        atomicAdd(&ctr[0], 1ULL);
        atomicAdd(&ctr[1], (u64)__popcll(w));
        atomicAdd(&ctr[2], (u64)(out_off[v + 1] - out_off[v]));
        atomicOr(&ctr[4], w);
    }
    if (active & ~s) {
        const i64 d = in_off[v + 1] - in_off[v];
        if (d) atomicAdd(&ctr[3], (u64)d);
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
    if (t >= tn) return;
    const i64 v = touched[t];
    const u64 s = seen[v];
    const u64 w = nxt[v] & ~s;
    frontier[v] = w;
    nxt[v] = 0;
    // active = 0: the unfinished in-degree sum is not counted here (see batch_frontier.finish_touched)
    end_level(v, w, s, seen, planes, nplanes, depth, 0ULL, out_off, out_off, ctr);
}

extern "C" __global__ void batch_bu(const i64* __restrict__ offsets, const col_t* __restrict__ cols,
                                    const u64* __restrict__ frontier, const u64* __restrict__ nonzero, int sparse,
                                    u64 active, u64* seen, u64* nxt, u64* planes, int nplanes, int depth,
                                    const i64* __restrict__ out_off, i64 nloc, u64* ctr) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (v >= nloc) return;
    const u64 s = seen[v];
    const u64 missing = active & ~s;
    u64 got = 0;
    if (missing) {
        for (i64 k = offsets[v]; k < offsets[v + 1]; ++k) {
            const i64 u = (i64)cols[k];
            if (sparse && !((nonzero[u >> 6] >> (u & 63)) & 1ULL)) continue;
            got |= frontier[u];
            if ((got & missing) == missing) break;
        }
        got &= missing;
    }
    nxt[v] = got;
    if (missing) end_level(v, got, s, seen, planes, nplanes, depth, active, out_off, offsets, ctr);
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
