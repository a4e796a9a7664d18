"""``--memory-limit``: sized up front, refused at once below the minimum, honoured above it."""

import os
import subprocess
import sys

import pytest

from breadth.pipeline.shuffle.memory_plan import (MemoryLimitError, format_bytes, parse_memory_limit, plan_memory,
                                          shard_bytes)

from conftest import data_file

THREADS = max(1, (os.cpu_count() or 1) // 2)  # what the CLI gives each of 2 local workers


def _run(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", "breadth.pipeline.cli.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _minimum(scale: int, **kw) -> int:
    return plan_memory(10**15, 1 << scale, 16 << scale, 2, THREADS, **kw).minimum


def test_parse_memory_limit():
    assert parse_memory_limit("100MB") == 100_000_000
    assert parse_memory_limit("1GiB") == 1 << 30
    assert parse_memory_limit("123456789") == 123456789
    for bad in ("banana", "", "-5MB", "0"):
        with pytest.raises(ValueError):
            parse_memory_limit(bad)


def test_plan_fits_the_limit_and_grows_with_it():
    n, m = 1 << 18, 16 << 18
    low = _minimum(18, store=True)
    with pytest.raises(MemoryLimitError) as e:
        plan_memory(low - 1, n, m, 2, THREADS, store=True, what="scale 18")
    assert e.value.minimum == low and format_bytes(low) in str(e.value)
    small = plan_memory(low, n, m, 2, THREADS, store=True)
    big = plan_memory(4 * low, n, m, 2, THREADS, store=True)
    assert small.spill and all(v <= low for v in small.phases.values())
    assert all(v <= 4 * low for v in big.phases.values())
    assert small.chunk_edges <= big.chunk_edges and small.batch_entries <= big.batch_entries
    # the shard is part of the minimum: more workers, smaller shards, a smaller minimum
    assert shard_bytes(n, m, 4) < shard_bytes(n, m, 2)
    assert plan_memory(10**15, n, m, 4, 1, store=True).minimum < plan_memory(10**15, n, m, 2, 1, store=True).minimum
    # a chunk size given by the user is kept, and refused when it cannot fit
    assert plan_memory(big.limit, n, m, 2, THREADS, chunk_edges=4096, store=True).chunk_edges == 4096
    with pytest.raises(MemoryLimitError, match="--chunk-edges"):
        plan_memory(low, n, m, 2, THREADS, chunk_edges=1 << 24, store=True)


def test_numpy_path_below_the_numba_minimum():
    """generate may run without Numba in its workers: a limit below the Numba path's minimum takes the NumPy
    path (disk tier, shards built to files), whose own minimum is refused below; a search never takes it."""
    n, m = 1 << 18, 16 << 18
    numba_min = _minimum(18, store=True)
    plan = plan_memory(100_000_000, n, m, 2, THREADS, store=True, numpy_path=True)
    assert 100_000_000 < numba_min and not plan.jit and plan.tier == "disk"
    assert plan.minimum < 100_000_000 and all(v <= 100_000_000 for v in plan.phases.values())
    assert plan_memory(numba_min, n, m, 2, THREADS, store=True, numpy_path=True).jit  # the faster path fits
    with pytest.raises(MemoryLimitError) as e:
        plan_memory(plan.minimum - 1, n, m, 2, THREADS, store=True, numpy_path=True, what="scale 18")
    assert e.value.minimum == plan.minimum and "without Numba" in str(e.value)
    with pytest.raises(MemoryLimitError):
        plan_memory(100_000_000, n, m, 2, THREADS, search=True, numpy_path=True)


@pytest.mark.parametrize("command", ["generate", "bench", "ingest"])
def test_too_small_limit_is_refused_at_once(command, tmp_path):
    out = tmp_path / "g.store"
    edges = tmp_path / "e.txt"
    edges.write_text("".join(f"{i} {i + 1}\n" for i in range(1000)))
    args = {"generate": ["generate", "--scale", "18", "--out", str(out)],
            "bench": ["bench", "--scale", "18"],
            "ingest": ["ingest", str(edges), "--directed", "--out", str(out)]}[command]
    r = _run(*args, "--workers", "2", "--memory-limit", "50MB", timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breadth: error: --memory-limit 50MB is below the minimum of ")
    assert "Traceback" not in r.stderr
    if command != "ingest":  # ingest's size is known only once read: its up-front floor is an empty graph's
        assert format_bytes(_minimum(18, store=command == "generate", search=command == "bench",
                                     numpy_path=command == "generate")) in lines[0]
        assert "scale 18 on 2 worker(s)" in lines[0]
    assert not out.exists()  # refused before anything was written


def _parquet(path, tuples: int, row_group: int):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    e = np.random.default_rng(3).integers(0, 1 << 40, size=(tuples, 2), dtype=np.int64)  # sparse ids
    pq.write_table(pa.table({"src": e[:, 0], "dst": e[:, 1]}), path, row_group_size=row_group)
    return path


def test_parquet_floor_is_what_the_tuples_need_with_one_vertex(tmp_path):
    """The footers' floor is the plan made after reading with a single vertex: no higher than the plan
    for any vertex count (so nothing that could fit is refused), and it grows with the row groups."""
    from breadth.pipeline.shuffle.memory_plan import plan_row_group_floor

    tuples = 1 << 19
    small = plan_row_group_floor(10**15, [str(_parquet(tmp_path / "a.parquet", tuples, 1 << 16))], 2, THREADS)
    big = plan_row_group_floor(10**15, [str(_parquet(tmp_path / "b.parquet", tuples, 1 << 19))], 2, THREADS)
    assert small == plan_memory(10**15, 1, tuples, 2, THREADS, chunk_edges=1 << 16, store=True,
                                source_chunks_held=True).minimum
    assert small < big
    for n in (2, 1 << 10, 1 << 19, 1 << 20):
        assert big <= plan_memory(10**15, n, tuples, 2, THREADS, chunk_edges=1 << 19, store=True,
                                  source_chunks_held=True).minimum
    with pytest.raises(MemoryLimitError) as e:
        plan_row_group_floor(big - 1, [str(tmp_path / "b.parquet")], 2, THREADS)
    assert e.value.minimum == big and "524,288 tuples (from the Parquet footers" in str(e.value)
    assert "smaller row groups" in str(e.value)  # the chunk phase (a row group's tuples per thread) is largest


def test_parquet_ingest_too_large_for_its_limit_is_refused_before_reading(tmp_path):
    """A limit that reading could meet but the footers' tuples cannot is refused at once, naming the
    footers (refused after reading, the message would give the vertex count instead)."""
    src = _parquet(tmp_path / "e.parquet", 1 << 19, 1 << 19)
    out = tmp_path / "p.store"
    r = _run("ingest", str(src), "--workers", "1", "--threads", "2", "--memory-limit", "260MB", "--out", str(out),
             timeout=60)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breadth: error: --memory-limit 260MB is below the minimum of ")
    assert "524,288 tuples (from the Parquet footers; their vertices add more) on 1 worker(s)" in lines[0]
    assert not out.exists()


def test_bad_memory_limit_is_a_usage_error():
    r = _run("generate", "--scale", "10", "--memory-limit", "banana", "--out", "never.store", timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breadth: error: argument --memory-limit:") and "banana" in lines[0]


def test_generate_just_above_the_minimum_completes_and_validates(tmp_path):
    limit = _minimum(14, store=True) + 1_000_000
    store = tmp_path / "s14.store"
    tmp = tmp_path / "tmp"  # the disk tier's temporary spill directory goes here, and must be gone after
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    r = _run("generate", "--scale", "14", "--workers", "2", "--memory-limit", str(limit), "--out", str(store),
             env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "disk tier" in r.stderr  # the plan, logged on stderr
    assert not [p for p in tmp.iterdir() if p.name.startswith("breadth-spill-")]
    r = _run("bench", str(store), "--roots", "4", "--workers", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "SCALE: 14" in r.stdout or "NBFS: 4" in r.stdout


def test_generate_scale_18_at_its_smallest_limit_without_numba(tmp_path):
    """The issue's target: scale 18 on 2 workers at the computed minimum of the NumPy path (below 100MB)
    completes (a worker past its limit is ended by its nanny, and the run fails), leaves no file behind,
    and its store searches and validates (the search itself with Numba, without a limit)."""
    limit = _minimum(18, store=True, numpy_path=True)
    assert limit <= 100_000_000
    store = tmp_path / "s18.store"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _run("generate", "--scale", "18", "--workers", "2", "--memory-limit", str(limit), "--out", str(store),
             env=dict(os.environ, TMPDIR=str(tmp)), timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NumPy kernels (no Numba in the workers)" in r.stderr
    assert not [p for p in tmp.iterdir() if p.name.startswith("breadth-")]  # spill files and shards' files gone
    r = _run("bench", str(store), "--roots", "2", "--workers", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "NBFS: 2" in r.stdout


def test_ingest_under_a_limit_completes(tmp_path):
    store = tmp_path / "wiki.store"
    r = _run("ingest", str(data_file("Wiki-Vote.txt")), "--directed", "--workers", "2", "--memory-limit", "300MB",
             "--spill-dir", str(tmp_path / "spill"), "--out", str(store))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "memory plan: limit 300MB" in r.stderr
    assert (store / "manifest.json").exists()
    assert not list((tmp_path / "spill").iterdir())  # bucket files and Dask's scratch folder are gone


def test_gpu_host_tier_keeps_its_pairs_on_a_device_that_holds_them():
    """GPU workers whose device holds the host tier's 32-bit pairs beside the build keep them there (no
    copies to the host and back); a smaller GPU sends them to the host; CPU workers never keep them on a
    device.  Kronecker scale 26 (2**30 tuples, one owner), 128 GB of host memory."""
    from breadth.pipeline.shuffle.memory_plan import choose_tier

    host = 128 << 30
    kw = dict(num_vertices=1 << 26, num_tuples=1 << 30, nparts=1, workers=1, threads=1, device="gpu")
    h100 = choose_tier(host, device_memory=int(0.8 * 80e9), **kw)  # dask-cuda's default limit: 80 %
    assert (h100.tier, h100.on_device) == ("host", True)
    assert h100.estimates["gpu_pairs"] <= 0.8 * 0.8 * 80e9 < h100.estimates["gpu_memory"]
    small = choose_tier(host, device_memory=24 << 30, **kw)
    assert (small.tier, small.on_device) == ("host", False)
    unlimited = choose_tier(None, device_memory=None, **kw)  # the memory tier (pairs on the device if forced)
    assert (unlimited.tier, unlimited.on_device) == ("memory", True)
    cpu = choose_tier(host, **{**kw, "device": "cpu"})
    assert not cpu.on_device and "gpu_pairs" not in cpu.estimates
