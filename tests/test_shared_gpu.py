"""Two GPU ranks on one GPU (one dask-cuda worker with two threads): NCCL refuses them, so ``protocol="auto"``
runs UCX, whose device rounds (CuPy buffers) carry the device engine; levels equal one rank's and validate.

Skipped (not faked) without CuPy, dask-cuda, ucxx or a CUDA device, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module()
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
pytest.importorskip("ucxx", reason="ucxx is not installed")

from breadth.bfs import choose_roots, run_session  # noqa: E402
from breadth.bfs.engine.session import session_protocol  # noqa: E402
from breadth.bfs.graph500.validate import validate_rank  # noqa: E402
from breadth.pipeline import kronecker, prepare  # noqa: E402
from breadth.pipeline.cluster.cluster import local_cuda_cluster  # noqa: E402
from conftest import closing  # noqa: E402


@pytest.fixture(scope="module")
def client():
    yield from closing(local_cuda_cluster(workers=1, threads_per_worker=2))


@pytest.fixture(scope="module")
def graphs(client):
    el = kronecker(14, seed=5, device="gpu")
    return prepare(el, client, nparts=1, device="gpu"), prepare(el, client, nparts=2, device="gpu")


def _body(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root)), sorted({r.direction for r in recs})))
    return type(engine).__name__, type(engine.comm).__name__, engine.graphs is None, out


def test_two_ranks_on_one_gpu_run_the_device_engine_over_ucx(graphs):
    g1, g2 = graphs
    assert len(set(g2.workers)) == 1 and session_protocol(g2) == "ucx"
    roots = choose_roots(g1, 4, 3)
    ref = run_session(g1, _body, roots)[0][3]
    parts = run_session(g2, _body, roots, timeout=60.0)  # protocol "auto"
    assert {p[:3] for p in parts} == {("DeviceEngine", "UCXCommunicator", True)}  # queued levels, no graphs
    dirs = set()
    for i, (level1, _, _) in enumerate(ref):
        np.testing.assert_array_equal(np.concatenate([p[3][i][0] for p in parts]), level1)
        for p in parts:
            assert not any(p[3][i][1].values()), p[3][i][1]
            dirs |= set(p[3][i][2])
    assert dirs == {"td", "bu"}


def _device_rounds(engine, setup_s):
    """The device rounds with CuPy arrays (the CPU tests drive them with NumPy arrays)."""
    comm = engine.comm
    r, q = comm.rank, 1 - comm.rank
    cnt = comm.gather_device(cp.array([r, 10 * r], cp.int64))
    pairs = cp.full((3 + r, 2), 100 * r, cp.int64)
    recv = comm.device_buffer((3 + q, 2), cp.int64)
    ctr = cp.zeros(2, cp.int64)
    comm.exchange_device({q: [cp.full(2, r + 1, cp.int64), pairs]}, {q: [ctr, recv]})
    parts = comm.allgatherv(cp.arange(2 * r, dtype=cp.uint64), [0, 2], wait=False)
    into = comm.device_buffer(6, cp.float32)
    comm.allgather_into(cp.full(3, r, cp.float32), into)
    comm.wait("test")
    return (cnt, cp.asnumpy(ctr), cp.asnumpy(recv), [type(x).__module__.split(".")[0] for x in parts],
            [cp.asnumpy(x) for x in parts], cp.asnumpy(into))


def test_ucx_device_rounds_with_cupy_arrays(graphs):
    res = run_session(graphs[1], _device_rounds, protocol="ucx", timeout=60.0)
    for r, (cnt, ctr, recv, mods, parts, into) in enumerate(res):
        q = 1 - r
        np.testing.assert_array_equal(cnt, [[0, 0], [1, 10]])
        np.testing.assert_array_equal(ctr, [q + 1, q + 1])
        np.testing.assert_array_equal(recv, np.full((3 + q, 2), 100 * q))
        assert mods == ["cupy", "cupy"]
        assert [list(p) for p in parts] == [[], [0, 1]]
        np.testing.assert_array_equal(into, [0, 0, 0, 1, 1, 1])
