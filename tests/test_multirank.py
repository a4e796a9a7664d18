"""Multi-rank BFS over real worker processes: communicators, levels on 1..4 ranks, failures mid-session.

One 4-worker local cluster serves the whole module (a graph of P shards runs its ranks on the first P
workers).  The test that kills a worker runs last, because it replaces one of the cluster's workers.
"""

from __future__ import annotations

import os
import time
import uuid

import numpy as np
import pytest

from breadth.bfs import RankError, run_session
from breadth.bfs.engine.session import WorkerDied, make_communicator
from breadth.bfs.graph500.validate import validate_rank
from breadth.bfs.transport.communicator import CommError
from breadth.pipeline import from_dask_array, kronecker, prepare
from breadth.pipeline.cluster.cluster import worker_addresses

from conftest import kill_rank1_mid_search, load_snap, scipy_levels

NWORKERS = 4


def _ucx_available() -> bool:
    try:
        import ucxx  # noqa: F401
    except Exception:
        return False
    return True


PROTOCOLS = ["tcp", pytest.param("ucx", marks=pytest.mark.skipif(not _ucx_available(),
                                                                  reason="ucxx is not installed"))]


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    # one thread per worker: 4 ranks share this machine's 2 cores, as they would share a node
    lc = LocalCluster(n_workers=NWORKERS, threads_per_worker=1, processes=True, dashboard_address=None,
                      env={"NUMBA_NUM_THREADS": "1"})
    c = Client(lc)
    yield c
    c.close()
    lc.close()


def _on_ranks(client, fn, size: int, *args, protocol: str = "tcp", timeout: float = 20.0):
    """Run ``fn(comm, *args)`` as ``size`` ranks on the first ``size`` workers; return their results."""
    session = f"test-{uuid.uuid4().hex[:10]}"
    ws = worker_addresses(client)[:size]
    futs = [client.submit(_comm_task, fn, r, size, session, protocol, timeout, args, workers=[ws[r]],
                          allow_other_workers=False, pure=False) for r in range(size)]
    from distributed import wait

    wait(futs, timeout=120)
    return [f.exception() if f.status == "error" else f.result() for f in futs]


def _comm_task(fn, rank, size, session, protocol, timeout, args):
    comm = make_communicator(rank, size, session, protocol, timeout)
    try:
        return fn(comm, *args)
    finally:
        comm.close()


# -- the communicator itself -------------------------------------------------------------------------
def _exchange_shapes(comm):
    r, p = comm.rank, comm.size
    # empty to some peers, 2-D int64 to others, and a message to self
    send = [np.full((r * p + d if (r + d) % 3 else 0, 2), 100 * r + d, np.int64) for d in range(p)]
    got = comm.alltoallv(send)
    f32 = comm.allgather(np.full((2, 3, r + 1), r, np.float32))
    u8 = comm.allgather(np.uint8(r))  # 0-d
    return [g.copy() for g in got], f32, [int(x) for x in u8]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_alltoallv_shapes_dtypes_and_empty(cluster, protocol):
    p = 3
    res = _on_ranks(cluster, _exchange_shapes, p, protocol=protocol)
    for r, (got, f32, u8) in enumerate(res):
        assert u8 == list(range(p))
        for s in range(p):
            rows = s * p + r if (s + r) % 3 else 0
            assert got[s].shape == (rows, 2) and got[s].dtype == np.int64
            assert (got[s] == 100 * s + r).all()
            assert f32[s].shape == (2, 3, s + 1) and f32[s].dtype == np.float32 and (f32[s] == s).all()


def _groups(comm):
    # grid rows {0, 1} and {2, 3}, then grid columns {0, 2} and {1, 3}: rounds among subsets, in step
    r = comm.rank
    b0 = comm.bytes_sent()
    row = [r // 2 * 2, r // 2 * 2 + 1]
    got_row = comm.exchange_among({p: ("mine" if p == r else np.full(3, 10 * r + p, np.int64)) for p in row})
    col = [r % 2, r % 2 + 2]
    got_col = comm.exchange_among({p: np.full((2, 2), 100 * r + p, np.int32) for p in col})
    after = comm.allreduce(np.array([r], np.int64))  # a full round after the group rounds: still in step
    return ({p: a if isinstance(a, str) else a.tolist() for p, a in got_row.items()},
            {p: a.tolist() for p, a in got_col.items()}, int(after[0]), comm.bytes_sent() - b0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_exchange_among_groups(cluster, protocol):
    res = _on_ranks(cluster, _groups, 4, protocol=protocol)
    for r, (row, col, total, nbytes) in enumerate(res):
        peer = r ^ 1
        assert row == {r: "mine", peer: [10 * peer + r] * 3}  # its own entry as given, never sent
        other = r ^ 2
        assert col == {r: [[100 * r + r] * 2] * 2, other: [[100 * other + r] * 2] * 2}
        assert total == 6
        # payload to the group's peer only (24 + 16 bytes), then the all-reduce's 8 bytes to each of 3 peers
        assert nbytes == 24 + 16 + 3 * 8


def _mixed_sizes(comm, sizes):
    # per round, each peer gets another size: inline in the slot, just past it, or a second message (UCX
    # inlines up to 256 KiB on CPU ranks, 16 KiB on GPU ranks; the header says which); the slot buffers
    # alternate between rounds
    out = []
    for rnd in range(len(sizes)):
        send = [np.full(sizes[(rnd + comm.rank + d) % len(sizes)] // 8, 1000 * comm.rank + 10 * d + rnd, np.int64)
                for d in range(comm.size)]
        got = comm.alltoallv(send)
        out.append([(int(g.size), int(g[0]) if g.size else None, int(g[-1]) if g.size else None) for g in got])
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_alltoallv_sizes_around_the_inline_limits(cluster, protocol):
    sizes = [8, (16 << 10) - 8, (16 << 10) + 64, 200_000, (256 << 10) + 8, 1 << 20, 0]
    res = _on_ranks(cluster, _mixed_sizes, 3, sizes, protocol=protocol)
    for r, rounds in enumerate(res):
        for rnd, got in enumerate(rounds):
            for s, (n, first, last) in enumerate(got):
                k = sizes[(rnd + s + r) % len(sizes)] // 8
                v = 1000 * s + 10 * r + rnd
                assert (n, first, last) == (k, v if k else None, v if k else None), (r, rnd, s)


def _large(comm, nbytes):
    # every rank sends a distinct large array to every peer at once: must not deadlock
    k = nbytes // 8
    b0 = comm.bytes_sent()
    send = [np.arange(k, dtype=np.int64) * (comm.rank + 1) + d for d in range(comm.size)]
    got = comm.alltoallv(send)
    ok = all(g.shape == (k,) and g[0] == comm.rank and g[-1] == (k - 1) * (s + 1) + comm.rank
             for s, g in enumerate(got))
    return ok, comm.bytes_sent() - b0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_alltoallv_large_messages(cluster, protocol):
    nbytes = 48 << 20  # far beyond any socket buffer
    res = _on_ranks(cluster, _large, 2, nbytes, protocol=protocol)
    assert all(ok for ok, _ in res)
    assert [sent for _, sent in res] == [nbytes, nbytes]  # payload to the one peer, nothing to self


def _reduce(comm):
    r = comm.rank
    i = np.array([r, -r, 7, r * r], np.int64)
    f = np.array([r + 0.5, -1.5 * r], np.float64)
    out = {op: (comm.allreduce(i, op), comm.allreduce(f, op)) for op in ("sum", "max", "min")}
    comm.barrier()
    try:
        comm.allreduce(i, "prod")
    except ValueError:
        out["bad_op_raises"] = True
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_allreduce_ops(cluster, protocol):
    p = 4
    res = _on_ranks(cluster, _reduce, p, protocol=protocol)
    ranks = np.arange(p)
    ints = np.stack([ranks, -ranks, np.full(p, 7), ranks ** 2])
    flts = np.stack([ranks + 0.5, -1.5 * ranks])
    for out in res:
        assert out["bad_op_raises"]
        for op, fn in (("sum", np.sum), ("max", np.max), ("min", np.min)):
            iv, fv = out[op]
            assert iv.dtype == np.int64 and fv.dtype == np.float64
            np.testing.assert_array_equal(iv, fn(ints, axis=1))
            np.testing.assert_allclose(fv, fn(flts, axis=1))


def _peer_closes(comm):
    if comm.rank == 1:
        comm.close()  # leaves the session at once
        return "closed"
    t0 = time.monotonic()
    try:
        comm.allgather(np.arange(10))
        comm.allgather(np.arange(10))  # rank 1 may have sent nothing: the second round must fail
    except CommError as e:
        return ("CommError", e.peer, time.monotonic() - t0)
    return ("no error", None, time.monotonic() - t0)


def _peer_silent(comm):
    if comm.rank == 1:
        time.sleep(4)  # alive, connected, not answering
        return "slept"
    t0 = time.monotonic()
    try:
        comm.allreduce(np.ones(1, np.int64))
    except CommError as e:
        return ("CommError", e.peer, time.monotonic() - t0)
    return ("no error", None, time.monotonic() - t0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_peer_close_and_silence_raise_commerror(cluster, protocol):
    res = _on_ranks(cluster, _peer_closes, 3, protocol=protocol, timeout=20.0)
    assert res[1] == "closed"
    for r in (0, 2):
        kind, peer, took = res[r]
        # a rank that lost rank 1 closes its own connections, so the last one may first see that
        assert kind == "CommError" and peer in (1, 2 - r) and took < 5.0, res[r]
    assert 1 in (res[0][1], res[2][1])
    res = _on_ranks(cluster, _peer_silent, 2, protocol=protocol, timeout=2.0)
    kind, peer, took = res[0]
    assert kind == "CommError" and peer == 1 and 1.5 < took < 5.0, res[0]


BIG = 3000  # int64s: 24 KB, past the UCX communicator's 16 KB staging size


def _device_rounds(comm):
    """The device engine's rounds with NumPy arrays, between slot rounds (sequence numbers interleave)."""
    r, p = comm.rank, comm.size
    peers = [q for q in range(p) if q != r]
    rows = lambda s, d: (s + 2 * d) % 3  # noqa: E731  rows of pairs rank s sends rank d (some none)
    out = {"flags": (comm.device_counters, comm.capturable_rounds)}
    out["counters"] = comm.gather_device(np.array([r, 10 * r, -r], np.int64))
    b0 = comm.bytes_sent()
    # small arrays travel packed in one message, a large one (past the staging size) between them on its own
    sends = {q: [np.full(2, r, np.int64), np.arange(BIG, dtype=np.int64) * (r + 1),
                 np.full((rows(r, q), 2), 100 * r + q, np.int64)] for q in peers}
    starts = np.concatenate(([0], np.cumsum([rows(q, r) for q in peers])))
    pairs = comm.device_buffer((int(starts[-1]), 2), np.int64)
    ctr = np.full((p, 2), -1, np.int64)
    big = np.zeros((p, BIG), np.int64)
    comm.exchange_device(sends, {q: [ctr[q], big[q], pairs[starts[i]:starts[i + 1]]] for i, q in enumerate(peers)})
    out["exchange"] = (ctr.copy(), pairs.copy(), big, comm.bytes_sent() - b0)
    # every array past the staging size: each a message of its own, nothing packed
    large = np.zeros((p, BIG), np.int64)
    b0 = comm.bytes_sent()
    comm.exchange_device({q: np.arange(BIG, dtype=np.int64) + 7 * r + q for q in peers}, {q: large[q] for q in peers})
    out["exchange_large"] = (large, comm.bytes_sent() - b0)
    out["slot"] = comm.allgather(np.arange(r + 1))  # a slot round between sized ones
    counts = [(2 * q) % 3 for q in range(p)]  # rank 0 sends nothing
    b0 = comm.bytes_sent()
    parts = comm.allgatherv(np.arange(counts[r], dtype=np.uint64) + 1000 * r, counts, wait=False)
    out["allgatherv"] = ([x.copy() for x in parts], comm.bytes_sent() - b0)
    recv = comm.device_buffer(4 * p, np.float32)
    b0 = comm.bytes_sent()
    comm.allgather_into(np.full(4, r + 0.5, np.float32), recv, payload=True)
    comm.note_sent(5)
    comm.wait("the test's rounds")
    out["allgather_into"] = (recv.copy(), comm.bytes_sent() - b0)
    out["sum"] = comm.allreduce(np.array([r], np.int64))
    # capped rounds: lengths vary by round and peer, sized and slot rounds between them; a round's buffers
    # are read only after the next round, which must not have touched them
    bufs = comm.open_capped(6)
    again = comm.open_capped(6)  # again: the same capacity is a no-op
    # the rounds hand back the buffers that opening them returned (captured GPU steps read them in place)
    out["own_buffers"] = all(again[q][0] is bufs[q][0] and again[q][1] is bufs[q][1] for q in peers)
    capped, last = [], None
    for i in range(4):
        words = {q: np.arange(1 + (r + 2 * q + i) % 6, dtype=np.int64) + 100 * r + 10 * q + i for q in peers}
        if i >= 2:  # with a sized round's arrays, one small and one past the staging size, in the same round
            with_sized = np.zeros((p, BIG + 2), np.int64)
            got = comm.capped_round(words, device=(
                {q: [np.full(2, -r - i, np.int64), np.arange(BIG, dtype=np.int64) - 3 * r - q - i] for q in peers},
                {q: [with_sized[q, :2], with_sized[q, 2:]] for q in peers}))
            out[f"capped_with_sized_{i}"] = with_sized
        else:
            got = comm.capped_round(words)
        out["own_buffers"] = out["own_buffers"] and all(got[q] is bufs[q][(i + 1) % 2] for q in peers)
        if last is not None:
            capped.append({q: last[q][:1 + (q + 2 * r + i - 1) % 6].copy() for q in peers})
        last = got
        comm.gather_device(np.array([i], np.int64))
        comm.allgather(np.arange(i))
    capped.append({q: last[q][:1 + (q + 2 * r + 3) % 6].copy() for q in peers})
    out["capped"] = capped
    # receives that follow the words: rank r sends arrays to the peers above it only, and its first word says so
    follows = np.full((p, BIG + 2), -1, np.int64)
    got = comm.capped_round({q: np.array([int(q > r), 40 + r], np.int64) for q in peers}, device=(
        {q: [np.full(2, 9 + r, np.int64), np.arange(BIG, dtype=np.int64) + 5 * r] for q in peers if q > r},
        lambda words: {q: [follows[q, :2], follows[q, 2:]] if words[q][0] else [] for q in peers}))
    out["follow"] = (follows, {q: got[q][:2].copy() for q in peers})
    # one array sent round after round, rewritten in between (as the engine's page-locked words): each round
    # carries what it holds then, and counts its bytes
    same, again_got = np.zeros(3, np.int64), []
    b0 = comm.bytes_sent()
    for i in range(3):
        same[:] = (r, i, 7)
        got = comm.capped_round(dict.fromkeys(peers, same))
        again_got.append({q: got[q][:3].copy() for q in peers})
    out["same_array"] = (again_got, comm.bytes_sent() - b0)
    try:
        comm.capped_round(dict.fromkeys(peers, np.zeros(6, np.int64)[::2]))
    except ValueError as e:
        out["strided"] = str(e)
    out["after_strided"] = comm.capped_round(dict.fromkeys(peers, np.array([r], np.int64)))[peers[0]][0]  # in step
    try:
        comm.open_capped(7)
    except ValueError as e:
        out["reopen"] = str(e)
    return out


def test_ucx_waits_poll_long_on_cpu_ranks_briefly_on_gpu_ranks_and_not_beyond_the_cores(monkeypatch):
    """CPU ranks poll up to 1 ms before sleeping (a rendezvous's steps need both sides progressing), GPU ranks'
    host rounds 50 us, and ranks that outnumber the host's cores do not poll (a polling rank would hold a core
    its peers need)."""
    from breadth.bfs.transport import ucx

    monkeypatch.setattr(ucx.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert ucx._spin_for(2) == ucx._HOST_SPIN_S == 1e-3
    assert ucx._spin_for(2, device=True) == ucx._SPIN_S == 5e-5
    assert ucx._spin_for(3) == ucx._spin_for(3, device=True) == 0.0


def _rounds_then_close(engine, setup_s):
    """Rounds of every kind, some past UCX's eager size (rendezvous), as a search's ranks run before closing."""
    comm = engine.comm
    peers = [q for q in range(comm.size) if q != comm.rank]
    comm.open_capped(64)
    words = np.arange(16, dtype=np.int64)
    for i in range(20):
        comm.barrier()
        comm.capped_round(dict.fromkeys(peers, words))
        comm.alltoallv([np.arange(40_000 * (q + 1), dtype=np.int64) for q in range(comm.size)])
        comm.allreduce(np.array([i], np.int64))
    return True


@pytest.mark.skipif(not _ucx_available(), reason="ucxx is not installed")
def test_ucx_sessions_close_without_ucx_errors(capfd):
    """Closing a session prints nothing: the rounds' endpoints to a peer of the same host go to its worker
    address, where a listener's connection without error handling, closed after its peer had closed its end,
    made UCX print "error during flush: Connection reset by remote peer" (with 20 sessions this test failed 3 of 5
    times then).  The workers start inside the test, so that their output is the one captured."""
    from breadth.pipeline import local_cluster

    with local_cluster(workers=2) as client:
        graph = prepare(kronecker(10, 16), client)
        for _ in range(30):
            assert run_session(graph, _rounds_then_close, protocol="ucx") == [True, True]
    out = "".join(capfd.readouterr())  # (UCX logs to standard output)
    assert "UCX  ERROR" not in out and "Connection reset" not in out, out[-2000:]


@pytest.mark.skipif(not _ucx_available(), reason="ucxx is not installed")
@pytest.mark.parametrize("size", [2, 3])
def test_ucx_device_rounds_with_numpy_arrays(cluster, size):
    rows = lambda s, d: (s + 2 * d) % 3  # noqa: E731
    counts = [(2 * q) % 3 for q in range(size)]
    res = _on_ranks(cluster, _device_rounds, size, protocol="ucx")
    for r, out in enumerate(res):
        assert not isinstance(out, BaseException), out
        peers = [q for q in range(size) if q != r]
        assert out["flags"] == (True, False)  # device rounds, not capturable in CUDA graphs
        np.testing.assert_array_equal(out["counters"], [[q, 10 * q, -q] for q in range(size)])
        ctr, pairs, big, sent = out["exchange"]
        for q in peers:
            assert (ctr[q] == q).all()
            np.testing.assert_array_equal(big[q], np.arange(BIG) * (q + 1))
        assert (ctr[r] == -1).all()  # nothing to self
        want = np.concatenate([np.full((rows(q, r), 2), 100 * q + r, np.int64) for q in peers])
        np.testing.assert_array_equal(pairs, want)
        assert sent == sum(16 + 8 * BIG + 16 * rows(r, q) for q in peers)
        large, sent = out["exchange_large"]
        for q in peers:
            np.testing.assert_array_equal(large[q], np.arange(BIG) + 7 * q + r)
        assert (large[r] == 0).all() and sent == 8 * BIG * (size - 1)
        assert [list(a) for a in out["slot"]] == [list(range(q + 1)) for q in range(size)]
        parts, sent = out["allgatherv"]
        for q, a in enumerate(parts):
            assert a.dtype == np.uint64 and list(a) == list(np.arange(counts[q]) + 1000 * q)
        assert sent == 8 * counts[r] * (size - 1)
        recv, sent = out["allgather_into"]
        np.testing.assert_array_equal(recv, np.repeat(np.arange(size) + 0.5, 4).astype(np.float32))
        assert sent == 16 * (size - 1) + 5
        assert out["sum"][0] == sum(range(size))
        for i, got in enumerate(out["capped"]):
            for q in peers:
                np.testing.assert_array_equal(got[q], np.arange(1 + (q + 2 * r + i) % 6) + 100 * q + 10 * r + i)
        for q in peers:  # the sized rounds' arrays that rode with the third and fourth capped rounds
            for i in (2, 3):
                np.testing.assert_array_equal(out[f"capped_with_sized_{i}"][q],
                                              [-q - i, -q - i, *(np.arange(BIG) - 3 * q - r - i)])
        follows, words = out["follow"]
        for q in peers:  # arrays came from the peers below this rank only, as their words said
            np.testing.assert_array_equal(words[q], [int(r > q), 40 + q])
            np.testing.assert_array_equal(follows[q], [9 + q, 9 + q, *(np.arange(BIG) + 5 * q)] if q < r else -1)
        again_got, sent = out["same_array"]
        assert [{q: list(g[q]) for q in peers} for g in again_got] == [{q: [q, i, 7] for q in peers} for i in range(3)]
        assert sent == 3 * 24 * (size - 1)
        assert "1-D C-contiguous words" in out["strided"] and out["after_strided"] == peers[0]
        assert "open for 6 words, not 7" in out["reopen"]
        assert out["own_buffers"]


# -- BFS on P ranks ----------------------------------------------------------------------------------
def _search_body(engine, setup_s, roots, validate):
    out = []
    for root in roots:
        recs = engine.search(int(root))
        viol = validate_rank(engine, int(root)) if validate else None
        out.append((engine.level.copy(), engine.parent.copy(), [r.direction for r in recs], viol,
                    [r.bytes_sent for r in recs]))
    return out


def _run(graph, roots, protocol="tcp", validate=True, **engine_kw):
    """Per root: global level and parent arrays, the directions taken, and validation counts."""
    parts = run_session(graph, _search_body, roots, validate, protocol=protocol, timeout=30.0,
                        engine_kw=engine_kw)
    res = []
    for i in range(len(roots)):
        level = np.concatenate([p[i][0] for p in parts])
        parent = np.concatenate([p[i][1] for p in parts])
        res.append((level, parent, parts[0][i][2], parts[0][i][3], sum(sum(p[i][4]) for p in parts)))
    return res


@pytest.fixture(scope="module")
def kron13():
    el = kronecker(13, seed=11)
    edges = el.edges.compute(scheduler="sync")
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=1 << 13)
    nz = np.flatnonzero(deg)
    roots = [int(nz[0]), int(nz[len(nz) // 3]), int(np.argmax(deg))]
    return el, edges, roots


@pytest.fixture(scope="module")
def kron13_single(cluster, kron13):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=1)
    res = _run(g, roots)
    g.release()
    return res


@pytest.mark.parametrize("nparts", [1, 2, 3, 4])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_kronecker_levels_equal_single_rank(cluster, kron13, kron13_single, nparts, protocol):
    el, edges, roots = kron13
    n = 1 << 13
    g = prepare(el, cluster, nparts=nparts)
    assert g.nparts == nparts and len(set(g.workers)) == nparts  # one rank per worker process
    res = _run(g, roots, protocol=protocol)
    for root, (level, parent, dirs, viol, nbytes), (level1, *_) in zip(roots, res, kron13_single):
        np.testing.assert_array_equal(level, level1)
        np.testing.assert_array_equal(level, scipy_levels(edges, n, root))
        assert not any(viol.values()), viol
        assert parent[root] == root
        assert (nbytes > 0) == (nparts > 1)  # ranks really exchanged data (and one rank sends nothing)
    # the big root goes top-down, bottom-up and back: both exchange paths ran
    assert {"td", "bu"} <= set(res[2][2])
    g.release()


@pytest.mark.parametrize("alpha,beta,expect", [(1e-9, 18.0, {"td"}), (1e9, 1e9, {"bu"})])
def test_pure_directions_on_three_ranks(cluster, kron13, alpha, beta, expect):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=3)
    for root, (level, _, dirs, viol, _) in zip(roots, _run(g, roots, alpha=alpha, beta=beta)):
        assert set(dirs) == expect
        np.testing.assert_array_equal(level, scipy_levels(edges, 1 << 13, root))
        assert not any(viol.values()), viol
    g.release()


def _corrupt_on_rank(engine, setup_s, root, bad_rank):
    engine.search(int(root))
    clean = validate_rank(engine, int(root))
    if engine.comm.rank == bad_rank:
        # a reached vertex (not the root) made its own parent: a cycle, a tree edge that does not go one
        # level up, and a parent that is not a neighbour
        v = int(np.flatnonzero(engine.level >= 2)[0])
        engine.parent[v] = engine.shard.lo + v
    return clean, validate_rank(engine, int(root))


@pytest.mark.parametrize("bad_rank", [0, 2])
def test_validation_on_ranks_detects_a_corrupt_parent(cluster, kron13, bad_rank):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=3)
    res = run_session(g, _corrupt_on_rank, roots[2], bad_rank, timeout=30.0)
    for clean, bad in res:  # every rank gets the same global counts
        assert not any(clean.values()), clean
        assert bad["tree"] >= 1 and bad["tree_edge_levels"] == 1 and bad["parent_is_neighbour"] == 1, bad
        assert bad["edge_levels"] == 0 and bad["spans_component"] == 0, bad
    g.release()


@pytest.mark.parametrize("name,nparts", [("facebook_combined.txt.gz", 4), ("CA-CondMat.txt", 3),
                                         ("CA-CondMat.txt", 2)])
def test_real_graphs_on_several_ranks(cluster, name, nparts):
    edges = load_snap(name)  # sparse ids (CA-CondMat: 1..108299) stay as they are: isolated vertices
    n = int(edges.max()) + 1
    el = from_dask_array(edges, n)
    deg = np.bincount(edges[edges[:, 0] != edges[:, 1]].ravel(), minlength=n)
    nz = np.flatnonzero(deg)
    roots = [int(nz[5]), int(nz[len(nz) // 2]), int(np.argmax(deg))]
    g1 = prepare(el, cluster, nparts=1)
    single = _run(g1, roots, validate=False)
    g1.release()
    g = prepare(el, cluster, nparts=nparts)
    for root, (level, parent, _, viol, _), (level1, *_) in zip(roots, _run(g, roots), single):
        np.testing.assert_array_equal(level, level1)
        np.testing.assert_array_equal(level, scipy_levels(edges, n, root))
        assert not any(viol.values()), viol
    g.release()


def test_graph500_driver_on_four_ranks(cluster):
    from breadth.bfs import graph500

    g = prepare(kronecker(12, seed=5), cluster, nparts=4)
    res = graph500(g, nroots=6, seed=3)
    assert res.valid and len(res.rows) == 6
    assert all(sum(lv["bytes_sent"] for lv in row["levels"]) > 0 for row in res.rows)
    g.release()


def _cli(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_bench_on_two_local_workers_and_on_an_existing_cluster(cluster, tmp_path):
    import json

    # (TCP, what auto picks on CPUs: with --protocol ucx the CLI's local cluster also runs Dask itself over
    # UCX, which is several times slower to start and run on this CPU machine; the UCX rank transport is
    # covered above)
    common = ["bench", "--scale", "11", "--roots", "6"]  # --protocol auto: TCP between CPU ranks
    a, b = tmp_path / "two.json", tmp_path / "four.json"
    r = _cli(*common, "--workers", "2", "--json", str(a))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "num_ranks: 2" in r.stdout and "protocol: tcp" in r.stdout
    r = _cli(*common, "--scheduler", cluster.scheduler.address, "--json", str(b))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"num_ranks: {NWORKERS}" in r.stdout
    two, four = json.loads(a.read_text()), json.loads(b.read_text())
    assert two["valid"] and four["valid"]
    # the same roots, and the same searches: component size, edge count and depth agree
    key = lambda row: (row["root"], row["reached"], row["nedge"], row["depth"])  # noqa: E731
    assert [key(x) for x in two["roots"]] == [key(x) for x in four["roots"]]


# -- session life-cycle ------------------------------------------------------------------------------
def _raise_on_rank1(engine, setup_s, root):
    engine.search(int(root))
    if engine.comm.rank == 1:
        raise ValueError("rank 1 gives up")
    for _ in range(3):
        engine.search(int(root))
    return "done"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rank_exception_raises_rankerror_and_cluster_goes_on(cluster, kron13, protocol):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=3)
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g, _raise_on_rank1, roots[0], protocol=protocol, timeout=30.0)
    took = time.monotonic() - t0
    assert info.value.rank == 1 and isinstance(info.value.cause, ValueError), info.value
    assert "rank 1 gives up" in str(info.value)
    assert took < 10.0  # peers see the closed connections at once, not after the 30 s timeout
    level, *_ = _run(g, roots[:1], protocol=protocol)[0]  # the same graph serves the next session
    np.testing.assert_array_equal(level, scipy_levels(edges, 1 << 13, roots[0]))
    g.release()


def _profiler_running(dask_worker=None) -> bool:
    from distributed import get_worker

    return (dask_worker or get_worker()).periodic_callbacks["profile"].is_running()


def _profiler_during_session(engine, setup_s):
    deadline = time.monotonic() + 5.0  # the stop is queued on the worker's event loop
    while _profiler_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    return _profiler_running()


def test_dask_profiler_paused_during_a_session_only(cluster, kron13):
    """The workers' statistical profiler (which samples the rank threads' stacks every 10 ms, holding the
    GIL) stops while a session's ranks run, and runs again after."""
    def everywhere():  # the last session's end queued the restart on each worker's event loop
        deadline = time.monotonic() + 5.0
        while not all(cluster.run(_profiler_running).values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return all(cluster.run(_profiler_running).values())

    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=2)
    assert everywhere()
    assert run_session(g, _profiler_during_session, protocol="tcp", timeout=30.0) == [False, False]
    assert everywhere()
    g.release()


def _rank2_stalls(engine, setup_s, root):
    engine.search(int(root))
    if engine.comm.rank == 2:
        time.sleep(5)  # alive but silent, longer than the session's 2 s timeout
    engine.search(int(root))
    return "done"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_silent_rank_is_named_after_timeout(cluster, kron13, protocol):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=3)
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g, _rank2_stalls, roots[2], protocol=protocol, timeout=2.0)
    took = time.monotonic() - t0
    # the peers give up after 2 s; rank 2 itself fails when it wakes up and finds them gone
    assert info.value.rank == 2 and isinstance(info.value.cause, CommError), info.value
    assert 2.0 < took < 12.0, took
    g.release()


def _rank2_stalls_until(engine, setup_s, root, flag):
    engine.search(int(root))
    if engine.comm.rank == 2:  # alive but silent until the test lets it go (at most a minute)
        with open(flag + ".start", "w") as f:
            f.write(repr(time.time()))
        t0 = time.monotonic()
        while not os.path.exists(flag) and time.monotonic() - t0 < 60:
            time.sleep(0.05)
    engine.search(int(root))
    return "done"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_stalled_rank_is_reported_at_about_the_timeout(cluster, kron13, protocol, tmp_path):
    # A rank that stays silent (not one that wakes up soon, as above) must be named once its peers give
    # up on it, after about `timeout` -- not after the peers' timeout plus another wait of the timeout
    # for the stalled rank to settle (251 s for a 120 s timeout).
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=3)
    flag, timeout = str(tmp_path / "wake"), 4.0
    try:
        with pytest.raises(RankError) as info:
            run_session(g, _rank2_stalls_until, roots[2], flag, protocol=protocol, timeout=timeout)
        took = time.time() - float(open(flag + ".start").read())
    finally:
        open(flag, "w").close()  # let the stalled rank's thread go: its worker serves the next tests
    assert info.value.rank == 2 and isinstance(info.value.cause, CommError), info.value
    assert "from rank(s) [2]" in str(info.value) and f"{timeout:g} s" in str(info.value), info.value
    print(f"stalled rank reported after {took:.2f} s ({protocol}, timeout {timeout:g} s)")
    assert timeout < took < timeout + 4.0, took  # the peers' timeout, a select tick, the settle grace
    g.release()


def test_more_ranks_than_worker_threads_is_refused_at_once(cluster, kron13):
    el, edges, roots = kron13
    g = prepare(el, cluster, nparts=NWORKERS + 1)  # two ranks on one single-threaded worker
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="ranks of this graph are placed on worker"):
        run_session(g, _search_body, roots[:1], False, timeout=30.0)
    assert time.monotonic() - t0 < 5.0
    g.release()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_worker_killed_mid_search_raises_rankerror(cluster, protocol):
    el = kronecker(14, seed=2)
    cluster.wait_for_workers(NWORKERS, timeout=60)  # a previous kill's worker is back
    g = prepare(el, cluster, nparts=3)
    edges = el.edges.compute(scheduler="sync")
    roots = [int(edges[i, 0]) for i in range(8)]
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g, kill_rank1_mid_search, roots, 0.5, 30.0, protocol=protocol, timeout=30.0)
    took = time.monotonic() - t0
    assert info.value.rank == 1 and info.value.worker == g.workers[1], info.value
    assert isinstance(info.value.cause, WorkerDied), info.value
    assert "killed by signal 9 (SIGKILL)" in str(info.value), info.value  # the nanny's word, in this process
    assert took < 15.0, took  # far below the 30 s search loop and the 30 s timeout
    # the cluster serves the next session once the nanny has replaced the worker
    cluster.wait_for_workers(NWORKERS, timeout=60)
    g2 = prepare(el, cluster, nparts=3)
    level, *_ = _run(g2, roots[:1], protocol=protocol, validate=False)[0]
    np.testing.assert_array_equal(level, scipy_levels(edges, 1 << 14, roots[0]))
    g2.release()


def test_worker_killed_after_a_direct_exchange_leaves_the_others_free(cluster):
    """The owners' direct exchange is a session too: once a worker holding its results dies, Dask recomputes
    them from its rank tasks; those stop at once (``SessionRerun``), rather than hold the surviving workers'
    threads waiting for the lost peer, and the search's error still names the killed worker."""
    import dask

    el = kronecker(14, seed=2)
    cluster.wait_for_workers(NWORKERS, timeout=60)
    with dask.config.set({"breadth.shuffle.exchange": "direct"}):
        g = prepare(el, cluster, nparts=NWORKERS)  # one owner per worker, as the direct exchange needs
    edges = el.edges.compute(scheduler="sync")
    roots = [int(edges[i, 0]) for i in range(8)]
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        run_session(g, kill_rank1_mid_search, roots, 0.5, 30.0, protocol="tcp", timeout=30.0)
    assert info.value.rank == 1 and isinstance(info.value.cause, WorkerDied), info.value
    for w in g.workers[:1] + g.workers[2:]:  # single-threaded: free once no rank task holds them
        f = cluster.submit(time.monotonic, workers=[w], allow_other_workers=False, pure=False)
        assert f.result(timeout=20) - t0 < 10.0
    g.release()


def test_result_read_after_its_worker_died_raises_workerlost(cluster):
    """A result's pieces are pinned to their ranks' workers: reading one after such a worker died raises
    ``WorkerLost`` naming it at once (Dask would wait forever for a worker of that address)."""
    import signal

    from breadth.bfs import WorkerLost, bfs

    cluster.wait_for_workers(NWORKERS, timeout=60)
    g = prepare(kronecker(12, seed=2), cluster, nparts=2)
    res = bfs(g, 1)
    assert res.summary()[0] > 1
    os.kill(cluster.run(os.getpid, workers=[g.workers[1]])[g.workers[1]], signal.SIGKILL)
    t0 = time.monotonic()
    while g.workers[1] in cluster.scheduler_info(n_workers=-1)["workers"] and time.monotonic() - t0 < 30:
        time.sleep(0.1)
    for read in (lambda: res.level, res.to_pandas, res.summary):
        t0 = time.monotonic()
        with pytest.raises(WorkerLost) as info:
            read()
        assert info.value.worker == g.workers[1] and time.monotonic() - t0 < 10.0, info.value
    cluster.wait_for_workers(NWORKERS, timeout=60)  # the nanny's replacement, for the tests after this one
