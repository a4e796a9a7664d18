"""Issue 5 diagnosis: what a host-device synchronisation and a one-element NCCL all-reduce cost in two plain
processes and inside dask-cuda workers (cluster protocol tcp and ucx), and what the waiting strategy, CPU
affinity and the worker's other threads have to do with it.

    python benchmarks/diag_sync.py --json $OUT/diag_sync.json

Per rank: CUDA_VISIBLE_DEVICES, CuPy's device and its PCI id, the CUDA context's scheduling flags, the
thread's CPU affinity, the cgroup's CPU limits, the process's threads with their CPU use over 0.5 s (a
spinning helper thread shows up there), then microseconds per: kernel + device synchronize, kernel +
2-element D2H copy, idle synchronize, kernel + event poll (spinning / time.sleep(0) between queries),
time.sleep(0), raw ncclAllReduce + stream synchronize / + spin / + sleep(0) poll, and the engine's
NCCLCommunicator.allreduce (spin wait, then the old sleep(0) wait).  Inside Dask the same again after the
rank thread's affinity is widened to every CPU.
"""

from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import sys
import time
import uuid

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import write_json  # noqa: E402


def _per(fn, reps):
    for _ in range(max(5, reps // 20)):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1e6


def _threads(dt=0.5):
    """(name, cpu ms over dt) of this process's threads, busiest first."""
    def sample():
        out = {}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
                out[tid] = (name, int(fields[11]) + int(fields[12]), fields[36] if len(fields) > 36 else "?")
            except OSError:
                pass
        return out
    a = sample()
    time.sleep(dt)
    b = sample()
    tick = os.sysconf("SC_CLK_TCK")
    rows = [(b[t][0], round((b[t][1] - a[t][1]) * 1000 / tick, 1), b[t][2]) for t in b if t in a]
    return sorted(rows, key=lambda r: -r[1])


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _info():
    import cupy as cp

    cp.zeros(1)  # the context exists and is current
    flags = ctypes.c_uint(0)
    try:
        rc = ctypes.CDLL("libcuda.so.1").cuCtxGetFlags(ctypes.byref(flags))
    except Exception as e:
        rc = repr(e)
    dev = cp.cuda.runtime.getDevice()
    try:
        pci = cp.cuda.runtime.deviceGetPCIBusId(dev)
    except Exception as e:
        pci = repr(e)
    return {"pid": os.getpid(), "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "device": dev,
            "pci": pci, "ctx_flags": flags.value, "ctx_flags_rc": rc,
            "affinity": sorted(os.sched_getaffinity(0)), "cpu_count": os.cpu_count(), "loadavg": os.getloadavg(),
            "cpu.max": _read("/sys/fs/cgroup/cpu.max"), "cpuset": _read("/sys/fs/cgroup/cpuset.cpus.effective"),
            "switchinterval": sys.getswitchinterval(), "threads": _threads()}


def _micro(nccl_comm=None, reps=400):
    import cupy as cp
    from cupy.cuda import nccl

    a = cp.zeros(2, cp.int64)
    dev = cp.cuda.Device()
    ev = cp.cuda.Event(block=False, disable_timing=True)
    st = cp.cuda.get_current_stream()
    res = {}

    def k_sync():
        a[0] += 1
        dev.synchronize()

    def k_get():
        a[0] += 1
        a.get()

    def poll(work, sleep):
        """``work()``, then wait for it by querying an event (spinning, or ``time.sleep(0)`` in between)."""
        def f():
            work()
            ev.record()
            while not ev.done:
                if sleep:
                    time.sleep(0)
        return f

    def kernel():
        a[0] += 1

    res["kernel_sync_us"] = _per(k_sync, reps)
    res["kernel_get_us"] = _per(k_get, reps)
    res["idle_sync_us"] = _per(dev.synchronize, reps)
    res["kernel_poll_spin_us"] = _per(poll(kernel, False), reps)
    res["kernel_poll_sleep0_us"] = _per(poll(kernel, True), reps)
    res["sleep0_us"] = _per(lambda: time.sleep(0), 200)
    if nccl_comm is not None:
        b = cp.zeros(1, cp.int64)

        def ar():
            nccl_comm.allReduce(b.data.ptr, b.data.ptr, 1, nccl.NCCL_INT64, nccl.NCCL_SUM, st.ptr)

        def ar_sync():
            ar()
            st.synchronize()

        res["nccl_allreduce_sync_us"] = _per(ar_sync, reps)
        res["nccl_allreduce_spin_us"] = _per(poll(ar, False), reps)
        res["nccl_allreduce_sleep0_us"] = _per(poll(ar, True), reps)
    return res


def _plain_rank(rank, size, q_uid, q_out):
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str((rank + i) % size) for i in range(size))
    import cupy as cp
    from cupy.cuda import nccl

    cp.cuda.Device(0).use()
    if rank == 0:
        uid = nccl.get_unique_id()
        for _ in range(size - 1):
            q_uid.put(uid)
    else:
        uid = q_uid.get()
    comm = nccl.NcclCommunicator(size, uid, rank)
    out = {"rank": rank, "info": _info(), "micro": _micro(comm)}
    q_out.put(out)


def plain(size=2):
    ctx = mp.get_context("spawn")
    q_uid, q_out = ctx.Queue(), ctx.Queue()
    ps = [ctx.Process(target=_plain_rank, args=(r, size, q_uid, q_out)) for r in range(size)]
    for p in ps:
        p.start()
    res = sorted((q_out.get(timeout=120) for _ in ps), key=lambda r: r["rank"])
    for p in ps:
        p.join(30)
    return res


def _dask_rank(rank, size, session):
    from breadth.bfs.transport.nccl import NCCLCommunicator

    old = sys.getswitchinterval()
    sys.setswitchinterval(2e-5)  # as run_session's rank tasks
    try:
        comm = NCCLCommunicator.connect(rank, size, session, timeout=60.0)
        out = {"rank": rank, "info": _info(), "micro": _micro(comm._comm)}
        one = np.zeros(1, np.int64)
        comm._spin_s = 0.002
        out["micro"]["comm_allreduce_spin_us"] = _per(lambda: comm.allreduce(one), 400)
        comm._spin_s = 0.0
        out["micro"]["comm_allreduce_sleep0_us"] = _per(lambda: comm.allreduce(one), 400)
        comm._spin_s = 0.002
        aff = os.sched_getaffinity(0)
        os.sched_setaffinity(0, range(os.cpu_count()))
        out["affinity_wide"] = sorted(os.sched_getaffinity(0))
        out["micro_wide"] = _micro(comm._comm)
        out["micro_wide"]["comm_allreduce_spin_us"] = _per(lambda: comm.allreduce(one), 400)
        os.sched_setaffinity(0, aff)
        comm.close()
        return out
    finally:
        sys.setswitchinterval(old)


def in_dask(protocol, size=2):
    from breadth.pipeline.cluster import local_cuda_cluster, worker_addresses

    client = local_cuda_cluster(workers=size, protocol=protocol)
    try:
        ws = worker_addresses(client)
        session = f"diag-{uuid.uuid4().hex[:8]}"
        futs = [client.submit(_dask_rank, r, size, session, workers=[ws[r]], allow_other_workers=False, pure=False)
                for r in range(size)]
        return client.gather(futs)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", required=True)
    ap.add_argument("--protocols", nargs="+", default=["ucx", "tcp"])
    args = ap.parse_args()
    out = {"plain": plain()}
    for proto in args.protocols:
        try:
            out[f"dask_{proto}"] = in_dask(proto)
        except Exception as e:
            out[f"dask_{proto}"] = repr(e)
    write_json(args.json, out, default=str)
    keys = ["kernel_sync_us", "kernel_get_us", "idle_sync_us", "kernel_poll_spin_us", "kernel_poll_sleep0_us",
            "sleep0_us", "nccl_allreduce_sync_us", "nccl_allreduce_spin_us", "nccl_allreduce_sleep0_us",
            "comm_allreduce_spin_us", "comm_allreduce_sleep0_us"]
    print("where        rank " + " ".join(f"{k[:-3][:14]:>14}" for k in keys))
    for where, ranks in out.items():
        if isinstance(ranks, str):
            print(where, ranks)
            continue
        for r in ranks:
            for tag, m in (("", r["micro"]), ("+wide", r.get("micro_wide"))):
                if m:
                    print(f"{where + tag:12s} {r['rank']:4d} " + " ".join(f"{m.get(k, float('nan')):14.1f}" for k in keys))
    for where, ranks in out.items():
        if isinstance(ranks, str):
            continue
        for r in ranks:
            i = r["info"]
            aff = i["affinity"]
            print(f"{where} rank {r['rank']}: CVD={i['CUDA_VISIBLE_DEVICES']} dev={i['device']} pci={i['pci']} "
                  f"flags={i['ctx_flags']} cpus={len(aff)} [{aff[0]}..{aff[-1]}] of {i['cpu_count']} "
                  f"cpu.max={i['cpu.max']} cpuset={i['cpuset']} load={i['loadavg'][0]:.1f} "
                  f"busy threads={[t for t in i['threads'] if t[1] > 20][:6]}")


if __name__ == "__main__":
    main()
