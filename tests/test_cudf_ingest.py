"""Real data on GPUs: cuDF frames and Parquet read by cuDF are relabeled on the device, and give the CPU
path's id map, shards and BFS results in original ids (int64, uint64; string ids through the host).

Skipped (not faked) without CuPy, a CUDA device, cuDF and dask-cuda, as on CI; run on a GPU machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import gpu_module

cp, pytestmark = gpu_module()
cudf = pytest.importorskip("cudf", reason="cuDF is not installed")
dask_cudf = pytest.importorskip("dask_cudf", reason="dask_cudf is not installed")
pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")

import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from breadth.bfs import bfs  # noqa: E402
from breadth.pipeline import read_parquet  # noqa: E402
from breadth.io.errors import NegativeIdError, NonNumericIdError  # noqa: E402
from breadth.pipeline import from_dask_dataframe, prepare  # noqa: E402
from breadth.pipeline.sources.kronecker import KroneckerParams, generate_edges  # noqa: E402

ARRAYS = ("offsets", "columns", "tuple_degree", "self_loops", "in_offsets", "in_columns")


@pytest.fixture(scope="module")
def gclient():
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    client = local_cuda_cluster(workers=1)
    yield client
    cluster = client.cluster
    client.close()
    cluster.close()


def _sparse_edges(scale: int, kind: str, seed: int = 3) -> np.ndarray:
    """Kronecker tuples with each vertex replaced by a distinct sparse id (int64 below 2^62, uint64 above
    2^63), self-loops and duplicates kept: what a crawl's ETL hands over."""
    e = generate_edges(KroneckerParams.make(scale, seed, 0.57, 0.19, 0.19), 0, 8 << scale)
    rng = np.random.default_rng(seed)
    ids = np.unique(rng.integers(1, 1 << 62, size=3 << scale, dtype=np.int64))[: 1 << scale]
    rng.shuffle(ids)
    out = ids[e]
    return out.astype(np.uint64) + np.uint64(1 << 63) if kind == "uint64" else out


def _host_shards(g) -> list:
    return [s.to(np) for s in g.client.gather(g.shards)]


def _same_graph(a, b) -> None:
    assert a.num_vertices == b.num_vertices and a.num_edges == b.num_edges
    np.testing.assert_array_equal(np.asarray(a.id_map), np.asarray(b.id_map))
    for x, y in zip(_host_shards(a), _host_shards(b)):
        for name in ARRAYS:
            u, v = getattr(x, name), getattr(y, name)
            assert (u is None) == (v is None), name
            if u is not None:
                np.testing.assert_array_equal(np.asarray(u), np.asarray(v), err_msg=name)


def _levels_by_id(g, root) -> pd.Series:
    df = bfs(g, root).to_pandas()
    return df.set_index("vertex")["level"].sort_index()


@pytest.mark.parametrize("kind", ["int64", "uint64"])
def test_cudf_frame_relabels_on_gpu_like_the_cpu(gclient, kind):
    e = _sparse_edges(12, kind)
    pdf = pd.DataFrame({"src": e[:, 0], "dst": e[:, 1]})
    host = from_dask_dataframe(dd.from_pandas(pdf, npartitions=3), client=gclient)
    dev = from_dask_dataframe(dask_cudf.from_cudf(cudf.from_pandas(pdf), npartitions=3), client=gclient)
    assert host.source["relabel"] == "hash" and dev.source["relabel"] == "hash_gpu"
    gh, gd = prepare(host, gclient, device="gpu"), prepare(dev, gclient, device="gpu")
    _same_graph(gh, gd)
    assert gd.id_map.dtype == np.dtype(kind)
    root = e[0, 0]
    pd.testing.assert_series_equal(_levels_by_id(gh, root), _levels_by_id(gd, root))


def _url_frame(scale: int) -> pd.DataFrame:
    e = _sparse_edges(scale, "int64")
    return pd.DataFrame({"src": [f"https://x.org/\u00e9/{v}" if v % 3 else f"http://y.net/{v}" for v in e[:, 0]],
                         "dst": [f"https://x.org/\u00e9/{v}" if v % 3 else f"http://y.net/{v}" for v in e[:, 1]]})


@pytest.mark.parametrize("owners", [1, 3])
def test_cudf_string_ids_relabel_on_gpu_like_the_cpu(gclient, owners):
    """String ids (non-ASCII too) stay cuDF string columns; with several owners the owners are the host's."""
    from breadth.pipeline.relabel.hash_relabel import relabel_hashed
    from breadth.pipeline.relabel.relabel import _chunk_meta

    pdf = _url_frame(10)
    dev = from_dask_dataframe(dask_cudf.from_cudf(cudf.from_pandas(pdf), npartitions=2), client=gclient)
    host = from_dask_dataframe(dd.from_pandas(pdf, npartitions=2), client=gclient)
    assert dev.source["relabel"] == "hash_gpu" and host.source["relabel"] == "hash"
    _same_graph(prepare(host, gclient, device="gpu"), prepare(dev, gclient, device="gpu"))
    # several owners: the same map as the CPU steps give with as many owners
    from breadth.io.cudf_edges import device_string_edges

    parts = [gclient.submit(device_string_edges, cudf.from_pandas(pdf.iloc[i::2]), "src", "dst", "p", pure=False)
             for i in range(2)]
    rows = [m[0] for m in gclient.gather([gclient.submit(_chunk_meta, p) for p in parts])]
    hparts = [gclient.scatter((pdf.iloc[i::2].to_numpy(dtype=object), None)) for i in range(2)]
    workers = list(gclient.scheduler_info()["workers"])
    _, gmap = relabel_hashed(gclient, parts, rows, object, workers, nowners=owners, device="gpu")
    _, cmap = relabel_hashed(gclient, hparts, rows, object, workers, nowners=owners, device="cpu")
    np.testing.assert_array_equal(gmap.offsets, cmap.offsets)
    np.testing.assert_array_equal(np.asarray(gmap), np.asarray(cmap))
    probe = pdf["dst"].iloc[:50].to_numpy(dtype=object)
    np.testing.assert_array_equal(gmap.to_dense(probe), cmap.to_dense(probe))


def test_parquet_string_ids_read_by_cudf(gclient, tmp_path):
    pdf = _url_frame(11)
    pq.write_table(pa.Table.from_pandas(pdf, preserve_index=False), tmp_path / "s.parquet", row_group_size=3000)
    cpu = read_parquet(str(tmp_path), client=gclient)
    gpu = read_parquet(str(tmp_path), client=gclient, device="gpu")
    assert gpu.source["relabel"] == "hash_gpu"
    _same_graph(prepare(cpu, gclient, device="gpu"), prepare(gpu, gclient, device="gpu"))


def _write_parquet(path, e: np.ndarray, row_group_size: int) -> None:
    pq.write_table(pa.table({"src": e[:, 0], "dst": e[:, 1]}), path, row_group_size=row_group_size)


@pytest.mark.parametrize("kind", ["int64", "uint64"])
def test_parquet_read_by_cudf_matches_the_cpu_reader(gclient, tmp_path, kind):
    e = _sparse_edges(12, kind)
    half = len(e) // 2
    _write_parquet(tmp_path / "a.parquet", e[:half], 5000)
    _write_parquet(tmp_path / "b.parquet", e[half:], 7000)
    cpu = read_parquet(str(tmp_path), client=gclient)
    gpu = read_parquet(str(tmp_path), client=gclient, device="gpu")
    assert gpu.source["relabel"] == "hash_gpu" and gpu.num_edges == len(e)
    _same_graph(prepare(cpu, gclient, device="gpu"), prepare(gpu, gclient, device="gpu"))


def test_parquet_bad_ids_name_file_and_row(gclient, tmp_path):
    e = _sparse_edges(10, "int64")
    bad = e.copy()
    bad[5000, 1] = -7
    _write_parquet(tmp_path / "neg.parquet", bad, 4096)
    with pytest.raises(NegativeIdError, match=r"neg\.parquet: column 'dst' row 5000: negative vertex id -7"):
        read_parquet(str(tmp_path / "neg.parquet"), client=gclient, device="gpu")
    t = pa.table({"src": pa.array(e[:, 0]), "dst": pa.array([None if i == 7000 else int(v) for i, v in
                                                             enumerate(e[:, 1])], pa.int64())})
    pq.write_table(t, tmp_path / "null.parquet", row_group_size=4096)
    with pytest.raises(NonNumericIdError, match=r"null\.parquet: column 'dst' row 7000: missing id"):
        read_parquet(str(tmp_path / "null.parquet"), client=gclient, device="gpu")


def test_cli_ingest_device_gpu_writes_the_cpu_store(tmp_path):
    e = _sparse_edges(12, "int64")
    _write_parquet(tmp_path / "e.parquet", e, 10000)
    env = dict(os.environ)
    stores = {}
    for dev in ("cpu", "gpu"):
        out = tmp_path / f"{dev}.store"
        r = subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", "ingest", str(tmp_path / "e.parquet"),
                            "--out", str(out), "--device", dev], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        stores[dev] = out
    from breadth.io.shard_store import read_manifest

    a, b = (read_manifest(str(stores[d])) for d in ("cpu", "gpu"))
    assert a["num_vertices"] == b["num_vertices"] == len(np.unique(e))
    sha = [[rec["files"][k]["sha256_blocks"] for rec in m["shards"] for k in sorted(rec["files"])] for m in (a, b)]
    assert sha[0] == sha[1]


def test_device_memory_limit_moves_the_shuffle_to_the_host_with_the_same_shards(gclient, tmp_path):
    """A GPU worker limited to less than the graph's entries keeps the shuffle's pieces in host batches
    (and dask-cuda moves task outputs to the host), and builds the same shards as an unlimited one."""
    from breadth.pipeline.cluster.cluster import local_cuda_cluster

    e = _sparse_edges(17, "int64")  # 2^20 tuples: ~32 MB of entries on the device's memory tier
    _write_parquet(tmp_path / "e.parquet", e, 1 << 16)
    st_free, st_small = {}, {}
    free = prepare(read_parquet(str(tmp_path / "e.parquet"), client=gclient, device="gpu"), gclient, device="gpu",
                   stages=st_free)
    small = local_cuda_cluster(workers=1, device_memory_limit="16MB")
    try:
        g = prepare(read_parquet(str(tmp_path / "e.parquet"), client=small, device="gpu"), small, device="gpu",
                    stages=st_small)
        assert st_free["tier"]["tier"] == "memory"
        assert st_small["tier"]["tier"] == "host"
        _same_graph(free, g)
    finally:
        cluster = small.cluster
        small.close()
        cluster.close()
    r = subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", "ingest", str(tmp_path / "e.parquet"),
                        "--out", str(tmp_path / "s"), "--device", "gpu", "--device-memory-limit", "16MB"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _host_block(path, opts):
    from breadth.io.text_parser import read_range

    return read_range(str(path), 0, os.path.getsize(path), opts)


@pytest.mark.parametrize("sep", ["\t", " ", ","])
def test_snap_text_parsed_by_cudf_equals_the_host_parser(tmp_path, sep):
    from breadth.io.cudf_edges import parse_text_block
    from breadth.io.text_parser import TextOptions, range_block, read_range_to_device

    e = _sparse_edges(10, "int64")
    path = tmp_path / "g.txt"
    path.write_text("# Directed graph: 123 nodes\n# FromNodeId\tToNodeId\n"
                    + "".join(f"{u}{sep}{v}\n" for u, v in e))
    opts = TextOptions()
    arr, _ = range_block(str(path), 0, os.path.getsize(path))
    fast = parse_text_block(arr, opts)
    assert fast is not None  # the plain file takes cuDF's reader, not the fallback
    host, _ = _host_block(path, opts)
    np.testing.assert_array_equal(cp.asnumpy(fast), host)
    # byte ranges cut mid-line own the lines that start in them, as on the host
    size = os.path.getsize(path)
    cuts = [0, 1000, 5001, 77777, size]
    parts = [cp.asnumpy(read_range_to_device(str(path), a, b, opts)[0]) for a, b in zip(cuts, cuts[1:])]
    np.testing.assert_array_equal(np.concatenate(parts), host)


@pytest.mark.parametrize("text", ["1 2\n3 -4\n", "1 2\r\n3 4\r\n", "# a\n% b\n1 2\n", "1 2 3\n4 5\n",
                                  "1 2\n3\n", "1 2\n99999999999999999999 3\n", "1 2\n3 x\n", "1 2\n3 4.5\n",
                                  "18446744073709551615 1\n2 3\n"])
def test_text_cudf_does_not_fit_goes_to_the_host_parser_with_its_errors(tmp_path, text):
    from breadth.io.text_parser import TextOptions, read_range_to_device

    path = tmp_path / "g.txt"
    path.write_text(text)
    opts = TextOptions()
    try:
        host, _ = _host_block(path, opts)
    except Exception as err:  # noqa: BLE001 - the GPU reader must raise the same, word for word
        with pytest.raises(type(err)) as got:
            read_range_to_device(str(path), 0, os.path.getsize(path), opts)
        assert str(got.value) == str(err)
        return
    got, _ = read_range_to_device(str(path), 0, os.path.getsize(path), opts)
    assert got.dtype == host.dtype
    np.testing.assert_array_equal(cp.asnumpy(got), host)


def test_snap_and_csv_read_on_the_gpu_give_the_cpu_graph(gclient, tmp_path):
    from breadth.pipeline import read_csv, read_snap

    e = _sparse_edges(12, "int64")
    snap = tmp_path / "g.txt"
    snap.write_text("# comment\n" + "".join(f"{u}\t{v}\n" for u, v in e))
    csv = tmp_path / "g.csv"
    csv.write_text("from,to\n" + "".join(f"{u},{v}\n" for u, v in e))
    for reader, path, kw in ((read_snap, snap, {}), (read_csv, csv, {"src": "from", "dst": "to"})):
        cpu = prepare(reader(str(path), client=gclient, **kw), gclient)
        gpu = prepare(reader(str(path), client=gclient, device="gpu", chunk_bytes=1 << 16, **kw), gclient,
                      device="gpu")
        assert gpu.num_vertices == cpu.num_vertices == len(np.unique(e))
        assert gpu.num_edges == cpu.num_edges
        root = int(e[0, 0])
        pd.testing.assert_series_equal(_levels_by_id(gpu, root), _levels_by_id(cpu, root))


def test_string_owners_hash_like_cudf_xxhash64():
    """The owners' hash of string ids (XXH64, seed 0, of the UTF-8 bytes) is cuDF's ``xxhash64``, so a GPU
    could compute owners where the strings are."""
    from breadth.bfs.string_hash import xxh64

    words = ["", "a", "abc", "https://h17.example.org/p/123456789", "ünïcödé", "x" * 31, "y" * 32, "z" * 100]
    ours = xxh64(pa.array(words))
    theirs = cudf.Series(words).hash_values(method="xxhash64", seed=0).to_numpy()
    np.testing.assert_array_equal(ours, theirs.astype(np.uint64))
