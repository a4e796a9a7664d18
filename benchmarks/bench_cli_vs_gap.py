"""``breadth bench`` as users run it (the CLI, default options) against the GAP suite's BFS, in one run.

    cd /tmp/gapbs && g++ -std=c++11 -O3 -Wall -fopenmp src/bfs.cc -o bfs      # gapbs, outside the repo
    python benchmarks/bench_cli_vs_gap.py --gap-bfs /tmp/gapbs/bfs --scale 20 22 \\
        --json benchmarks/results/cli_vs_gap.json

For every scale, interleaved so that the machine's slow and fast phases hit both sides: GAP's BFS
(``benchmarks/gap_reference.py``: the same Kronecker graph, 64 trials, 2 OpenMP threads), then
``breadth bench --scale S --json ...`` as a subprocess for each ``--workers`` value (1: one worker with
``cores`` threads; 2: two workers of one thread each), then GAP again.  The ratio is breadth's Graph500
harmonic-mean TEPS over the faster of the two GAP runs (both in the Graph500 convention: input edge tuples
in the root's component over the search time).  Construction is compared too: breadth's
``graph_generation + construction_time`` against GAP's generation (breadth's generator, timed by the
script) plus GAP's own ``Build Time``, the faster run's sum (``gap_generate_plus_build_s``) and the
fastest of each part (``gap_best_parts_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gap_reference  # noqa: E402
from results_file import write_json  # noqa: E402


def _cli_run(scale: int, workers: int, seed: int, roots: int, workdir: str) -> dict:
    out = os.path.join(workdir, f"breadth_s{scale}_w{workers}.json")
    cmd = ["breadth", "bench", "--scale", str(scale), "--seed", str(seed), "--roots", str(roots),
           "--workers", str(workers), "--json", out]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    with open(out) as f:
        res = json.load(f)
    header = res["header"]
    gen = header.get("graph_generation")
    return {"command": " ".join(cmd), "wall_s": wall, "valid": res["valid"],
            "harmonic_mean_teps": res["statistics"]["teps"]["harmonic_mean"],
            "median_time_s": res["statistics"]["time"]["median"],
            "construction_s": float(header["construction_time"]),
            "graph_generation_s": float(gen) if gen not in (None, "fused") else None,
            "per_root_times_s": [r["time"] for r in res["roots"]],
            "median_root_levels": sorted(res["roots"], key=lambda r: r["time"])[len(res["roots"]) // 2]["levels"],
            "loadavg_after": os.getloadavg()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap-bfs", required=True, help="compiled gapbs bfs binary (built outside the repo)")
    p.add_argument("--scale", type=int, nargs="+", default=[20, 22])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="breadth bench --workers values")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--roots", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for gapbs (default 2)")
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    gap_args = SimpleNamespace(seed=args.seed, trials=args.roots, threads=args.threads, keep_el=False,
                               skip_project_check=True, keep_stdout=False, gap_bfs=args.gap_bfs)
    doc = {"benchmark": "breadth bench (CLI, default options) vs gapbs bfs, interleaved",
           "machine": gap_reference.machine_info(args.gap_bfs),
           "parameters": {"scales": args.scale, "workers": args.workers, "seed": args.seed, "roots": args.roots,
                          "gap_omp_threads": args.threads},
           "teps_convention": "Graph500: input edge tuples in the root's component / search time; harmonic mean",
           "runs": []}
    with tempfile.TemporaryDirectory(prefix="cli_vs_gap_") as workdir:
        for scale in args.scale:
            run = {"scale": scale, "gap": [], "breadth": {}}
            run["gap"].append(gap_reference.run_scale(gap_args, scale, workdir))
            for w in args.workers:
                run["breadth"][str(w)] = _cli_run(scale, w, args.seed, args.roots, workdir)
            run["gap"].append(gap_reference.run_scale(gap_args, scale, workdir))
            best = max(g["harmonic_mean_gteps"] for g in run["gap"]) * 1e9
            gap_build = min(g["generate_s"] + g["gap_build_s"] for g in run["gap"] if g["gap_build_s"])
            run["gap_best_teps"], run["gap_generate_plus_build_s"] = best, gap_build
            # the stricter reference: GAP's fastest generation and fastest build, from either run
            run["gap_best_parts_s"] = min(g["generate_s"] for g in run["gap"]) + \
                min(g["gap_build_s"] for g in run["gap"] if g["gap_build_s"])
            for w, b in run["breadth"].items():
                b["ratio_to_gap"] = b["harmonic_mean_teps"] / best
                b["construction_total_s"] = b["construction_s"] + (b["graph_generation_s"] or 0.0)
                print(f"scale {scale} workers {w}: breadth {b['harmonic_mean_teps'] / 1e9:.3f} GTEPS "
                      f"(median {b['median_time_s'] * 1e3:.1f} ms), GAP {[round(g['harmonic_mean_gteps'], 3) for g in run['gap']]}"
                      f" GTEPS -> {b['ratio_to_gap']:.2f}x; construction {b['construction_total_s']:.2f} s vs GAP "
                      f"generate+build {gap_build:.2f} s (best parts {run['gap_best_parts_s']:.2f} s)", flush=True)
            for g in run["gap"]:
                g.pop("roots", None), g.pop("nedge", None)
            doc["runs"].append(run)
            write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
