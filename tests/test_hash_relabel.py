"""Distributed relabeling (hash owners), the partitioned id map, and results that stay on the workers.

Oracles are independent of breadth: ``np.unique`` relabels a copy of the input and scipy searches it
(``scipy_levels``); results are compared in original ids.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import load_snap, scipy_levels


def _sparse_edges(kind: str, m: int = 1 << 14, nids: int = 1 << 15, seed: int = 3):
    """``m`` random tuples over ``nids`` random 64-bit ids of ``kind`` (int64, uint64 above 2^63, str)."""
    rng = np.random.default_rng(seed)
    base = np.unique(rng.integers(0, np.iinfo(np.int64).max, size=nids, dtype=np.int64))
    e = base[rng.integers(0, base.size, size=(m, 2))]
    if kind == "int64":
        return e
    if kind == "uint64":
        return e.astype(np.uint64) + np.uint64(2**63)
    return np.array([f"https://h{x:x}.example/p" for x in e.ravel()], dtype=object).reshape(m, 2)


def _write_parquet(path, e, rows_per_group: int = 1 << 12) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"src": e[:, 0].tolist() if e.dtype == object else e[:, 0],
                  "dst": e[:, 1].tolist() if e.dtype == object else e[:, 1]})
    pq.write_table(t, path, row_group_size=rows_per_group)


def _oracle(e, roots, directed=False):
    """``{root: {vertex: level}}`` of reached vertices, in original ids, by np.unique + scipy."""
    u, inv = np.unique(e.ravel(), return_inverse=True)
    dense = inv.reshape(-1, 2)
    out = {}
    for r in roots:
        lv = scipy_levels(dense, u.size, int(np.searchsorted(u, r)), directed=directed)
        out[r] = {(x.item() if hasattr(x, "item") else x): int(v) for x, v in zip(u, lv) if v >= 0}
    return out


def _largest_whole_array(client, nbytes_min: int) -> int:
    """The longest 1-D array a worker holds (in tasks' results), among arrays of at least ``nbytes_min``."""
    def scan(dask_worker):
        best = 0
        stack = list(dask_worker.data.values())
        while stack:
            v = stack.pop()
            if isinstance(v, (tuple, list)):
                stack.extend(v)
            elif isinstance(v, np.ndarray) and v.ndim == 1 and v.nbytes >= nbytes_min:
                best = max(best, v.size)
        return best

    return max(client.run(scan).values())


def _check_against_oracle(results, e, directed=False):
    roots = [r.root for r in results]
    want = _oracle(e, roots, directed)
    edges = {(a, b) for a, b in e.tolist()}
    for res in results:
        df = res.to_pandas()
        got = dict(zip(df["vertex"].tolist(), df["level"].tolist()))
        assert got == want[res.root]  # unreached vertices omitted, levels equal, in original ids
        lv = got
        for v, p, lev in zip(df["vertex"].tolist(), df["parent"].tolist(), df["level"].tolist()):
            if v == res.root:
                assert p == v and lev == 0
            else:  # the parent is one hop closer and an input edge joins them
                assert lv[p] == lev - 1
                assert (p, v) in edges or (not directed and (v, p) in edges)


@pytest.mark.parametrize("kind", ["int64", "uint64", "str"])
def test_sparse_ids_hash_owners_match_oracle(tmp_path, lclient, kind):
    from breadth.bfs import bfs
    from breadth.bfs.id_map import PartitionedIdMap
    from breadth.pipeline import read_parquet
    from breadth.pipeline import prepare

    e = _sparse_edges(kind)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 10)  # 16 chunks of 2^11 endpoints
    el = read_parquet(str(tmp_path / "e.parquet"), client=lclient)
    n = np.unique(e.ravel()).size
    idm = el.id_map
    assert el.source["relabel"] == "hash" and isinstance(idm, PartitionedIdMap)
    assert el.num_vertices == n and idm.nparts == 2 and all(hasattr(p, "key") for p in idm.parts)
    sizes = idm.part_sizes
    assert sizes.sum() == n and sizes.min() > 0.4 * n and sizes.max() < 0.6 * n  # about n/P each
    # no worker holds the whole map: the longest 1-D array anywhere is a part or a chunk's ids
    assert _largest_whole_array(lclient, 1 << 10) <= max(sizes.max(), 2 << 10) < 0.6 * n
    dense = el.edges.compute()
    np.testing.assert_array_equal(idm[dense], e)  # the map back, gathered on demand (small graph)
    assert sorted(np.unique(dense.ravel()).tolist()) == list(range(n))

    g = prepare(el, lclient)
    roots = [e[0, 0], e[5, 1]]
    res = bfs(g, roots)
    _check_against_oracle(res, e)
    with pytest.raises(KeyError, match="not in the graph"):
        bfs(g, "nope" if kind != "str" else "https://absent.example/")


def test_prepare_takes_the_edge_list_as_it_is(tmp_path, lclient):
    """Preparation takes a relabeled edge list's own chunks (futures, no alias tasks of the assembled
    array) while ``edges`` is the array they made, and ``edges``' own chunks once the caller has replaced
    it: a graph of the first half of the tuples is that half's, not the whole input's."""
    from breadth.pipeline import prepare, read_parquet

    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)  # 8 chunks
    el = read_parquet(str(tmp_path / "e.parquet"), client=lclient)
    keys = [d.key for d in el.blocks]
    assert [d.key for d in el.chunk_objects()] == keys and len(keys) == 8
    whole = el.edges.compute()
    g = prepare(el, lclient)
    assert g.num_input_edges == e.shape[0] and g.num_edges == _undirected_edges(whole)
    g.release()
    el.edges = el.edges[: e.shape[0] // 2]
    assert len(el.chunk_objects()) == 4 and not {d.key for d in el.chunk_objects()} & set(keys)
    g = prepare(el, lclient)
    assert g.num_input_edges == e.shape[0] // 2 and g.num_edges == _undirected_edges(whole[: e.shape[0] // 2])
    g.release()


def _held(client, keys: set, patience: int = 50) -> set:
    """Which of ``keys`` some worker still holds, asked up to ``patience`` times 0.1 s apart while some are
    (the client's releases reach the workers shortly after)."""
    import time

    for _ in range(patience):
        held = set().union(*client.run(lambda dask_worker: set(dask_worker.data)).values()) & keys
        if not held:
            break
        time.sleep(0.1)
    return held


def test_prepare_without_keeping_the_edges_frees_the_chunks(tmp_path, lclient):
    """``keep_edges=False`` (what ``breadth ingest`` prepares with) hands a relabeled edge list's chunks to the
    shuffle: the graph is the same, the list is empty, and no worker holds a chunk afterwards; a kept list
    keeps them."""
    from breadth.pipeline import prepare, read_parquet

    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)  # 8 chunks
    el = read_parquet(str(tmp_path / "e.parquet"), client=lclient)
    keys = {d.key for d in el.blocks}
    whole = el.edges.compute()
    g = prepare(el, lclient)
    assert _held(lclient, keys, patience=1) == keys and el.edges is not None
    g.release()
    g = prepare(el, lclient, keep_edges=False)
    assert g.num_input_edges == e.shape[0] and g.num_edges == _undirected_edges(whole)
    assert el.edges is None and el.blocks is None
    assert _held(lclient, keys) == set()
    g.release()
    with pytest.raises(ValueError, match="keep_edges=False"):
        prepare(el, lclient)  # an emptied list says why, instead of failing on None


def test_prepare_without_keeping_the_edges_reads_parked_chunks(tmp_path, lclient):
    """Relabeled chunks parked in files (the id shuffle's disk tier) are recipes that read them: handed to the
    shuffle, their folder lasts until every chunk is sent, then goes."""
    import gc

    import dask

    from breadth.pipeline import prepare, read_parquet
    from breadth.pipeline.shuffle.shuffle import TIER_CONFIG

    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)
    spill = tmp_path / "spill"
    with dask.config.set({TIER_CONFIG: "disk"}):
        el = read_parquet(str(tmp_path / "e.parquet"), client=lclient, spill_dir=str(spill))
    whole = el.edges.compute()
    assert [p.name for p in spill.iterdir() if p.name.startswith("breadth-chunks-")]
    g = prepare(el, lclient, keep_edges=False)
    assert g.num_input_edges == e.shape[0] and g.num_edges == _undirected_edges(whole)
    g.release()
    gc.collect()
    assert not [p.name for p in spill.iterdir() if p.name.startswith("breadth-chunks-")]


def test_relabeling_lets_each_chunks_split_go_once_densified(tmp_path, lclient, monkeypatch):
    """While relabeling waits for the last dense chunks, the client holds no chunk's split any more (codes,
    order, pieces): each went once its chunk was densified, not all at once at the end, when a memory plan
    made right after would count them as what the workers hold."""
    import distributed

    from breadth.pipeline import read_parquet

    real_wait, held = distributed.wait, []

    def wait(fs, *a, **kw):
        out = real_wait(fs, *a, **kw)
        held.append(sorted(str(k) for k in lclient.futures if str(k).startswith("getitem")))
        return out

    monkeypatch.setattr(distributed, "wait", wait)
    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)  # 8 chunks
    el = read_parquet(str(tmp_path / "e.parquet"), client=lclient)
    assert el.source["relabel"] == "hash" and held and held[-1] == []


def _codes_held(client) -> int:
    """Chunks' codes ((k, 2) int32 arrays) among the workers' task results."""
    def scan(dask_worker):
        n, stack = 0, list(dask_worker.data.values())
        while stack:
            v = stack.pop()
            if isinstance(v, (tuple, list)):
                stack.extend(v)
            elif isinstance(v, np.ndarray) and v.ndim == 2 and v.dtype == np.int32:
                n += 1
        return n

    return sum(client.run(scan).values())


@pytest.mark.parametrize("tier", ["memory", "disk"])
def test_disk_tier_parks_the_chunks_codes_while_the_owners_merge(tmp_path, lclient, monkeypatch, tier):
    """On the disk tier no worker holds the chunks' codes while the owners merge their parts (they wait in
    files beside the pieces, a worker's share of the edge list otherwise); the memory tier holds them."""
    import dask

    from breadth.pipeline import read_parquet
    from breadth.pipeline.shuffle.shuffle import TIER_CONFIG

    real_gather, held = lclient.gather, []

    def gather(futures, *a, **kw):
        out = real_gather(futures, *a, **kw)
        if not held:  # the owners' part sizes: every chunk is split, none densified
            held.append(_codes_held(lclient))
        return out

    monkeypatch.setattr(lclient, "gather", gather)
    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)  # 8 chunks
    with dask.config.set({TIER_CONFIG: tier}):
        el = read_parquet(str(tmp_path / "e.parquet"), client=lclient, spill_dir=str(tmp_path / "spill"))
    assert held == [0] if tier == "disk" else held == [8]
    np.testing.assert_array_equal(np.concatenate(lclient.gather(el.id_map.parts))[el.edges.compute()], e)


def test_failed_relabeling_leaves_no_parked_folder(tmp_path, lclient, monkeypatch):
    """A relabeling that fails on the disk tier removes the folder where its dense chunks were to wait, even
    while the failure's traceback (holding the relabeling's frames) is still alive."""
    import dask

    from breadth.pipeline import read_parquet
    from breadth.pipeline.relabel import hash_relabel
    from breadth.pipeline.shuffle.shuffle import TIER_CONFIG

    def fail(*a, **kw):
        raise RuntimeError("densify failed")

    monkeypatch.setattr(hash_relabel, "_densify", fail)
    e = _sparse_edges("int64", m=1 << 12, nids=1 << 10)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)
    spill = tmp_path / "spill"
    with dask.config.set({TIER_CONFIG: "disk"}), pytest.raises(RuntimeError, match="densify failed") as err:
        read_parquet(str(tmp_path / "e.parquet"), client=lclient, spill_dir=str(spill))
    assert err.value is not None and list(spill.iterdir()) == []


def _undirected_edges(dense: np.ndarray) -> int:
    """Distinct undirected non-loop edges of ``(k, 2)`` dense ids."""
    d = dense[dense[:, 0] != dense[:, 1]]
    return np.unique(np.sort(d, axis=1), axis=0).shape[0]


@pytest.mark.parametrize("kind", ["int64", "str"])
def test_id_shuffle_disk_tier_numbers_as_memory_does(tmp_path, lclient, kind):
    """The id shuffle's pieces on disk (the tier a small memory limit picks) give the same map and dense
    edges as in memory, and leave nothing in the spill folder."""
    import dask

    from breadth.pipeline import read_parquet
    from breadth.pipeline.shuffle.shuffle import TIER_CONFIG

    e = _sparse_edges(kind, m=1 << 12, nids=1 << 12)
    _write_parquet(tmp_path / "e.parquet", e, rows_per_group=1 << 9)
    spill = tmp_path / "spill"
    spill.mkdir()
    got = {}
    for tier in ("memory", "disk"):
        with dask.config.set({TIER_CONFIG: tier}):
            el = read_parquet(str(tmp_path / "e.parquet"), client=lclient, spill_dir=str(spill))
        got[tier] = (el.edges.compute(), [np.asarray(p) for p in lclient.gather(el.id_map.parts)])
        # dense ids in 32 bits while they fit, as the edge list says
        assert el.edges.dtype == got[tier][0].dtype == np.int32
        # the disk tier's dense chunks wait in a folder of their own, as long as the edge list's graph
        assert len(list(spill.iterdir())) == (tier == "disk")
        del el
        assert list(spill.iterdir()) == []
    (dm, pm), (dd, pd_) = got["memory"], got["disk"]
    np.testing.assert_array_equal(dm, dd)
    assert all(np.array_equal(a, b) for a, b in zip(pm, pd_))
    np.testing.assert_array_equal(np.concatenate(pd_)[dd], e)


def test_results_stay_distributed_and_round_trip(tmp_path, lclient):
    import pandas as pd
    import pyarrow.dataset as ds

    from breadth.bfs import bfs
    from breadth.bfs.engine.search import write_results_dataset
    from breadth.pipeline import read_parquet
    from breadth.pipeline import prepare

    e = _sparse_edges("uint64", seed=11)
    _write_parquet(tmp_path / "e.parquet", e)
    g = prepare(read_parquet(str(tmp_path / "e.parquet"), client=lclient), lclient)
    res = bfs(g, e[3, 0])
    ddf = res.to_dask_dataframe()
    assert ddf.npartitions == g.nparts and list(ddf.columns) == ["root", "vertex", "parent", "level"]
    key = ["vertex"]
    a = ddf.compute().sort_values(key).reset_index(drop=True)
    b = res.to_pandas().sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert a["vertex"].dtype == np.uint64 and len(a) == res.reached

    out = tmp_path / "res"
    rows = res.to_parquet(str(out))
    assert rows == len(b) and len(os.listdir(out)) == g.nparts
    t = ds.dataset(str(out), format="parquet").to_table()
    assert t.schema.field("vertex").type == "uint64"
    c = t.to_pandas().sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(c, b)
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p or ".old-" in p]
    # several roots in one dataset; an earlier dataset is replaced, anything else is refused
    many = bfs(g, [e[3, 0], e[7, 1]])
    rows = write_results_dataset(many, str(out))
    assert rows == sum(len(r.to_pandas()) for r in many)
    assert set(pd.read_parquet(out)["root"].tolist()) == {int(e[3, 0]), int(e[7, 1])}
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        res.to_parquet(str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "notes.txt").exists()
    # the compatibility view (n-length arrays, gathered on demand)
    lv = res.level
    assert lv.shape == (g.num_vertices,) and (lv >= 0).sum() == len(b)
    par = res.parent
    assert par.dtype == object and sum(p is None for p in par) == (lv < 0).sum()


def test_store_round_trip_keeps_the_parts(tmp_path, lclient):
    from breadth.bfs import bfs
    from breadth.io.shard_store import load_store, read_manifest, write_store
    from breadth.pipeline import read_parquet
    from breadth.pipeline import prepare

    e = _sparse_edges("str", seed=5)
    _write_parquet(tmp_path / "e.parquet", e)
    g = prepare(read_parquet(str(tmp_path / "e.parquet"), directed=True, client=lclient), lclient)
    st = str(tmp_path / "s.store")
    m = write_store(g, st, parameters={"t": 1})
    rec = m["id_map"]
    assert rec["layout"] == "parts" and rec["owner"] == "hash" and len(rec["parts"]) == 2
    assert sorted(p for p in os.listdir(st) if p.startswith("id_map")) == ["id_map-00000.parquet",
                                                                          "id_map-00001.parquet"]
    assert read_manifest(st)["id_map"]["offsets"][-1] == g.num_vertices
    g2 = load_store(st, lclient)
    assert g2.id_map.nparts == 2 and all(hasattr(p, "key") for p in g2.id_map.parts)
    root = e[1, 0]
    a, b = bfs(g, root).to_pandas(), bfs(g2, root).to_pandas()
    assert sorted(map(tuple, a.values.tolist())) == sorted(map(tuple, b.values.tolist()))
    _check_against_oracle([bfs(g2, root)], e, directed=True)


def test_real_graph_with_hashed_ids_matches_table_path(tmp_path, lclient):
    """p2p-Gnutella31 (directed), ids scattered over 64 bits: the hash path equals the table path."""
    from breadth.bfs import bfs
    from breadth.pipeline import read_parquet, read_snap
    from breadth.pipeline import prepare

    raw = load_snap("p2p-Gnutella31.txt")
    rng = np.random.default_rng(1)
    ids = np.unique(raw)
    sparse = rng.permutation(np.unique(rng.integers(1, 2**62, size=2 * ids.size)))[:ids.size]
    e = sparse[np.searchsorted(ids, raw)]
    _write_parquet(tmp_path / "g.parquet", e, rows_per_group=1 << 15)
    el = read_parquet(str(tmp_path / "g.parquet"), directed=True, client=lclient)
    assert el.source["relabel"] == "hash" and el.id_map.nparts == 2
    plain = read_snap(str(load_snap.__globals__["DATA"] / "p2p-Gnutella31.txt"), directed=True, client=lclient)
    assert plain.source["relabel"] == "table"
    gh, gt = prepare(el, lclient), prepare(plain, lclient)
    back = dict(zip(sparse.tolist(), ids.tolist()))
    for r in (int(raw[0, 0]), int(raw[1000, 0])):
        h = bfs(gh, int(sparse[np.searchsorted(ids, r)])).to_pandas()
        t = bfs(gt, r).to_pandas()
        assert dict(zip(h["vertex"].map(back), h["level"])) == dict(zip(t["vertex"], t["level"]))
    _check_against_oracle([bfs(gh, int(e[0, 0]))], e, directed=True)


def test_pure_part_functions():
    from breadth.bfs.id_map import id_hash, lookup_keyed, lookup_sorted, owner_of
    from breadth.pipeline.relabel.hash_relabel import chunk_dense, chunk_split, owner_part, part_ids

    v = np.array([0, 5, 2**62, 2**63 - 1], np.int64)
    np.testing.assert_array_equal(id_hash(v), id_hash(v.astype(np.uint64)))  # value, not dtype
    assert owner_of(np.array(["a", "b"], dtype=object), 3).tolist() == \
        owner_of(np.array(["a", "b"]), 3).tolist()
    np.testing.assert_array_equal(lookup_sorted(np.array([3, 9], np.uint64), 4, np.array([9, 3, 7, -1])),
                                  [5, 4, -1, -1])
    # two chunks, three owners: compose the steps by hand and compare with np.unique numbering
    rng = np.random.default_rng(0)
    chunks = [rng.integers(-(1 << 40), 1 << 40, size=(200, 2)) for _ in range(2)]
    splits = [chunk_split(c, 3, np.int64) for c in chunks]
    for s in splits:  # pieces: sorted keys of their owner only
        for p, piece in enumerate(s[2]):
            assert piece.dtype == np.uint64 and (np.diff(piece.astype(object)) > 0).all()
            assert ((piece % np.uint64(3)) == p).all()
    parts = [owner_part(np.int64, *[s[2][p] for s in splits]) for p in range(3)]
    offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])])
    dense = [chunk_dense(s, *[lookup_sorted(parts[p], offsets[p], s[2][p]) for p in range(3)]) for s in splits]
    ids = [part_ids(p, np.int64) for p in parts]
    whole = np.concatenate(ids)
    for c, d in zip(chunks, dense):
        np.testing.assert_array_equal(whole[d], c)
    assert whole.size == np.unique(np.concatenate(chunks)).size
    for p, part in enumerate(ids):  # the map's parts: owner p's ids in key order, found by lookup_keyed
        assert (owner_of(part, 3) == p).all() and (np.diff(id_hash(part).astype(object)) > 0).all()
        q = np.concatenate([part[::3], [12345678912345]])
        got = lookup_keyed(part, offsets[p], q)
        np.testing.assert_array_equal(got[:-1], offsets[p] + np.arange(0, part.size, 3))
        assert got[-1] == -1 or part[got[-1] - offsets[p]] == q[-1]
        np.testing.assert_array_equal(lookup_keyed(part, offsets[p], q.astype(np.float64)), -1)


def test_hash_ordered_map_looks_up_any_integer_kind():
    """A map of parts in key order (what hash relabeling gives) answers to_dense for ids of another integer
    dtype by value, -1 for ids out of the map's range, and to_original positionally."""
    from breadth.bfs.id_map import PartitionedIdMap, id_hash, owner_of

    ids = np.array([0, 7, 2**40, 2**63 - 5, 3, 99], np.uint64)
    parts = [ids[owner_of(ids, 2) == p] for p in range(2)]
    parts = [p[np.argsort(id_hash(p))] for p in parts]
    idm = PartitionedIdMap(parts, np.array([0, parts[0].size, ids.size]), np.dtype(np.uint64), "hash",
                           order="hash")
    whole = np.concatenate(parts)
    np.testing.assert_array_equal(idm.to_dense(whole), np.arange(ids.size))
    np.testing.assert_array_equal(idm.to_dense(np.array([7, 99, -1, 8], np.int64))[[0, 1]],
                                  [np.flatnonzero(whole == 7)[0], np.flatnonzero(whole == 99)[0]])
    np.testing.assert_array_equal(idm.to_dense(np.array([-1, 8], np.int64)), [-1, -1])
    np.testing.assert_array_equal(idm.to_original(np.arange(ids.size)), whole)


def test_store_map_without_order_is_sorted_by_value(tmp_path, lclient):
    """A store's id map record without ``order`` (written before hash order) loads as value order, and its
    lookups find every id; a map in hash order keeps ``order`` through the store."""
    from breadth.bfs.id_map import PartitionedIdMap, id_hash, owner_of
    from breadth.io.id_map_store import load_id_map_parts, write_id_map

    ids = np.random.default_rng(4).integers(0, 1 << 50, 1000)
    workers = list(lclient.scheduler_info()["workers"])
    for order in ("value", "hash"):
        parts = [np.unique(ids[owner_of(ids, 2) == p]) for p in range(2)]
        if order == "hash":
            parts = [p[np.argsort(id_hash(p))] for p in parts]
        idm = PartitionedIdMap(parts, np.array([0, parts[0].size, parts[0].size + parts[1].size]),
                               np.dtype(np.int64), "hash", order=order)
        d = tmp_path / order
        d.mkdir()
        rec = write_id_map(idm, str(d), lclient)
        assert rec["order"] == order
        if order == "value":
            del rec["order"]
        back = load_id_map_parts(str(d), rec, lclient, workers)
        assert back.order == order
        whole = np.concatenate(parts)
        np.testing.assert_array_equal(back.to_dense(whole[::7]), np.arange(0, whole.size, 7))


def test_cli_ingest_and_bfs_dataset(tmp_path):
    import pandas as pd

    e = _sparse_edges("int64", seed=9)
    _write_parquet(tmp_path / "e.parquet", e)
    st, out = str(tmp_path / "s.store"), str(tmp_path / "out")

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *a], capture_output=True, text=True,
                              timeout=300)

    r = cli("ingest", str(tmp_path / "e.parquet"), "--out", st, "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("info", st, "--verify")
    assert r.returncode == 0 and "2 part(s) by hash owner" in r.stdout and "file(s) OK" in r.stdout
    root = int(e[2, 1])
    r = cli("bfs", st, "--root", str(root), "--out", out, "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    df = pd.read_parquet(out)
    assert list(df.columns) == ["root", "vertex", "parent", "level"] and os.path.isdir(out)
    assert dict(zip(df["vertex"].tolist(), df["level"].tolist())) == _oracle(e, [root])[root]


@pytest.mark.parametrize("kind", ["int64", "uint64", "skewed", "one_hub", "crafted_keys", "tiny", "empty"])
def test_hashed_factorize_numbers_ids_by_key(kind):
    """Every id's code is the rank of its hash key among the chunk's distinct keys, whether the keys are
    spread over the buckets or one id fills a bucket (a hub), or ids were chosen so that their keys crowd
    one bucket's group (sorted by the fallback sort), and ids_of_keys gives the ids back."""
    from breadth.bfs.id_map import id_hash, ids_of_keys
    from breadth.pipeline.relabel.hashed_factorize import hashed_factorize

    rng = np.random.default_rng(5)
    a = {"int64": lambda: rng.integers(-(1 << 63), (1 << 63) - 1, 300_000),
         "uint64": lambda: rng.integers(0, 1 << 64, 300_000, dtype=np.uint64),
         "skewed": lambda: rng.integers(0, 1 << 62, 50)[rng.zipf(1.5, 200_000) % 50],
         "one_hub": lambda: np.where(rng.random(200_000) < 0.5, 42, rng.integers(0, 1 << 40, 200_000)),
         "crafted_keys": lambda: np.concatenate([  # keys differing in their low bits only, or in middle bits
             ids_of_keys(rng.permutation(np.arange(5000, dtype=np.uint64)) | np.uint64(5 << 58), np.uint64),
             ids_of_keys((np.arange(5000, dtype=np.uint64) << np.uint64(20)) | np.uint64(3 << 60), np.uint64),
             rng.integers(0, 1 << 64, 20_000, dtype=np.uint64)]),
         "tiny": lambda: np.array([3, -3, 3]),
         "empty": lambda: np.empty(0, np.int64)}[kind]()
    a = np.concatenate([a, a[::7]])
    codes, keys = hashed_factorize(a)
    want = np.unique(id_hash(a))
    np.testing.assert_array_equal(keys, want)
    np.testing.assert_array_equal(keys[codes], id_hash(a))
    np.testing.assert_array_equal(ids_of_keys(keys, a.dtype)[codes], a)
    assert keys.dtype == np.uint64 and codes.dtype == np.int32


def test_parquet_metadata_tells_what_reading_tells(tmp_path):
    """Row-group statistics give relabeling each chunk's rows, id kind and range without reading it (so
    chunks are split as they are read); where they cannot (unsigned ids), the chunk is read instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from breadth.io.parquet_edges import _row_group_meta, read_row_group
    from breadth.pipeline.relabel.relabel import _chunk_meta

    rng = np.random.default_rng(3)
    e = rng.integers(0, 1 << 62, size=(10_000, 2))
    pq.write_table(pa.table({"src": e[:, 0], "dst": e[:, 1]}), tmp_path / "i.parquet", row_group_size=3000)
    pq.write_table(pa.table({"src": [str(x) for x in e[:50, 0]], "dst": [str(x) for x in e[:50, 1]]}),
                   tmp_path / "s.parquet")
    pq.write_table(pa.table({"src": e[:50, 0].astype(np.uint64), "dst": e[:50, 1].astype(np.uint64)}),
                   tmp_path / "u.parquet")
    for name in ("i", "s"):
        pf = pq.ParquetFile(tmp_path / f"{name}.parquet")
        for rg in range(pf.metadata.num_row_groups):
            got = _row_group_meta(str(tmp_path / f"{name}.parquet"), pf, rg, "src", "dst")
            want = _chunk_meta(read_row_group(str(tmp_path / f"{name}.parquet"), rg, "src", "dst"))
            assert got[0] == want[0] and got[2:] == want[2:], (name, rg)
    assert _row_group_meta("u", pq.ParquetFile(tmp_path / "u.parquet"), 0, "src", "dst") is None


@pytest.mark.parametrize("kind", ["uniform", "crowded", "tiny", "empty"])
def test_indexed_lookup_finds_what_the_walk_finds(kind):
    """A part's key index only says in which run of the part each key lies: dense ids (and -1 for absent
    keys) are the plain walk's and np.searchsorted's, whether the keys spread over the index (hash keys)
    or crowd a few of its runs (each key is then found by a binary search in its run)."""
    from breadth.pipeline.relabel.hash_relabel import lookup_piece, part_index

    rng = np.random.default_rng(7)
    part = {"uniform": lambda: rng.integers(0, 1 << 64, 200_000, dtype=np.uint64),
            "crowded": lambda: np.concatenate([np.uint64(9 << 60) + rng.integers(0, 1 << 20, 100_000, dtype=np.uint64),
                                               rng.integers(0, 1 << 64, 1000, dtype=np.uint64)]),
            "tiny": lambda: np.array([5, 1 << 63], np.uint64),
            "empty": lambda: np.empty(0, np.uint64)}[kind]()
    part = np.unique(part)
    present = rng.choice(part, min(part.size, 5000), replace=False) if part.size else part
    keys = np.unique(np.concatenate([present, rng.integers(0, 1 << 64, 500, dtype=np.uint64), part[:1]]))
    idx = part_index(part)
    assert idx.dtype == np.int32 and idx[0] == 0 and idx[-1] == part.size and (np.diff(idx) >= 0).all()
    got = lookup_piece(part, 11, keys, idx)
    np.testing.assert_array_equal(got, lookup_piece(part, 11, keys))
    pos = np.searchsorted(part, keys)
    hit = pos < part.size
    hit[hit] = part[pos[hit]] == keys[hit]
    np.testing.assert_array_equal(got, np.where(hit, pos + 11, -1))
    assert part_index(np.array(["a"], dtype=object)) is None
