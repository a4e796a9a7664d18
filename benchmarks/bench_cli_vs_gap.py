"""``breadth bench`` as users run it (the CLI, default options) against the GAP suite's BFS, in one run.

    cd /tmp/gapbs && g++ -std=c++11 -O3 -Wall -fopenmp src/bfs.cc -o bfs      # gapbs, outside the repo
    python -m benchmarks.bench_cli_vs_gap --gap-bfs /tmp/gapbs/bfs --scale 20 22 --json cli_vs_gap.json

For every scale, interleaved so that the machine's slow and fast phases hit both sides: GAP's BFS
(:mod:`benchmarks.gap_reference`: the same Kronecker graph, 64 trials, 2 OpenMP threads), then
``breadth bench --scale S --json ...`` in a fresh process for each ``--workers`` value (1: one worker with
``cores`` threads; 2: two workers of one thread each), then GAP again; ``--repeat`` rounds of that.  The
ratio is breadth's Graph500 harmonic-mean TEPS over the faster of the two GAP runs (both in the Graph500
convention: input edge tuples in the root's component over the search time).  Construction is compared too: breadth's
``graph_generation + construction_time`` against GAP's generation (breadth's generator, timed by the
script) plus GAP's own ``Build Time``, the faster run's sum (``gap_generate_plus_build_s``) and the
fastest of each part (``gap_best_parts_s``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from types import SimpleNamespace

from benchmarks import gap_reference
from benchmarks.harness import JSON_PATH, add_json_argument, breadth_command, new_record, print_table, run_command, \
    write_json


def _cli_run(scale: int, workers: int, seed: int, roots: int) -> dict:
    """``breadth bench`` as a user types it, in a fresh process: its figures from the JSON it wrote."""
    rec = run_command([breadth_command(), "bench", "--scale", scale, "--seed", seed, "--roots", roots,
                       "--workers", workers, "--json", JSON_PATH], check=True)
    res = rec.pop("json")
    header = res["header"]
    gen = header.get("graph_generation")
    return {"command": rec["command"], "wall_s": rec["wall_s"], "valid": res["valid"],
            "harmonic_mean_teps": res["statistics"]["teps"]["harmonic_mean"],
            "median_time_s": res["statistics"]["time"]["median"],
            "construction_s": float(header["construction_time"]),
            "graph_generation_s": float(gen) if gen not in (None, "fused") else None,
            "per_root_times_s": [r["time"] for r in res["roots"]],
            "median_root_levels": sorted(res["roots"], key=lambda r: r["time"])[len(res["roots"]) // 2]["levels"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap-bfs", required=True, help="compiled gapbs bfs binary (built outside the repo)")
    p.add_argument("--scale", type=int, nargs="+", default=[20, 22])
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="breadth bench --workers values")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--roots", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for gapbs (default 2)")
    p.add_argument("--repeat", type=int, default=1, help="rounds of GAP, breadth, GAP per scale")
    add_json_argument(p)
    args = p.parse_args(argv)
    gap_args = SimpleNamespace(seed=args.seed, trials=args.roots, threads=args.threads, keep_el=False,
                               skip_project_check=True, keep_stdout=False, gap_bfs=args.gap_bfs)
    doc = new_record("bench_cli_vs_gap", args)
    doc.update(gap=gap_reference.gap_info(args.gap_bfs),
               teps_convention="Graph500: input edge tuples in the root's component / search time; harmonic mean",
               runs=[])
    table = []
    with tempfile.TemporaryDirectory(prefix="cli_vs_gap_") as workdir:
        for rnd in range(args.repeat):
            for scale in args.scale:
                run = {"round": rnd, "scale": scale, "gap": [], "breadth": {}}
                run["gap"].append(gap_reference.run_scale(gap_args, scale, workdir))
                for w in args.workers:
                    run["breadth"][str(w)] = _cli_run(scale, w, args.seed, args.roots)
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
                    table.append([rnd, scale, w, b["harmonic_mean_teps"] / 1e9, b["median_time_s"] * 1e3,
                                  " / ".join(f"{g['harmonic_mean_gteps']:.3f}" for g in run["gap"]),
                                  f"{b['ratio_to_gap']:.2f}x", b["construction_total_s"], gap_build,
                                  run["gap_best_parts_s"], b["valid"]])
                    print(f"scale {scale} workers {w}: breadth {b['harmonic_mean_teps'] / 1e9:.3f} GTEPS, "
                          f"{b['ratio_to_gap']:.2f}x GAP", flush=True)
                for g in run["gap"]:
                    g.pop("roots", None), g.pop("nedge", None)
                doc["runs"].append(run)
                if args.json:
                    write_json(args.json, doc)
    print_table(["round", "scale", "workers", "breadth GTEPS (hm)", "median ms", "GAP GTEPS (hm)", "ratio",
                 "construction s", "GAP gen+build s", "GAP best parts s", "valid"], table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
