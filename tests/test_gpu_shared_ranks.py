"""Two GPU ranks sharing one GPU (``local_cuda_cluster(ranks_per_gpu=2)``, cluster protocol UCX): ``auto``
picks UCX for them (NCCL refuses two ranks on one device), UCX moves device buffers between the two
processes and runs the device engine, levels equal one rank's and every tree validates, over UCX and TCP;
a rank killed mid-search over UCX ends the session with RankError in bounded time.  The two workers are clients
of a private MPS daemon (``local_cuda_cluster``'s ``mps="auto"``), which closing the cluster stops.

Skipped (not faked) without CuPy, dask-cuda, ucxx or a CUDA device, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from conftest import closing, gpu_module, kill_rank1_mid_search

cp, pytestmark = gpu_module()
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
pytest.importorskip("ucxx", reason="ucxx is not installed (the 'ucx' extra)")

from breadth.bfs import choose_roots, run_session  # noqa: E402
from breadth.bfs.engine.session import RankError, WorkerDied, ranks_share_a_gpu, session_protocol  # noqa: E402
from breadth.bfs.graph500.validate import validate_rank  # noqa: E402
from breadth.pipeline import kronecker, prepare  # noqa: E402
from breadth.pipeline.cluster.cluster import local_cuda_cluster  # noqa: E402


def test_closing_the_cluster_stops_its_mps():
    """First in the module, before the shared cluster's own daemon starts."""
    c = local_cuda_cluster(workers=2, ranks_per_gpu=2, mps=True)
    mps = c.cluster.mps
    try:
        assert mps.running and len(mps.servers()) == 1  # the workers' contexts made at start-up
        pipes = c.run(lambda: os.environ.get("CUDA_MPS_PIPE_DIRECTORY"))
        assert set(pipes.values()) == {mps.env["CUDA_MPS_PIPE_DIRECTORY"]}
    finally:
        cluster = c.cluster
        c.close()
        cluster.close()
    assert not mps.running and not os.path.exists(mps.root)


@pytest.fixture(scope="module")
def client():
    yield from closing(local_cuda_cluster(workers=2, ranks_per_gpu=2, protocol="ucx"))


@pytest.fixture(scope="module")
def graphs(client):
    el = kronecker(16, seed=3, device="gpu")
    return prepare(el, client, nparts=1, device="gpu"), prepare(el, client, nparts=2, device="gpu")


def _levels_body(engine, setup_s, roots):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root)), sorted({r.direction for r in recs})))
    return type(engine).__name__, out


def test_ranks_sharing_a_gpu_are_clients_of_a_private_mps(client):
    mps = client.cluster.mps  # mps="auto": the GPU machines have the driver's MPS control program
    assert mps is not None and mps.running and len(mps.servers()) == 1
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ  # this process stays outside


def test_auto_picks_ucx_for_ranks_sharing_a_gpu(graphs):
    g1, g2 = graphs
    assert len(set(g2.workers)) == 2  # two processes, one GPU
    assert ranks_share_a_gpu(g2.client, g2.workers) and session_protocol(g2, "auto") == "ucx"
    assert session_protocol(g1, "auto") == "self"


@pytest.mark.parametrize("protocol", ["ucx", "tcp"])
def test_shared_gpu_levels_equal_single_rank_and_valid(graphs, protocol):
    g1, g2 = graphs
    roots = choose_roots(g1, 6, 7)
    ref = [p[0] for p in run_session(g1, _levels_body, roots, protocol="tcp")[0][1]]
    for kw, expect in (({}, {"td", "bu"}), ({"alpha": 0.0}, {"td"}), ({"alpha": 1e9, "beta": 1e-9}, {"bu"})):
        parts = run_session(g2, _levels_body, roots, protocol=protocol, timeout=60.0, engine_kw=kw)
        # UCX carries the device engine's rounds; TCP stages through the host (the host-counter engine)
        assert {name for name, _ in parts} == {"DeviceEngine" if protocol == "ucx" else "Engine"}
        dirs = set()
        for _, rows in parts:
            for _, viol, d in rows:
                assert all(v == 0 for v in viol.values()), viol
                dirs |= set(d)
        assert dirs == expect, (kw, dirs)
        for i, want in enumerate(ref):
            np.testing.assert_array_equal(np.concatenate([rows[i][0] for _, rows in parts]), want)


def _records_body(engine, setup_s, roots, inline, blind, lists=None):
    one = engine.one_round
    if one is not None:
        one.list_cap = lists  # bottom-up levels that found more send their bitmap
    if one is not None and inline:
        one.inline = inline  # fewer rows inside the capped round than its buffers hold: the rest go sized
    if one is not None and blind is not None and engine.comm.rank == 1:
        one.blind_cap = blind  # rank 1 expands nothing blind: rank 0 takes its expansions back
    out = []
    for root in roots:
        recs = engine.search(int(root))
        out.append((cp.asnumpy(engine.level), validate_rank(engine, int(root)),
                    [(r.depth, r.direction, r.frontier, r.found) for r in recs]))
    return (dict(one.tally) if one is not None else None), out


@pytest.mark.parametrize("spec, inline, blind, lists", [(None, 0, None, None), (64, 0, None, None),
                                                        (None, 8, None, None), (None, 0, 0, None),
                                                        (256, 8, 0, None), (None, 0, None, 0),
                                                        (None, 0, None, 300)])
def test_one_round_levels_decide_as_the_exact_levels(graphs, spec, inline, blind, lists):
    """Over UCX the device engine's top-down levels take one round each (bfs/engine/one_round_levels.py);
    every level must go the way, and find what, the two-round levels do (the same direction rule on the same
    counters), the levels equal one rank's and every tree validates.  A pair capacity of 64 or 256 sends
    larger frontiers the exact way; with 8 inline rows the pairs past them follow in a sized round; with
    rank 1 expanding nothing blind, rank 0 takes its blind expansions back and the level runs exactly.  Where
    no part is expanded blind and each fits the inline rows, the parts' lists ride in the round and a level
    turning bottom-up reads its frontier from them; a search whose last level claims and sends nothing ends
    without a round more.  The ranks write their bottom-up levels' bitmaps, and the frontier where a search
    turns bottom-up, into each other's (``lists`` None: CUDA IPC); else (``peer_memory=False``) a bottom-up
    level sends the vertices it found where they fit the round's words (at most ``lists``), else its bitmap:
    always (0), or some levels each way (300)."""
    from breadth.bfs import SearchConfig

    g1, g2 = graphs
    roots = choose_roots(g1, 8, 11)
    ref = [p[0] for p in run_session(g1, _levels_body, roots, protocol="tcp")[0][1]]
    exact = run_session(g2, _records_body, roots, 0, None, protocol="ucx", timeout=60.0,
                        config=SearchConfig(one_round_levels=False, spec_pairs=spec))
    one = run_session(g2, _records_body, roots, inline, blind, lists, protocol="ucx", timeout=60.0,
                      config=SearchConfig(spec_pairs=spec, peer_memory=lists is None))
    assert [tally for tally, _ in exact] == [None, None]
    tally = {k: sum(t[k] for t, _ in one) for k in one[0][0]}
    assert tally["levels"] > 0
    assert tally["taken_back"] > 0 or blind is None, tally
    assert tally["sized"] > 0 or not inline, tally
    assert tally["bu_bitmaps"] > 0 or lists is None, tally
    assert tally["bu_lists"] > 0 or lists in (0, None), tally
    assert (tally["bu_written"] > 0) == (lists is None), tally
    assert tally["bu_bitmaps"] + tally["bu_lists"] == 0 or lists is not None, tally
    # both parts too large to expand blind where the searches turn bottom-up: they came listed in the round
    assert tally["listed"] > 0 or spec or inline or blind is not None, tally
    # the last top-down levels claim and send nothing (each vertex's parent skipped): no round more to end
    assert tally["ended"] > 0 or spec or inline or blind is not None, tally
    for i, want in enumerate(ref):
        for parts in (exact, one):
            for _, rows in parts:
                assert all(v == 0 for v in rows[i][1].values()), rows[i][1]
            np.testing.assert_array_equal(np.concatenate([rows[i][0] for _, rows in parts]), want)
        assert one[0][1][i][2] == one[1][1][i][2] == exact[0][1][i][2], (spec, inline, roots[i])


@pytest.mark.parametrize("peer_memory", [False, True])
def test_one_round_bottom_up_bitmaps_past_the_staging_size(client, peer_memory):
    """A one-round bottom-up level's bitmap goes device to device where it is larger than the communicator stages
    through the host (16 KB: at scale 20 on two ranks a rank's bitmap is 64 KB), its receive posted once the words
    say it follows, or (``peer_memory``) written into the peer's bitmap by the level itself; the levels equal the
    two-round levels' and every tree validates."""
    from breadth.bfs import SearchConfig

    g2 = prepare(kronecker(20, seed=7, device="gpu"), client, nparts=2, device="gpu")
    roots = choose_roots(g2, 4, 3)
    exact = run_session(g2, _records_body, roots, 0, None, protocol="ucx", timeout=60.0,
                        config=SearchConfig(one_round_levels=False))
    one = run_session(g2, _records_body, roots, 0, None, protocol="ucx", timeout=60.0,
                      config=SearchConfig(peer_memory=peer_memory))
    for i in range(len(roots)):
        for parts in (exact, one):
            for _, rows in parts:
                assert all(v == 0 for v in rows[i][1].values()), rows[i][1]
        np.testing.assert_array_equal(np.concatenate([rows[i][0] for _, rows in one]),
                                      np.concatenate([rows[i][0] for _, rows in exact]))
        assert one[0][1][i][2] == one[1][1][i][2] == exact[0][1][i][2], roots[i]
        assert "bu" in {d for _, d, _, _ in one[0][1][i][2]}
    assert all(tally["bu_written" if peer_memory else "bu_bitmaps"] > 0 for tally, _ in one), one[0][0]


def _comm_body(engine, setup_s):
    comm = engine.comm
    r, p = comm.rank, comm.size
    send = [cp.full((r * p + d if (r + d) % 3 else 0, 2), 100 * r + d, cp.int64) for d in range(p)]
    got = comm.alltoallv(send)
    big = comm.alltoallv([cp.full(1 << 24, r + 1, cp.uint8)] * p)  # 16 MB: the device-to-device path
    red = [comm.allreduce(np.array([r + 1, -r], np.int64), op) for op in ("sum", "max", "min")]
    return ([type(x).__module__.split(".")[0] for x in got], [cp.asnumpy(x) for x in got],
            [int(x.sum()) for x in big], red)


def test_ucx_moves_device_arrays_between_processes_on_one_gpu(graphs):
    res = run_session(graphs[1], _comm_body, protocol="ucx", timeout=60.0)
    for r, (mods, got, big, red) in enumerate(res):
        assert mods == ["cupy", "cupy"]
        for d in range(2):
            n = d * 2 + r if (d + r) % 3 else 0
            np.testing.assert_array_equal(got[d], np.full((n, 2), 100 * d + r, np.int64))
            assert big[d] == (d + 1) << 24
        np.testing.assert_array_equal(red[0], [3, -1])
        np.testing.assert_array_equal(red[1], [2, 0])
        np.testing.assert_array_equal(red[2], [1, -1])


def _sized_rounds_body(engine, setup_s, wraps):
    from breadth.bfs.transport import ucx

    comm, was = engine.comm, ucx._WRAPS
    ucx._WRAPS = wraps  # this rank's process: a small cache, so that rounds also run past its clearing
    try:
        peer = 1 - comm.rank
        out = []
        for i in range(3 * wraps):
            # a new array each round, of one of three lengths, from a pool that hands the freed memory out
            # again: the cached wrappers of an address and length must move whatever array lives there now
            n = (1 << 16) + (i % 3) * 4096
            send, into = cp.full(n, 10 * comm.rank + i, cp.int32), cp.zeros(n, cp.int32)
            comm.exchange_device({peer: send}, {peer: into})
            out.append((int(into.min()), int(into.max())))
            del send, into
        return out, len(comm._wraps) <= wraps
    finally:
        ucx._WRAPS = was


def test_sized_rounds_cache_device_wrappers_by_address_and_length(graphs):
    for r, (got, bounded) in enumerate(run_session(graphs[1], _sized_rounds_body, 4, protocol="ucx", timeout=60.0)):
        assert got == [(10 * (1 - r) + i, 10 * (1 - r) + i) for i in range(12)]
        assert bounded


def _batch_body(engine, setup_s, roots):
    engine.search(roots)
    lo = int(engine.shard.lo)
    got = [tuple(cp.asnumpy(cp.asarray(a)) for a in engine.device_result(i)) for i in range(len(roots))]
    return lo, got, engine._found is not None


@pytest.mark.parametrize("protocol", ["ucx", "tcp"])
@pytest.mark.parametrize("record", [None, False])
def test_shared_gpu_batch_equals_single_searches(graphs, protocol, record):
    """A batch on two GPU ranks: parents recorded in the pass (3-wide ``(vertex, bits, parent)`` rows through
    the GPU claim kernel) or derived after it (2-wide rows); levels equal one rank's single searches, and
    every reached vertex's parent is one level up (its root is its own parent)."""
    from breadth.bfs.engine.batch_engine import BatchEngine

    g1, g2 = graphs
    roots = [int(r) for r in choose_roots(g1, 24, 11)]
    ref = [p[0] for p in run_session(g1, _levels_body, roots, protocol="tcp")[0][1]]
    kw = {} if record is None else {"record_parents": record}
    parts = sorted(run_session(g2, _batch_body, roots, protocol=protocol, timeout=60.0, engine_class=BatchEngine,
                               engine_kw=kw))
    assert [recorded for _, _, recorded in parts] == [record is None] * 2
    for i, root in enumerate(roots):
        parent = np.concatenate([got[i][0] for _, got, _ in parts]).astype(np.int64)
        level = np.concatenate([got[i][1] for _, got, _ in parts]).astype(np.int64)
        np.testing.assert_array_equal(level, ref[i])
        reached = np.flatnonzero(level > 0)
        assert parent[root] == root and level[root] == 0
        np.testing.assert_array_equal(level[parent[reached]], level[reached] - 1)
        assert (parent[level < 0] == -1).all()


def test_rank_killed_over_ucx_raises_rankerror(graphs):
    """Last in the module: the killed worker is gone from this cluster afterwards."""
    g1, g2 = graphs
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g2, kill_rank1_mid_search, choose_roots(g1, 8, 1), protocol="ucx", timeout=60.0)
    took = time.monotonic() - t0
    assert info.value.rank == 1 and isinstance(info.value.cause, WorkerDied), info.value
    assert "killed by signal 9 (SIGKILL)" in str(info.value), info.value  # the nanny's word
    assert took < 20.0, took  # far below the 60 s search loop and the 60 s timeout


def test_owners_exchange_their_pieces_over_ucx_with_the_dask_paths_shards(client):
    """Two GPU ranks on one GPU: ``auto`` sends the memory tier's pieces owner to owner over UCX (CUDA IPC
    between the two processes' device memory), and the shards are the ones Dask's path builds."""
    import dask

    client.wait_for_workers(2, timeout=120)  # the rank killed above is back: one owner per worker again
    el = kronecker(15, seed=8, device="gpu")
    got = {}
    for how in ("auto", "dask"):
        stages: dict = {}
        with dask.config.set({"breadth.shuffle.exchange": how}):
            g = prepare(el, client, device="gpu", stages=stages)
        got[how] = (stages["exchange"], [s.to(np) for s in client.gather(g.shards)])
        g.release()
    assert got["auto"][0] == "direct (ucx)" and got["dask"][0] == "dask"
    for x, y in zip(got["auto"][1], got["dask"][1]):
        for k in ("offsets", "columns", "tuple_degree", "self_loops"):
            np.testing.assert_array_equal(getattr(x, k), getattr(y, k))
        np.testing.assert_array_equal(x.meta["bu_columns"], y.meta["bu_columns"])
