"""UCX between two CPU processes of this host, beside TCP sockets: which UCX settings move host buffers fastest.

    python benchmarks/diag_ucx_host.py --json benchmarks/results/ucx_cpu_settings.json

Two spawned processes exchange one message each way per round (both post their receive and send, then
progress until both complete, as the UCX communicator's rounds do: a busy poll of 50 us, then UCX's epoll
wake-up) for each size, ``--reps`` rounds after a warm-up; the figure is the median round in microseconds.
Each ``--configs`` entry is a UCX context configuration (``KEY=VAL,KEY=VAL`` without the ``UCX_`` prefix;
``default`` is UCX's own choice; ``ERROR_HANDLING=n`` creates the endpoints without peer error handling, which
lets UCX use its shared-memory transports); ``tcp`` times a socket pair the same way (non-blocking, ``select`` when
nothing moves).  ``breadth.bfs.transport.ucx._HOST_UCX`` is the configuration CPU ranks use; this script is
where its numbers come from.  Needs ucxx (the ``ucx`` extra).

``--gpu`` times GPU ranks' messages instead (a GPU machine): each process makes its CUDA context before UCX,
as ``UCXCommunicator.connect`` does, the host buffers are page-locked (as the capped rounds' are), and
``--device-sizes`` adds CuPy buffers moved device to device -- so that a configuration that speeds up the
host messages is seen beside what it does to the device ones:

    python benchmarks/diag_ucx_host.py --gpu --sizes 40 32768 131072 --device-sizes 8 262144 67108864 \
        --configs default ERROR_HANDLING=n --json $OUT/ucx_gpu_host_settings.json
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import select
import socket
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402

SPIN_S = 5e-5


def _ucx_side(rank: int, ports, results, config: dict, sizes: list[int], reps: int, gpu: bool = False,
              device_sizes: tuple = ()) -> None:
    cp = None
    if gpu:
        import cupy as cp

        cp.cuda.runtime.free(0)  # a CUDA context before UCX looks for CUDA memory support
    import ucxx._lib.libucxx as api
    from ucxx._lib.arr import Array

    config = dict(config)
    handled = config.pop("ERROR_HANDLING", "y") == "y"  # (not a UCX variable: the endpoints' error handling)
    ctx = api.UCXContext(config_dict=config, feature_flags=(api.Feature.TAG, api.Feature.WAKEUP))
    worker = api.UCXWorker(ctx)
    worker.init_blocking_progress_mode()
    accepted: list = []
    listener = None

    def accept(conn_request):
        accepted.append(listener.create_endpoint_from_conn_request(conn_request, handled))

    listener = api.UCXListener.create(worker, 0, accept)
    ports[rank].put(listener.port)
    ep = api.UCXEndpoint.create(worker, "127.0.0.1", int(ports[1 - rank].get()), handled)

    def wait(reqs):
        t0 = time.perf_counter()
        while not all(r.completed for r in reqs):
            if time.perf_counter() - t0 < SPIN_S:
                worker.progress()
            else:
                worker.progress_worker_event(2)

    def host(n):
        if cp is None:
            return np.ones(n, np.uint8)
        a = np.frombuffer(cp.cuda.alloc_pinned_memory(n), np.uint8, n)
        a[:] = 1
        return a

    out, tag = {}, 0
    for n in list(sizes) + [-d for d in device_sizes]:  # negative: a device size
        if n < 0:
            send, recv, times = cp.ones(-n, cp.uint8), cp.empty(-n, cp.uint8), []
        else:
            send, recv, times = host(n), host(n), []
        for i in range(reps + 20):
            tag += 1
            t0 = time.perf_counter()
            r = ep.tag_recv(Array(recv), api.UCXXTag(2 * tag + 1 - rank))
            s = ep.tag_send(Array(send), api.UCXXTag(2 * tag + rank))
            wait([r, s])
            times.append(time.perf_counter() - t0)
        out[f"device_{-n}" if n < 0 else n] = float(np.median(times[20:]) * 1e6)
    results.put((rank, out))
    time.sleep(0.5)  # the peer's last round completes before this endpoint closes


def _tcp_side(rank: int, ports, results, config: dict, sizes: list[int], reps: int, gpu: bool = False,
              device_sizes: tuple = ()) -> None:
    if rank == 0:
        lsock = socket.create_server(("127.0.0.1", 0))
        ports[0].put(lsock.getsockname()[1])
        s, _ = lsock.accept()
    else:
        s = socket.create_connection(("127.0.0.1", ports[0].get()))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setblocking(False)
    out = {}
    for n in sizes:
        send, recv, times = memoryview(np.ones(n, np.uint8)), memoryview(np.empty(n, np.uint8)), []
        for i in range(reps + 20):
            t0 = time.perf_counter()
            sent = got = 0
            while sent < n or got < n:
                if sent < n:
                    try:
                        sent += s.send(send[sent:])
                    except BlockingIOError:
                        pass
                if got < n:
                    try:
                        got += s.recv_into(recv[got:])
                    except BlockingIOError:
                        select.select([s], [s] if sent < n else [], [], 1.0)
            times.append(time.perf_counter() - t0)
        out[n] = float(np.median(times[20:]) * 1e6)
    results.put((rank, out))
    time.sleep(0.3)


def run_pair(kind: str, config: dict, sizes: list[int], reps: int, gpu: bool = False, device_sizes: tuple = ()
             ) -> dict:
    """Median round (us) per size (``device_N`` for a device one), as rank 0 saw it."""
    ctx = mp.get_context("spawn")
    ports, results = [ctx.Queue(), ctx.Queue()], ctx.Queue()
    target = _tcp_side if kind == "tcp" else _ucx_side
    procs = [ctx.Process(target=target, args=(r, ports, results, config, sizes, reps, gpu, device_sizes))
             for r in range(2)]
    for p in procs:
        p.start()
    got = dict([results.get(timeout=300), results.get(timeout=300)])
    for p in procs:
        p.join()
    return got[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[40, 16448, 65552, 200000, 823936],
                    help="bytes each way (defaults: a counter, a full 16 KiB slot, a scale-20 bitmap half, "
                         "scale-20 levels' pair lists)")
    ap.add_argument("--configs", nargs="+", default=["default", "RNDV_SCHEME=put_zcopy,RNDV_THRESH=32k", "tcp"])
    ap.add_argument("--gpu", action="store_true", help="GPU ranks (see above)")
    ap.add_argument("--device-sizes", type=int, nargs="*", default=[], help="device bytes each way (with --gpu)")
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=2, help="runs of every configuration, alternating")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    os.environ.setdefault("UCX_WARN_UNUSED_ENV_VARS", "n")
    doc = {"benchmark": "ucx_host_settings", "machine": machine(), "versions": versions("ucxx"), "args": vars(args),
           "unit": "median round, both ways, microseconds", "runs": []}
    for rep in range(args.repeats):
        for name in args.configs:
            config = {} if name in ("default", "tcp") else dict(kv.split("=", 1) for kv in name.split(","))
            us = run_pair("tcp" if name == "tcp" else "ucx", config, args.sizes, args.reps, args.gpu,
                          tuple(args.device_sizes) if args.gpu else ())
            doc["runs"].append({"config": name, "repeat": rep, "round_us": us})
            print(f"{name:45s} " + "  ".join(f"{n}: {v:7.0f}" for n, v in us.items()), flush=True)
            write_json(args.json, doc)


if __name__ == "__main__":
    main()
