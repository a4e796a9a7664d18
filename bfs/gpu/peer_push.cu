// The peer-memory round of bfs/transport/peer_memory.py: one kernel copies this rank's segments into its
// peers' mapped GPU buffers and signals them through flags (NVRTC through cupy.RawModule).

typedef unsigned long long u64;
typedef long long i64;

__device__ __forceinline__ i64 peer_clock_ns() {
#ifdef __CUDACC__
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return (i64)t;
#else
    return 0;
#endif
}

// One round.  desc: nseg segments of 5 u64: source, destination, bytes (a multiple of 8), and a count
// bound: when its pointer (4th) is not null, only min(bytes, *count * unit (5th)) bytes move; the count
// is read here, on the device, so it may come from the kernels just before the round.
// peer_flags[q]: this rank's slot in rank q's flag array (mapped; unused for q == rank); flags: this
// rank's array, flags[q] written by rank q.  state[0]: rounds so far, state[1]: blocks done (reset by
// the last block).  host[0]: abort requested (the host writes it); the kernel writes host[1]: 0, or 1
// aborted, 2 timed out, then host[2]: the peer waited for, host[3]: this round's number, host[4]: the
// peer's flag when it gave up.
extern "C" __global__ void peer_push(const u64* __restrict__ desc, int nseg, const u64* __restrict__ peer_flags,
                                     volatile u64* flags, u64* state, volatile i64* host, int size, int rank,
                                     i64 timeout_ns) {
    const i64 tid = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    const i64 nth = (i64)gridDim.x * blockDim.x;
    for (int s = 0; s < nseg; ++s) {
        const u64* d = desc + 5 * s;
        const u64* src = (const u64*)d[0];
        u64* dst = (u64*)d[1];
        i64 bytes = (i64)d[2];
        if (d[3]) {
            const i64 c = *(const i64*)d[3];
            const i64 b = (c > 0 ? c : 0) * (i64)d[4];
            if (b < bytes) bytes = b;
        }
        const i64 n = bytes >> 3;
        for (i64 i = tid; i < n; i += nth) dst[i] = src[i];
    }
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x != 0) return;
    if (atomicAdd(&state[1], 1ull) != (u64)gridDim.x - 1) return;
    // the last block: every block's stores are fenced before its count, so the signal follows them all
    state[1] = 0;
    const u64 e = state[0] + 1;
    state[0] = e;
    __threadfence_system();
    for (int q = 0; q < size; ++q)
        if (q != rank) *(volatile u64*)peer_flags[q] = e;
    const i64 t0 = peer_clock_ns();
    for (int q = 0; q < size; ++q) {
        if (q == rank) continue;
        while (flags[q] < e) {
            const int why = host[0] ? 1 : (peer_clock_ns() - t0 > timeout_ns ? 2 : 0);
            if (why) { host[2] = q; host[3] = (i64)e; host[4] = (i64)flags[q]; host[1] = why; return; }
        }
    }
    __threadfence_system();
}
