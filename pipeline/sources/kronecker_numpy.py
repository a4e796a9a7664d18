"""The Kronecker generator's parameters and its NumPy twin: no Numba, for workers that must not load it.

:class:`KroneckerParams` (the integer form of the generator's parameters) is shared by the three
generators: Numba's (:mod:`breadth.pipeline.sources.kronecker`), CUDA's (:mod:`breadth.pipeline.sources.kronecker_gpu`)
and :func:`generate_edges_numpy` here, which gives the same edges with array operations over a block of
tuples at a time.  It is slower than the Numba kernel, but a worker that runs it never imports Numba,
whose import and first compiled call cost ~110 MiB of resident memory (see
:mod:`breadth.pipeline.shuffle.memory_plan`): the generator of ``generate`` under a small ``--memory-limit``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
M1 = 0xBF58476D1CE4E5B9
M2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1
#: edge tuples per block of :func:`generate_edges_numpy`: its temporaries (a few uint64 arrays of a
#: block) stay under 2 MiB whatever the chunk size
BLOCK_TUPLES = 1 << 14


def mix64_int(z: int) -> int:
    """SplitMix64 finaliser on a Python int (the key derivation of :meth:`KroneckerParams.make`)."""
    z = ((z ^ (z >> 30)) * M1) & MASK64
    z = ((z ^ (z >> 27)) * M2) & MASK64
    return z ^ (z >> 31)


@dataclass(frozen=True)
class KroneckerParams:
    """Integer form of the generator parameters, shared by the NumPy, Numba and GPU kernels."""

    scale: int
    seed: int
    key: int  # stream key derived from the seed
    t_ab: int  # row bit set when u32 > t_ab
    t_a_norm: int  # column bit (row bit clear) set when v32 > t_a_norm
    t_c_norm: int  # column bit (row bit set) set when v32 > t_c_norm
    scramble_keys: tuple[int, int, int, int]  # odd multipliers / offsets of the id bijection

    @staticmethod
    def make(scale: int, seed: int, a: float, b: float, c: float) -> "KroneckerParams":
        if not 1 <= scale <= 40:
            raise ValueError(f"scale must be in 1..40, got {scale}")
        if min(a, b, c) < 0 or a + b + c >= 1:
            raise ValueError(f"need a, b, c >= 0 and a + b + c < 1, got {a}, {b}, {c}")
        ab = a + b
        to_u32 = lambda p: min(int(p * 2**32), 2**32 - 1)  # noqa: E731
        k = [mix64_int((seed + GOLDEN * (i + 1)) % 2**64) for i in range(5)]
        return KroneckerParams(
            scale=scale, seed=seed, key=k[0],
            t_ab=to_u32(ab), t_a_norm=to_u32(a / ab), t_c_norm=to_u32(c / (1.0 - ab)),
            scramble_keys=(k[1] | 1, k[2], k[3] | 1, k[4]),
        )


def _mix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser of a uint64 array, in place (wrap-around multiplication, as in C)."""
    z ^= z >> np.uint64(30)
    z *= np.uint64(M1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(M2)
    z ^= z >> np.uint64(31)
    return z


def _bitreverse64(v: np.ndarray) -> np.ndarray:
    for shift, mask in ((1, 0x5555555555555555), (2, 0x3333333333333333), (4, 0x0F0F0F0F0F0F0F0F),
                        (8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF)):
        s, m = np.uint64(shift), np.uint64(mask)
        v = ((v >> s) & m) | ((v & m) << s)
    return (v >> np.uint64(32)) | (v << np.uint64(32))


def scramble_numpy(v: np.ndarray, scale: int, keys: tuple[int, int, int, int]) -> np.ndarray:
    """The generator's keyed bijection of ``[0, 2**scale)`` on a uint64 array (a new array)."""
    k0, k1, k2, k3 = (np.uint64(k) for k in keys)
    mask = np.uint64((1 << scale) - 1)
    half = np.uint64((scale + 1) // 2)
    v = (v * k0 + k1) & mask
    v ^= v >> half
    v = _bitreverse64(v) >> np.uint64(64 - scale)
    v = (v * k2 + k3) & mask
    v ^= v >> half
    return v


def generate_edges_numpy(params: KroneckerParams, start: int, stop: int) -> np.ndarray:
    """Edge tuples ``start..stop-1`` as a ``(stop - start, 2)`` int64 array, equal to
    :func:`breadth.pipeline.sources.kronecker.generate_edges` (the Numba kernel) for the same ``params``."""
    out = np.empty((stop - start, 2), dtype=np.int64)
    s = np.uint64(params.scale)
    with np.errstate(over="ignore"):
        for b0 in range(start, stop, BLOCK_TUPLES):
            b1 = min(stop, b0 + BLOCK_TUPLES)
            e = np.arange(b0, b1, dtype=np.uint64)
            base = np.uint64(params.key) + (e * s + np.uint64(1)) * np.uint64(GOLDEN)
            del e
            row = np.zeros(b1 - b0, np.uint64)
            col = np.zeros(b1 - b0, np.uint64)
            for lvl in range(params.scale):
                h = _mix64(base + np.uint64(lvl) * np.uint64(GOLDEN))
                ib = (h >> np.uint64(32)) > np.uint64(params.t_ab)
                h &= np.uint64(0xFFFFFFFF)
                jb = np.where(ib, h > np.uint64(params.t_c_norm), h > np.uint64(params.t_a_norm))
                row |= ib.astype(np.uint64) << np.uint64(lvl)
                col |= jb.astype(np.uint64) << np.uint64(lvl)
            out[b0 - start:b1 - start, 0] = scramble_numpy(row, params.scale, params.scramble_keys)
            out[b0 - start:b1 - start, 1] = scramble_numpy(col, params.scale, params.scramble_keys)
    return out
