"""What two processes sharing one GPU pay per device wait: a tiny kernel and its synchronisation, timed in one
process alone and in two processes at once, with each way a host thread can wait for the device.

    python benchmarks/diag_gpu_context_switch.py --json $OUT/gpu_context_switch.json

Each case starts fresh processes (spawned, CuPy only: no Dask, no UCX), lines them up on a barrier and times
``--reps`` rounds of an 8-element kernel followed by a stream synchronisation; the median microseconds of each
process are reported.  Cases: one process; two in step; two where the second stays idle after creating its
context; two taking strict turns (a shared counter); two in step with ``cudaDeviceScheduleSpin``, ``Yield`` or
``BlockingSync`` set before the context exists (``cudaSetDeviceFlags``); two in step with the flags changed on
the live context (``cuCtxSetFlags``, as a worker that already has a context would have to).  Two GPU ranks of
one shared-GPU session are the "in step" case: their kernels and waits come at the same moments.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import time

FLAGS = {"spin": 1, "yield": 2, "block": 4}


def _set_flags_before(mode: str) -> None:
    for name in ("libcudart.so", "libcudart.so.13", "libcudart.so.12"):
        try:
            rt = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        import glob

        rt = ctypes.CDLL(sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"))[-1])
    err = rt.cudaSetDeviceFlags(ctypes.c_uint(FLAGS[mode]))
    if err:
        raise RuntimeError(f"cudaSetDeviceFlags: error {err}")


def _set_flags_live(mode: str) -> None:
    cu = ctypes.CDLL("libcuda.so.1")
    f = ctypes.c_uint(0)
    cu.cuCtxGetFlags(ctypes.byref(f))
    if cu.cuCtxSetFlags(ctypes.c_uint((f.value & ~7) | FLAGS[mode])):
        raise RuntimeError("cuCtxSetFlags failed (CUDA 12.1+ drivers)")


def _proc(i: int, case: dict, reps: int, barrier, turn, out) -> None:
    if case.get("before"):
        _set_flags_before(case["before"])
    import cupy as cp

    x = cp.arange(8, dtype=cp.int64)
    y = cp.empty_like(x)
    inc = cp.ElementwiseKernel("int64 a", "int64 b", "b = a + 1", "breadth_diag_inc")
    st = cp.cuda.get_current_stream()
    inc(x, y)
    st.synchronize()
    if case.get("live"):
        _set_flags_live(case["live"])
    barrier.wait()
    if case.get("idle") and i == 1:
        time.sleep(reps * 3e-4 + 1.0)
        out.put((i, None))
        return
    ts = []
    for _ in range(reps):
        if case.get("turns"):
            while turn.value % 2 != i:
                pass
        t0 = time.perf_counter()
        inc(x, y)
        st.synchronize()
        ts.append(time.perf_counter() - t0)
        if case.get("turns"):
            turn.value += 1
    ts.sort()
    out.put((i, ts[len(ts) // 2] * 1e6))


CASES = {
    "one_process": {"n": 1},
    "two_in_step": {"n": 2},
    "two_second_idle": {"n": 2, "idle": True},
    "two_taking_turns": {"n": 2, "turns": True},
    "two_in_step_spin": {"n": 2, "before": "spin"},
    "two_in_step_yield": {"n": 2, "before": "yield"},
    "two_in_step_block": {"n": 2, "before": "block"},
    "two_in_step_block_live": {"n": 2, "live": "block"},
    "one_process_block": {"n": 1, "before": "block"},
}


def run(case: dict, reps: int) -> list[float]:
    ctx = mp.get_context("spawn")
    barrier, out, turn = ctx.Barrier(case["n"]), ctx.Queue(), ctx.Value("l", 0, lock=False)
    ps = [ctx.Process(target=_proc, args=(i, case, reps, barrier, turn, out)) for i in range(case["n"])]
    for p in ps:
        p.start()
    res = dict(out.get(timeout=120) for _ in ps)
    for p in ps:
        p.join()
    return [res[i] for i in sorted(res) if res[i] is not None]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2, help="every case this many times, cases interleaved")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    doc = {"benchmark": "gpu_context_switch", "unit": "median microseconds per kernel + synchronisation, per process",
           "reps": args.reps, "cases": {k: [] for k in CASES}}
    for r in range(args.rounds):
        for name, case in CASES.items():
            us = run(case, args.reps)
            doc["cases"][name].append(us)
            print(f"round {r} {name:24s} " + " ".join(f"{u:7.1f}" for u in us), flush=True)
    import cupy as cp  # this process's own context only now, after the cases

    doc.update({"gpu": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "cupy": cp.__version__,
                "driver": cp.cuda.runtime.driverGetVersion()})
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
