"""Resumable shard store: an interrupted write keeps its complete shards, never loads as complete, and a
rerun finishes it into exactly the store an uninterrupted write gives.

Interruptions are real where cheap: a CLI process killed (SIGKILL to its process group, workers included)
while a worker is in the middle of a shard, and a worker's shard writer failing after its first file
(:mod:`store_faults`, installed in this process or as the CLI's workers' preload).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from conftest import data_file
from store_faults import patched, preload_env

PARAMS = {"input": "Wiki-Vote.txt", "directed": True}


@pytest.fixture(scope="module")
def graph4(lclient):
    """Wiki-Vote (directed, with an integer id map) in 4 shards on the 2 in-process workers."""
    from breadth.pipeline import read_edges
    from breadth.pipeline import prepare

    g = prepare(read_edges(str(data_file("Wiki-Vote.txt")), directed=True, client=lclient), lclient, nparts=4)
    yield g
    g.release()


@pytest.fixture(scope="module")
def reference(graph4, tmp_path_factory):
    """The same graph written in one uninterrupted run."""
    from breadth.io.shard_store import write_store

    path = str(tmp_path_factory.mktemp("ref") / "ref.store")
    write_store(graph4, path, parameters=PARAMS)
    return path


def _arrays(store: str) -> dict[str, np.ndarray]:
    """Every .npy of a store by relative path (shard arrays and the id map)."""
    out = {}
    for root, _, files in os.walk(store):
        for f in files:
            if f.endswith(".npy"):
                p = os.path.join(root, f)
                out[os.path.relpath(p, store)] = np.load(p, allow_pickle=False)
    return out


def _assert_same_store(path: str, ref: str) -> None:
    import json

    a, b = _arrays(path), _arrays(ref)
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    ma, mb = (json.load(open(os.path.join(p, "manifest.json"))) for p in (path, ref))
    for key in ("num_vertices", "num_input_edges", "num_edges", "num_self_loops", "directed", "nparts", "id_map",
                "shards", "parameters"):
        assert ma[key] == mb[key], key


def _stats(store: str, ranks) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every file of the given shards: unchanged means not rewritten."""
    out = {}
    for r in ranks:
        d = os.path.join(store, f"shard-{r:05d}")
        for f in sorted(os.listdir(d)):
            s = os.stat(os.path.join(d, f))
            out[f"shard-{r:05d}/{f}"] = (s.st_ino, s.st_mtime_ns)
    return out


def _leftovers(directory: str) -> list[str]:
    return sorted(e for e in os.listdir(directory) if ".tmp-" in e or ".old-" in e)


def _partial(graph, path: str, fail: str, monkeypatch) -> None:
    """Write ``graph`` to ``path`` with the shard writers of ranks ``fail`` failing after their first file."""
    from breadth.io import StoreError
    from breadth.io.shard_store import write_store

    with patched(monkeypatch, f"fail={fail}"), pytest.raises(StoreError, match="injected failure"):
        write_store(graph, path, parameters=PARAMS)


def test_failed_shards_leave_an_unloadable_store_and_rerun_resumes(lclient, graph4, reference, tmp_path,
                                                                     monkeypatch):
    from breadth.io import IncompleteStoreError, StoreError
    from breadth.io.shard_store import describe, load_store, write_store

    path = str(tmp_path / "w.store")
    with patched(monkeypatch, "fail=1,2"), pytest.raises(
            StoreError, match=r"writing shard-00001..shard-00002 failed \(RuntimeError: .*injected failure.*\); "
                              r"2 of 4 shards are complete and kept; rerun the same command to resume"):
        write_store(graph4, path, parameters=PARAMS)
    names = sorted(os.listdir(path))
    # the failing writers removed their temporary directories; the other shards are whole
    assert names == ["id_map.npy", "progress.json", "shard-00000", "shard-00003"], names
    for r in (0, 3):
        assert sorted(os.listdir(os.path.join(path, f"shard-{r:05d}"))) == [
            "columns.npy", "in_columns.npy", "in_offsets.npy", "offsets.npy", "self_loops.npy", "shard.json",
            "tuple_degree.npy"]
    want = (f"{path}: no manifest.json; the store is incomplete: 2 of 4 shard(s) missing or incomplete "
            f"(shard-00001..shard-00002); rerun write_store with the same graph and parameters to resume it "
            f"(the complete shards are kept)")
    with pytest.raises(IncompleteStoreError) as e:
        load_store(path, lclient)
    assert str(e.value) == want
    with pytest.raises(IncompleteStoreError, match="2 of 4 shard"):
        describe(path)
    before = _stats(path, (0, 3))

    m = write_store(graph4, path, parameters=PARAMS)
    assert m["resume"] == {"kept": [0, 3], "written": [1, 2]}
    assert _stats(path, (0, 3)) == before  # complete shards were verified, not rewritten
    assert sorted(os.listdir(path)) == ["id_map.npy", "manifest.json"] + [f"shard-{r:05d}" for r in range(4)]
    _assert_same_store(path, reference)
    g = load_store(path, lclient, nparts=3)
    assert (g.nparts, g.num_vertices, g.num_edges) == (3, graph4.num_vertices, graph4.num_edges)
    g.release()
    # a complete store is not written over without overwrite, and is left as it was
    with pytest.raises(StoreError, match="already exists; pass overwrite=True"):
        write_store(graph4, path, parameters=PARAMS)
    assert _stats(path, (0, 3)) == before


def test_damaged_or_different_shards_are_rewritten(lclient, graph4, reference, tmp_path, monkeypatch):
    import json

    from breadth.io.shard_store import write_store
    from breadth.io.store_files import file_block_digests

    path = str(tmp_path / "d.store")
    _partial(graph4, path, "3", monkeypatch)

    def flip(p):
        data = bytearray(open(p, "rb").read())
        data[-3] ^= 0xFF  # same size, other content: only a checksum can tell
        with open(p, "wb") as f:
            f.write(bytes(data))

    col0 = os.path.join(path, "shard-00000", "columns.npy")
    flip(col0)  # damaged on disk: no longer matches its record
    col1 = os.path.join(path, "shard-00001", "columns.npy")
    flip(col1)  # intact on disk but not this graph's (as if from another input): its record says so too
    rec_path = os.path.join(path, "shard-00001", "shard.json")
    rec = json.load(open(rec_path))
    rec["files"]["columns"]["sha256_blocks"] = file_block_digests(col1, rec["files"]["columns"]["block_bytes"])
    json.dump(rec, open(rec_path, "w"))
    kept = _stats(path, (2,))
    inos = [os.stat(p).st_ino for p in (col0, col1)]
    m = write_store(graph4, path, parameters=PARAMS)
    assert m["resume"] == {"kept": [2], "written": [0, 1, 3]}
    assert _stats(path, (2,)) == kept
    assert all(os.stat(p).st_ino != i for p, i in zip((col0, col1), inos))
    _assert_same_store(path, reference)


def test_other_parameters_are_refused_unless_overwrite(lclient, graph4, reference, tmp_path, monkeypatch):
    from breadth.io import StoreError
    from breadth.io.shard_store import check_store, write_store

    path = str(tmp_path / "p.store")
    _partial(graph4, path, "0", monkeypatch)
    before = _stats(path, (1, 2, 3))
    other = dict(PARAMS, directed=False, extra="x")
    msg = (rf"{path} holds a partial store written with different parameters \(directed: true before, false "
           rf"now; extra: absent before, \"x\" now\); rerun with the same parameters to resume it, or pass "
           rf"overwrite=True to replace it")
    with pytest.raises(StoreError, match=msg):
        write_store(graph4, path, parameters=other)
    with pytest.raises(StoreError, match=msg):
        check_store(path, other)
    with pytest.raises(StoreError, match=r"holds a partial store of 4 shards, this graph has 2; prepare with "
                                         r"nparts=4 to resume it"):
        check_store(path, PARAMS, nparts=2)
    assert _stats(path, (1, 2, 3)) == before and not os.path.exists(os.path.join(path, "manifest.json"))
    st = check_store(path, PARAMS, nparts=4)
    assert (st["state"], st["complete"], st["missing"]) == ("partial", [1, 2, 3], [0])

    m = write_store(graph4, path, parameters=other, overwrite=True)  # starts again: nothing kept
    assert m["resume"] == {"kept": [], "written": [0, 1, 2, 3]} and m["parameters"] == other
    assert check_store(path, other)["state"] == "complete"
    with pytest.raises(StoreError, match=r"holds a complete store written with different parameters"):
        check_store(path, PARAMS)
    np.testing.assert_array_equal(_arrays(path)["shard-00002/columns.npy"],
                                  _arrays(reference)["shard-00002/columns.npy"])


def test_rerun_removes_leftovers_and_never_loads_them(lclient, graph4, reference, tmp_path, monkeypatch):
    from breadth.io import IncompleteStoreError
    from breadth.io.shard_store import load_store, write_store

    path = tmp_path / "l.store"
    _partial(graph4, str(path), "2", monkeypatch)
    # what a killed run leaves: a half-written shard, a half-written manifest, a shard being replaced,
    # and (from earlier versions, which wrote the whole store under a temporary name) a sibling
    (path / "shard-00002.tmp-0123abcd").mkdir()
    (path / "shard-00002.tmp-0123abcd" / "offsets.npy").write_bytes(b"\x93NUMPY half")
    (path / "manifest.json.tmp-deadbeef").write_text('{"format": "breadth-shard-store", "ver')
    (path / "shard-00001.old-89abcdef").mkdir()
    (tmp_path / "l.store.tmp-00c0ffee").mkdir()
    (path / "notes.txt").write_text("mine")  # not a temporary name: must survive
    os.remove(path / "shard-00003" / "shard.json")  # a shard directory without its completion record
    with pytest.raises(IncompleteStoreError, match=r"2 of 4 shard\(s\) missing or incomplete "
                                                   r"\(shard-00002..shard-00003\)"):
        load_store(str(path), lclient)
    m = write_store(graph4, str(path), parameters=PARAMS)
    assert m["resume"] == {"kept": [0, 1], "written": [2, 3]}
    assert _leftovers(str(path)) == [] and _leftovers(str(tmp_path)) == []
    assert (path / "notes.txt").read_text() == "mine"
    os.remove(path / "notes.txt")
    _assert_same_store(str(path), reference)


def test_refuses_paths_that_are_not_stores(graph4, tmp_path):
    from breadth.io import StoreError
    from breadth.io.shard_store import write_store

    d = tmp_path / "mydata"
    d.mkdir()
    (d / "precious.txt").write_text("keep")
    for overwrite in (False, True):
        with pytest.raises(StoreError, match=r"mydata is a non-empty directory without manifest.json or "
                                             r"progress.json, not a breadth shard store; refusing to write"):
            write_store(graph4, str(d), parameters=PARAMS, overwrite=overwrite)
    assert os.listdir(d) == ["precious.txt"]
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(StoreError, match="afile exists and is not a directory"):
        write_store(graph4, str(f), overwrite=True)
    assert f.read_text() == "x"


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_generate_killed_midway_then_rerun_finishes(lclient, tmp_path):
    from breadth.io.shard_store import write_store
    from breadth.pipeline import kronecker, prepare

    st = str(tmp_path / "k.store")
    cmd = [sys.executable, "-m", "breadth.pipeline.cli.cli", "generate", "--scale", "10", "--out", st,
           "--workers", "2", "--threads", "1"]
    # rank 1's writer stops after its first file, as a process does when it is killed mid-shard
    p = subprocess.Popen(cmd, env=preload_env("pause=1"), start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and p.poll() is None:
            tmp = [e for e in (os.listdir(st) if os.path.isdir(st) else []) if e.startswith("shard-00001.tmp-")]
            if (os.path.exists(os.path.join(st, "shard-00000", "shard.json"))
                    and tmp and os.path.exists(os.path.join(st, tmp[0], "offsets.npy"))):
                break
            time.sleep(0.1)
        assert p.poll() is None, p.stderr.read()[-2000:]
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the CLI and its worker processes, at once
        p.wait(timeout=60)
    assert not os.path.exists(os.path.join(st, "manifest.json"))
    assert _leftovers(st) == [tmp[0]]

    r = _cli("info", st)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1] == (
        f"breadth: error: {st}: no manifest.json; the store is incomplete: 1 of 2 shard(s) missing or incomplete "
        f"(shard-00001); rerun `breadth generate --scale 10 --edgefactor 16 --seed 1 --out {shlex.quote(st)}` "
        f"to resume it (the complete shards are kept)")
    r = _cli("generate", "--scale", "10", "--seed", "2", "--out", st)
    assert r.returncode == 1 and "different parameters (seed: 1 before, 2 now)" in r.stderr, r.stderr[-2000:]

    before = _stats(st, (0,))
    # one worker now: the partial store's 2 shards are kept as its shard count
    r = _cli("generate", "--scale", "10", "--out", st, "--workers", "1", "--threads", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "resuming a partial store: 1 of 2 shard(s) already written" in r.stderr
    assert "2 shard(s)" in r.stdout and "resumed: 1 of 2 shard(s) kept" in r.stdout
    assert _stats(st, (0,)) == before and _leftovers(st) == []

    ref = str(tmp_path / "ref.store")  # the same graph, uninterrupted, through the Python API
    g = prepare(kronecker(10, 16, seed=1), lclient, nparts=2)
    write_store(g, ref, parameters={"command": "generate", "scale": 10, "edgefactor": 16, "seed": 1})
    g.release()
    _assert_same_store(st, ref)
    r = _cli("generate", "--scale", "10", "--out", st, "--workers", "1", "--threads", "1")
    assert r.returncode == 0 and "already complete with these parameters; nothing to do" in r.stdout
    assert _stats(st, (0,)) == before


def test_cli_ingest_failure_then_changed_input_is_refused(tmp_path):
    rng = np.random.default_rng(5)
    src = tmp_path / "e.txt"
    src.write_text("".join(f"{a} {b}\n" for a, b in rng.integers(0, 300, (1000, 2))))
    st = str(tmp_path / "e.store")
    args = ("ingest", str(src), "--out", st, "--workers", "2", "--threads", "1")
    r = _cli(*args, env=preload_env("fail=1"))
    assert r.returncode == 1
    assert ("writing shard-00001 failed (RuntimeError: store_faults: injected failure while writing "
            "shard 1); 1 of 2 shards are complete and kept; rerun the same command to resume") in r.stderr
    assert sorted(os.listdir(st)) == ["id_map.npy", "progress.json", "shard-00000"]
    with open(src, "a") as f:
        f.write("7 8\n")  # the input changed: resuming would mix two graphs
    r = _cli(*args)
    assert r.returncode == 1 and "different parameters (inputs[0][1]: " in r.stderr, r.stderr[-2000:]
    assert not os.path.exists(os.path.join(st, "manifest.json"))
    r = _cli(*args, "--overwrite")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _cli("info", st, "--verify")
    assert r.returncode == 0 and "file(s) OK" in r.stdout and "input edges:    1,001" in r.stdout
