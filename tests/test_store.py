"""The shard store: round trip onto 1 and 3 workers, corrupted/incomplete stores refused, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import data_file


@pytest.fixture(scope="module")
def cluster3():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=3, threads_per_worker=1, processes=False, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory, cluster3):
    from breadth.pipeline import read_edges
    from breadth.io.shard_store import write_store
    from breadth.pipeline import prepare

    path = tmp_path_factory.mktemp("st") / "wiki.store"
    g = prepare(read_edges(str(data_file("Wiki-Vote.txt")), directed=True, client=cluster3), cluster3, nparts=2)
    write_store(g, str(path), parameters={"test": True})
    roots = [30, 3, 8297]
    from breadth.bfs import bfs

    ref = bfs(g, roots)
    g.release()
    return str(path), roots, ref


@pytest.mark.parametrize("nparts", [1, 2, 3])
def test_round_trip_any_worker_count(store, cluster3, nparts):
    from breadth.bfs import bfs, validate
    from breadth.io.shard_store import load_store

    path, roots, ref = store
    g = load_store(path, cluster3, nparts=nparts)
    assert g.nparts == nparts and g.directed and g.num_vertices == 7_115 and g.num_input_edges == 103_689
    np.testing.assert_array_equal(g.id_map[:3], [3, 4, 5])
    shards = cluster3.gather(g.shards)
    for res, want in zip(bfs(g, roots), ref):
        np.testing.assert_array_equal(res.level, want.level)
        # parents may differ between equally valid trees; check them against the stored graph instead
        dense_parent = np.where(res.parent >= 0, np.searchsorted(g.id_map, np.maximum(res.parent, 0)), -1)
        v = validate(shards, dense_parent, res.level, int(np.searchsorted(g.id_map, res.root)))
        assert not any(v.values()), v
    g.release()


def test_corrupted_and_incomplete_stores_are_refused(store, cluster3, tmp_path):
    import shutil

    from breadth.io import CorruptStoreError, IncompleteStoreError, StoreError
    from breadth.io.shard_store import load_store

    path, _, _ = store
    bad = tmp_path / "bad.store"
    shutil.copytree(path, bad)
    col = bad / "shard-00001" / "columns.npy"
    data = bytearray(col.read_bytes())
    data[-5] ^= 0xFF  # one flipped byte, same size
    col.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match=r"shard-00001/columns.npy: sha256 checksum mismatch"):
        load_store(str(bad), cluster3)
    col.write_bytes(bytes(data[:-8]))
    with pytest.raises(CorruptStoreError, match="manifest says"):
        load_store(str(bad), cluster3, nparts=1)
    (bad / "id_map.npy").unlink()
    with pytest.raises(CorruptStoreError, match="id_map.npy: file listed in the manifest is missing"):
        load_store(str(bad), cluster3)
    (bad / "manifest.json").unlink()
    with pytest.raises(IncompleteStoreError, match="no manifest.json; the store is incomplete"):
        load_store(str(bad), cluster3)
    with pytest.raises(StoreError, match="no such shard store"):
        load_store(str(tmp_path / "nothing"), cluster3)
    m = json.loads((tmp_path.parent / os.path.basename(os.path.dirname(path)) / "wiki.store" / "manifest.json")
                   .read_text()) if False else json.loads(open(os.path.join(path, "manifest.json")).read())
    assert m["format"] == "breadth-shard-store" and m["version"] == 2 and m["parameters"] == {"test": True}
    assert all(len(d) == 64 for s in m["shards"] for f in s["files"].values() for d in f["sha256_blocks"])
    # written shard by shard: each shard directory holds its completion record; the progress record is
    # gone once the manifest is written (see tests/test_store_resume.py for interrupted writes)
    assert m["resume"] == {"kept": [], "written": [0, 1]}
    assert sorted(os.listdir(path)) == ["id_map.npy", "manifest.json", "shard-00000", "shard-00001"]
    for s in m["shards"]:
        rec = json.loads(open(os.path.join(path, s["dir"], "shard.json")).read())
        assert rec["files"] == s["files"] and (rec["rank"], rec["nparts"]) == (s["rank"], 2)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_generate_info_bfs_bench(tmp_path):
    import pandas as pd

    st = str(tmp_path / "k.store")
    r = _cli("generate", "--scale", "10", "--out", st, "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _cli("info", st, "--verify")
    assert r.returncode == 0 and "vertices:       1,024" in r.stdout and "file(s) OK" in r.stdout
    out = str(tmp_path / "res.parquet")
    r = _cli("bfs", st, "--root", "1", "--root", "5", "--out", out, "--workers", "2", "--threads", "1")
    if "not in the graph" in r.stderr:  # isolated Kronecker vertex: pick two with edges from the store
        pytest.fail(r.stderr)
    assert r.returncode == 0, r.stderr[-2000:]
    df = pd.read_parquet(out)
    assert list(df.columns) == ["root", "vertex", "parent", "level"]
    assert set(df["root"]) <= {1, 5} and (df["level"] >= 0).all()
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
    r = _cli("bench", st, "--roots", "4", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "bfs  harmonic_mean_TEPS:" in r.stdout
    r = _cli("bfs", st, "--root", "99999", "--out", out)
    assert r.returncode == 2 and "vertex 99999 is not in the graph (its ids are 0..1023)" in r.stderr  # preflight
    r = _cli("bench")
    assert r.returncode == 2 and "bench needs either a STORE or --scale" in r.stderr


@pytest.mark.parametrize("block", [4096, 1 << 26])
@pytest.mark.parametrize("dtype", [np.int32, np.uint64])
def test_saved_array_records_each_block_of_the_file_it_wrote(tmp_path, monkeypatch, block, dtype):
    """A store's ``.npy`` record holds the sha256 of each block of the file it wrote (the header in the
    first), hashed on other threads while the array was written; the same digests come from the file, from
    the array in memory and from a memory map of it; it reads back checked, and a flipped byte is reported
    with the block that holds it."""
    import hashlib

    from breadth.io import CorruptStoreError, store_files

    monkeypatch.setattr(store_files, "BLOCK_BYTES", block)
    a = np.random.default_rng(3).integers(0, 1 << 30, size=(3 << 18) + 5).astype(dtype)
    path = str(tmp_path / "a.npy")
    rec = store_files.save_npy(path, a, atomic=True)
    raw = open(path, "rb").read()
    want = [hashlib.sha256(raw[i:i + block]).hexdigest() for i in range(0, len(raw), block)]
    assert rec["sha256_blocks"] == want and rec["block_bytes"] == block and rec["bytes"] == len(raw)
    assert store_files.file_block_digests(path, block) == want
    assert store_files.same_content(rec, store_files.npy_digest(a))
    np.save(tmp_path / "m.npy", a)
    assert store_files.same_content(rec, store_files.npy_digest(np.load(tmp_path / "m.npy", mmap_mode="r")))
    np.testing.assert_array_equal(np.load(path), a)
    out = np.empty_like(a)
    store_files.read_npy_into(path, rec, out)
    np.testing.assert_array_equal(out, a)
    bad = bytearray(raw)
    bad[len(raw) - 3] ^= 1
    open(path, "wb").write(bytes(bad))
    k = (len(raw) - 3) // block
    with pytest.raises(CorruptStoreError, match=rf"a.npy: sha256 checksum mismatch in bytes {k * block:,}\.\."):
        store_files.read_npy_into(path, rec, out)
    with pytest.raises(CorruptStoreError, match="checksum mismatch"):
        store_files.read_npy_into(path, rec, out[:10], start=5)  # a part of the file: checked whole first
