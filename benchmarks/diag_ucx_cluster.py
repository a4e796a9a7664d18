"""What a UCX Dask cluster costs the search ranks: two workers on one GPU, cluster protocol TCP, UCX with
distributed-ucxx's defaults, and UCX as :func:`breadth.pipeline.cluster.local_cuda_cluster` starts it.

    python benchmarks/diag_ucx_cluster.py --json $OUT/ucx_cluster_progress.json

Per variant and rank: microseconds per barrier of the TCP communicator inside a Dask task (with the
search's 20 µs switch interval), the CPU ticks (1/100 s) every thread of the worker used meanwhile (a
thread that spins while the rank waits shows up there, named), and the round trip of 8 host bytes with
ucxx's low-level API between the two workers (progressed in the task's thread).  distributed-ucxx's
defaults are forced with ``UCXPY_PROGRESS_MODE=blocking UCXPY_ENABLE_PYTHON_FUTURE=0`` (set variables win
over the cluster's own choice).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import machine, versions, write_json  # noqa: E402
from raw_ucxx import ping_pong  # noqa: E402


def _thread_ticks() -> dict:
    """{native thread id: (name, user + system ticks)} of this process."""
    import threading

    names = {str(t.native_id): t.name for t in threading.enumerate()}
    out = {}
    for t in os.listdir("/proc/self/task"):
        try:
            st = open(f"/proc/self/task/{t}/stat").read()
            f = st[st.rindex(")") + 2:].split()
            out[t] = (names.get(t, "native:" + st[st.index("(") + 1:st.rindex(")")]), int(f[11]) + int(f[12]))
        except (OSError, ValueError):
            pass
    return out


def _barriers(rank: int, size: int, session: str, n: int) -> dict:
    from breadth.bfs.engine.session import make_communicator

    sys.setswitchinterval(2e-5)  # as a search rank does (breadth.bfs.engine.session)
    comm = make_communicator(rank, size, session, "tcp", 60.0, "gpu")
    try:
        for _ in range(50):
            comm.barrier()
        c0 = _thread_ticks()
        t0 = time.perf_counter()
        for _ in range(n):
            comm.barrier()
        dt = time.perf_counter() - t0
        c1 = _thread_ticks()
    finally:
        comm.close()
    busy = sorted(((c1[t][1] - c0[t][1], c1[t][0]) for t in c1 if t in c0), reverse=True)[:4]
    return {"barrier_us": dt / n * 1e6, "wall_ticks": round(dt * 100), "busiest_threads": busy}


def _raw_round_trip(rank: int, session: str, reps: int) -> float:
    import ucxx._lib.libucxx as ucx_api
    from distributed import Variable, get_client
    from ucxx._lib.arr import Array

    from breadth.bfs.transport.wire_format import worker_host

    sys.setswitchinterval(2e-5)
    worker = ucx_api.UCXWorker(ucx_api.UCXContext(feature_flags=(ucx_api.Feature.TAG,)))
    var, got = Variable(f"{session}-raw", client=get_client()), {}
    if rank == 0:
        def accept(conn_request):
            got["ep"] = listener.create_endpoint_from_conn_request(conn_request, endpoint_error_handling=True)

        listener = ucx_api.UCXListener.create(worker=worker, port=0, cb_func=accept)
        var.set([worker_host(), listener.port])
        deadline = time.monotonic() + 30
        while "ep" not in got and time.monotonic() < deadline:
            worker.progress()
    else:
        host, port = var.get(timeout=30)
        got["ep"] = ucx_api.UCXEndpoint.create(worker, host, port, endpoint_error_handling=True)
    ep = got["ep"]

    a, b = Array(np.ones(8, np.uint8)), Array(np.zeros(8, np.uint8))
    ts = ping_pong((worker, ep, ucx_api), a, b, rank, reps + 10)[10:]
    time.sleep(0.3)  # the peer's last receive completes before this end closes
    return float(np.median(ts) * 1e6)


def run_variant(name: str, protocol: str, env: dict, barriers: int, reps: int) -> dict:
    from breadth.pipeline.cluster import local_cuda_cluster, worker_addresses

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        t0 = time.perf_counter()
        client = local_cuda_cluster(workers=2, ranks_per_gpu=2, protocol=protocol)
        start_s = time.perf_counter() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        ws = worker_addresses(client)
        s = uuid.uuid4().hex
        bar = client.gather([client.submit(_barriers, r, 2, s, barriers, workers=[ws[r]], pure=False)
                             for r in range(2)])
        s = uuid.uuid4().hex
        raw = client.gather([client.submit(_raw_round_trip, r, s, reps, workers=[ws[r]], pure=False)
                             for r in range(2)])
        progress = client.run(lambda: {k: os.environ.get(k) for k in ("UCXPY_PROGRESS_MODE",
                                                                      "UCXPY_ENABLE_PYTHON_FUTURE")})
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    return {"variant": name, "cluster_protocol": protocol, "env": env, "cluster_start_s": start_s,
            "worker_ucx_settings": list(progress.values()), "ranks": bar, "raw_ucxx_host_8B_round_trip_us": raw}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--barriers", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=500)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    import cupy as cp

    out = {"benchmark": "ucx_cluster_progress", "machine": machine(), "versions": versions("cupy", "ucxx"),
           "gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "args": vars(args), "runs": []}
    variants = [("tcp cluster", "tcp", {}),
                ("ucx cluster, distributed-ucxx defaults", "ucx",
                 {"UCXPY_PROGRESS_MODE": "blocking", "UCXPY_ENABLE_PYTHON_FUTURE": "0"}),
                ("ucx cluster, local_cuda_cluster", "ucx", {}),
                ("tcp cluster again", "tcp", {})]
    print(f"{'variant':<42} {'barrier us':>10} {'raw ucxx us':>11}  busiest threads (ticks)", flush=True)
    for name, protocol, env in variants:
        r = run_variant(name, protocol, env, args.barriers, args.reps)
        out["runs"].append(r)
        write_json(args.json, out)
        b = r["ranks"][0]
        print(f"{name:<42} {b['barrier_us']:10.1f} {r['raw_ucxx_host_8B_round_trip_us'][0]:11.1f}  "
              f"{b['busiest_threads'][:2]} of {b['wall_ticks']}", flush=True)


if __name__ == "__main__":
    main()
