"""Issue 14, deliverable 5: inputs and commands that gave wrong answers or lost/left files.

CLI cases run the command as a user types it (a subprocess) and check the exit status, a one-line
``breadth: error:`` message naming what is wrong, no traceback, and the files before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest


def _cli(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env=env)


def _one_error_line(r, needle: str, code: int = 1) -> str:
    """The run failed with ``code``, no Python traceback of the command, and exactly one
    ``breadth: error:`` line, containing ``needle``.  (A failed Dask task also makes the worker log
    "Compute Failed" on this branch; silencing Dask's own logs is the CLI error framework's work.)"""
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("breadth: error: ")]
    assert r.returncode == code, (r.returncode, r.stderr[-3000:])
    assert "Traceback (most recent call last)" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1, r.stderr[-3000:]
    assert needle in lines[0], lines[0]
    return lines[0]


def _listing(path) -> dict:
    """Every file under ``path`` with its bytes: what a failed command must leave unchanged."""
    out = {}
    for d, _, files in os.walk(path):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
    return out


# -- 2. uint64 ids through `breadth bfs --out` -------------------------------------------------------
def test_bfs_results_with_uint64_ids_are_uint64_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    big = 2**63
    src = np.array([big + 1, big + 2, big + 3, 5], np.uint64)
    dst = np.array([big + 2, big + 3, 2**64 - 1, big + 1], np.uint64)
    pq.write_table(pa.table({"src": pa.array(src, pa.uint64()), "dst": pa.array(dst, pa.uint64())}),
                   tmp_path / "e.parquet")
    store, out = tmp_path / "u.store", tmp_path / "levels.parquet"
    r = _cli("ingest", tmp_path / "e.parquet", "--out", store)
    assert r.returncode == 0, r.stderr[-3000:]
    r = _cli("bfs", store, "--root", big + 1, "--out", out)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-3000:]
    t = pq.read_table(out)
    assert [t.schema.field(c).type for c in ("root", "vertex", "parent")] == [pa.uint64()] * 3
    got = dict(zip(t.column("vertex").to_pylist(), zip(t.column("parent").to_pylist(), t.column("level").to_pylist())))
    assert got == {big + 1: (big + 1, 0), big + 2: (big + 1, 1), 5: (big + 1, 1), big + 3: (big + 2, 2),
                   2**64 - 1: (big + 3, 3)}
    assert set(t.column("root").to_pylist()) == {big + 1}
    assert sorted(os.listdir(tmp_path)) == ["e.parquet", "levels.parquet", "u.store"]  # no temporary left


# -- 6. `breadth bfs --out` inside a store, or onto a directory ---------------------------------------
@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """A scale-6 Kronecker store written by the CLI (two stores: results must not go into either)."""
    d = tmp_path_factory.mktemp("stores")
    for name in ("g.store", "other.store"):
        r = _cli("generate", "--scale", "6", "--out", d / name, "--workers", "1", "--threads", "1")
        assert r.returncode == 0, r.stderr[-3000:]
    return d


@pytest.mark.parametrize("where,needle", [
    ("g.store/manifest.json", "inside the shard store {d}/g.store; write it outside the store"),
    ("g.store/shard-00000/levels.parquet", "inside the shard store {d}/g.store; write it outside"),
    ("g.store/new/levels.parquet", "inside the shard store {d}/g.store; write it outside"),
    ("other.store/levels.parquet", "inside the shard store {d}/other.store; write it outside"),
    ("g.store", "inside the shard store {d}/g.store; write it outside"),
    (".", "exists and is not a results dataset written by breadth bfs"),
])
def test_bfs_out_inside_a_store_or_onto_a_directory_is_refused_before_any_work(small_store, where, needle):
    d = str(small_store)
    before = _listing(d)
    out = os.path.join(d, where)
    r = _cli("bfs", os.path.join(d, "g.store"), "--root", "1", "--out", out, timeout=60)
    line = _one_error_line(r, needle.format(d=d), code=2)
    assert line.startswith(f"breadth: error: --out {out}: "), line
    assert _listing(d) == before  # the store's manifest and shards are untouched, nothing added
    # the same store and root with a results file outside it work
    r = _cli("bfs", os.path.join(d, "g.store"), "--root", "1", "--out", os.path.join(d, "levels.parquet"))
    assert r.returncode == 0, r.stderr[-3000:]
    shutil.rmtree(os.path.join(d, "levels.parquet"))  # a results dataset: a directory of part files


# -- 7. --overwrite on a directory that is not a breadth store ----------------------------------------
@pytest.mark.parametrize("cmd", [["generate", "--scale", "4"], ["ingest", "{edges}"]])
@pytest.mark.parametrize("record", ["manifest.json", "progress.json"])
def test_overwrite_refuses_a_directory_that_only_holds_a_file_named_like_a_store_record(tmp_path, cmd, record):
    edges = tmp_path / "e.txt"
    edges.write_text("1 2\n2 3\n")
    user = tmp_path / "project"
    (user / "shard-00000").mkdir(parents=True)  # even names that look like a store's are the user's here
    (user / record).write_text('{"name": "my project", "version": 1}\n')
    (user / "shard-00000" / "notes.txt").write_text("precious\n")
    (user / "id_map.npy").write_bytes(b"mine")
    before = _listing(user)
    for extra in (["--overwrite"], []):
        r = _cli(*[c.format(edges=edges) for c in cmd], "--out", user, *extra, "--workers", "1", timeout=120)
        _one_error_line(r, f"{user}/{record}: not a breadth shard store record (unreadable, or no \"format\": "
                           f"\"breadth-shard-store\"); refusing to write {'over' if extra else 'into'} {user}")
        assert _listing(user) == before


# -- 8. a failed --spill-dir preparation leaves no spill files ----------------------------------------
def _disk_tier():
    """The shuffle's disk tier, which these workers' memory limit would not need."""
    import dask

    return dask.config.set({"breadth.shuffle.tier": "disk"})


@pytest.mark.parametrize("spill_exists", [True, False])
def test_failed_spilled_prepare_removes_its_spill_tree(lclient, tmp_path, spill_exists):
    import dask.array as da

    from breadth.pipeline import from_dask_array, prepare

    good = np.array([[0, 1], [1, 2], [2, 3]] * 400, np.int64)
    bad = good.copy()
    bad[700] = [3, 99]  # out of range: the second chunk's task fails after the first wrote its buckets
    arr = da.concatenate([da.from_array(good, chunks=(600, 2)), da.from_array(bad, chunks=(600, 2))])
    spill = tmp_path / "spill"
    if spill_exists:
        spill.mkdir()
        (spill / "user.txt").write_text("not ours")
    with pytest.raises(ValueError, match=r"row 100 has vertex id \[3, 99\] outside \[0, 4\)"), _disk_tier():
        prepare(from_dask_array(arr, num_vertices=4), lclient, spill_dir=str(spill), batch_entries=64)
    if spill_exists:
        assert _listing(spill) == {"user.txt": b"not ours"} and os.listdir(spill) == ["user.txt"]
    else:
        assert not spill.exists()  # made by this run, removed with it
    # the same spill directory serves a good run, which also leaves nothing
    with _disk_tier():
        g = prepare(from_dask_array(da.from_array(good, chunks=(600, 2)), num_vertices=4), lclient,
                    spill_dir=str(spill), batch_entries=64)
    assert g.num_edges == 3
    assert sorted(os.listdir(spill)) == (["user.txt"] if spill_exists else [])
    g.release()



def _slow_chunk(edges, seconds):
    import time

    time.sleep(seconds)
    return edges


def test_interrupted_spilled_prepare_removes_its_spill_tree(lclient, tmp_path):
    import signal
    import threading
    import time

    import dask
    import dask.array as da

    from breadth.pipeline import from_dask_array, prepare

    good = np.array([[0, 1], [1, 2], [2, 3]] * 400, np.int64)
    # the slow chunk must outlast the fast chunks' sends, which a loaded CI machine with a cold Numba cache
    # once stretched past 3 s (no spill file before the end, so nothing to interrupt)
    slow_s = 8.0
    slow = da.from_delayed(dask.delayed(_slow_chunk, pure=False)(good, slow_s), shape=good.shape, dtype=np.int64)
    arr = da.concatenate([da.from_array(good, chunks=(600, 2)), slow])
    spill = tmp_path / "spill"
    spill.mkdir()
    seen = []
    stop = threading.Event()

    def on_sigint(signum, frame):
        if not stop.is_set():
            raise KeyboardInterrupt

    def interrupt():  # Ctrl-C once the fast chunks' bucket files are on disk, while the slow one runs
        t0 = time.monotonic()
        while time.monotonic() - t0 < slow_s:
            files = [f for _, _, fs in os.walk(spill) for f in fs]
            if files:
                seen.extend(files)
                break
            time.sleep(0.01)
        # again until it lands: Python drops a KeyboardInterrupt raised inside a garbage-collection callback
        # (distributed registers one), which in a long session sometimes swallowed the only one sent
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.2)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        with pytest.raises(KeyboardInterrupt), _disk_tier():
            try:
                prepare(from_dask_array(arr, num_vertices=4), lclient, spill_dir=str(spill), batch_entries=64)
            finally:
                stop.set()
    finally:
        stop.set()
        signal.signal(signal.SIGINT, previous)
    assert seen  # the run was interrupted with spill files written
    assert os.listdir(spill) == []
    time.sleep(slow_s + 0.5)  # the slow chunk's task ends meanwhile: nothing may reappear
    assert os.listdir(spill) == []


# -- 1. a header-less numeric CSV keeps its first edge -------------------------------------------------
def _orig_edges(el) -> list[tuple]:
    e = el.edges.compute()
    idm = np.asarray(el.id_map) if el.id_map is not None else None
    return sorted((idm[a], idm[b]) if idm is not None else (a, b) for a, b in e.tolist())


@pytest.mark.parametrize("text,kw,want", [
    ("10,20\n20,30\n30,40\n", {}, [(10, 20), (20, 30), (30, 40)]),               # no header: all edges
    ("src,dst\n10,20\n20,30\n", {}, [(10, 20), (20, 30)]),                       # a header still works
    (" 10 , 20 ,0.5\r\n20,30,1.5\r\n", {}, [(10, 20), (20, 30)]),                 # weights, blanks, CRLF
    ("w,a,b\n0.5,10,20\n1.5,20,30\n", {"src": 1, "dst": 2}, [(10, 20), (20, 30)]),
    ("0.5,10,20\n1.5,20,30\n", {"src": 1, "dst": 2}, [(10, 20), (20, 30)]),
    ("a,b\n10,20\n", {"src": "a", "dst": "b"}, [(10, 20)]),
    ("10,20\n20,30\n", {"ids": "str"}, [("10", "20"), ("20", "30")]),
    ("src,dst\nx,y\n", {"ids": "str"}, [("x", "y")]),
    ("x,y\ny,z\n", {"ids": "str", "header": False}, [("x", "y"), ("y", "z")]),
    ("10,20\n20,30\n", {"header": True}, [(20, 30)]),                             # the caller's explicit word
])
@pytest.mark.parametrize("gz", [False, True])
def test_csv_first_row_of_ids_is_an_edge(lclient, tmp_path, text, kw, want, gz):
    import gzip

    from breadth.pipeline import read_csv

    p = tmp_path / ("e.csv.gz" if gz else "e.csv")
    (gzip.open if gz else open)(p, "wt").write(text)
    el = read_csv(str(p), directed=True, client=lclient, **kw)
    assert _orig_edges(el) == sorted(want)


def test_csv_first_row_out_of_range_is_reported_not_taken_for_a_header(lclient, tmp_path):
    from breadth.pipeline import read_csv
    from breadth.io.errors import IdRangeError

    p = tmp_path / "e.csv"
    p.write_text(f"{2**64},1\n2,3\n")
    with pytest.raises(IdRangeError, match=rf"e.csv:1: vertex id .*: '{2**64},1'"):
        read_csv(str(p), client=lclient)


def test_cli_ingest_headerless_csv_keeps_every_edge(tmp_path):
    (tmp_path / "e.csv").write_text("1,2\n2,3\n3,4\n")
    (tmp_path / "h.csv").write_text("src,dst\n1,2\n2,3\n3,4\n")
    for name in ("e", "h"):
        r = _cli("ingest", tmp_path / f"{name}.csv", "--out", tmp_path / f"{name}.store", "--workers", "1")
        assert r.returncode == 0, r.stderr[-3000:]
        assert "4 vertices, 3 input edges" in r.stdout, r.stdout


# -- 3. text ids in [2**63, 2**64) are uint64 ids ----------------------------------------------------
BIG = [2**63, 2**63 + 1, 2**64 - 1, 7]


@pytest.mark.parametrize("name,sep", [("e.txt", " "), ("e.csv", ","), ("e.txt.gz", "\t")])
def test_text_ids_above_int64_are_read_as_uint64(lclient, tmp_path, name, sep):
    import gzip

    from breadth.pipeline import read_edges

    pairs = [(BIG[0], BIG[1]), (BIG[1], BIG[2]), (BIG[3], BIG[0])]
    text = "".join(f"{a}{sep}{b}\n" for a, b in pairs)
    p = tmp_path / name
    if name.endswith(".gz"):
        # many small stream blocks: int64-only blocks and uint64 blocks meet in one chunk
        text = "".join(f"{i}{sep}{i + 1}\n" for i in range(2000)) + text
        pairs = [(i, i + 1) for i in range(2000)] + pairs
        with gzip.open(p, "wt") as f:
            f.write(text)
    else:
        p.write_text(text)
    el = read_edges(str(p), directed=True, client=lclient, chunk_bytes=64)
    assert np.asarray(el.id_map).dtype == np.uint64
    assert _orig_edges(el) == sorted(pairs)


def test_cli_ingest_and_bfs_with_uint64_text_ids(tmp_path):
    import pyarrow.parquet as pq

    (tmp_path / "e.txt").write_text(f"{BIG[0]} {BIG[1]}\n{BIG[1]} {BIG[2]}\n{BIG[3]} {BIG[0]}\n")
    st = tmp_path / "e.store"
    r = _cli("ingest", tmp_path / "e.txt", "--out", st, "--workers", "1")
    assert r.returncode == 0 and "4 vertices, 3 input edges" in r.stdout, r.stderr[-3000:]
    r = _cli("bfs", st, "--root", 2**64 - 1, "--out", tmp_path / "l.parquet", "--workers", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    t = pq.read_table(tmp_path / "l.parquet").to_pydict()
    assert dict(zip(t["vertex"], t["level"])) == {2**64 - 1: 0, BIG[1]: 1, BIG[0]: 2, 7: 3}


@pytest.mark.parametrize("text,line", [(f"1 2\n{2**64} 3\n", 2), (f"5 {10**30}\n", 1)])
def test_cli_ids_of_2_to_the_64_and_more_are_refused_with_file_and_line(tmp_path, text, line):
    p = tmp_path / "e.txt"
    p.write_text(text)
    r = _cli("ingest", p, "--out", tmp_path / "s", "--workers", "1")
    bad = text.splitlines()[line - 1]
    _one_error_line(r, f"{p}:{line}: vertex id exceeds the uint64 range (expected an integer in 0..2**64-1): "
                       f"{bad!r}")
    assert not (tmp_path / "s" / "manifest.json").exists()


# -- 5. a manifest that disagrees with its shards ----------------------------------------------------
@pytest.fixture(scope="module")
def directed_store(tmp_path_factory):
    """A directed two-shard store with an id map (sparse ids), written by the CLI."""
    d = tmp_path_factory.mktemp("dstore")
    rng = np.random.default_rng(3)
    ids = rng.choice(10**6, 50, replace=False) * 7 + 3
    (d / "e.txt").write_text("".join(f"{ids[a]} {ids[b]}\n" for a, b in rng.integers(0, 50, (300, 2))))
    r = _cli("ingest", d / "e.txt", "--directed", "--out", d / "g.store", "--workers", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "g.store"


def _set(*path_and_value):
    *path, value = path_and_value

    def edit(m):
        for k in path[:-1]:
            m = m[k]
        m[path[-1]] = value(m[path[-1]]) if callable(value) else value
    return edit


@pytest.mark.parametrize("edit,needle", [
    (_set("num_vertices", lambda v: v - 1), "manifest.json: num_vertices is {nvm1} but the shards cover vertices [0, {nv})"),
    (_set("num_vertices", lambda v: v + 5), "manifest.json: num_vertices is {nvp5} but the shards cover vertices [0, {nv})"),
    (_set("nparts", 1), "manifest.json: nparts is 1 but shards lists 2 shard(s)"),
    (_set("nparts", 3), "manifest.json: nparts is 3 but shards lists 2 shard(s)"),
    (_set("num_edges", lambda v: v + 1), "manifest.json: num_edges is {nep1} but the shards hold {ne} adjacency entries"),
    (_set("shards", 0, "nnz", lambda v: v - 1), "manifest.json: shards[0].files.columns has shape [{nnz0}], expected [{nnz0m1}] (from shards[0].nnz {nnz0m1})"),
    (_set("shards", 1, "files", "columns", "shape", lambda v: [v[0] + 1]), "manifest.json: shards[1].files.columns says int32[{nnz1p1}], the file holds int32[{nnz1}]"),
    (_set("shards", 0, "hi", lambda v: v - 1), "manifest.json: shards[1].lo is {hi0}, expected {hi0m1} (where the previous shard ends)"),
    (_set("shards", 1, "dir", "../elsewhere"), "manifest.json: shards[1].dir is '../elsewhere', expected 'shard-00001'"),
    (_set("directed", False), "manifest.json: shards[0].files lists ['columns', 'in_columns', 'in_offsets', 'offsets', 'self_loops', 'tuple_degree'], expected ['columns', 'offsets', 'self_loops', 'tuple_degree'] for an undirected graph"),
    # sparse ids: the id map is partitioned by hash owner, one file per part
    (_set("id_map", "parts", 0, "shape", [3]), "manifest.json: id_map.parts[0] says int64[3], the file holds int64["),
    (_set("id_map", "parts", 1, "dtype", "uint64"), "manifest.json: id_map.parts[1] says uint64["),
    (_set("id_map", "offsets", lambda v: [0] + [x + 1 for x in v[1:]]), "manifest.json: id_map.offsets are [0, "),
    (_set("num_self_loops", -1), "manifest.json: num_self_loops is -1, expected an integer >= 0"),
    (_set("shards", "oops"), "manifest.json: nparts is 2 but shards lists no shard(s)"),
])
def test_manifest_that_disagrees_with_its_shards_is_refused(directed_store, tmp_path, edit, needle):
    import json
    import shutil

    from breadth.io import StoreError
    from breadth.io.shard_store import load_store

    m = json.loads((directed_store / "manifest.json").read_text())
    st = tmp_path / "s.store"
    shutil.copytree(directed_store, st)
    nv, ne, nnz0, nnz1, hi0 = (m["num_vertices"], m["num_edges"], m["shards"][0]["nnz"], m["shards"][1]["nnz"],
                               m["shards"][0]["hi"])
    needle = needle.format(nv=nv, nvm1=nv - 1, nvp5=nv + 5, ne=ne, nep1=ne + 1, nnz0=nnz0, nnz0m1=nnz0 - 1,
                           nnz1=nnz1, nnz1p1=nnz1 + 1, hi0=hi0, hi0m1=hi0 - 1)
    edit(m)
    (st / "manifest.json").write_text(json.dumps(m))  # every file and checksum is unchanged
    with pytest.raises(StoreError) as info:
        load_store(str(st))  # refused before any worker is asked for anything
    assert f"{st}: {needle}" in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert "disagrees with the store" in str(info.value)


@pytest.mark.parametrize("raw,detail", [
    (b'{"format": "breadth-shard-store", "note": "\xff\xfe"}', "('utf-8' codec can't decode byte 0xff in position 43: invalid start byte)"),
    (b'{"format": "breadth-shard-store", ', "(Expecting property name enclosed in double quotes: line 1 column 35 (char 34))"),
    (None, None),  # a readable manifest whose num_vertices disagrees with the shards
])
@pytest.mark.parametrize("cmd", ["info", "bfs"])
def test_cli_refuses_a_damaged_or_disagreeing_manifest_in_one_line(directed_store, tmp_path, raw, detail, cmd):
    import json
    import shutil

    st = tmp_path / "s.store"
    shutil.copytree(directed_store, st)
    if raw is None:
        m = json.loads((st / "manifest.json").read_text())
        m["num_vertices"] += 1
        (st / "manifest.json").write_text(json.dumps(m))
        needle = f"{st}: manifest.json: num_vertices is {m['num_vertices']} but the shards cover vertices [0, "
    else:
        (st / "manifest.json").write_bytes(raw)
        needle = f"{st}/manifest.json: not valid UTF-8/JSON {detail}"
    before = _listing(st)
    args = ["info", st] if cmd == "info" else ["bfs", st, "--root", "3", "--out", tmp_path / "r.parquet", "--workers", "1"]
    _one_error_line(_cli(*args), needle)
    assert _listing(st) == before and not (tmp_path / "r.parquet").exists()


# -- 4. float ids from a Dask DataFrame --------------------------------------------------------------
def _ddf(d: dict, nparts: int = 2):
    import dask.dataframe as dd
    import pandas as pd

    return dd.from_pandas(pd.DataFrame(d, index=[100 + i for i in range(len(next(iter(d.values()))))]),
                          npartitions=nparts)


def test_integral_float_ids_are_the_integer_ids(lclient):
    import pandas as pd

    from breadth.pipeline import from_dask_dataframe

    # the same graph as integers, as floats (e.g. after a merge that introduced NaN, then dropna) and
    # as nullable Float64: one vertex per id, never "3" and "3.0" apart
    ints = {"src": [1, 2, 3, 4], "dst": [2, 3, 1, 1]}
    want = _orig_edges(from_dask_dataframe(_ddf(ints), directed=True, client=lclient))
    for d in ({"src": [1.0, 2.0, 3.0, 4.0], "dst": [2, 3, 1, 1]},
              {"src": [1.0, 2.0, 3.0, 4.0], "dst": [2.0, 3.0, 1.0, 1.0]},
              {"src": pd.array([1.0, 2.0, 3.0, 4.0], dtype="Float64"), "dst": [2, 3, 1, 1]}):
        el = from_dask_dataframe(_ddf(d), directed=True, client=lclient)
        assert el.num_vertices == 4 and np.asarray(el.id_map).dtype.kind == "i"
        assert _orig_edges(el) == want
    big = {"src": [2.0**63, 2.0**64 - 2048], "dst": [5.0, 2.0**63]}  # exact floats above int64
    el = from_dask_dataframe(_ddf(big, 1), directed=True, client=lclient)
    assert np.asarray(el.id_map).dtype == np.uint64
    assert _orig_edges(el) == sorted([(2**63, 5), (2**64 - 2048, 2**63)])
    mixed = {"src": np.array([2**63 + 1, 1], np.uint64), "dst": [1, 2]}  # uint64 with int64: no float64 rounding
    assert _orig_edges(from_dask_dataframe(_ddf(mixed, 1), directed=True, client=lclient)) == [(1, 2), (2**63 + 1, 1)]


@pytest.mark.parametrize("d,cls,needle", [
    ({"src": [1.0, 2.0, 3.5, 4.0], "dst": [2, 3, 1, 1]}, "NonNumericIdError",
     "partition 1: column 'src' row 0 (index 102): vertex id 3.5 is not an integer (1 such value(s) in the column)"),
    ({"src": [1, 2, 3, 4], "dst": [2.0, float("nan"), 1.0, 1.0]}, "NonNumericIdError",
     "partition 0: column 'dst' row 1 (index 101): missing id (NaN/None); 1 missing id(s) in the column"),
    ({"src": [1.0, 2.0, 3.0, float("inf")], "dst": [2, 3, 1, 1]}, "NonNumericIdError",
     "partition 1: column 'src' row 1 (index 103): vertex id inf is not an integer"),
    ({"src": [1.0, 2.0, 3.0, 2.0**64], "dst": [2, 3, 1, 1]}, "IdRangeError",
     "partition 1: column 'src' row 1 (index 103): vertex id 1.8446744073709552e+19 exceeds the uint64 range"),
    ({"src": [1.0, -2.0, 3.0, 4.0], "dst": [2, 3, 1, 1]}, "NegativeIdError", "partition 0: row 1 has negative vertex id -2"),
    ({"src": [1, -2, 3, 4], "dst": np.array([2, 2**63, 1, 1], np.uint64)}, "NegativeIdError",
     "partition 0: column 'src' row 1 (index 101): negative vertex id -2"),
])
def test_non_integral_nan_or_out_of_range_float_ids_are_one_clear_error(lclient, d, cls, needle):
    from breadth.io import errors
    from breadth.pipeline import from_dask_dataframe

    with pytest.raises(getattr(errors, cls)) as info:
        from_dask_dataframe(_ddf(d), directed=True, client=lclient)
    assert needle in str(info.value) and "\n" not in str(info.value), str(info.value)
