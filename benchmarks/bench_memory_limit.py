"""Memory limits honoured: the smallest ``--memory-limit`` that works, and each worker's peak RSS under it.

For each scale, ``breadth generate --scale S --workers W --memory-limit L`` runs as a subprocess (the CLI,
as a user runs it) for ``L`` = the minimum that :mod:`breadth.pipeline.memory_plan` computes, then a few
values upward from it, until one *works*: the command succeeds and no worker's sampled RSS went above
``L``.  A thread samples the RSS of every worker process (psutil, every 50 ms).  The store of the
smallest working limit is then searched and validated (``breadth bench STORE``, without a limit: the
search runs Numba kernels, and a limit below the Numba path's baseline only fits the NumPy path of
``generate``).  The idle RSS of a
worker process is measured too: started from a script that imports only distributed, and from one that
imports the CLI module first, as the ``breadth`` console script does (a spawned worker re-imports the
parent's main module).  Not a test::

    python benchmarks/bench_memory_limit.py --scales 18 20 --json benchmarks/results/memory_limit_cpu.json
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results_file import versions, write_json  # noqa: E402

MiB = 1 << 20
STEPS = (1.0, 1.05, 1.1, 1.2, 1.35, 1.5, 2.0)

IDLE = """
import os, sys, time
{imports}
if __name__ == "__main__":
    import psutil
    from distributed import Client, LocalCluster
    c = Client(LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None))
    time.sleep(3)
    print(" ".join(str(psutil.Process(p).memory_info().rss) for p in c.run(os.getpid).values()))
    c.close(); c.cluster.close()
"""


class WorkerSampler(threading.Thread):
    """Peak RSS (bytes) of every worker process under ``root`` (children running ``spawn_main``), and the
    seconds (since the sampler started) at which each was first and last seen."""

    def __init__(self, root: int, period: float = 0.05):
        super().__init__(daemon=True)
        self.root, self.period = psutil.Process(root), period
        self.peak: dict[int, int] = {}
        self.seen: dict[int, list[float]] = {}
        self.t0 = time.perf_counter()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                kids = self.root.children(recursive=True)
            except psutil.Error:
                return
            for k in kids:
                try:
                    if "spawn_main" not in " ".join(k.cmdline()):
                        continue
                    rss = k.memory_info().rss
                except psutil.Error:
                    continue
                self.peak[k.pid] = max(self.peak.get(k.pid, 0), rss)
                t = round(time.perf_counter() - self.t0, 2)
                self.seen.setdefault(k.pid, [t, t])[1] = t
            self.stop.wait(self.period)


def run_sampled(cmd: list[str], timeout: float) -> dict:
    """Run ``cmd``; its exit status, wall seconds, stderr's last lines and each worker's peak RSS."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    s = WorkerSampler(p.pid)
    s.start()
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    s.stop.set()
    s.join()
    lines = [ln for ln in err.splitlines() if ln.startswith("breadth:")]
    # workers in order of start; a process started after the first ones is one the nanny started again
    pids = sorted(s.peak, key=lambda pid: s.seen[pid][0])
    return {"cmd": " ".join(cmd[2:]), "rc": p.returncode, "wall_s": time.perf_counter() - t0,
            "stdout_last": out.strip().splitlines()[-1:] if out.strip() else [], "breadth_stderr": lines,
            "worker_processes": [{"pid": pid, "peak_rss_bytes": s.peak[pid], "first_seen_s": s.seen[pid][0],
                                  "last_seen_s": s.seen[pid][1]} for pid in pids],
            "peak_rss_per_worker_bytes": [s.peak[pid] for pid in pids]}


def idle_worker_rss(import_cli: bool) -> list[int]:
    """RSS (bytes) of the two idle workers of a local cluster started by a script that imports the CLI
    module first (``import_cli``) or only distributed."""
    imports = "from breadth.pipeline.cli import main  # noqa" if import_cli else ""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "idle.py")
        with open(path, "w") as f:
            f.write(IDLE.format(imports=imports))
        out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120).stdout
    return [int(x) for x in out.split()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[18, 20])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--roots", type=int, default=4, help="validated searches on the smallest working limit's store")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()

    from breadth.pipeline.memory_plan import NUMPY_WORKER_BASELINE, WORKER_BASELINE, plan_memory

    threads = max(1, (os.cpu_count() or 1) // args.workers)
    doc: dict = {"benchmark": "memory_limit", "args": vars(args),
                 "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                             "memory_bytes": psutil.virtual_memory().total, "loadavg_start": os.getloadavg()},
                 "versions": versions(), "worker_baseline_bytes": WORKER_BASELINE,
                 "numpy_path_worker_baseline_bytes": NUMPY_WORKER_BASELINE, "threads_per_worker": threads}
    doc["idle_worker_rss_bytes"] = {"script_importing_only_distributed": idle_worker_rss(False),
                                    "script_importing_the_cli_module": idle_worker_rss(True)}
    print("idle worker RSS (MiB): plain", [b // MiB for b in doc["idle_worker_rss_bytes"]
                                          ["script_importing_only_distributed"]],
          "with the CLI module", [b // MiB for b in doc["idle_worker_rss_bytes"]["script_importing_the_cli_module"]],
          flush=True)
    base = [sys.executable, "-m", "breadth.pipeline.cli"]
    doc["scales"] = []
    work = tempfile.mkdtemp(prefix="bench-memory-limit-")
    try:
        for scale in args.scales:
            # generate's minimum: the NumPy path's (no Numba in the workers) when it is below the Numba path's
            plan = plan_memory(10**15, 1 << scale, 16 << scale, args.workers, threads, store=True, numpy_path=True)
            numba = plan_memory(10**15, 1 << scale, 16 << scale, args.workers, threads, store=True)
            row: dict = {"scale": scale, "workers": args.workers, "computed_minimum_bytes": plan.minimum,
                         "computed_minimum_numba_path_bytes": numba.minimum, "runs": []}
            store = os.path.join(work, f"s{scale}.store")
            # the target limit, and a run without a limit (default chunks, in memory) for reference
            for name, extra in (("limit_100MB", ["--memory-limit", "100MB"]),
                                ("limit_numba_path_minimum", ["--memory-limit", str(numba.minimum)]),
                                ("no_limit", [])):
                shutil.rmtree(store, ignore_errors=True)
                r = run_sampled(base + ["generate", "--scale", str(scale), "--workers", str(args.workers),
                                        "--out", store, *extra], args.timeout)
                row[name] = r
                print(f"scale {scale} {name}: rc {r['rc']}, worker peaks "
                      f"{[b // MiB for b in r['peak_rss_per_worker_bytes']]} MiB; {r['breadth_stderr'][-1:]}",
                      flush=True)
            for step in STEPS:
                limit = int(plan.minimum * step)
                shutil.rmtree(store, ignore_errors=True)
                r = run_sampled(base + ["generate", "--scale", str(scale), "--workers", str(args.workers),
                                        "--memory-limit", str(limit), "--out", store], args.timeout)
                peak = max(r["peak_rss_per_worker_bytes"] or [0])  # every worker process, restarted ones too
                r.update(limit_bytes=limit, limit_over_minimum=step, peak_within_limit=peak <= limit,
                         works=r["rc"] == 0 and peak <= limit)
                row["runs"].append(r)
                print(f"scale {scale}: limit {limit / 1e6:.0f} MB (x{step}): rc {r['rc']}, {r['wall_s']:.1f} s, "
                      f"worker peaks {[b // MiB for b in r['peak_rss_per_worker_bytes']]} MiB, "
                      f"within limit: {r['peak_within_limit']}", flush=True)
                if r["works"]:
                    row["smallest_working_limit_bytes"] = limit
                    row["peak_rss_per_worker_bytes"] = r["peak_rss_per_worker_bytes"]
                    v = subprocess.run(base + ["bench", store, "--roots", str(args.roots), "--workers",
                                               str(args.workers)], capture_output=True, text=True,
                                       timeout=args.timeout)
                    # the search needs Numba, whose worker baseline is above such a limit: run without one
                    row["validation"] = {"memory_limit": None, "rc": v.returncode, "valid": v.returncode == 0,
                                         "stdout_tail": v.stdout.strip().splitlines()[-3:]}
                    print(f"  store searched and validated: rc {v.returncode}", flush=True)
                    break
            doc["scales"].append(row)
            write_json(args.json, doc)  # after every scale: a later one killed keeps the earlier results
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["machine"]["loadavg_end"] = os.getloadavg()
    write_json(args.json, doc)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
