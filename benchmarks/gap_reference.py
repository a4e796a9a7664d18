"""Time the GAP benchmark suite's BFS (gapbs, built outside this repository) on the project's Kronecker graph.

gapbs (https://github.com/sbeamer/gapbs) is not vendored: build it elsewhere and pass the binary, e.g.::

    cd /tmp/gapbs && g++ -std=c++11 -O3 -Wall -fopenmp src/bfs.cc -o bfs
    python -m benchmarks.gap_reference --gap-bfs /tmp/gapbs/bfs --scale 20 22 --json gap.json

For every scale the script

1. builds the edge tuples with ``breadth.pipeline.sources.kronecker`` (``KroneckerParams.make(scale, seed, 0.57,
   0.19, 0.19)``, ``generate_edges(params, 0, 16 << scale)``) and writes them as a gapbs ``.el`` text edge
   list (``u v`` per line) under the temporary directory, never into the repository;
2. prepares the same graph with the project (``prepare(kronecker(scale, seed=...), client).num_edges``) and
   counts the distinct undirected non-loop edges with NumPy, to check gapbs builds the same graph;
3. runs ``BFS -f FILE.el -s -n TRIALS`` (``-s``: symmetrize, undirected like Graph500) with
   ``OMP_NUM_THREADS`` threads and parses its ``Trial Time`` / ``Average Time`` lines;
4. reports per-search times and TEPS in the Graph500 convention: for each search, the number of input edge
   tuples (duplicates and self-loops included, as the reference counts them) whose endpoints lie in the
   searched root's connected component, divided by the time.

gapbs picks its own roots (``SourcePicker``: ``std::mt19937`` seeded with 27491095, uniform over
``[0, max_id]``, rejecting vertices of zero degree after self-loops and duplicates are removed), not the
project's Graph500 roots.  The script reproduces that sequence with a tiny C++ helper compiled by the same
``g++`` (libstdc++'s ``uniform_int_distribution`` is implementation-specific), so the edge count is exact per
root; where gapbs was built with logging enabled its printed ``Source`` lines are used and cross-checked.
If the helper cannot be built, every root is assumed to lie in the giant component (stated in the output).

The `.el` route was chosen over gapbs' binary ``.sg`` format on purpose: with ``.el`` gapbs builds (and
cleans) the CSR itself, so its printed edge count is an independent check of the project's preparation.
Reading the text file takes a while at scale 22 but is not part of any timed search.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numba
import numpy as np

from benchmarks.edge_text import format_edges
from benchmarks.harness import REPO_ROOT, add_json_argument, new_record, print_table, write_json

EDGEFACTOR = 16
A, B, C = 0.57, 0.19, 0.19
GAP_RAND_SEED = 27491095  # gapbs util.h kRandSeed

_ROOTS_CPP = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
int main(int argc, char** argv) {
  long long n = std::atoll(argv[1]);
  long long k = std::atoll(argv[2]);
  std::mt19937 rng(%d);
  std::uniform_int_distribution<int32_t> udist(0, (int32_t)(n - 1));
  for (long long i = 0; i < k; i++) std::printf("%%d\n", (int)udist(rng));
  return 0;
}
""" % GAP_RAND_SEED


# ------------------------------------------------------------------------------------------------ helpers

def write_el(edges: np.ndarray, path: str, chunk: int = 1 << 22) -> int:
    digits = len(str(int(edges.max()))) if edges.size else 1
    buf = np.empty(chunk * (2 * digits + 2), np.uint8)
    total = 0
    with open(path, "wb") as f:
        for s in range(0, edges.shape[0], chunk):
            used = format_edges(edges[s:s + chunk], buf, 32)
            f.write(buf[:used].tobytes())
            total += used
    return total


@numba.njit(cache=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        nxt = parent[x]
        parent[x] = root
        x = nxt
    return root


@numba.njit(cache=True)
def _components(n, edges):
    parent = np.arange(n)
    for i in range(edges.shape[0]):
        a = _find(parent, edges[i, 0])
        b = _find(parent, edges[i, 1])
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    for v in range(n):
        parent[v] = _find(parent, v)
    return parent


def graph_facts(edges: np.ndarray) -> dict:
    """Vertex count as gapbs sees it (max id + 1), cleaned degrees, components and tuples per component."""
    n = int(edges.max()) + 1
    u, v = edges[:, 0], edges[:, 1]
    nonloop = u != v
    deg = np.bincount(u[nonloop], minlength=n) + np.bincount(v[nonloop], minlength=n)
    comp = _components(n, edges)
    tuples_per_comp = np.bincount(comp[u], minlength=n)  # a tuple lies wholly inside comp[u]
    giant = int(np.argmax(tuples_per_comp))
    lo = np.minimum(u[nonloop], v[nonloop])
    hi = np.maximum(u[nonloop], v[nonloop])
    undirected = int(np.unique(lo * n + hi).size)
    return {"n": n, "deg": deg, "comp": comp, "tuples_per_comp": tuples_per_comp, "giant": giant,
            "giant_tuples": int(tuples_per_comp[giant]), "numpy_undirected_edges": undirected,
            "self_loop_tuples": int((~nonloop).sum())}


def gap_roots(n: int, deg: np.ndarray, trials: int, workdir: str) -> list[int] | None:
    """gapbs' SourcePicker sequence, reproduced with the same compiler's libstdc++; None if not buildable."""
    cxx = shutil.which("g++")
    if cxx is None:
        return None
    src = os.path.join(workdir, "gap_roots.cc")
    exe = os.path.join(workdir, "gap_roots")
    with open(src, "w") as f:
        f.write(_ROOTS_CPP)
    if subprocess.run([cxx, "-std=c++11", "-O2", src, "-o", exe], capture_output=True).returncode:
        return None
    roots: list[int] = []
    k = max(4 * trials, 256)
    while len(roots) < trials:
        out = subprocess.run([exe, str(n), str(k)], capture_output=True, text=True, check=True).stdout
        cand = np.array(out.split(), dtype=np.int64)
        roots = [int(r) for r in cand if deg[r] > 0][:trials]
        k *= 4
    return roots


def project_num_edges(scale: int, seed: int) -> int:
    from breadth.pipeline import kronecker, local_cluster, prepare

    client = local_cluster(workers=1)
    try:
        return int(prepare(kronecker(scale, seed=seed), client).num_edges)
    finally:
        cluster = client.cluster
        client.close()
        if cluster is not None:
            cluster.close()


_FLOAT = r"([0-9.eE+-]+)"


def parse_gap(out: str) -> dict:
    m = re.search(r"Graph has (\d+) nodes and (\d+) (un)?directed edges", out)
    get = lambda label: [float(x) for x in re.findall(rf"^{label}:\s+{_FLOAT}\s*$", out, re.M)]  # noqa: E731
    avg = get("Average Time")
    return {
        "nodes": int(m.group(1)) if m else None,
        "edges": int(m.group(2)) if m else None,
        "undirected": bool(m and m.group(3)),
        "read_s": (get("Read Time") or [None])[0],
        "build_s": (get("Build Time") or [None])[0],
        "trial_s": get("Trial Time"),
        "average_s": avg[0] if avg else None,
        "sources": [int(float(x)) for x in re.findall(rf"^\s*Source\s+{_FLOAT}\s*$", out, re.M)],
    }


def gap_info(gap_bfs: str) -> dict:
    """The GAP binary (its path and sha256) and the compiler that built the root picker (``g++ --version``)."""
    try:
        gcc = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        gcc = None
    with open(gap_bfs, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return {"gap_bfs": os.path.abspath(gap_bfs), "gap_bfs_sha256": sha, "gcc": gcc}


# ------------------------------------------------------------------------------------------------ one scale

def run_scale(args, scale: int, workdir: str) -> dict:
    from breadth.bfs.graph500.statistics import statistics
    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges

    rec: dict = {"scale": scale, "seed": args.seed, "edgefactor": EDGEFACTOR, "abc": [A, B, C],
                 "trials": args.trials, "omp_num_threads": args.threads}
    m = EDGEFACTOR << scale
    t0 = time.perf_counter()
    edges = generate_edges(KroneckerParams.make(scale, args.seed, A, B, C), 0, m)
    rec["generate_s"] = time.perf_counter() - t0
    el = os.path.join(workdir, f"kron_s{scale}_seed{args.seed}.el")
    t0 = time.perf_counter()
    rec["el_bytes"] = write_el(edges, el)
    rec["write_el_s"] = time.perf_counter() - t0
    facts = graph_facts(edges)
    rec["input_tuples"] = m
    rec["self_loop_tuples"] = facts["self_loop_tuples"]
    rec["giant_component_tuples"] = facts["giant_tuples"]
    rec["numpy_undirected_edges"] = facts["numpy_undirected_edges"]
    del edges

    if not args.skip_project_check:
        t0 = time.perf_counter()
        rec["project_num_edges"] = project_num_edges(scale, args.seed)
        rec["project_prepare_s"] = time.perf_counter() - t0

    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    cmd = [args.gap_bfs, "-f", el, "-s", "-n", str(args.trials)]
    rec["command"] = f"OMP_NUM_THREADS={args.threads} " + " ".join(cmd)
    rec["loadavg_before"] = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    rec["gap_wall_s"] = time.perf_counter() - t0
    rec["loadavg_after"] = os.getloadavg()
    if not args.keep_el:
        os.unlink(el)
    if proc.returncode != 0:
        raise RuntimeError(f"gapbs failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    gap = parse_gap(proc.stdout)
    times = np.asarray(gap["trial_s"], np.float64)
    if times.size != args.trials:
        raise RuntimeError(f"expected {args.trials} Trial Time lines, got {times.size}:\n{proc.stdout}")
    rec["gap_nodes"], rec["gap_undirected_edges"] = gap["nodes"], gap["edges"]
    rec["gap_read_s"], rec["gap_build_s"] = gap["read_s"], gap["build_s"]
    rec["gap_average_s"] = gap["average_s"]
    rec["trial_s"] = times.tolist()

    if gap["nodes"] is not None and gap["nodes"] != facts["n"]:
        raise RuntimeError(f"gapbs sees {gap['nodes']} vertices, expected max id + 1 = {facts['n']}")
    roots = gap_roots(facts["n"], facts["deg"], args.trials, workdir)
    if gap["sources"]:  # a logging build prints its roots: prefer them, and check the reproduction
        rec["roots_match_reproduction"] = roots == gap["sources"] if roots is not None else None
        roots = gap["sources"]
    if roots is not None:
        nedge = facts["tuples_per_comp"][facts["comp"][np.asarray(roots)]].astype(np.float64)
        rec["roots"] = roots
        rec["nedge_method"] = "exact: input tuples in the root's component (gapbs roots reproduced)"
    else:
        nedge = np.full(args.trials, float(facts["giant_tuples"]))
        rec["nedge_method"] = ("approximate: every root assumed in the giant component "
                               f"({facts['giant_tuples']} of {m} tuples)")
    rec["nedge"] = nedge.tolist()
    rec["roots_outside_giant"] = (int(sum(facts["comp"][r] != facts["giant"] for r in roots))
                                  if roots is not None else None)
    teps = nedge / times
    rec["time_stats"] = statistics(times)
    rec["teps_stats"] = statistics(teps, rate=True)
    rec["median_s"] = rec["time_stats"]["median"]
    rec["mean_s"] = rec["time_stats"]["mean"]
    rec["harmonic_mean_gteps"] = rec["teps_stats"]["harmonic_mean"] / 1e9
    rec["gap_stdout"] = proc.stdout if args.keep_stdout else None
    return rec


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gap-bfs", required=True, help="compiled gapbs bfs binary (built outside the repo)")
    p.add_argument("--scale", type=int, nargs="+", default=[20])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS for gapbs (default 2)")
    p.add_argument("--tmpdir", default=None, help="where the .el file goes (default: system temp dir)")
    p.add_argument("--keep-el", action="store_true")
    p.add_argument("--keep-stdout", action="store_true", help="store gapbs' full output in the JSON")
    p.add_argument("--skip-project-check", action="store_true")
    add_json_argument(p)
    args = p.parse_args(argv)
    if not os.access(args.gap_bfs, os.X_OK):
        p.error(f"--gap-bfs {args.gap_bfs}: not executable")
    base = os.path.abspath(args.tmpdir or tempfile.gettempdir())
    if base == REPO_ROOT or base.startswith(REPO_ROOT + os.sep):
        p.error("--tmpdir: the edge list must not be written into the repository")

    doc = new_record("gap_reference", args)
    doc.update(gap=gap_info(args.gap_bfs), edgefactor=EDGEFACTOR, abc=[A, B, C],
               notes=["gapbs picks its own roots (SourcePicker, seed 27491095), not the Graph500 roots",
                      "TEPS = input edge tuples in the root's component / per-search time (Graph500 convention)",
                      "times are gapbs' own per-trial timer (gettimeofday around DOBFS)"],
               runs=[])
    with tempfile.TemporaryDirectory(prefix="gap_reference_", dir=base) as workdir:
        for scale in args.scale:
            rec = run_scale(args, scale, workdir)
            doc["runs"].append(rec)
            if args.json:
                write_json(args.json, doc)
            print(f"scale {scale}: gapbs {rec['gap_nodes']} nodes, {rec['gap_undirected_edges']} undirected edges; "
                  f"project prepare {rec.get('project_num_edges')}; numpy {rec['numpy_undirected_edges']}; "
                  f"load {rec['loadavg_before'][0]:.2f}->{rec['loadavg_after'][0]:.2f}", flush=True)

    rows = []
    for r in doc["runs"]:
        nmed = float(np.median(r["nedge"]))
        ok = r["gap_undirected_edges"] == r["numpy_undirected_edges"] and \
            r.get("project_num_edges", r["gap_undirected_edges"]) == r["gap_undirected_edges"]
        rows.append([r["scale"], r["trials"], r["omp_num_threads"], r["median_s"] * 1e3, r["mean_s"] * 1e3,
                     r["gap_average_s"] * 1e3, r["time_stats"]["min"] * 1e3, r["harmonic_mean_gteps"],
                     nmed / r["median_s"] / 1e9, ok])
    print_table(["scale", "trials", "threads", "median ms", "mean ms", "gap avg ms", "min ms", "GTEPS (hm)",
                 "GTEPS at median", "edges equal"], rows)
    print("nedge per root:", ", ".join(f"s{r['scale']}: {r['nedge_method']}, "
                                       f"{r['roots_outside_giant']} roots outside giant" for r in doc["runs"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
