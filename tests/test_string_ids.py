"""String ids as Arrow arrays: XXH64 owners, the chunk split, owners' unions and lookups, the disk tier,
stores and the CLI.

Oracles are independent of breadth: published XXH64 test vectors, Python's ``sorted``/``bisect`` on
``str`` (code-point order), ``pandas.factorize`` and dicts.
"""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

#: strings that order differently by bytes than by naive rules: prefixes, the empty string, 2-, 3- and
#: 4-byte UTF-8, a NUL, lengths about the XXH64 stripe (32 bytes) and word (8, 4 bytes) boundaries
TRICKY = ["", "a", "ab", "a\x00", "b", "\u00e9", "e\u0301", "\u4e2d\u6587", "\U0001F600", "z" * 31, "z" * 32,
          "z" * 33, "y" * 64, "x" * 7, "x" * 8, "x" * 12, "https://h1.example/\u00e9t\u00e9", "https://h1.example/"]


def _strings(n: int, seed: int) -> list[str]:
    """``n`` distinct URL-like strings (some non-ASCII), plus :data:`TRICKY`."""
    rng = np.random.default_rng(seed)
    alphabet = ["a", "b", "/", ".", "\u00e9", "\u4e2d", "\U0001F600", "0", "9"]
    out = set(TRICKY)
    while len(out) < n:
        k = int(rng.integers(0, 40))
        out.add("https://h%d.org/" % rng.integers(0, 50) + "".join(rng.choice(alphabet, k)))
    return sorted(out)


def _edges(nids: int, m: int, seed: int) -> np.ndarray:
    ids = np.array(_strings(nids, seed), dtype=object)
    rng = np.random.default_rng(seed + 1)
    return ids[rng.integers(0, ids.size, size=(m, 2))]


def test_xxh64_published_vectors():
    """XXH64 with seed 0 (xxHash's reference values), every path of the algorithm: empty, under 4, under
    8, under 32 and over 32 bytes, several stripes."""
    from breadth.bfs.string_hash import xxh64

    vectors = {"": 0xEF46DB3751D8E999, "a": 0xD24EC4F1A98C6E5B, "abc": 0x44BC2CF5AD770999,
               "message digest": 0x066ED728FCEEB3BE,
               "abcdefghijklmnopqrstuvwxyz": 0xCFE1F278FA89835C,
               "Nobody inspects the spammish repetition": 0xFBCEA83C8A378BF1,
               "1234567890" * 8: 0xE04A477F19EE145D}
    got = xxh64(pa.array(list(vectors)))
    assert [hex(int(h)) for h in got] == [hex(v) for v in vectors.values()]


def test_string_owners_agree_for_every_container():
    """Owners of strings are ``XXH64 % P`` whether the ids come as Arrow (also sliced, large_string,
    chunked), object or ``U`` arrays: the CPU split, the GPU path's host call and root lookups agree."""
    from breadth.bfs.id_map import id_hash, owner_of
    from breadth.bfs.string_hash import xxh64

    s = _strings(300, 1)
    want = xxh64(pa.array(s)) % np.uint64(7)
    arr = pa.array(["pad"] + s)[1:]
    for ids in (np.array(s, dtype=object), np.array(s), arr, arr.cast(pa.large_string()),
                pa.chunked_array([s[:100], s[100:]])):
        np.testing.assert_array_equal(owner_of(ids, 7), want.astype(np.int64))
    assert id_hash(np.array(s, dtype=object)).dtype == np.uint64
    assert len(set(owner_of(np.array(s, dtype=object), 7).tolist())) == 7


def test_merge_and_search_kernels_match_python_order():
    from breadth.bfs.arrow_strings import search_sorted
    from breadth.pipeline.relabel.sorted_string_merge import lookup_strings, union_strings

    rng = np.random.default_rng(4)
    every = _strings(2000, 4)
    pieces = [sorted(set(rng.choice(every, 300).tolist())) for _ in range(5)] + [[]]
    part = union_strings([pa.array(p, pa.string()) for p in pieces])
    assert part.to_pylist() == sorted(set().union(*pieces))
    for p in pieces:
        want = [part.to_pylist().index(x) + 100 for x in p]
        assert lookup_strings(part, 100, pa.array(p, pa.string())).tolist() == want
    probe = every[::7] + ["absent", "", "\U0001F601"]
    ref = part.to_pylist()
    want = [bisect.bisect_left(ref, x) if x in set(ref) else -1 for x in probe]
    assert search_sorted(part, 0, np.array(probe, dtype=object)).tolist() == want
    assert lookup_strings(part, 0, pa.array(sorted(["absent", "~"]))).tolist() == [-1, -1]


def _dictionary_table(e: np.ndarray) -> pa.Table:
    """String edges as the Parquet reader gives them (dictionary-encoded columns): two chunks per column with
    dictionaries of their own, one of them holding categories that no row uses."""
    def column(a):
        half = len(a) // 2
        extra = pa.array(["never used", "\u00e9 unused"] + sorted(set(a[:half].tolist())))
        first = pa.DictionaryArray.from_arrays(pa.array([2 + sorted(set(a[:half].tolist())).index(x)
                                                         for x in a[:half].tolist()], pa.int32()), extra)
        return pa.chunked_array([first, pa.array(a[half:].tolist()).dictionary_encode()])

    return pa.table({"src": column(e[:, 0]), "dst": column(e[:, 1])})


@pytest.mark.parametrize("owners", [1, 3, 64])
def test_split_union_lookup_number_like_a_dict(owners):
    """Chunks of string edges (Arrow tables and object arrays) through the CPU steps by hand, with one
    owner (every hash modulo 1 collides), a few, and more owners than some pieces have ids: every string
    gets one dense id, the same in every chunk, and the map back gives the input."""
    import pandas as pd

    from breadth.pipeline.relabel.hash_relabel import chunk_dense, chunk_split, lookup_piece, owner_part

    e = _edges(500, 4000, seed=owners)
    chunks = [pa.table({"src": e[:1000, 0].tolist(), "dst": e[:1000, 1].tolist()}), e[1000:2500],
              pa.table({"src": pa.array(e[2500:3000, 0].tolist(), pa.large_string()),
                        "dst": pa.array(e[2500:3000, 1].tolist(), pa.large_string())}),
              _dictionary_table(e[3000:3600]),
              pa.table({"src": pa.array(e[3600:, 0].tolist(), pa.large_string()),  # mixed column types
                        "dst": _dictionary_table(e[3600:]).column(1)})]
    splits = [chunk_split(c, owners, object) for c in chunks]
    for c, (codes, _order, _pieces) in zip(chunks, splits):
        flat = np.concatenate([np.asarray(c)[:, 0], np.asarray(c)[:, 1]]) if isinstance(c, np.ndarray) else \
            np.concatenate([c.column(i).to_numpy(zero_copy_only=False) for i in range(2)])
        want, _ = pd.factorize(flat)  # first-seen numbering, as pandas gives it
        got = np.concatenate([codes[:, 0], codes[:, 1]])
        if isinstance(c, pa.Table) and pa.types.is_dictionary(c.column(1).type):
            got = pd.factorize(got)[0]  # the unified dictionary's numbering: the same partition of the rows
            assert codes.max() + 1 == len(set(flat.tolist()))  # unused categories dropped
        np.testing.assert_array_equal(got, want)
    parts = [owner_part(object, *[s[2][p] for s in splits]) for p in range(owners)]
    offsets = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
    dense = [chunk_dense(s, *[lookup_piece(parts[p], offsets[p], s[2][p]) for p in range(owners)])
             for s in splits]
    whole = np.concatenate([p.to_numpy(zero_copy_only=False) for p in parts])
    np.testing.assert_array_equal(whole[np.concatenate(dense)], e)
    ref = {}
    for x in e.ravel().tolist():
        ref.setdefault(x, len(ref))
    assert whole.size == len(ref) == len(set(whole.tolist()))
    for p in parts:  # each part sorted by code points, owned by its hash
        assert p.to_pylist() == sorted(p.to_pylist())


def test_relabel_disk_tier_three_owners_matches_memory(tmp_path, lclient):
    """More owners than workers, the id shuffle's pieces as Arrow IPC files: the same parts and dense edges
    as in memory, and the map gives back every input string (non-ASCII, empty)."""
    import dask

    from breadth.pipeline.relabel.hash_relabel import relabel_hashed
    from breadth.pipeline.shuffle.shuffle import TIER_CONFIG

    e = _edges(700, 4000, seed=9)
    chunks = [lclient.scatter((pa.table({"src": e[i:i + 1000, 0].tolist(), "dst": e[i:i + 1000, 1].tolist()}),
                               None)) for i in range(0, 4000, 1000)]
    workers = list(lclient.scheduler_info()["workers"])
    got = {}
    for tier in ("memory", "disk"):
        with dask.config.set({TIER_CONFIG: tier}):
            dense, idm = relabel_hashed(lclient, chunks, [1000] * 4, object, workers, nowners=3,
                                        spill_dir=str(tmp_path / "spill"))
        d = np.concatenate(dask.compute(*[dask.delayed(c) for c in dense]))  # futures, or delayed reads of files
        got[tier] = (d, idm.gather())
        np.testing.assert_array_equal(idm.gather()[d], e.reshape(-1, 2))
        assert idm.nparts == 3 and idm.size == len(set(e.ravel().tolist()))
        probe = np.array(["", "\U0001F600", "absent"] + e[:5, 0].tolist(), dtype=object)
        want = [-1 if x not in set(e.ravel().tolist()) else int(np.flatnonzero(idm.gather() == x)[0]) for x in probe]
        assert idm.to_dense(probe).tolist() == want
        assert idm.to_original(np.array(want[3:])).tolist() == probe[3:].tolist()
    np.testing.assert_array_equal(got["memory"][0], got["disk"][0])
    np.testing.assert_array_equal(got["memory"][1], got["disk"][1])


def _cli(*a, timeout=300):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *map(str, a)], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_string_store_bfs_dataset_and_old_hash_refused(tmp_path):
    """``breadth ingest`` of string ids, then ``breadth bfs --out``: string columns in original ids, levels
    as a dict BFS gives them; a store whose manifest names no string hash (an earlier breadth's) is refused
    with one line."""
    import pandas as pd

    e = _edges(400, 1500, seed=2)
    pq.write_table(pa.table({"src": e[:, 0].tolist(), "dst": e[:, 1].tolist()}), tmp_path / "e.parquet",
                   row_group_size=400)
    st, out = tmp_path / "s.store", tmp_path / "out"
    r = _cli("ingest", tmp_path / "e.parquet", "--out", st, "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    root = next(x for x in e[:, 0] if x.startswith("https://"))  # a command-line argument: no NUL
    r = _cli("bfs", st, "--root", root, "--out", out, "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    t = pq.read_table(out)
    assert t.schema.field("vertex").type == pa.string() and t.schema.field("parent").type == pa.string()
    adj: dict = {}
    for a, b in e.tolist():
        adj.setdefault(a, set()).add(b)
        adj.setdefault(b, set()).add(a)
    want, frontier = {root: 0}, [root]
    while frontier:
        nxt = []
        for u in frontier:
            for v in adj[u]:
                if v not in want:
                    want[v] = want[u] + 1
                    nxt.append(v)
        frontier = nxt
    df = pd.read_parquet(out)
    assert dict(zip(df["vertex"], df["level"])) == want
    assert all(want[p] == want[v] - 1 or v == root for v, p in zip(df["vertex"], df["parent"]))

    man = st / "manifest.json"
    m = json.loads(man.read_text())
    assert m["id_map"]["string_hash"] == "xxh64"
    del m["id_map"]["string_hash"]
    man.write_text(json.dumps(m))
    r = _cli("bfs", st, "--root", root, "--out", tmp_path / "out2", "--workers", "2", "--threads", "1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("breadth: error:"), r.stderr[-2000:]
    assert "xxh64" in lines[0] and "ingest the input again" in lines[0]


@pytest.mark.parametrize("case", ["null", "mixed"])
def test_bad_string_input_one_line(tmp_path, case):
    d = tmp_path / "in"
    d.mkdir()
    if case == "null":
        pq.write_table(pa.table({"src": ["a", None, "c"], "dst": ["b", "c", "a"]}), d / "a.parquet")
        want = "null id"
    else:
        pq.write_table(pa.table({"src": ["a", "b"], "dst": ["b", "c"]}), d / "a.parquet")
        pq.write_table(pa.table({"src": [1, 2], "dst": [2, 3]}), d / "b.parquet")
        want = "mix strings and integers"
    r = _cli("ingest", d, "--out", tmp_path / "s.store", "--workers", "1", "--threads", "1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and lines[0].startswith("breadth: error:"), r.stderr[-2000:]
    assert want in lines[0]
    assert not os.path.exists(tmp_path / "s.store" / "manifest.json")
