"""Raw ucxx between ranks 0 and 1 of a search session, to time UCX itself beside the communicators
(``python -m benchmarks.bench_multigpu --commbench --raw-ucxx``): a context, worker and endpoint of their own,
the listener's address sent through the session's communicator, and the ping-pong timed on such a pair."""

from __future__ import annotations

import time

import numpy as np

_HANDSHAKE = 1 << 62  # tags of the handshake's messages (the callers' own tags stay below it)


def raw_pair(comm, wakeup: bool = False, error_handling: bool = True):
    """Collective over ``comm``'s ranks: an endpoint between ranks 0 and 1 on a ucxx context of its own (the
    TAG feature; ``wakeup``: TAG and WAKEUP with the worker in blocking progress mode, as the UCX
    communicator's; ``error_handling``: ucxx's default, with which UCX leaves out its shared-memory transports,
    so that host messages and CUDA IPC's control messages between two processes of one host go over TCP; the
    UCX communicator's rounds with a peer of its host go without it).  Returns ``(worker, endpoint, api, Array, keep)``: the endpoint is None on ranks past 1,
    ``keep`` holds the context and listener alive."""
    import ucxx._lib.libucxx as api
    from ucxx._lib.arr import Array

    from breadth.bfs.transport.wire_format import worker_host

    r = comm.rank
    feats = (api.Feature.TAG, api.Feature.WAKEUP) if wakeup else (api.Feature.TAG,)
    ctx = api.UCXContext(feature_flags=feats)
    worker = api.UCXWorker(ctx)
    if wakeup:
        worker.init_blocking_progress_mode()
    got, listener = {}, None
    if r == 0:
        def accept(conn_request):
            got["ep"] = listener.create_endpoint_from_conn_request(conn_request,
                                                                   endpoint_error_handling=error_handling)

        listener = api.UCXListener.create(worker=worker, port=0, cb_func=accept)
    host = np.frombuffer(worker_host().encode().ljust(64, b"\0"), np.uint8)
    port = np.array([listener.port if listener is not None else 0], np.int64)
    addr = comm.allgather(np.concatenate([host, port.view(np.uint8)]))[0]
    if r == 1:
        got["ep"] = api.UCXEndpoint.create(worker, bytes(addr[:64]).rstrip(b"\0").decode(),
                                           int(addr[64:].view(np.int64)[0]), endpoint_error_handling=error_handling)
    elif r == 0:
        while "ep" not in got:
            worker.progress()
    if r < 2:  # one message each way, so that both ends are connected when this returns: rank 1's connection
        # request goes out only while its worker is progressed, and rank 0 waits for it above
        mine, theirs = np.full(1, r, np.int64), np.full(1, -1, np.int64)
        reqs = [got["ep"].tag_recv(Array(theirs), api.UCXXTag(_HANDSHAKE + 1 - r)),
                got["ep"].tag_send(Array(mine), api.UCXXTag(_HANDSHAKE + r))]
        while not all(q.completed for q in reqs):
            worker.progress()
        for q in reqs:
            q.check_error()
    return worker, got.get("ep"), api, Array, (ctx, listener)


def ping_pong(pair, a, b, rank: int, reps: int) -> list:
    """``reps`` round trips of ucxx ``Array`` ``a`` on ``pair`` = (worker, endpoint, API): rank 0 sends it and
    receives ``b`` back, rank 1 receives into ``b`` and sends ``a``, the worker progressed in this thread; each
    round trip's seconds."""
    worker, ep, api = pair

    def wait(q):
        while not q.completed:
            worker.progress()
        q.check_error()

    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        if rank == 0:
            wait(ep.tag_send(a, tag=api.UCXXTag(1)))
            wait(ep.tag_recv(b, tag=api.UCXXTag(2)))
        else:
            wait(ep.tag_recv(b, tag=api.UCXXTag(1)))
            wait(ep.tag_send(a, tag=api.UCXXTag(2)))
        ts.append(time.perf_counter() - t0)
    return ts


def release(pair, within: float = 0.1) -> None:
    """Close ``pair``'s endpoint (``raw_pair``'s tuple) without waiting for the peer beyond ``within`` seconds of
    progress: an endpoint without peer error handling is otherwise closed, as it is dropped, by a blocking close
    that waits until the peer answers, which a peer that closed first never does (as in the UCX communicator's
    release).  Call it on both ranks, after a collective that ends their use of the pair."""
    worker, ep = pair[0], pair[1]
    if ep is None:
        return
    try:
        req = ep.close()
    except Exception:
        return
    deadline = time.perf_counter() + within
    while req is not None and not req.completed and time.perf_counter() < deadline:
        worker.progress()

