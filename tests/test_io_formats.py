"""Readers of every format agree with each other: Parquet round trip, CSV, Matrix Market, DataFrames."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from conftest import data_file, load_snap


def _shards(g):
    """(offsets, columns, in_offsets, in_columns, tuple_degree, self_loops) of every shard, on the client."""
    out = []
    for s in g.client.gather(g.shards):
        out.append([np.asarray(a) for a in (s.offsets, s.columns, s.in_offsets if s.directed else [],
                                           s.in_columns if s.directed else [], s.tuple_degree, s.self_loops)])
    return out


def _assert_same_graph(g1, g2):
    assert (g1.num_vertices, g1.num_input_edges, g1.num_edges) == (g2.num_vertices, g2.num_input_edges, g2.num_edges)
    for a, b in zip(_shards(g1), _shards(g2)):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint64"])
def test_parquet_round_trip_identical_shards(tmp_path, lclient, dtype):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from breadth.pipeline import read_parquet, read_snap
    from breadth.pipeline import prepare

    raw = load_snap("Wiki-Vote.txt")
    d = tmp_path / "wiki"
    d.mkdir()
    half = len(raw) // 2
    for i, part in enumerate((raw[:half], raw[half:])):  # two files, several row groups each
        t = pa.table({"from": pa.array(part[:, 0].astype(dtype)), "to": pa.array(part[:, 1].astype(dtype)),
                      "weight": pa.array(np.ones(len(part)))})
        pq.write_table(t, d / f"part-{i}.parquet", row_group_size=10_000)
    el_p = read_parquet(str(d), src="from", dst="to", directed=True, client=lclient)
    assert el_p.npartitions > 4  # one chunk per row group
    el_s = read_snap(str(data_file("Wiki-Vote.txt")), directed=True, client=lclient)
    np.testing.assert_array_equal(el_p.id_map, el_s.id_map)
    _assert_same_graph(prepare(el_p, lclient), prepare(el_s, lclient))
    # a glob names the same files
    el_g = read_parquet(str(d / "part-*.parquet"), src="from", dst="to", directed=True, client=lclient)
    assert el_g.num_edges == len(raw)


def test_parquet_huge_uint64_and_string_ids(tmp_path, lclient):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from breadth.bfs import bfs
    from breadth.pipeline import read_parquet
    from breadth.pipeline import prepare

    big = np.array([2**64 - 1, 2**63 + 5, 7, 2**63 + 5], np.uint64)
    pq.write_table(pa.table({"src": big[[0, 1, 2]], "dst": big[[1, 2, 3]]}), tmp_path / "u.parquet")
    el = read_parquet(str(tmp_path / "u.parquet"), client=lclient)
    assert el.num_vertices == 3 and el.id_map.dtype == np.uint64
    assert sorted(el.id_map.tolist()) == [7, 2**63 + 5, 2**64 - 1]  # hash owners: any order
    np.testing.assert_array_equal(el.id_map[el.edges.compute()], np.stack([big[[0, 1, 2]], big[[1, 2, 3]]], 1))
    res = bfs(prepare(el, lclient), [np.uint64(2**64 - 1)])[0]
    assert dict(zip(res.vertex_ids.tolist(), res.level.tolist())) == {7: 2, 2**63 + 5: 1, 2**64 - 1: 0}
    assert res.parent[res.vertex_ids.tolist().index(7)] == 2**63 + 5

    pq.write_table(pa.table({"source": ["a.org", "b.org", "c.org"], "target": ["b.org", "c.org", "a.org"],
                             "x": [1, 2, 3]}), tmp_path / "s.parquet")
    el = read_parquet(str(tmp_path / "s.parquet"), directed=True, client=lclient)
    assert sorted(el.id_map) == ["a.org", "b.org", "c.org"]
    res = bfs(prepare(el, lclient), "b.org")
    df = res.to_pandas().sort_values("level")
    assert df["vertex"].tolist() == ["b.org", "c.org", "a.org"] and df["level"].tolist() == [0, 1, 2]
    assert df["parent"].tolist() == ["b.org", "b.org", "c.org"]


def test_csv_header_no_header_and_string_ids(tmp_path, lclient):
    from breadth.pipeline import read_csv, read_edges

    raw = load_snap("CA-CondMat.txt")
    with open(tmp_path / "h.csv", "w") as f:
        f.write("weight,to,from\r\n")
        for u, v in raw:
            f.write(f"1.5,{v},{u}\r\n")
    with gzip.open(tmp_path / "n.csv.gz", "wt") as f:
        f.write("".join(f"{u},{v}\n" for u, v in raw))
    a = read_csv(str(tmp_path / "h.csv"), src="from", dst="to", client=lclient, chunk_bytes=1 << 16)
    b = read_edges(str(tmp_path / "n.csv.gz"), header=False, client=lclient)
    c = read_csv(str(tmp_path / "h.csv"), src="from", dst="to", ids="str", client=lclient)
    assert a.num_edges == b.num_edges == c.num_edges == len(raw)
    assert a.num_vertices == b.num_vertices == c.num_vertices == 23_133
    np.testing.assert_array_equal(a.edges.compute(), b.edges.compute())
    assert sorted(int(x) for x in c.id_map) == a.id_map.tolist()


def test_matrix_market_is_one_based_and_keeps_isolated_vertices(tmp_path, lclient):
    from breadth.pipeline import read_edges

    p = tmp_path / "g.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n% a comment\n6 6 4\n1 2 0.5\n2 3 1\n"
                 "% mid comment\n3 1 2\n5 6 1")
    el = read_edges(str(p), client=lclient)
    assert el.directed and el.num_vertices == 6 and el.num_edges == 4
    np.testing.assert_array_equal(el.edges.compute(), [[0, 1], [1, 2], [2, 0], [4, 5]])
    assert el.id_map.tolist() == [1, 2, 3, 4, 5, 6]


def test_snap_variants_agree(tmp_path, lclient):
    from breadth.pipeline import read_snap

    (tmp_path / "a.txt").write_bytes(b"# c\r\n% c2\r\n10\t20\r\n20 30\r\n  30,10\r\n\r\n10   30")
    (tmp_path / "b.txt").write_bytes(b"10 20 1234567\n20 30 99\n30 10 0\n10 30 5\n")
    a = read_snap(str(tmp_path / "a.txt"), client=lclient)
    b = read_snap(str(tmp_path / "b.txt"), extra_columns="ignore", client=lclient)
    for el in (a, b):
        assert el.num_edges == 4 and el.id_map.tolist() == [10, 20, 30]
        np.testing.assert_array_equal(el.edges.compute(), [[0, 1], [1, 2], [2, 0], [0, 2]])


def test_byte_ranges_split_lines_exactly_once(tmp_path, lclient):
    from breadth.pipeline import read_snap

    rng = np.random.default_rng(0)
    e = rng.integers(0, 10**9, size=(6_000, 2))
    text = "".join(f"{u}\t{v}\r\n" for u, v in e)
    (tmp_path / "r.txt").write_text("# header\n" + text)
    for cb in (997, 4096, 1 << 20):  # ranges end mid-line, at line ends, or cover the file
        el = read_snap(str(tmp_path / "r.txt"), client=lclient, chunk_bytes=cb)
        np.testing.assert_array_equal(el.id_map[el.edges.compute()], e)


def test_from_dask_dataframe(lclient):
    import dask.dataframe as dd
    import pandas as pd

    from breadth.pipeline import from_dask_dataframe

    raw = load_snap("Wiki-Vote.txt")
    ddf = dd.from_pandas(pd.DataFrame({"s": raw[:, 0], "d": raw[:, 1]}), npartitions=5)
    el = from_dask_dataframe(ddf, src="s", dst="d", directed=True, client=lclient)
    assert el.num_vertices == 7_115 and el.num_edges == len(raw) and el.npartitions == 5
    np.testing.assert_array_equal(el.id_map[el.edges.compute()], raw)
    sdf = dd.from_pandas(pd.DataFrame({"s": ["x", "y"], "d": ["y", "z"]}), npartitions=2)
    assert sorted(from_dask_dataframe(sdf, src="s", dst="d", client=lclient).id_map) == ["x", "y", "z"]
    from breadth.io import MissingColumnError

    with pytest.raises(MissingColumnError, match="no column 'nope'"):
        from_dask_dataframe(ddf, src="nope", dst="d", client=lclient)


@pytest.mark.parametrize("hi", [50, 3_000_000, 2**25, 2**40, 2**63 - 1])  # bitmap / lookup table / sorted paths
def test_relabel_paths_match_sort_and_searchsorted(hi):
    from breadth.pipeline.relabel.relabel import _chunk_unique, _densify, _map_table, _merge

    rng = np.random.default_rng(hi % 1000)
    pool = rng.integers(hi // 3, hi, size=3_000, dtype=np.int64)  # chunks share ids: unions must deduplicate
    chunks = [rng.choice(pool, size=(n, 2)) for n in (1, 700, 5_000, 0, 3)]
    chunks[2][0, 0] = hi  # both span ends present
    uniq = [_chunk_unique((c, None))[0] for c in chunks]
    for c, u in zip(chunks, uniq):
        np.testing.assert_array_equal(u, np.unique(c))
    id_map = _merge(_merge(*uniq[:3]), _merge(*uniq[3:]))
    expect = np.unique(np.concatenate([c.ravel() for c in chunks]))
    np.testing.assert_array_equal(id_map, expect)
    table = _map_table(id_map)
    assert table[0] == ("lut" if hi <= 3_000_000 else "sorted")
    for c in chunks:
        np.testing.assert_array_equal(_densify((c, None), table), np.searchsorted(expect, c))


@pytest.mark.parametrize("block", [5, 64, 1 << 20])  # header and lines cut across decompressed blocks
def test_gzip_stream_blocks_with_header(tmp_path, block, monkeypatch):
    from breadth.io import text_parser
    from breadth.io.text_parser import TextOptions, read_stream

    monkeypatch.setattr(text_parser, "STREAM_BLOCK_BYTES", block)
    rng = np.random.default_rng(block)
    e = rng.integers(0, 10**6, size=(2_000, 2))
    path = tmp_path / "h.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write("source_id,target_id\r\n" + "".join(f"{u},{v}\r\n" for u, v in e))
    opts = TextOptions(sep=ord(","), max_fields=2, comments=b"#")
    edges, stats = read_stream(str(path), opts, chunk_bytes=1 << 20, skip_lines=1)
    np.testing.assert_array_equal(edges, e)
    assert stats.edges == len(e)
