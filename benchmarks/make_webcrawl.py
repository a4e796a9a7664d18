"""Write a web-crawl-like edge list as a multi-file Parquet dataset (never into the repository).

    python -m benchmarks.make_webcrawl /tmp/wc26 --log2-tuples 26 --log2-ids 23            # hashed int64 ids
    python -m benchmarks.make_webcrawl /tmp/wc26s --log2-tuples 26 --log2-ids 23 --ids str  # URL-like ids
    python -m benchmarks.make_webcrawl /tmp/wc28 --log2-tuples 28 --log2-ids 26 --device gpu # written by cuDF

Degrees follow a power law (Kronecker / R-MAT tuples, Graph500's A, B, C = 0.57, 0.19, 0.19, self-loops and
duplicates kept, as a crawl's ETL output has them) over ``2^log2-ids`` vertices; each vertex's id is replaced
by a keyed 64-bit hash (63-bit, non-negative int64: no order or density left to exploit) or, with
``--ids str``, by a URL built from that hash (``https://h<k>.example.org/p/<hash>``, 40-50 bytes).  Written
chunk by chunk (``--chunk-log2`` tuples at a time: the generator's memory does not grow with the input)
into ``--files`` files of ``src``/``dst`` columns, to ``OUT.tmp`` and then renamed to ``OUT``.  With
``--device gpu`` the tuples are generated on the GPU and each file written by cuDF at once (row groups of
2^22 rows): the same tuples and ids, faster at 2^28 and more.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

import numpy as np

from benchmarks.harness import REPO_ROOT

KEY = 0x5DEECE66D2F6A9B1


def hashed_ids(v, key: int = KEY, xp=np):
    """Keyed splitmix64 of vertex numbers ``v`` (NumPy or CuPy, any shape) -> distinct non-negative int64."""
    with np.errstate(over="ignore"):
        z = v.astype(xp.uint64) ^ xp.uint64(key)
        z += xp.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
        z = (z ^ (z >> xp.uint64(31))) >> xp.uint64(1)  # bijective on 64 bits, then 63 of them
    return z.astype(xp.int64)


def url_ids(h: np.ndarray):
    """URL-like string ids (a pyarrow array) from hashed ids: 1,000 hosts, a hexadecimal path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    host = pc.cast(pa.array(h % 1000), pa.string())
    path = pc.cast(pa.array(h), pa.string())
    return pc.binary_join_element_wise("https://h", host, ".example.org/p/", path, "")


def write(out: str, log2_tuples: int, log2_ids: int, files: int, ids: str = "int", seed: int = 1,
          chunk_log2: int = 22) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges

    params = KroneckerParams.make(log2_ids, seed, 0.57, 0.19, 0.19)
    m = 1 << log2_tuples
    per_file = -(-m // files)
    step = 1 << chunk_log2
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for f in range(files):
        a, b = f * per_file, min(m, (f + 1) * per_file)
        with pq.ParquetWriter(os.path.join(tmp, f"part-{f:04d}.parquet"),
                              pa.schema([("src", pa.string() if ids == "str" else pa.int64()),
                                         ("dst", pa.string() if ids == "str" else pa.int64())])) as w:
            for s in range(a, b, step):
                h = hashed_ids(generate_edges(params, s, min(b, s + step)))
                cols = [h[:, 0], h[:, 1]] if ids == "int" else [url_ids(h[:, 0]), url_ids(h[:, 1])]
                w.write_table(pa.table({"src": cols[0], "dst": cols[1]}), row_group_size=1 << 20)
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return {"out": out, "tuples": m, "log2_ids": log2_ids, "files": files, "ids": ids, "seed": seed}


def _url_gpu(col):
    """URL-like string ids from hashed ids, as :func:`url_ids` builds them (cuDF strings)."""
    return "https://h" + (col % 1000).astype(str) + ".example.org/p/" + col.astype(str)


def write_gpu(out: str, log2_tuples: int, log2_ids: int, files: int, ids: str = "int", seed: int = 1) -> dict:
    """:func:`write` with the tuples generated on the GPU and each file written by cuDF."""
    import cudf
    import cupy as cp

    from breadth.pipeline.sources.kronecker import KroneckerParams
    from breadth.pipeline.sources.kronecker_gpu import generate_edges_gpu

    params = KroneckerParams.make(log2_ids, seed, 0.57, 0.19, 0.19)
    m = 1 << log2_tuples
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    per = -(-m // files)
    for i in range(files):
        h = hashed_ids(generate_edges_gpu(params, i * per, min(m, (i + 1) * per)), xp=cp)
        df = cudf.DataFrame({"src": h[:, 0], "dst": h[:, 1]})
        if ids == "str":
            df = cudf.DataFrame({"src": _url_gpu(df["src"]), "dst": _url_gpu(df["dst"])})
        df.to_parquet(os.path.join(tmp, f"part-{i:04d}.parquet"), row_group_size_rows=1 << 22)
        del h, df
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    return {"out": out, "tuples": m, "log2_ids": log2_ids, "files": files, "ids": ids, "seed": seed}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--log2-tuples", type=int, default=26)
    p.add_argument("--log2-ids", type=int, default=23)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--ids", choices=("int", "str"), default="int")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--chunk-log2", type=int, default=22, help="tuples generated and written at a time (CPU)")
    p.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    a = p.parse_args(argv)
    target = os.path.abspath(a.out)
    if target == REPO_ROOT or target.startswith(REPO_ROOT + os.sep):
        p.error(f"{a.out}: the input must not be written into the repository")
    t0 = time.perf_counter()
    if a.device == "gpu":
        info = write_gpu(a.out, a.log2_tuples, a.log2_ids, a.files, a.ids, a.seed)
    else:
        info = write(a.out, a.log2_tuples, a.log2_ids, a.files, a.ids, a.seed, a.chunk_log2)
    json.dump(dict(info, seconds=round(time.perf_counter() - t0, 2)), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
