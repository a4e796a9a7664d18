"""The floor of a batched pass (MS-BFS, one bit per search) on one CPU rank: the least work any bit-parallel
pass must do for given roots, timed at this machine's best rate for each kind of work.

``bench_batch.py --floor`` runs it after its timed rounds, on the same shard and roots, with the roots'
levels from the batch (equal to the single searches').  Three parts, each a lower bound:

* **Edge visits with an oracle for the direction.**  At depth ``d`` a top-down level reads the rows of the
  aggregate frontier (every vertex some search reached at ``d - 1``); a bottom-up level reads, for every
  vertex still missing a running search, its row until all of the missing searches are found -- and to
  the end of the row where one of them is not found at this depth (the word says which searches reached a
  neighbour, not which ones will reach the vertex later, so no scan can stop before its end).  A row that can
  stop early counts one visit (``bottom_up_visits`` also gives where the shard's own order of the row
  stops).  The floor takes the cheaper direction at every depth.
* **A visit's cost**: a column read and a read of the neighbour's 64-bit word, OR-ed into one word per
  row, over every row of the shard (``scan_rows``, the threads cutting the rows; with and without a
  prefetch 16 entries ahead; the faster of the best of 7).  It writes nothing per visit, so every real
  step (which also writes the words it finds and the parents) costs more per visit.
* **The results**: each (vertex, search) reached gets a parent, written once during the pass (4 bytes a
  pair, timed as one sequential write) and laid out per search afterwards (the pass's output read once,
  timed as a sequential read, and the ``(2, k, n)`` int32 parent and level arrays written once, timed as a
  fill of memory already touched).

``floor_s`` is their sum.  A batch is at least ``floor_s``; ``64 single searches / floor_s`` is the most a
batch of this algorithm can gain on this machine.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from breadth.bfs.cpu.bit_ops import prefetch


@numba.njit(parallel=True, cache=True)
def _active(levels_vm, d):
    """Searches (bit i) with some vertex at level ``d - 1``: those still running at depth ``d``."""
    n, k = levels_vm.shape
    words = np.zeros(numba.get_num_threads(), np.uint64)
    for t in numba.prange(numba.get_num_threads()):
        w = np.uint64(0)
        for v in range(t * n // words.size, (t + 1) * n // words.size):
            for i in range(k):
                if levels_vm[v, i] == d - 1:
                    w |= np.uint64(1) << np.uint64(i)
        words[t] = w
    out = np.uint64(0)
    for w in words:
        out |= w
    return out


@numba.njit(parallel=True, cache=True)
def _depth_visits(out_offsets, bu_offsets, bu_cols, levels_vm, d, active):
    """(top-down visits, bottom-up visits in the rows' order, bottom-up visits of rows scanned to their end,
    rows that stop early) at depth ``d``."""
    n, k = levels_vm.shape
    td = np.zeros(n, np.int64)
    bu = np.zeros(n, np.int64)
    full = np.zeros(n, np.int64)
    early = np.zeros(n, np.int64)
    for v in numba.prange(n):
        in_frontier = False
        missing = False
        to_end = False
        for i in range(k):
            lv = levels_vm[v, i]
            if lv == d - 1:
                in_frontier = True
            if (active >> np.uint64(i)) & np.uint64(1) and (lv < 0 or lv >= d):
                missing = True
                if lv != d:
                    to_end = True
        if in_frontier:
            td[v] = out_offsets[v + 1] - out_offsets[v]
        if missing:
            lo, hi = bu_offsets[v], bu_offsets[v + 1]
            if to_end:
                bu[v] = hi - lo
                full[v] = hi - lo
            else:
                early[v] = 1
                last = 0
                for i in range(k):
                    if levels_vm[v, i] == d and (active >> np.uint64(i)) & np.uint64(1):
                        for j in range(lo, hi):
                            if levels_vm[bu_cols[j], i] == d - 1:
                                last = max(last, j - lo + 1)
                                break
                bu[v] = last
    return td.sum(), bu.sum(), full.sum(), early.sum()


def oracle_visits(out_offsets, bu_offsets, bu_cols, levels_vm: np.ndarray) -> list[dict]:
    """Per depth: the visits of a top-down and of a bottom-up level (see the module notes).
    ``levels_vm``: ``(n, k)`` int8, vertex-major levels of the ``k`` searches (-1 unreached).

    ``bottom_up_visits`` stops each row that can stop early where the shard's order of it does;
    ``bottom_up_least_visits`` counts one visit for such a row, whatever its order (what the floor uses)."""
    out = []
    depth = int(levels_vm.max())
    for d in range(1, depth + 1):
        active = _active(levels_vm, d)
        td, bu, full, early = _depth_visits(out_offsets, bu_offsets, bu_cols, levels_vm, d, active)
        out.append({"depth": d, "top_down_visits": int(td), "bottom_up_visits": int(bu),
                    "bottom_up_to_row_end_visits": int(full), "bottom_up_least_visits": int(full + early)})
    return out


@numba.njit(parallel=True, cache=True)
def scan_rows(offsets, cols, words, out):
    """Every row's neighbours' words OR-ed into ``out[v]``: a visit's column read and word read, nothing else."""
    for v in numba.prange(offsets.size - 1):
        acc = np.uint64(0)
        for j in range(offsets[v], offsets[v + 1]):
            acc |= words[cols[j]]
        out[v] = acc


@numba.njit(parallel=True, cache=True)
def scan_rows_prefetched(offsets, cols, words, out):
    """:func:`scan_rows`, asking for the word of the entry 16 on (the random reads' latency overlapped)."""
    m = cols.size
    for v in numba.prange(offsets.size - 1):
        acc = np.uint64(0)
        for j in range(offsets[v], offsets[v + 1]):
            if j + 16 < m:
                prefetch(words, np.int64(cols[j + 16]))
            acc |= words[cols[j]]
        out[v] = acc


@numba.njit(parallel=True, cache=True)
def _fill(a, x):
    for i in numba.prange(a.size):
        a[i] = x


@numba.njit(parallel=True, cache=True)
def _read(a):
    t = numba.get_num_threads()
    part = np.zeros(t, np.uint64)
    for c in numba.prange(t):
        acc = np.uint64(0)
        for i in range(c * a.size // t, (c + 1) * a.size // t):
            acc |= a[i]
        part[c] = acc
    return part


def _best(fn, reps: int = 7) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def visit_seconds(offsets, cols, seed: int = 3) -> dict:
    """Seconds per visit of :func:`scan_rows` over the rows (random words; best of 7)."""
    n = offsets.size - 1
    words = np.random.default_rng(seed).integers(0, 2**63, max(n, int(cols.max()) + 1 if cols.size else 1),
                                                 dtype=np.int64).view(np.uint64)
    out = np.empty(n, np.uint64)
    plain = _best(lambda: scan_rows(offsets, cols, words, out))
    ahead = _best(lambda: scan_rows_prefetched(offsets, cols, words, out))
    t = min(plain, ahead)
    return {"full_scan_s": t, "full_scan_plain_s": plain, "full_scan_prefetched_s": ahead, "visits": int(cols.size),
            "s_per_visit": t / max(cols.size, 1), "threads": numba.get_num_threads()}


def results_seconds(pairs: int, k: int, n: int) -> dict:
    """The results' three memory passes: ``pairs`` int32 parents written and read sequentially, and the
    ``(2, k, n)`` int32 arrays filled (memory already touched; best of 5 each)."""
    rec = np.zeros(pairs + pairs % 2, np.int32)
    fill = np.zeros((2, k, n), np.int32)
    flat = fill.reshape(-1)
    # the faster of NumPy's fill (one thread) and a parallel one, for each pass
    w = min(_best(lambda: rec.fill(7), 5), _best(lambda: _fill(rec, np.int32(7)), 5))
    r = _best(lambda: _read(rec.view(np.uint64)), 5)
    f = min(_best(lambda: fill.fill(7), 5), _best(lambda: _fill(flat, np.int32(7)), 5))
    return {"record_write_s": w, "record_read_s": r, "results_fill_s": f, "pairs": int(pairs),
            "results_bytes": int(fill.nbytes)}


def floor(out_offsets, bu_offsets, bu_cols, levels_vm: np.ndarray) -> dict:
    """Everything above for one rank's shard (all vertices: one rank) and the roots' levels."""
    n, k = levels_vm.shape
    depths = oracle_visits(out_offsets, bu_offsets, bu_cols, levels_vm)
    visits = sum(min(d["top_down_visits"], d["bottom_up_least_visits"]) for d in depths)
    vs = visit_seconds(bu_offsets, bu_cols)
    pairs = int((levels_vm >= 0).sum())
    rs = results_seconds(pairs, k, n)
    visits_s = visits * vs["s_per_visit"]
    results_s = rs["record_write_s"] + rs["record_read_s"] + rs["results_fill_s"]
    return {"depths": depths, "oracle_visits": int(visits), "visit": vs, "results": rs,
            "visits_s": visits_s, "results_floor_s": results_s, "floor_s": visits_s + results_s}
