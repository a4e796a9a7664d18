"""A stored graph searches as the same graph prepared in memory: the same levels, the same direction at
every level, the same kernels (as the engines describe themselves); and stores of the first format (one
sha256 per file, ``tests/data/store-v1-*``, written by ``breadth generate``/``ingest``) still load."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

DATA = os.path.join(os.path.dirname(__file__), "data")


def _directions(result) -> list[list[str]]:
    return [[lv["direction"] for lv in row["levels"]] for row in result.rows]


@pytest.mark.parametrize("nparts", [1, 2])
def test_a_stored_graph_searches_as_the_same_graph_in_memory(lclient, tmp_path, nparts):
    from breadth.bfs import bfs, graph500
    from breadth.io import load_store, write_store
    from breadth.pipeline import kronecker, prepare

    mem = prepare(kronecker(12, seed=4), lclient, nparts=nparts)
    path = str(tmp_path / "k12.store")
    write_store(prepare(kronecker(12, seed=4), lclient, nparts=nparts, search_order=False), path)
    stored = load_store(path, lclient, nparts=nparts)
    a, b = (graph500(g, nroots=6, seed=3) for g in (mem, stored))
    assert a.valid and b.valid
    assert [r["root"] for r in a.rows] == [r["root"] for r in b.rows]
    assert [r["nedge"] for r in a.rows] == [r["nedge"] for r in b.rows]
    assert _directions(a) == _directions(b) and "bu" in sum(_directions(a), [])
    assert a.engines == b.engines and a.engines[0]["bottom_up_rows"] == "degree-ordered"
    assert a.header["engine"] == b.header["engine"]
    for root in (r["root"] for r in a.rows[:2]):
        np.testing.assert_array_equal(bfs(mem, root).level, bfs(stored, root).level)
    assert stored.source["load_stages"]["order_s"] >= 0 and len(stored.source["load_stages"]["ranks"]) == nparts
    mem.release()
    stored.release()


@pytest.mark.parametrize("nparts", [1, 2])
def test_a_store_of_the_first_format_loads_onto_any_number_of_ranks(lclient, nparts):
    """``store-v1-kron7``: ``breadth generate --scale 7 --workers 2`` (edgefactor 16, seed 1) in the format
    that recorded one sha256 per file: it loads (checked against those digests) and searches as the graph
    generated now does (on 1 rank its two stored shards are cut into one)."""
    from breadth.bfs import bfs
    from breadth.io import load_store
    from breadth.io.shard_store import read_manifest
    from breadth.pipeline import kronecker, prepare

    path = os.path.join(DATA, "store-v1-kron7")
    assert read_manifest(path)["version"] == 1
    old = load_store(path, lclient, nparts=nparts)
    new = prepare(kronecker(7, seed=1), lclient, nparts=nparts)
    assert (old.num_vertices, old.num_edges, old.num_self_loops) == (new.num_vertices, new.num_edges,
                                                                       new.num_self_loops)
    for root in (0, 5, 77):
        x, y = bfs(old, root), bfs(new, root)
        np.testing.assert_array_equal(x.level, y.level)
    old.release()
    new.release()


def test_a_string_id_store_of_the_first_format_loads_and_answers_in_its_ids(lclient):
    """``store-v1-people``: ``breadth ingest people.csv --ids str --directed --workers 2`` of the edges
    alice->bob->carol->dave->alice, erin->alice, frank->grace; its id map is in Parquet parts."""
    from breadth.bfs import bfs
    from breadth.io import load_store

    g = load_store(os.path.join(DATA, "store-v1-people"), lclient)
    res = bfs(g, "alice").to_pandas().set_index("vertex")
    assert res["level"].to_dict() == {"alice": 0, "bob": 1, "carol": 2, "dave": 3}
    assert res.loc["dave", "parent"] == "carol"
    g.release()


def test_a_damaged_file_of_a_first_format_store_is_refused(lclient, tmp_path):
    from breadth.io import CorruptStoreError, load_store

    bad = tmp_path / "v1"
    shutil.copytree(os.path.join(DATA, "store-v1-kron7"), bad)
    col = bad / "shard-00000" / "columns.npy"
    data = bytearray(col.read_bytes())
    data[-2] ^= 0x10
    col.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="shard-00000/columns.npy: sha256 checksum mismatch; the file"):
        load_store(str(bad), lclient)
    m = json.loads((bad / "manifest.json").read_text())
    assert "sha256" in m["shards"][0]["files"]["columns"]  # the first format's record, as the fixture holds


def test_the_cli_reports_the_load_and_the_engine(tmp_path):
    """``breadth bench STORE``: the load's time and stages on stderr, ``load_time`` and ``engine`` in the
    report, as ``breadth bench --scale`` reports its construction and engine."""
    import subprocess
    import sys

    store = tmp_path / "k9.store"
    cli = [sys.executable, "-m", "breadth.pipeline.cli.cli"]
    r = subprocess.run(cli + ["generate", "--scale", "9", "--out", str(store)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(cli + ["bench", str(store), "--roots", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "loaded in" in r.stderr and "bottom-up order" in r.stderr
    assert "load_time: " in r.stdout
    assert "engine: Engine (cpu, host arrays, degree-ordered bottom-up rows)" in r.stdout
