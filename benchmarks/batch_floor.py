"""The floor of a batched pass (MS-BFS, one bit per search) on one CPU rank: the least work any bit-parallel
pass must do for given roots, each kind of work timed at this machine's best rate for it.

``python -m benchmarks.bench_batch --floor`` runs it after its timed rounds, on the same shard and roots, with the
roots' levels from the batch (equal to the single searches').  Its parts, each a lower bound:

* **Edge visits with an oracle for the direction.**  At depth ``d`` a top-down level reads the rows of the
  aggregate frontier (every vertex some search reached at ``d - 1``); a bottom-up level reads, for every
  vertex still missing a running search, its row until all of the missing searches are found -- and to
  the end of the row where one of them is not found at this depth (a neighbour's word says which searches
  reached it, not which will reach the vertex later, so no scan can stop before the row's end).  A row
  that can stop early counts one visit.  The floor takes the cheaper direction at every depth.
* **A visit's cost.**  A visit to a neighbour outside the frontier needs no more than a bit of a bitmap
  of the frontier's vertices (``n / 8`` bytes, in cache where the words are not); one to a frontier
  neighbour (in a bottom-up level) needs its 64-bit word.  Both are timed as bare scans of every row
  (``scan_words``, ``scan_bits``: a column read and a word or a bit read, OR-ed into one word per row,
  nothing else written; the faster of the best of 7 with and without a prefetch).  Top-down visits are
  counted at the bit's cost.
* **The results**: the ``(2, k, n)`` int32 parent and level arrays written once (a fill of memory already
  touched, best of 5; the pass's records and their layout are not counted).

``floor_s`` is their sum.  A batch costs at least ``floor_s``; ``64 single searches / floor_s`` is the most
a batch of this algorithm can gain on this machine.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from breadth.bfs.cpu.bit_ops import prefetch


@numba.njit(parallel=True, cache=True)
def _frontier(levels_vm, d, front):
    """``front[v] = 1`` where some search reached ``v`` at ``d - 1``; returns the searches that did (bits)."""
    n, k = levels_vm.shape
    t = numba.get_num_threads()
    words = np.zeros(t, np.uint64)
    for c in numba.prange(t):
        w = np.uint64(0)
        for v in range(c * n // t, (c + 1) * n // t):
            f = 0
            for i in range(k):
                if levels_vm[v, i] == d - 1:
                    w |= np.uint64(1) << np.uint64(i)
                    f = 1
            front[v] = f
        words[c] = w
    out = np.uint64(0)
    for w in words:
        out |= w
    return out


@numba.njit(parallel=True, cache=True)
def _depth_visits(out_offsets, bu_offsets, bu_cols, levels_vm, d, active, front):
    """At depth ``d``: (top-down visits, bottom-up visits of rows read to their end, those of them that meet
    a frontier vertex, rows that stop early)."""
    n, k = levels_vm.shape
    td = np.zeros(n, np.int64)
    full = np.zeros(n, np.int64)
    hits = np.zeros(n, np.int64)
    early = np.zeros(n, np.int64)
    for v in numba.prange(n):
        missing = False
        to_end = False
        for i in range(k):
            lv = levels_vm[v, i]
            if (active >> np.uint64(i)) & np.uint64(1) and (lv < 0 or lv >= d):
                missing = True
                if lv != d:
                    to_end = True
        if front[v]:
            td[v] = out_offsets[v + 1] - out_offsets[v]
        if missing and to_end:
            full[v] = bu_offsets[v + 1] - bu_offsets[v]
            h = 0
            for j in range(bu_offsets[v], bu_offsets[v + 1]):
                h += front[bu_cols[j]]
            hits[v] = h
        elif missing:
            early[v] = 1
    return td.sum(), full.sum(), hits.sum(), early.sum()


def oracle_visits(out_offsets, bu_offsets, bu_cols, levels_vm: np.ndarray) -> list[dict]:
    """Per depth: a top-down level's visits, and a bottom-up level's (rows read to the end, the visits among
    them that meet the frontier, rows that stop early).  ``levels_vm``: ``(n, k)`` int8 vertex-major levels
    of the ``k`` searches (-1 unreached)."""
    n = levels_vm.shape[0]
    front = np.empty(n, np.uint8)
    out = []
    for d in range(1, int(levels_vm.max()) + 1):
        active = _frontier(levels_vm, d, front)
        td, full, hits, early = _depth_visits(out_offsets, bu_offsets, bu_cols, levels_vm, d, active, front)
        out.append({"depth": d, "top_down_visits": int(td), "bottom_up_to_row_end_visits": int(full),
                    "bottom_up_frontier_visits": int(hits), "bottom_up_early_rows": int(early)})
    return out


def depth_seconds(dep: dict, bit_s: float, word_s: float) -> float:
    """The cheaper direction's least seconds at one depth of :func:`oracle_visits`."""
    td = dep["top_down_visits"] * bit_s
    f, h, e = dep["bottom_up_to_row_end_visits"], dep["bottom_up_frontier_visits"], dep["bottom_up_early_rows"]
    return min(td, (f - h) * bit_s + (h + e) * word_s)


@numba.njit(parallel=True, cache=True)
def scan_words(offsets, cols, words, out):
    """Every row's neighbours' words OR-ed into ``out[v]``: a visit's column read and word read, nothing else."""
    for v in numba.prange(offsets.size - 1):
        acc = np.uint64(0)
        for j in range(offsets[v], offsets[v + 1]):
            acc |= words[cols[j]]
        out[v] = acc


@numba.njit(parallel=True, cache=True)
def scan_words_prefetched(offsets, cols, words, out):
    """:func:`scan_words`, asking for the word of the entry 16 on (the random reads' latency overlapped)."""
    m = cols.size
    for v in numba.prange(offsets.size - 1):
        acc = np.uint64(0)
        for j in range(offsets[v], offsets[v + 1]):
            if j + 16 < m:
                prefetch(words, np.int64(cols[j + 16]))
            acc |= words[cols[j]]
        out[v] = acc


@numba.njit(parallel=True, cache=True)
def scan_bits(offsets, cols, bits, out):
    """Every row's neighbours' bits of the bitmap ``bits`` (``(ceil(n / 64),)`` uint64) OR-ed into ``out[v]``."""
    one = np.uint64(1)
    for v in numba.prange(offsets.size - 1):
        acc = np.uint64(0)
        for j in range(offsets[v], offsets[v + 1]):
            u = np.uint64(cols[j])
            acc |= (bits[u >> np.uint64(6)] >> (u & np.uint64(63))) & one
        out[v] = acc


@numba.njit(parallel=True, cache=True)
def _fill(a, x):
    for i in numba.prange(a.size):
        a[i] = x


def _best(fn, reps: int = 7) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def visit_seconds(offsets, cols, n: int, seed: int = 3) -> dict:
    """Seconds per visit of the bare scans over the rows (random words and bits; best of 7)."""
    rng = np.random.default_rng(seed)
    words = rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64)
    bits = rng.integers(0, 2**63, -(-n // 64), dtype=np.int64).view(np.uint64)
    out = np.empty(offsets.size - 1, np.uint64)
    plain = _best(lambda: scan_words(offsets, cols, words, out))
    ahead = _best(lambda: scan_words_prefetched(offsets, cols, words, out))
    bit = _best(lambda: scan_bits(offsets, cols, bits, out))
    m = max(int(cols.size), 1)
    return {"visits": int(cols.size), "word_scan_s": plain, "word_scan_prefetched_s": ahead, "bit_scan_s": bit,
            "word_s_per_visit": min(plain, ahead) / m, "bit_s_per_visit": min(bit, plain, ahead) / m,
            "threads": numba.get_num_threads()}


def results_seconds(k: int, n: int) -> dict:
    """The ``(2, k, n)`` int32 results written once (memory already touched; the faster of NumPy's fill and a
    parallel one, best of 5)."""
    fill = np.zeros((2, k, n), np.int32)
    flat = fill.reshape(-1)
    f = min(_best(lambda: fill.fill(7), 5), _best(lambda: _fill(flat, np.int32(7)), 5))
    return {"results_bytes": int(fill.nbytes), "results_fill_s": f}


def floor(out_offsets, bu_offsets, bu_cols, levels_vm: np.ndarray) -> dict:
    """Everything above for one rank's shard (all vertices: one rank) and the roots' levels."""
    n, k = levels_vm.shape
    depths = oracle_visits(out_offsets, bu_offsets, bu_cols, levels_vm)
    vs = visit_seconds(bu_offsets, bu_cols, n)
    visits_s = sum(depth_seconds(d, vs["bit_s_per_visit"], vs["word_s_per_visit"]) for d in depths)
    rs = results_seconds(k, n)
    return {"depths": depths, "visit": vs, "results": rs, "visits_s": visits_s,
            "results_floor_s": rs["results_fill_s"], "floor_s": visits_s + rs["results_fill_s"]}
