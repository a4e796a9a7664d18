"""Where a process's first GPU search session loses against its later ones (issue #26, item 1).

One process, one GPU worker: Kronecker graph built once, then ``--sessions`` Graph500 runs of the same
roots, each a search session of its own.  Writes per search the time and per level the direction, the
frontier and the local/exchange seconds, for every session, with the GPU's SM clock, power and
temperature sampled every 50 ms by ``nvidia-smi`` in the background and CuPy's pool size on the worker
after each session.

    python benchmarks/diag_gpu_sessions.py --scale 26 --sessions 3 --json $OUT/sessions.json
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time

import numpy as np

from results_file import machine, versions, write_json


def _pool_bytes() -> dict:
    import cupy as cp

    pool = cp.get_default_memory_pool()
    return {"used": int(pool.used_bytes()), "total": int(pool.total_bytes())}


def _clock_log(path: str) -> subprocess.Popen:
    return subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu",
                             "--format=csv,noheader,nounits", "-lms", "50", "-f", path])


def _clock_rows(path: str, t0_wall: float) -> list[list]:
    rows = []
    for line in open(path):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        try:
            ts = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S"))
            ts += float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            rows.append([round(ts - t0_wall, 3)] + [float(p) for p in parts[1:]])
        except ValueError:
            continue
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=int, default=26)
    ap.add_argument("--roots", type=int, default=64)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()

    from breadth.bfs import graph500
    from breadth.pipeline import kronecker, prepare
    from breadth.pipeline.cluster import local_cuda_cluster

    clocks = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    t0_wall = time.time()
    smi = _clock_log(clocks)
    marks = {}
    try:
        client = local_cuda_cluster(workers=1)
        marks["cluster"] = time.time() - t0_wall
        g = prepare(kronecker(a.scale, seed=1, device="gpu"), client, device="gpu")
        marks["built"] = time.time() - t0_wall
        sessions = []
        for s in range(a.sessions):
            start = time.time() - t0_wall
            res = graph500(g, nroots=a.roots, seed=2)
            end = time.time() - t0_wall
            rows = res.rows
            sessions.append({
                "start_s": start, "end_s": end, "hmean_teps": res.harmonic_mean_teps, "valid": res.valid,
                "times": [r["time"] for r in rows],
                "levels": [[(lv["direction"], lv["frontier"], lv["local_s"], lv["exchange_s"])
                            for lv in r["levels"]] for r in rows],
                "pool": list(client.run(_pool_bytes).values())[0],
            })
            t = np.array(sessions[-1]["times"])
            print(f"session {s}: {res.harmonic_mean_teps / 1e9:.1f} GTEPS valid={res.valid} "
                  f"median {np.median(t) * 1e3:.2f} ms first8 {np.median(t[:8]) * 1e3:.2f} ms "
                  f"last8 {np.median(t[-8:]) * 1e3:.2f} ms", flush=True)
        client.close()
    finally:
        smi.terminate()
        smi.wait()
    clock_rows = _clock_rows(clocks, t0_wall)
    write_json(a.json, {"machine": machine(), "versions": versions("cupy", "dask_cuda"), "scale": a.scale,
                        "roots": a.roots, "marks": marks, "construction_s": g.construction_time,
                        "sessions": sessions,
                        "clocks_columns": ["t_s", "sm_mhz", "mem_mhz", "power_w", "temp_c"],
                        "clocks": clock_rows})
    for s in sessions:
        sel = [c for c in clock_rows if s["start_s"] <= c[0] <= s["end_s"]]
        if sel:
            sm = np.array([c[1] for c in sel])
            print(f"  clocks {s['start_s']:.1f}-{s['end_s']:.1f} s: SM {sm.min():.0f}-{sm.max():.0f} MHz "
                  f"(median {np.median(sm):.0f}), power max {max(c[3] for c in sel):.0f} W")


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main()
