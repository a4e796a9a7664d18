"""Three GPU ranks sharing one GPU over UCX (``local_cuda_cluster(ranks_per_gpu=3)``): the device engine's
one-round levels with two peers each -- the pairs' owner regions, and bottom-up bitmaps that every rank writes
into both peers' (CUDA IPC) or sends them over UCX -- find the levels one rank finds, and every tree validates.

Skipped (not faked) without CuPy, dask-cuda, ucxx or a CUDA device, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import closing, gpu_module

cp, pytestmark = gpu_module()
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
pytest.importorskip("ucxx", reason="ucxx is not installed (the 'ucx' extra)")

from breadth.bfs import SearchConfig, choose_roots, run_session  # noqa: E402
from breadth.bfs.graph500.validate import validate_rank  # noqa: E402
from breadth.pipeline import kronecker, prepare  # noqa: E402
from breadth.pipeline.cluster.cluster import local_cuda_cluster  # noqa: E402


@pytest.fixture(scope="module")
def client():
    yield from closing(local_cuda_cluster(workers=3, ranks_per_gpu=3, protocol="ucx"))


def _body(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root)), {r.direction for r in recs}))
    one = engine.one_round
    return (dict(one.tally) if one is not None else None), out


@pytest.mark.parametrize("peer_memory", [True, False])
def test_three_ranks_on_one_gpu_find_one_ranks_levels(client, peer_memory):
    el = kronecker(17, seed=5, device="gpu")
    g1, g3 = prepare(el, client, nparts=1, device="gpu"), prepare(el, client, nparts=3, device="gpu")
    roots = choose_roots(g1, 6, 2)
    ref = [lv for lv, _, _ in run_session(g1, _body, roots)[0][1]]
    parts = run_session(g3, _body, roots, protocol="ucx", timeout=60.0, config=SearchConfig(peer_memory=peer_memory))
    tally = {k: sum(t[k] for t, _ in parts) for k in parts[0][0]}
    assert tally["levels"] > 0, tally
    assert (tally["bu_written"] > 0) == peer_memory, tally
    assert (tally["bu_bitmaps"] + tally["bu_lists"] > 0) != peer_memory, tally
    for i, want in enumerate(ref):
        for _, rows in parts:
            assert all(v == 0 for v in rows[i][1].values()), rows[i][1]
            assert "bu" in rows[i][2], rows[i][2]
        np.testing.assert_array_equal(np.concatenate([rows[i][0] for _, rows in parts]), want)
