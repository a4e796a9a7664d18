"""``breadth ingest --memory-limit``: a SNAP text file and a Parquet file whose edge list does not fit in a
worker's memory next to what it holds already are ingested under the limit -- the shuffle takes a
batched tier by itself, no worker is ended -- and the store is the one an unlimited run writes, file for
file (sha256s in the manifests).

The inputs: 4 M random tuples on 2**20 vertices (64 MB of int64 tuples, 128 MB of adjacency entries;
the memory tier needs 28 B per entry, 112 MB per owner).  SNAP text: small int ids, the table relabel;
Parquet: scrambled 64-bit ids, the hash-owner relabel, whose own peak (327-454 MiB per worker for this file
in row groups of 2**19 tuples) sets the Parquet limit higher than the text's; 480MB still cannot take the
memory tier.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

M = 4_000_000
N = 1 << 20


def _run(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    d = tmp_path_factory.mktemp("ingest-ooc")
    e = np.random.default_rng(1).integers(0, N, size=(M, 2), dtype=np.int64)
    text = d / "g.txt"
    with open(text, "wb") as f:
        f.write(b"# random graph\n")
        pacsv.write_csv(pa.table({"a": e[:, 0], "b": e[:, 1]}), f,
                        pacsv.WriteOptions(include_header=False, delimiter="\t"))
    ids = (np.arange(N, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(2)  # distinct, sparse
    s = ids[e].astype(np.int64)
    par = d / "g.parquet"
    pq.write_table(pa.table({"src": s[:, 0], "dst": s[:, 1]}), par, row_group_size=1 << 19)
    return {"snap": text, "parquet": par}


def _files(store) -> dict:
    """Every array file of a store with its sha256s (shards and id map), from its manifest."""
    m = json.loads((store / "manifest.json").read_text())
    out = {f"{s['dir']}/{k}": r["sha256_blocks"] for s in m["shards"] for k, r in s["files"].items()}
    im = m["id_map"] or {}
    for part in im.get("parts", []):
        out[part["file"]] = part["sha256_blocks"]
    if "sha256_blocks" in im:
        out["id_map"] = im["sha256_blocks"]
    return out


# limits under which the tuples' entries do not fit the memory tier: the plan counts what the workers hold
# after reading (the Parquet workers no longer import pandas: 560MB then fitted)
@pytest.mark.parametrize("fmt,limit", [("snap", "350MB"), ("parquet", "480MB")])
def test_ingest_under_a_limit_matches_the_unlimited_store(inputs, tmp_path, fmt, limit):
    path = inputs[fmt]
    free = _run("ingest", path, "--workers", 2, "--out", tmp_path / "free.store")
    assert free.returncode == 0, free.stderr[-3000:]
    spill = tmp_path / "spill"
    bound = _run("ingest", path, "--workers", 2, "--memory-limit", limit, "--spill-dir", spill,
                 "--out", tmp_path / "bound.store")
    assert bound.returncode == 0, bound.stderr[-3000:]
    plan = [ln for ln in bound.stderr.splitlines() if "memory plan" in ln]
    assert plan and ("disk tier" in plan[0] or "host tier" in plan[0]), plan  # the entries did not fit
    a, b = _files(tmp_path / "free.store"), _files(tmp_path / "bound.store")
    assert a == b and len(a) >= 2 * 4
    assert not list(spill.iterdir())  # bucket files and Dask's scratch folder are gone
    assert not os.path.exists(tmp_path / "bound.store" / "progress.json")


@pytest.fixture(scope="module")
def url_parquet(tmp_path_factory):
    """2 M tuples of URL-like string ids over ~1 M distinct, in one row group (one chunk)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    n = 1 << 21
    ids = np.random.default_rng(7).integers(0, 1 << 20, size=2 * n, dtype=np.int64)
    url = pc.binary_join_element_wise("https://h", pa.array(ids % 1009).cast(pa.string()), ".example.org/p/",
                                      pa.array((ids * 2654435761) % (1 << 40)).cast(pa.string()), "")
    path = tmp_path_factory.mktemp("ingest-urls") / "urls.parquet"
    pq.write_table(pa.table({"src": url[:n], "dst": url[n:]}), path, row_group_size=n)
    return path, len(pc.unique(url))


def test_string_ids_under_a_limit_match_the_unlimited_store(url_parquet, tmp_path):
    """A row group of string ids is read dictionary-encoded, each distinct string decoded once: one worker
    ingests it under 1000MB and writes the store an unlimited run writes.  Reading every row's string, as
    before, a worker held 821 MB after relabeling and the plan asked for 1089MB (a 700MB worker was ended
    while relabeling); now 615 MB and 883MB."""
    path, distinct = url_parquet
    free = _run("ingest", path, "--workers", 1, "--out", tmp_path / "free.store")
    assert free.returncode == 0, free.stderr[-3000:]
    bound = _run("ingest", path, "--workers", 1, "--memory-limit", "1000MB", "--out", tmp_path / "bound.store")
    assert bound.returncode == 0, bound.stderr[-3000:]
    assert f"{distinct:,} vertices" in bound.stdout
    assert _files(tmp_path / "free.store") == _files(tmp_path / "bound.store")
