"""The floor of a batched pass on one GPU: :mod:`benchmarks.batch_floor`'s parts with CuPy arrays (see there).

* the oracle's edge visits: one thread per vertex and depth over the ``(n, k)`` int8 levels on the device;
* a visit's cost: bare scans, one thread per column entry (grid-stride, the column reads coalesced) reading
  the entry's 64-bit word, or its bit of an ``n``-bit bitmap, OR-ed into a register (one word written per
  thread at the end), over every entry of the rows, timed with CUDA events (best of 7);
* the results: the ``(2, k, n)`` int32 arrays written once, at the device's best write rate (the faster of
  ``cudaMemsetAsync`` and a kernel storing 16 bytes a thread, on a 2 GiB buffer: the floor needs no room for
  the results themselves).
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from benchmarks.batch_floor import depth_seconds

_SOURCE = r"""
typedef long long i64;
typedef unsigned long long u64;

// front[v] = 1 where some search reached v at d - 1; the searches that did OR-ed into *bits
extern "C" __global__ void frontier(const signed char* __restrict__ lv, int k, i64 n, int d, unsigned char* front,
                                    u64* bits) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    u64 b = 0;
    if (v < n) {
        for (int i = 0; i < k; ++i)
            if (lv[v * k + i] == d - 1) b |= 1ULL << i;
        front[v] = b != 0;
    }
    for (int o = 16; o > 0; o >>= 1) b |= __shfl_xor_sync(0xffffffffu, b, o);
    if ((threadIdx.x & 31) == 0 && b) atomicOr(bits, b);
}

template <typename C>
__device__ void depth_visits(const signed char* __restrict__ lv, int k, i64 n, int d, u64 active,
                             const i64* __restrict__ out_off, const i64* __restrict__ bu_off,
                             const C* __restrict__ bu_cols, const unsigned char* __restrict__ front,
                             i64* td, i64* full, i64* hits, i64* early) {
    const i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (v >= n) return;
    bool missing = false, to_end = false;
    for (int i = 0; i < k; ++i) {
        const int l = lv[v * k + i];
        if (((active >> i) & 1ULL) && (l < 0 || l >= d)) {
            missing = true;
            if (l != d) to_end = true;
        }
    }
    td[v] = front[v] ? out_off[v + 1] - out_off[v] : 0;
    i64 f = 0, h = 0;
    if (missing && to_end) {
        f = bu_off[v + 1] - bu_off[v];
        for (i64 j = bu_off[v]; j < bu_off[v + 1]; ++j) h += front[bu_cols[j]];
    }
    full[v] = f;
    hits[v] = h;
    early[v] = missing && !to_end;
}
extern "C" __global__ void depth_visits32(const signed char* lv, int k, i64 n, int d, u64 active, const i64* out_off,
                                          const i64* bu_off, const int* bu_cols, const unsigned char* front,
                                          i64* td, i64* full, i64* hits, i64* early) {
    depth_visits(lv, k, n, d, active, out_off, bu_off, bu_cols, front, td, full, hits, early);
}
extern "C" __global__ void depth_visits64(const signed char* lv, int k, i64 n, int d, u64 active, const i64* out_off,
                                          const i64* bu_off, const i64* bu_cols, const unsigned char* front,
                                          i64* td, i64* full, i64* hits, i64* early) {
    depth_visits(lv, k, n, d, active, out_off, bu_off, bu_cols, front, td, full, hits, early);
}

template <typename C, bool BIT>
__device__ void scan(const C* __restrict__ cols, i64 m, const u64* __restrict__ words, u64* out) {
    const i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    const i64 step = (i64)gridDim.x * blockDim.x;
    u64 acc = 0;
    for (i64 j = t; j < m; j += step) {
        const i64 u = (i64)__ldg(cols + j);
        acc |= BIT ? (__ldg(words + (u >> 6)) >> (u & 63)) & 1ULL : __ldg(words + u);
    }
    out[t] = acc;
}
extern "C" __global__ void words32(const int* c, i64 m, const u64* w, u64* o) { scan<int, false>(c, m, w, o); }
extern "C" __global__ void words64(const i64* c, i64 m, const u64* w, u64* o) { scan<i64, false>(c, m, w, o); }
extern "C" __global__ void bits32(const int* c, i64 m, const u64* w, u64* o) { scan<int, true>(c, m, w, o); }
extern "C" __global__ void bits64(const i64* c, i64 m, const u64* w, u64* o) { scan<i64, true>(c, m, w, o); }

extern "C" __global__ void store16(int4* a, i64 n4) {
    const i64 step = (i64)gridDim.x * blockDim.x;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n4; i += step) a[i] = make_int4(7, 7, 7, 7);
}
"""


def _module():
    return cp.RawModule(code=_SOURCE, options=("-std=c++17",))


def _best_ms(fn, reps: int = 7) -> float:
    fn()
    cp.cuda.get_current_stream().synchronize()
    best = float("inf")
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(a, b))
    return best


def _grid() -> int:
    return cp.cuda.Device().attributes["MultiProcessorCount"] * 8


def oracle_visits(mod, out_offsets, bu_offsets, bu_cols, levels_vm) -> list[dict]:
    """Per depth, as :func:`batch_floor.oracle_visits`."""
    n, k = levels_vm.shape
    front = cp.empty(n, cp.uint8)
    td, full, hits, early = (cp.empty(n, cp.int64) for _ in range(4))
    bits = cp.zeros(1, cp.uint64)
    visits = mod.get_function("depth_visits64" if bu_cols.dtype == cp.int64 else "depth_visits32")
    blocks = ((n + 255) // 256,)
    out = []
    for d in range(1, int(levels_vm.max()) + 1):
        bits.fill(0)
        mod.get_function("frontier")(blocks, (256,), (levels_vm, np.int32(k), np.int64(n), np.int32(d), front, bits))
        active = int(bits.get()[0])
        visits(blocks, (256,), (levels_vm, np.int32(k), np.int64(n), np.int32(d), np.uint64(active), out_offsets,
                                bu_offsets, bu_cols, front, td, full, hits, early))
        out.append({"depth": d, "top_down_visits": int(td.sum()), "bottom_up_to_row_end_visits": int(full.sum()),
                    "bottom_up_frontier_visits": int(hits.sum()), "bottom_up_early_rows": int(early.sum())})
    return out


def visit_seconds(mod, cols, n: int) -> dict:
    """Seconds per visit of the bare scans over every column entry (random words and bits; best of 7)."""
    m = int(cols.size)
    rng = cp.random.default_rng(3)
    words = rng.integers(0, 2**63, n, dtype=cp.int64).view(cp.uint64)
    bits = rng.integers(0, 2**63, -(-n // 64), dtype=cp.int64).view(cp.uint64)
    suffix = "64" if cols.dtype == cp.int64 else "32"
    out = cp.empty(_grid() * 256, cp.uint64)
    w = mod.get_function("words" + suffix)
    b = mod.get_function("bits" + suffix)
    word_ms = _best_ms(lambda: w((_grid(),), (256,), (cols, np.int64(m), words, out)))
    bit_ms = _best_ms(lambda: b((_grid(),), (256,), (cols, np.int64(m), bits, out)))
    return {"visits": m, "word_scan_s": word_ms / 1e3, "bit_scan_s": bit_ms / 1e3,
            "word_s_per_visit": word_ms / 1e3 / max(m, 1), "bit_s_per_visit": min(bit_ms, word_ms) / 1e3 / max(m, 1)}


def write_rate(mod, nbytes: int = 2 << 30) -> dict:
    """The device's best write rate, bytes per second: ``cudaMemsetAsync`` and 16-byte stores on a buffer."""
    a = cp.empty(nbytes // 4, cp.int32)
    stream = cp.cuda.get_current_stream().ptr
    memset = _best_ms(lambda: cp.cuda.runtime.memsetAsync(a.data.ptr, 7, a.nbytes, stream), 5)
    fn = mod.get_function("store16")
    vec = _best_ms(lambda: fn((_grid(),), (256,), (a, np.int64(a.nbytes // 16))), 5)
    return {"buffer_bytes": int(a.nbytes), "memset_bytes_per_s": a.nbytes / (memset / 1e3),
            "store16_bytes_per_s": a.nbytes / (vec / 1e3),
            "write_bytes_per_s": a.nbytes / (min(memset, vec) / 1e3)}


def floor(out_offsets, bu_offsets, bu_cols, levels_vm) -> dict:
    """:func:`batch_floor.floor` on one GPU (all arguments CuPy arrays; ``levels_vm`` ``(n, k)`` int8)."""
    mod = _module()
    n, k = levels_vm.shape
    depths = oracle_visits(mod, out_offsets, bu_offsets, bu_cols, levels_vm)
    vs = visit_seconds(mod, bu_cols, n)
    visits_s = sum(depth_seconds(d, vs["bit_s_per_visit"], vs["word_s_per_visit"]) for d in depths)
    rate = write_rate(mod)
    rs = {"results_bytes": 2 * k * n * 4, **rate, "results_fill_s": 2 * k * n * 4 / rate["write_bytes_per_s"]}
    return {"depths": depths, "visit": vs, "results": rs, "visits_s": visits_s,
            "results_floor_s": rs["results_fill_s"], "floor_s": visits_s + rs["results_fill_s"]}
