"""The id shuffle's hook (breadth.pipeline.shuffle.shuffle.exchange): per-owner pieces of 1-D ids, merged at their
owners in a tree and looked up per chunk, give the same parts in every tier; the disk tier leaves nothing."""

import os

import numpy as np
import pytest

from breadth.pipeline.shuffle.shuffle import exchange, spill_space


def _cut(ids: np.ndarray, nowners: int):
    """A chunk's distinct ids cut by owner (value mod nowners for integers, length for strings)."""
    u = np.unique(ids)
    key = np.array([len(x) for x in u]) if u.dtype == object else u
    return int(u.size), [u[key % nowners == p] for p in range(nowners)]


def _union(*pieces):
    arrs = [p for p in pieces if len(p)]
    return np.unique(np.concatenate(arrs)) if arrs else np.empty(0, np.int64)


@pytest.mark.parametrize("strings", [False, True])
def test_exchange_tiers_agree(lclient, tmp_path, strings):
    from breadth.pipeline.cluster.cluster import worker_addresses

    rng = np.random.default_rng(2)
    chunks = [rng.integers(0, 5000, 3000) for _ in range(11)]
    if strings:
        chunks = [np.array([f"v{x}" for x in c], dtype=object) for c in chunks]
    futures = lclient.scatter(chunks)
    workers = worker_addresses(lclient)
    got = {}
    for tier in ("memory", "disk"):
        with spill_space(lclient, tier, str(tmp_path)) as space:
            ex = exchange(lclient, futures, _cut, 3, workers, tier=tier, root=space.root, args=(3,))
            parts = lclient.gather([ex.reduce(p, _union, fanin=4) for p in range(3)])
            pieces = lclient.gather([ex.piece(c, p) for c in (0, 10) for p in range(3)])
            kept = lclient.gather(ex.kept)
            if tier == "disk":
                files = [f for _, _, fs in os.walk(space.root) for f in fs]
                assert len(files) == 11 * 3, files
        got[tier] = (parts, pieces, kept)
    assert list(tmp_path.iterdir()) == []  # the disk tier's folder is gone
    everything = np.unique(np.concatenate(chunks))
    for tier, (parts, pieces, kept) in got.items():
        assert np.array_equal(np.sort(np.concatenate(parts)), everything), tier
        assert kept == [np.unique(c).size for c in chunks]
        expect = [_cut(chunks[c], 3)[1][p] for c in (0, 10) for p in range(3)]
        assert all(np.array_equal(a, b) for a, b in zip(pieces, expect)), tier
