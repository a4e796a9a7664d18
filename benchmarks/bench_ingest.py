"""Text ingest throughput (edges/s): breadth's SNAP reader vs pandas.read_csv and pyarrow.csv, same files, same run.

    python -m benchmarks.bench_ingest --json ingest.json                       # a ~1 GB Kronecker text file
    python -m benchmarks.bench_ingest --input cnr-2000.txt.gz --json ingest.json  # a SNAP file beside it
    python -m benchmarks.bench_ingest --scale 18 --json small.json             # quicker

For each file it times, in one process:
  * ``breadth.read``   -- ``read_snap`` to a dense-relabeled EdgeList, parsed chunks materialised
                          (parse + per-chunk unique + tree merge + dense-id mapping), on a local Dask cluster;
  * ``breadth.ingest`` -- the same plus ``prepare`` (CSR shards) and ``write_store`` (npy + sha256);
  * ``pandas.read_csv`` (C engine, comment='#', whitespace separated) -> int64 columns;
  * ``pyarrow.csv.read_csv`` (tab delimiter; comment lines skipped by the invalid-row handler is not
    possible in pyarrow, so it is given ``skip_rows`` = the header lines, which favours it).
The pandas/pyarrow figures only parse (no relabeling, no shards); pyarrow uses all cores, pandas one.
Each is run ``--repeat`` times and the best time is reported (``first_s``: the first run).  The machine's
load average is recorded: on a shared machine compare figures of the same run only.  The Kronecker file
(SNAP text of scale ``--scale``, tab-separated, a ``#`` header) is written to /tmp, never into the
repository, and reused by later runs with ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from benchmarks.edge_text import format_edges
from benchmarks.harness import add_json_argument, new_record, print_table, write_json

READERS = ("breadth.read", "breadth.ingest", "pandas.read_csv", "pyarrow.csv")


def write_kronecker_text(path: str, scale: int, edgefactor: int = 16) -> int:
    """SNAP text of a Kronecker graph (a '#' header, tab-separated) via temp name + rename; returns bytes."""
    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges

    params = KroneckerParams.make(scale, 1, 0.57, 0.19, 0.19)
    m = edgefactor << scale
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(f"# Kronecker scale {scale} edgefactor {edgefactor}\n# FromNodeId\tToNodeId\n".encode())
        step = 1 << 22
        buf = np.empty(step * 24, np.uint8)
        for a in range(0, m, step):
            e = generate_edges(params, a, min(a + step, m))
            k = format_edges(e, buf, 9)
            f.write(buf[:k].tobytes())
    os.replace(tmp, path)
    return os.path.getsize(path)


def _timed(fn, repeat=1):
    """(best seconds, first seconds, last result) of ``repeat`` runs; the first run of a fresh worker
    includes loading the cached Numba kernels."""
    best = first = None
    for _ in range(repeat):
        out = None  # drop the previous result (and its worker memory) before the next run
        t0 = time.perf_counter()
        out = fn()
        t = time.perf_counter() - t0
        first = t if first is None else first
        best = t if best is None else min(best, t)
    return best, first, out


def bench_file(path: str, client, header_lines: int, store_dir: str, repeat: int = 2) -> dict:
    import pandas as pd
    import pyarrow as pa
    from pyarrow import csv

    from breadth.pipeline import read_snap
    from breadth.io.shard_store import write_store
    from breadth.pipeline import prepare

    res = {"file": os.path.abspath(path), "bytes": os.path.getsize(path), "repeat": repeat,
           "loadavg_before": os.getloadavg()}

    def record(name, t, first, m, **extra):
        res[name] = {"s": t, "edges_per_s": m / t, "first_s": first, **extra}

    def breadth_read():
        el = read_snap(path, client=client)
        el.edges = el.edges.persist()
        from distributed import wait

        wait(el.edges)
        return el

    t, first, el = _timed(breadth_read, repeat)
    m = el.num_edges
    res.update({"edges": m, "vertices": el.num_vertices})
    record("breadth.read", t, first, m)
    del el

    def breadth_ingest():
        el = read_snap(path, client=client)
        g = prepare(el, client)
        st = os.path.join(store_dir, "b.store")
        write_store(g, st, overwrite=True)
        g.release()
        return g

    t, first, g = _timed(breadth_ingest, repeat)
    record("breadth.ingest", t, first, m, construction_s=g.construction_time)

    def pandas_read():
        df = pd.read_csv(path, sep="\t", comment="#", header=None, names=["u", "v"], dtype=np.int64,
                         engine="c")
        return len(df)

    t, first, n = _timed(pandas_read, repeat)
    assert n == m, (n, m)
    record("pandas.read_csv", t, first, m, version=pd.__version__)

    def arrow_read():
        tab = csv.read_csv(pa.input_stream(path, compression="gzip" if path.endswith(".gz") else None),
                           read_options=csv.ReadOptions(skip_rows=header_lines, column_names=["u", "v"]),
                           parse_options=csv.ParseOptions(delimiter="\t"),
                           convert_options=csv.ConvertOptions(column_types={"u": pa.int64(), "v": pa.int64()}))
        return tab.num_rows

    t, first, n = _timed(arrow_read, repeat)
    assert n == m, (n, m)
    record("pyarrow.csv", t, first, m, version=pa.__version__)
    res["loadavg_after"] = os.getloadavg()
    return res


def _header_lines(path: str) -> int:
    import gzip

    op = gzip.open if path.endswith(".gz") else open
    k = 0
    with op(path, "rb") as f:
        for line in f:
            if not line.startswith(b"#"):
                return k
            k += 1
    return k


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--input", action="append", default=[], metavar="FILE",
                   help="a SNAP text file (.txt or .txt.gz) read beside the Kronecker file (repeatable)")
    p.add_argument("--scale", type=int, default=22, help="Kronecker scale of the big text file (22: ~1 GB)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeat", type=int, default=2, help="runs per reader; the best is reported (and the first)")
    p.add_argument("--keep", action="store_true", help="keep the generated text file in /tmp (reused next time)")
    add_json_argument(p)
    args = p.parse_args(argv)
    for f in args.input:
        if not os.path.isfile(f):
            p.error(f"--input {f}: no such file")

    from breadth.pipeline import local_cluster

    big = f"/tmp/breadth-kron-s{args.scale}.txt"
    t0 = time.perf_counter()
    if not os.path.exists(big):
        write_kronecker_text(big, args.scale)
    out = new_record("bench_ingest", args)
    out["kronecker_text"] = {"scale": args.scale, "path": big, "write_s": time.perf_counter() - t0}
    client = local_cluster(workers=args.workers, threads_per_worker=args.threads)
    store_dir = tempfile.mkdtemp(prefix="bench-ingest-", dir="/tmp")
    try:
        results = []
        for path in [*args.input, big]:
            r = bench_file(path, client, _header_lines(path), store_dir, args.repeat)
            results.append(r)
            print(f"{os.path.basename(path)}: {r['bytes'] / 2**20:,.0f} MiB, {r['edges']:,} edges, load average "
                  f"{r['loadavg_before'][0]:.2f} -> {r['loadavg_after'][0]:.2f}", flush=True)
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
        shutil.rmtree(store_dir, ignore_errors=True)
        if not args.keep and os.path.exists(big):
            os.remove(big)
    out["results"] = results
    if args.json:
        write_json(args.json, out)
    print_table(["file", "reader", "best s", "M edges/s", "first s"],
                [[os.path.basename(r["file"]), k, r[k]["s"], r[k]["edges_per_s"] / 1e6, r[k]["first_s"]]
                 for r in results for k in READERS])
    return 0


if __name__ == "__main__":
    sys.exit(main())
