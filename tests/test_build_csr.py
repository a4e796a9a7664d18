"""The CPU's CSR builder against a plain NumPy reference: rows of every length (insertion sort, quicksort,
radix sort), id widths that need an even and an odd number of radix passes, 32- and 64-bit columns, all
rows in one row block or in five (blocks of 64 rows, each holding rows of up to 5,000 entries)."""

import numpy as np
import pytest

from breadth.pipeline.kernels import build_csr
from breadth.pipeline.kernels.build_csr import RADIX_MIN_ROW, csr_from_entries


def _reference(entries: np.ndarray, lo: int, num_local: int):
    rows = entries[:, 0] - lo
    mult = np.bincount(rows, minlength=num_local)
    pairs = np.unique(entries.astype(np.int64), axis=0)  # sorted by row, then column; unique
    offsets = np.zeros(num_local + 1, np.int64)
    np.cumsum(np.bincount(pairs[:, 0] - lo, minlength=num_local), out=offsets[1:])
    return offsets, pairs[:, 1], mult


# ids of 12 bits take 2 radix passes; ids of 24 and 33 bits take 3
@pytest.mark.parametrize("block_entries", [build_csr.BLOCK_ENTRIES, 64])
@pytest.mark.parametrize("num_vertices", [1 << 12, (1 << 23) + 5, 1 << 33])
def test_csr_matches_numpy_for_every_row_length(num_vertices, block_entries, monkeypatch):
    monkeypatch.setattr(build_csr, "BLOCK_ENTRIES", block_entries)
    rng = np.random.default_rng(num_vertices % 1000)
    lo, num_local = num_vertices // 3, 300
    # one row per length class: empty, short, insertion-sorted, quicksorted, radix-sorted (with duplicates)
    lengths = rng.choice([0, 1, 5, 16, 17, RADIX_MIN_ROW - 1, RADIX_MIN_ROW, 5000], size=num_local)
    rows = np.repeat(np.arange(lo, lo + num_local), lengths)
    cols = rng.integers(0, num_vertices, size=rows.size)
    cols[::7] = cols[::7] // 1000 * 1000  # duplicates within a row
    cols[::11] = num_vertices - 1  # the widest id
    entries = np.stack([rows, cols], axis=1)
    dt = np.int32 if num_vertices < 2**31 else np.int64
    entries = entries[rng.permutation(entries.shape[0])].astype(dt)
    pieces = [entries[:1000], entries[1000:7777], entries[7777:]]
    offsets, columns, mult = csr_from_entries(pieces, lo, num_local, num_vertices)
    shift = build_csr.block_shift(num_local, entries.shape[0])
    assert ((num_local - 1) >> shift) + 1 == (1 if block_entries > 64 else 5)  # blocks of 64 rows: 5
    want_off, want_cols, want_mult = _reference(entries, lo, num_local)
    assert columns.dtype == dt
    assert np.array_equal(offsets, want_off)
    assert np.array_equal(columns, want_cols)
    assert np.array_equal(mult, want_mult)
