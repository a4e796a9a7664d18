"""The one level loop (:func:`breadth.bfs.engine.levels.run_levels`): every engine takes its directions from it.

With the loop's direction rule replaced by one that always answers the same, every level of every engine -- 1D,
2D, delegates, the batched engine -- must go that way, and its levels must still equal scipy's: an engine with a
loop of its own would not follow.  The GPU engines' levels are checked against the same forced directions in
``test_gpu_shared_ranks.py`` (alpha 0, and alpha 1e9 with beta 1e-9).
"""

from __future__ import annotations

import numpy as np
import pytest

from breadth.bfs import run_session
from breadth.bfs.engine import levels
from breadth.bfs.engine.batch_engine import BatchEngine
from breadth.pipeline import from_dask_array, kronecker, prepare

from conftest import roots_with_edges, scipy_levels

SCALE = 10


def _single(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((engine.level.copy(), [r.direction for r in recs]))
    return out


def _batch(engine, setup_s, roots):
    recs = engine.search(np.asarray(roots, np.int64))
    return [(engine.result(i)[1], [r.direction for r in recs]) for i in range(len(roots))]


@pytest.fixture(scope="module")
def kron10():
    edges = kronecker(SCALE, seed=2).edges.compute(scheduler="sync")
    return edges, 1 << SCALE


@pytest.mark.parametrize("forced", ["td", "bu"])
@pytest.mark.parametrize("kind, batch", [("1d", False), ("2d", False), ("delegates", False), ("1d", True)])
def test_every_engine_takes_its_directions_from_the_loop(lclient, monkeypatch, kron10, kind, batch, forced):
    edges, n = kron10
    # (the two in-process workers share this module: both ranks follow the forced rule)
    monkeypatch.setattr(levels, "next_direction", lambda direction, **counts: forced)
    graph = prepare(from_dask_array(edges, n), lclient, nparts=2, partition=kind)
    roots = [int(r) for r in roots_with_edges(edges, n, 3, seed=4)]
    parts = run_session(graph, _batch if batch else _single, roots, protocol="tcp", timeout=60.0,
                        engine_class=BatchEngine if batch else None)
    for i, root in enumerate(roots):
        level = np.concatenate([p[i][0] for p in parts])
        np.testing.assert_array_equal(level, scipy_levels(edges, n, root))
        dirs = parts[0][i][1]
        assert len(dirs) >= 2 and set(dirs) == {forced}, (kind, batch, dirs)
    graph.release()
