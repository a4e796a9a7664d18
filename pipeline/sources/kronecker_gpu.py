"""The Kronecker generator of :mod:`breadth.pipeline.sources.kronecker` as a CUDA kernel (CuPy, NVRTC).

Bit-identical to the NumPy/Numba generator: edge tuple ``e`` draws the same SplitMix64 words from
``(key, e, level)`` with the same unsigned 64-bit wrap-around arithmetic, compares their halves with the same
integer thresholds, and goes through the same id bijection (``__brevll`` is the same bit reversal).  One
thread per edge tuple; the output is written as ``(count, 2)`` int64 like the CPU's.
"""

from __future__ import annotations

import functools

import cupy as cp
import numpy as np

from .kronecker_numpy import KroneckerParams

_SOURCE = r"""
typedef unsigned long long u64;
typedef long long i64;

__device__ __forceinline__ u64 mix64(u64 z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__device__ __forceinline__ u64 scramble(u64 v, int scale, u64 k0, u64 k1, u64 k2, u64 k3) {
    const u64 mask = (1ull << scale) - 1ull;
    const int half = (scale + 1) / 2;
    v = (v * k0 + k1) & mask;
    v = v ^ (v >> half);
    v = __brevll(v) >> (64 - scale);
    v = (v * k2 + k3) & mask;
    v = v ^ (v >> half);
    return v;
}

extern "C" __global__ void kronecker(u64 start, i64 count, int scale, u64 key, u64 t_ab, u64 t_a_norm,
                                     u64 t_c_norm, u64 k0, u64 k1, u64 k2, u64 k3, i64* __restrict__ out) {
    const u64 GOLDEN = 0x9E3779B97F4A7C15ull;
    for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < count; i += (i64)gridDim.x * blockDim.x) {
        const u64 e = start + (u64)i;
        const u64 base = key + (e * (u64)scale + 1ull) * GOLDEN;
        u64 row = 0, col = 0;
        for (int lvl = 0; lvl < scale; ++lvl) {
            const u64 h = mix64(base + (u64)lvl * GOLDEN);
            const u64 u = h >> 32;
            const u64 w = h & 0xFFFFFFFFull;
            const bool ib = u > t_ab;
            const bool jb = ib ? (w > t_c_norm) : (w > t_a_norm);
            row |= (u64)ib << lvl;
            col |= (u64)jb << lvl;
        }
        out[2 * i] = (i64)scramble(row, scale, k0, k1, k2, k3);
        out[2 * i + 1] = (i64)scramble(col, scale, k0, k1, k2, k3);
    }
}
"""


@functools.lru_cache(maxsize=None)
def _kernel():
    return cp.RawKernel(_SOURCE, "kronecker", options=("-std=c++17",))


def generate_edges_gpu(params: KroneckerParams, start: int, stop: int) -> cp.ndarray:
    """Edge tuples ``start..stop-1`` as a ``(stop - start, 2)`` int64 CuPy array, equal to
    :func:`breadth.pipeline.sources.kronecker.generate_edges` for the same ``params``."""
    count = stop - start
    out = cp.empty((count, 2), cp.int64)
    if count > 0:
        sms = cp.cuda.Device().attributes["MultiProcessorCount"]
        blocks = max(1, min(-(-count // 256), sms * 32))
        u = np.uint64
        k = [u(x) for x in params.scramble_keys]
        _kernel()((blocks,), (256,), (u(start), np.int64(count), np.int32(params.scale), u(params.key),
                                     u(params.t_ab), u(params.t_a_norm), u(params.t_c_norm), *k, out))
    return out
