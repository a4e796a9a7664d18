"""Multi-GPU BFS (one dask-cuda worker per GPU, cluster protocol UCX): levels equal the single-rank
levels, every rank's tree validates, the NCCL and UCX communicators move device arrays, and a worker
killed mid-search ends the session with RankError while the other rank stops within a bounded time.

Skipped (not faked) without CuPy, dask-cuda or at least two CUDA devices, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module(2)
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")

from breadth.bfs import choose_roots, run_session  # noqa: E402
from breadth.bfs.engine.session import RankError, WorkerDied  # noqa: E402
from breadth.bfs.graph500.validate import validate_rank  # noqa: E402
from breadth.bfs.search_config import SearchConfig  # noqa: E402
from breadth.pipeline import kronecker, prepare  # noqa: E402
from breadth.pipeline.cluster.cluster import local_cuda_cluster  # noqa: E402
from conftest import closing, kill_rank1_mid_search  # noqa: E402

PROTOCOLS = ["nccl", "ucx"]


@pytest.fixture(scope="module")
def client():
    yield from closing(local_cuda_cluster(workers=2, protocol="ucx"))


@pytest.fixture(scope="module")
def graphs(client):
    el = kronecker(16, seed=3, device="gpu")
    g1 = prepare(el, client, nparts=1, device="gpu")
    g2 = prepare(el, client, nparts=2, device="gpu")
    return g1, g2


def _levels_body(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root)), sorted({r.direction for r in recs})))
    return out


def _levels(g, roots, protocol, config=None, **engine_kw):
    parts = run_session(g, _levels_body, roots, protocol=protocol, timeout=60.0, engine_kw=engine_kw, config=config)
    levels = [np.concatenate([p[i][0] for p in parts]) for i in range(len(roots))]
    for p in parts:
        for _, viol, _ in p:
            assert all(v == 0 for v in viol.values()), viol
    dirs = set().union(*(set(d) for p in parts for _, _, d in p))
    return levels, dirs


def _engine_name(engine, setup_s):
    return type(engine).__name__


def _graph_levels(engine, setup_s, root):
    engine.search(int(root))
    return dict(engine.graphs.launches) if getattr(engine, "graphs", None) else {}


# "nccl" runs the device-counter engine (breadth.bfs.engine.device_engine) with its levels captured as CUDA
# graphs (breadth.bfs.gpu.level_graphs) whose rounds go through peer memory (breadth.bfs.transport.peer_memory)
# where the GPUs reach each other, "nccl-nopeer" the same graphs with NCCL rounds, "nccl-overflow" that with
# pair caps so small that top-down levels take the exact second round, "nccl-queued" the same engine queueing
# each level from Python, "nccl-exact" that with every top-down level sized by a counters round first,
# "nccl-host" the host-counter engine; "ucx" runs the device-counter engine with its levels queued (UCX rounds
# cannot be captured), "ucx-host" the host-counter engine
_VARIANT = {"nccl-nopeer": SearchConfig(peer_memory=False), "nccl-queued": SearchConfig(level_graphs=False),
            "nccl-overflow": SearchConfig(graph_caps=(16, 64)),
            "nccl-exact": SearchConfig(spec_pairs=0, level_graphs=False),
            "nccl-host": SearchConfig(device_counters=False), "ucx-host": SearchConfig(device_counters=False)}


def test_two_gpu_levels_run_as_cuda_graphs(client, graphs):
    """The default NCCL engine replays captured bottom-up and top-down levels (not only the queued path),
    and with small pair caps its top-down levels need (and make) the exact second round."""
    g2 = graphs[1]
    root = int(choose_roots(graphs[0], 1, 7)[0])
    launches = run_session(g2, _graph_levels, root, protocol="nccl", timeout=60.0)
    assert all(n.get("bu", 0) > 0 and n.get("td", 0) > 0 and not n.get("overflow") for n in launches), launches
    launches = run_session(g2, _graph_levels, root, protocol="nccl", timeout=60.0, engine_kw={"alpha": 0.0},
                           config=_VARIANT["nccl-overflow"])
    assert any(n.get("overflow", 0) > 0 for n in launches), launches


def _peer_memory(engine, setup_s):
    return engine.comm.peer_memory


def test_two_gpu_rounds_use_peer_memory_where_the_gpus_reach_each_other(client, graphs):
    """The NCCL communicator maps its captured rounds' buffers into the peer exactly when the two GPUs can
    access each other's memory (NVLink machines), and not when peer memory is turned off."""
    expect = bool(cp.cuda.runtime.deviceCanAccessPeer(0, 1))
    assert run_session(graphs[1], _peer_memory, protocol="nccl", timeout=60.0) == [expect, expect]
    assert run_session(graphs[1], _peer_memory, protocol="nccl", timeout=60.0,
                       config=_VARIANT["nccl-nopeer"]) == [False, False]


@pytest.mark.parametrize("protocol", ["nccl", "nccl-nopeer", "nccl-overflow", "nccl-queued", "nccl-exact", "nccl-host",
                                      "ucx", "ucx-host"])
def test_two_gpu_levels_equal_single_rank_and_valid(client, graphs, protocol):
    g1, g2 = graphs
    roots = choose_roots(g1, 6, 7)
    ref, _ = _levels(g1, roots, "tcp")
    proto = protocol.split("-")[0]
    config = _VARIANT.get(protocol, SearchConfig())
    engines = set(run_session(g2, _engine_name, protocol=proto, timeout=60.0, config=config))
    assert engines == {"Engine" if protocol.endswith("-host") else "DeviceEngine"}, engines
    for kw, expect in (({}, {"td", "bu"}), ({"alpha": 0.0}, {"td"}), ({"alpha": 1e9, "beta": 1e-9}, {"bu"})):
        got, dirs = _levels(g2, roots, proto, config, **kw)
        assert dirs == expect, (kw, dirs)
        for a, b in zip(got, ref):
            np.testing.assert_array_equal(a, b)


def test_two_gpu_shards_have_degree_ordered_bottom_up_rows(client, graphs):
    """Preparation gathers the owners' degree buckets so that several ranks get the ordered rows too: each
    row of the copy is a permutation of the sorted row, and the order differs (the levels test above
    checks that searches over them stay exact)."""
    def check(shard):
        ordered = shard.meta["bu_columns"]
        off = cp.asnumpy(shard.offsets)
        cols, oc = cp.asnumpy(shard.columns), cp.asnumpy(ordered)
        return all(np.array_equal(np.sort(oc[a:b]), cols[a:b]) for a, b in zip(off[:-1], off[1:])) and \
            not np.array_equal(oc, cols)

    g2 = graphs[1]
    assert all(client.gather([client.submit(check, s, workers=[w], pure=False)
                              for s, w in zip(g2.shards, g2.workers)]))


def _comm_body(engine, setup_s):
    comm = engine.comm
    r, p = comm.rank, comm.size
    send = [cp.full((r * p + d if (r + d) % 3 else 0, 2), 100 * r + d, cp.int64) for d in range(p)]
    got = comm.alltoallv(send)
    host = comm.allgather(np.full((2, 3, r + 1), r, np.float32))
    v = comm.allgatherv(cp.arange(r + 2, dtype=cp.uint64), [q + 2 for q in range(p)])
    red = [comm.allreduce(np.array([r + 1, -r], np.int64), op) for op in ("sum", "max", "min")]
    return ([type(x).__module__.split(".")[0] for x in got], [cp.asnumpy(x) for x in got], host,
            [cp.asnumpy(x) for x in v], red)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_communicator_device_arrays(client, graphs, protocol):
    res = run_session(graphs[1], _comm_body, protocol=protocol, timeout=60.0)
    p = 2
    for r, (mods, got, host, v, red) in enumerate(res):
        assert mods == ["cupy"] * p  # device arrays arrive as device arrays
        for d in range(p):
            n = d * p + r if (d + r) % 3 else 0
            np.testing.assert_array_equal(got[d], np.full((n, 2), 100 * d + r, np.int64))
            assert isinstance(host[d], np.ndarray) and host[d].shape == (2, 3, d + 1) and (host[d] == d).all()
            np.testing.assert_array_equal(v[d], np.arange(d + 2, dtype=np.uint64))
        np.testing.assert_array_equal(red[0], [3, -1])
        np.testing.assert_array_equal(red[1], [2, 0])
        np.testing.assert_array_equal(red[2], [1, -1])


@pytest.mark.parametrize("protocol", ["nccl"])
def test_worker_killed_mid_search_raises_rankerror(client, graphs, protocol):
    """Last in the module: the killed worker's GPU is gone from this cluster afterwards."""
    g2 = graphs[1]
    roots = choose_roots(graphs[0], 8, 1)
    w0 = g2.workers[0]
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g2, kill_rank1_mid_search, roots, protocol=protocol, timeout=60.0)
    took = time.monotonic() - t0
    assert info.value.rank == 1 and isinstance(info.value.cause, WorkerDied), info.value
    assert "killed by signal 9 (SIGKILL)" in str(info.value), info.value  # the nanny's word
    assert took < 20.0, took  # far below the 60 s search loop and the 60 s timeout
    # rank 0's worker has one thread: a task runs there only once rank 0 stopped searching
    f = client.submit(lambda: time.monotonic(), workers=[w0], allow_other_workers=False, pure=False)
    try:
        free_at = f.result(timeout=20)
    except Exception:  # where is rank 0 stuck? (to the worker's stderr)
        import faulthandler
        import sys

        client.run(lambda: faulthandler.dump_traceback(sys.stderr, all_threads=True), workers=[w0])
        raise
    assert free_at - t0 < 20.0, free_at - t0
    print(f"\nkill test ({protocol}): RankError after {took:.2f} s; rank 0's worker free after {free_at - t0:.2f} s")
