"""Memory limits honoured: the smallest ``--memory-limit`` that works, and each worker's peak RSS under it.

For each scale, ``breadth generate --scale S --workers W --memory-limit L`` runs as a subprocess (the CLI,
as a user runs it) for ``L`` = the minimum that :mod:`breadth.pipeline.shuffle.memory_plan` computes, then a few
values upward from it, until one *works*: the command succeeds and no worker's sampled RSS went above
``L``.  A thread samples the RSS of every worker process (from /proc, every 50 ms).  The store of the
smallest working limit is then searched and validated (``breadth bench STORE``, without a limit: the
search runs Numba kernels, and a limit below the Numba path's baseline only fits the NumPy path of
``generate``).  The idle RSS of a
worker process is measured too: started from a script that imports only distributed, and from one that
imports the CLI module first, as the ``breadth`` console script does (a spawned worker re-imports the
parent's main module)::

    python -m benchmarks.bench_memory_limit --scales 18 20 --json memory_limit_cpu.json
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from benchmarks.harness import add_json_argument, new_record, print_table, run_command, write_json

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


def run_sampled(cmd: list[str], timeout: float) -> dict:
    """Run ``cmd``; its exit status, wall seconds, stderr's ``breadth:`` lines and each worker's peak RSS (the
    processes of its tree running ``spawn_main``, sampled every 50 ms, in order of start: one started after
    the first ones is a worker the nanny started again)."""
    r = run_command(cmd, memory=True, timeout=timeout)
    workers = sorted((p for p in r["processes"] if "spawn_main" in p["cmdline"]), key=lambda p: p["first_s"])
    return {"cmd": " ".join(cmd[2:]), "rc": r["rc"], "wall_s": r["wall_s"],
            "stdout_last": r["stdout_tail"].strip().splitlines()[-1:],
            "breadth_stderr": [ln for ln in r["stderr_tail"].splitlines() if ln.startswith("breadth:")],
            "worker_processes": [{"pid": p["pid"], "peak_rss_bytes": p["rss_peak_bytes"], "first_seen_s": p["first_s"],
                                  "last_seen_s": p["last_s"]} for p in workers],
            "peak_rss_per_worker_bytes": [p["rss_peak_bytes"] for p in workers]}


def idle_worker_rss(import_cli: bool) -> list[int]:
    """RSS (bytes) of the two idle workers of a local cluster started by a script that imports the CLI
    module first (``import_cli``) or only distributed."""
    imports = "from breadth.pipeline.cli.cli import main  # noqa" if import_cli else ""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "idle.py")
        with open(path, "w") as f:
            f.write(IDLE.format(imports=imports))
        out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120).stdout
    return [int(x) for x in out.split()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", type=int, nargs="+", default=[18, 20])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--roots", type=int, default=4, help="validated searches on the smallest working limit's store")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    add_json_argument(ap)
    args = ap.parse_args(argv)

    from breadth.pipeline.shuffle.memory_plan import NUMPY_WORKER_BASELINE, WORKER_BASELINE, plan_memory

    threads = max(1, (os.cpu_count() or 1) // args.workers)
    doc = new_record("bench_memory_limit", args)
    doc.update(worker_baseline_bytes=WORKER_BASELINE, numpy_path_worker_baseline_bytes=NUMPY_WORKER_BASELINE,
               threads_per_worker=threads)
    doc["idle_worker_rss_bytes"] = {"script_importing_only_distributed": idle_worker_rss(False),
                                    "script_importing_the_cli_module": idle_worker_rss(True)}
    print("idle worker RSS (MiB): plain", [b // MiB for b in doc["idle_worker_rss_bytes"]
                                          ["script_importing_only_distributed"]],
          "with the CLI module", [b // MiB for b in doc["idle_worker_rss_bytes"]["script_importing_the_cli_module"]],
          flush=True)
    base = [sys.executable, "-m", "breadth.pipeline.cli.cli"]
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
            # 100 MB per worker (the memory target), and a run without a limit (default chunks, in memory) for reference
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
            if args.json:  # after every scale: a later one killed keeps the earlier results
                write_json(args.json, doc)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    doc["machine"]["loadavg_end"] = list(os.getloadavg())
    if args.json:
        write_json(args.json, doc)
    print_table(["scale", "computed minimum MB", "smallest working limit MB", "worker peaks MiB", "store valid",
                 "100MB: rc", "no limit: worker peaks MiB"],
                [[r["scale"], round(r["computed_minimum_bytes"] / 1e6),
                  round(r["smallest_working_limit_bytes"] / 1e6) if "smallest_working_limit_bytes" in r else None,
                  " ".join(str(b // MiB) for b in r.get("peak_rss_per_worker_bytes", [])),
                  r.get("validation", {}).get("valid"), r["limit_100MB"]["rc"],
                  " ".join(str(b // MiB) for b in r["no_limit"]["peak_rss_per_worker_bytes"])]
                 for r in doc["scales"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
