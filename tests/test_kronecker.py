"""The Kronecker generator: chunking invariance, the id bijection, and its degree distribution against
figures derived analytically from the R-MAT parameters (not from its own output)."""

from math import comb

import numpy as np
import pytest

from breadth.pipeline import kronecker
from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges, scramble_ids


def _edges(scale, seed, chunk):
    return kronecker(scale, seed=seed, chunk_edges=chunk).edges.compute(scheduler="sync")


def test_same_edges_for_any_chunking():
    m = 16 << 12
    ref = _edges(12, 5, m)  # one chunk
    for nchunks in (3, 8):
        got = _edges(12, 5, -(-m // nchunks))
        assert got.shape == (m, 2)
        np.testing.assert_array_equal(got, ref)


def test_seed_changes_graph_and_ids_in_range():
    a, b = _edges(10, 1, 1 << 20), _edges(10, 2, 1 << 20)
    assert not np.array_equal(a, b)
    assert a.min() >= 0 and a.max() < 1 << 10


@pytest.mark.parametrize("scale", [1, 2, 7, 13])
def test_scramble_is_a_bijection(scale):
    p = KroneckerParams.make(scale, 3, 0.57, 0.19, 0.19)
    out = scramble_ids(p, np.arange(1 << scale))
    assert np.array_equal(np.sort(out), np.arange(1 << scale))
    if scale >= 7:  # it actually moves ids
        assert (out != np.arange(1 << scale)).mean() > 0.9


def test_bad_parameters():
    with pytest.raises(ValueError, match="scale"):
        kronecker(0)
    with pytest.raises(ValueError, match="a, b, c"):
        kronecker(4, a=0.6, b=0.3, c=0.2)


def _analytic(scale, m, a=0.57, b=0.19, c=0.19):
    """Expected self-loops and never-touched vertices of an R-MAT graph with these parameters.

    Per level, the row bit is 1 with probability c + d and the column bit with b + d; both equal with
    a + d.  A vertex with w one-bits is a tuple's row with p_r = (c+d)^w (a+b)^(S-w), its column with
    p_c = (b+d)^w (a+c)^(S-w), and both with d^w a^(S-w).  The scrambling is a bijection, so counts over
    vertices do not change.
    """
    d = 1 - a - b - c
    loops = m * (a + d) ** scale
    untouched = 0.0
    for w in range(scale + 1):
        pr = (c + d) ** w * (a + b) ** (scale - w)
        pc = (b + d) ** w * (a + c) ** (scale - w)
        pb = d ** w * a ** (scale - w)
        untouched += comb(scale, w) * (1 - (pr + pc - pb)) ** m
    return loops, untouched


def test_degree_distribution_matches_rmat_theory():
    scale = 16
    m = 16 << scale
    e = generate_edges(KroneckerParams.make(scale, 11, 0.57, 0.19, 0.19), 0, m)
    loops, untouched = _analytic(scale, m)
    got_loops = int((e[:, 0] == e[:, 1]).sum())
    assert abs(got_loops - loops) < 5 * np.sqrt(loops), (got_loops, loops)
    got_untouched = (1 << scale) - np.unique(e).size
    assert abs(got_untouched - untouched) < 0.02 * untouched + 50, (got_untouched, untouched)
    # Heavy tail: the busiest vertex of R-MAT at (0.57, 0.19, 0.19) has an expected degree of
    # 2 m (a + b)^S-ish ~ m * 2 * 0.76^S = 2 * 1M * 0.0123; far above the mean of 32.
    deg = np.bincount(e.ravel(), minlength=1 << scale)
    expected_max = m * ((0.76) ** scale * 2 - 0.57 ** scale)
    assert 0.8 * expected_max < deg.max() < 1.2 * expected_max, (deg.max(), expected_max)
